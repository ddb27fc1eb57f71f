"""The empirical privacy audit of DP Barker (cancelling full-batch design, ``rdp-direct`` claim).

Design check: without privacy noise the released values are exactly the means the statistic
assumes (0 on D, −2 sign(θ' − θ)/√b on D') and the noise variances exactly 1 and 1 + 4/b²;
the statistic is the exact log likelihood ratio of those two Gaussians.

False-alarm rates (ε = 3, δ = 1e-5, 8 iterations, b = n = 104, claim 2.993). With 5·10⁴ runs
per data set (the fast test's) 24 seeds (400–423) gave ε_lower = 1.17 ± 0.22 (sd; min 0.73)
for the calibrated sampler: the fast check "0.45 ≤ ε_lower ≤ claim" sits 3.3 sd below / 8.3 sd
above (false alarm < 0.1 % under a normal approximation). (At 2·10⁵ runs twelve seeds gave
1.33 ± 0.29, min 0.69: the same check 3 sd below / 5.7 sd above, for twice the CPU.) The
noise × 0.3 variant gives 5.4–5.5 (flag at 2.99: far), and 4.54 ± 0.30 at the 5·10⁴ runs of
its fast test (5.2 sd above the flag line). The sensitivity-under-counted variant gave
3.09 ± 0.29 at 2·10⁵ runs, too close to the claim for a reliable fast test, so it runs with the
default 10⁶ runs (slow; 3.85 with its key, 3.52 with another). Every test uses a fixed key, so
its outcome is reproducible.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpmcmc import accounting
from dpmcmc.audit import AUDITS, audit
from dpmcmc.audit import FAR
from dpmcmc.samplers import ALGORITHMS
from dpmcmc.testing import forbid_audit_runner, logistic_correction, noiseless_mechanism
from dpmcmc.samplers.barker import tapped_dp_barker
from _audit_cli import check_flagged, cli_audit

EPSILON, DELTA, FAST_TRIALS = 3.0, 1e-5, 50_000
ENTRY = AUDITS["dp-barker"]


def _kernel(p, **pieces):
    design = ENTRY.design(p["batch_size"] // 2)
    return tapped_dp_barker(design.model, p["batch_size"], p["n0"],
                            jnp.asarray(p["proposal_std"]), p["mode"], **pieces)


def _prepared(half):
    design = ENTRY.design(half)
    return design, ALGORITHMS["dp-barker"].prepare(ENTRY.params(half), design.model, 2 * half)


def test_design_is_cancelling_and_far():
    design, p = _prepared(52)
    x, xp = np.asarray(design.data)[:, 0], np.asarray(design.data_prime)[:, 0]
    assert x.shape == xp.shape == (104,) and p["batch_size"] == 104 and p["n0"] == 104.0
    assert np.all(np.abs(x) == FAR) and np.sum(x > 0) == np.sum(x < 0) == 52
    assert int(np.sum(x != xp)) == 1 and np.sum(xp > 0) == 51


def test_noiseless_releases_are_the_assumed_means_and_variances():
    design, p = _prepared(52)
    b = p["batch_size"]
    kernel = _kernel(p, mechanism=noiseless_mechanism, correction=logistic_correction)
    step = jax.jit(kernel.transition)  # the data are its argument: one program for D and D'
    for data, prime in ((design.data, False), (design.data_prime, True)):
        s = kernel.init(design.theta0, data)
        for t in range(6):
            s, info, taps = step(jax.random.fold_in(jax.random.key(7), t), s, data)
            sign = float(np.sign(taps["theta_new"][0] - taps["theta"][0]))
            assert float(info.clip_fraction) == 1.0
            if prime:
                assert float(taps["delta"]) == pytest.approx(-2.0 * sign / math.sqrt(b), rel=1e-12)
                assert float(taps["noise_variance"]) == pytest.approx(1.0 + 4.0 / b**2, rel=1e-12)
            else:
                assert abs(float(taps["delta"])) < 1e-12
                assert float(taps["noise_variance"]) == pytest.approx(1.0, rel=1e-12)


def test_audit_tap_leaves_the_chain_unchanged():
    # The tapped and the plain kernel step in ONE compiled program (one compilation; eagerly,
    # op by op, each step compiled dozens of small programs): any difference in what they
    # compute (keys, noise, correction, acceptance) still shows in the positions, bit for bit.
    design, p = _prepared(52)
    tapped = _kernel(p)
    plain = ALGORITHMS["dp-barker"].build(design.model, p)
    data = design.data

    @jax.jit
    def both(k, st, sp, data):
        st, it, _ = tapped.transition(k, st, data)
        sp, ip = plain.step(k, sp, data)
        return st, it, sp, ip

    st, sp = tapped.init(design.theta0, data), plain.init(design.theta0, data)
    for t in range(6):
        st, it, sp, ip = both(jax.random.fold_in(jax.random.key(3), t), st, sp, data)
        np.testing.assert_array_equal(np.asarray(st.position), np.asarray(sp.position))
        assert bool(it.accepted) == bool(ip.accepted)


def test_statistic_is_the_exact_log_likelihood_ratio():
    _, p = _prepared(52)
    b = p["batch_size"]
    rng = np.random.default_rng(0)
    y = rng.normal(size=8)
    theta = rng.normal(size=(8, 1))
    theta_new = theta + rng.normal(size=(8, 1))
    taps = {"delta": jnp.asarray(y), "theta": jnp.asarray(theta), "theta_new": jnp.asarray(theta_new)}
    m_prime = -2.0 * np.sign(theta_new - theta)[:, 0] / math.sqrt(b)
    expected = np.sum(stats.norm.logpdf(y, 0.0, 1.0)
                      - stats.norm.logpdf(y, m_prime, math.sqrt(1.0 + 4.0 / b**2)))
    # One compiled program (evaluated op by op, each of its operations compiles one of its own).
    got = float(jax.jit(lambda t: ENTRY.release_statistic(t, p, b))(taps))
    assert got == pytest.approx(expected, rel=1e-12)


@pytest.fixture(scope="module")
def calibrated():
    """The calibrated audit (ε = 3, δ = 1e-5: the CLI's defaults; --seed s is
    jax.random.key(s)), run once through the CLI: (its printed JSON, its AuditResult). The
    calibrated and CLI tests read it (one audit program, ~4.5 CPU-s, instead of two); both are
    slow (suite budget: tests/suite_budget.py, SLOW_CASES_B3)."""
    return cli_audit("dp-barker", "--trials", str(FAST_TRIALS), "--seed", "401")


def test_claim_is_the_default_accountant_and_the_smallest_batch():
    """The audit's configuration at the CLI's defaults (ε = 3, δ = 1e-5): its claim is DP
    Barker's default accountant (rdp-direct) at the audit's iterations, and the design's batch
    (n = b = 104, half 52: test_design_is_cancelling_and_far) is the smallest even one whose claim
    is at most ε, the one the audit's integer scale search must pick. That the calibrated audit's
    own result carries this claim and n is test_calibrated_barker_passes's (slow: suite budget)."""
    assert accounting.supported_accountants("dp-barker")[0] == "rdp-direct"
    _, p = _prepared(52)
    assert p["batch_size"] == 104 and ENTRY.iterations == 8

    def claim(b):
        return accounting.spent("dp-barker", ENTRY.iterations, DELTA, b, chains=1,
                                accountant="rdp-direct", batch_size=b).epsilon

    assert claim(104) <= EPSILON
    assert claim(102) > EPSILON  # the next smaller even batch would claim too much


@pytest.mark.xla_optimized  # a long chain: compiled at XLA level 1 (tests/conftest.py)
def test_calibrated_barker_passes(calibrated):
    res = calibrated[1]
    # The claim is the default accountant's at the smallest batch (test_claim_is_the_default_
    # accountant_and_the_smallest_batch): this audit's result carries it.
    assert res.n == res.params["batch_size"] == 104 and res.iterations == ENTRY.iterations
    direct = accounting.spent("dp-barker", res.iterations, DELTA, res.n, chains=1, accountant="rdp-direct",
                              batch_size=res.n)
    assert res.epsilon_claimed == pytest.approx(direct.epsilon, rel=1e-12)
    assert res.epsilon_claimed <= EPSILON
    assert res.trials == FAST_TRIALS and res.miscalibration is None
    assert res.all_clipped >= 0.95
    assert 0.45 <= res.epsilon_lower <= res.epsilon_claimed
    assert not res.flagged
    assert res.epsilon_lower_draws <= res.epsilon_claimed


# noise × 0.3 at 5·10⁴ runs: 20 disjoint blocks of 5·10⁴ runs (10⁶ runs of the real kernel,
# another key) gave ε_lower = 4.54 ± 0.30 (sd; min 4.02), 5.2 sd above the flag line 2.993 (a
# miss has probability < 1e-6 under a normal approximation); at 2·10⁵ runs it was 5.22 ± 0.27.
@pytest.mark.xla_optimized  # 5·10⁴–10⁶ audit runs: compiled at XLA level 1 (tests/conftest.py)
@pytest.mark.parametrize("variant,trials", [
    ({"noise_scale": 0.3}, 50_000),
    pytest.param({"sensitivity_factor": 0.5}, 1_000_000, marks=pytest.mark.slow),
], ids=["noise-x0.3", "sensitivity-undercounted-x2"])
def test_miscalibrated_barker_is_flagged(variant, trials):
    res = audit("dp-barker", EPSILON, DELTA, trials=trials, key=jax.random.key(411), _miscalibration=variant)
    check_flagged(res)


@pytest.mark.xla_optimized  # its audit is the calibrated one (fixture): 5·10⁴ runs at level 1
def test_cli_audit_dp_barker_json(calibrated):
    import json

    obj, res = calibrated
    assert obj["algorithm"] == "dp-barker" and obj["trials"] == FAST_TRIALS and obj["iterations"] == 8
    assert 2.9 < obj["epsilon_claimed"] <= 3.0 and obj["n"] == obj["params"]["batch_size"] == 104
    assert 0.0 <= obj["epsilon_lower"] <= obj["epsilon_claimed"] and obj["flagged"] is False
    assert obj == json.loads(res.to_json())  # it prints the result of dpmcmc.audit.audit


# ------------------------------------------------------------------ bounded work

def test_tiny_epsilon_is_refused_before_any_run(monkeypatch):
    """ε → 0 needs an unbounded DP Barker batch: refused (naming epsilon and the size) in well
    under a second, before any design is simulated (the runner is never built)."""
    import time

    from dpmcmc.audit import MAX_DESIGN_ROWS

    forbid_audit_runner(monkeypatch)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=rf"epsilon=1e-06.*more than {MAX_DESIGN_ROWS} records"):
        audit("dp-barker", 1e-6, DELTA, trials=FAST_TRIALS, key=jax.random.key(0))
    assert time.perf_counter() - start < 30.0  # was still running after 300 s


def test_cli_tiny_epsilon_is_refused_with_the_reason_before_any_run(monkeypatch):
    """`dpmcmc audit dp-barker --epsilon 1e-6` (in-process) exits with status 2 and the reason,
    before the audit builds its runner. The same through a fresh ``python -m dpmcmc.cli``
    process is the slow test below (the module entry point and its error exit are guarded by
    tests/experiments/test_experiments.py's subprocess CLI runs)."""
    from typer.testing import CliRunner

    from dpmcmc.cli import app

    forbid_audit_runner(monkeypatch)
    out = CliRunner().invoke(app, ["audit", "dp-barker", "--epsilon", "1e-6"])
    assert out.exit_code == 2, out.output
    text = out.output + (out.stderr if out.stderr_bytes is not None else "")
    assert "epsilon" in text and "records" in text


@pytest.mark.slow  # in-process: test_cli_tiny_epsilon_is_refused_with_the_reason_before_any_run
def test_cli_tiny_epsilon_fails_fast_with_the_reason():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "dpmcmc.cli", "audit", "dp-barker", "--epsilon", "1e-6"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "epsilon" in proc.stderr + proc.stdout and "records" in proc.stderr + proc.stdout


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


# The strings come from a short alphabet of number-like characters: st.text() over all of
# Unicode makes hypothesis build its character map on a clean clone (~2 CPU-s), and a string
# such as "1e" or "." is the argument a user could mistype.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(epsilon=st.one_of(st.floats(allow_nan=False, max_value=1e-3), st.just(math.nan), st.just(math.inf),
                         st.just(0.0), st.booleans(), st.text(alphabet="1e.x -", max_size=3), st.none()),
       trials=st.one_of(st.just(1000), st.integers(max_value=999), st.floats(), st.booleans()))
def test_audit_argument_validation_names_the_argument(epsilon, trials):
    """Any invalid (or unauditably small) epsilon or trials fails fast with an error that
    names the argument, never by starting the runs."""
    with pytest.raises((TypeError, ValueError)) as err:
        audit("dp-barker", epsilon, DELTA, trials=trials, key=jax.random.key(0))
    assert "epsilon" in str(err.value) or "trials" in str(err.value)
