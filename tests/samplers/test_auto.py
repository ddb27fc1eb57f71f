"""algorithm="auto" (issue 35): the private Newton start, its passes, the rule, the run."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpmcmc
from dpmcmc import accounting
from dpmcmc.auto import auto_config, min_time
from dpmcmc.models.reparam import affine, to_theta
from dpmcmc.records.passes import whitened_grad_histogram, whitened_grad_moments
from dpmcmc.samplers.private_newton import newton_plan, private_newton

N, DIM = 2000, 2
TRUTH = np.array([3.0, -2.0])
# An anisotropic Gaussian mean model: x ~ N(θ, diag(1, 1/16)), so the per-record Fisher is
# diag(1, 16) and the declared bound (1.0) clips almost every record in the first round.
SCALE = np.array([1.0, 0.25])
DATA = TRUTH + SCALE * np.random.default_rng(0).standard_normal((N, DIM))
PREC = N / SCALE ** 2 + 0.01
POST_MEAN = (DATA.sum(0) / SCALE ** 2) / PREC


def _model():
    return dpmcmc.Model(
        log_likelihood=lambda t, x: -0.5 * jnp.sum(((x - t) / jnp.asarray(SCALE)) ** 2),
        log_prior=lambda t: -0.5 * jnp.sum(t ** 2) / 100.0, dim=DIM, name="aniso-mean",
        sample_prior=lambda k, shape: 10.0 * jax.random.normal(k, (*shape, DIM)))


def test_whitened_passes_are_the_clipped_sums_and_the_histogram():
    rng = np.random.default_rng(1)
    theta, w, c = np.array([2.5, -1.0]), rng.normal(size=(2, 2)), np.array([0.3, -0.2])
    g = (DATA - theta) / SCALE ** 2                  # per-record gradients, closed form
    u = (g - c) @ w.T
    norm = np.linalg.norm(u, axis=1)
    bound = float(np.quantile(norm, 0.7))
    uc = u * np.minimum(1.0, bound / norm)[:, None]
    edges = np.exp(np.linspace(-3, 5, 33))
    with jax.enable_x64(True):
        # Both passes in one compiled program (op by op they compile some sixty small ones).
        (total, outer, count), hist = jax.jit(lambda data, theta, w, c, edges: (
            whitened_grad_moments(_model(), data, theta, w, c, bound),
            whitened_grad_histogram(_model(), data, theta, w, c, edges)))(
                jnp.asarray(DATA), jnp.asarray(theta), jnp.asarray(w), jnp.asarray(c),
                jnp.asarray(edges))
    np.testing.assert_allclose(np.asarray(total), uc.sum(0), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(outer), uc.T @ uc, rtol=1e-10)
    assert int(count) == int(np.sum(norm > bound))
    np.testing.assert_array_equal(np.asarray(hist), np.bincount(np.searchsorted(edges, norm, "right"),
                                                                minlength=edges.size + 1))


def test_plan_splits_the_budget_and_each_sigma_is_its_release():
    plan = newton_plan(10**6, DIM, 0.2, 1.0, rounds=4)
    rel = plan.releases()
    assert len(rel) == 4 * 7 and plan.mu_total == pytest.approx(0.2)
    # σ per unit bound = √(2/μ): sensitivity 2·bound costs exactly μ.
    np.testing.assert_allclose(plan.sigmas().ravel(), [np.sqrt(2 / r.mu) for r in rel])
    last = sum(r.mu for r in rel[-7:])
    assert last == pytest.approx(0.5 * 0.2)            # FINAL_SHARE
    # At small n a histogram's noise would swamp the quantile: not released, its μ re-spent.
    small = newton_plan(N, DIM, 0.2, 1.0, rounds=4)
    assert small.mu_total == pytest.approx(0.2)
    assert not any("histogram" in r.name for r in small.releases())
    assert np.all(np.isinf(small.sigmas()[:, [0, 2, 4]]))


@pytest.mark.slow  # ~7 CPU-s; default guard: test_sample_auto_approximation_run_plan_and_ledger
def test_private_newton_finds_the_gaussian_posterior_from_a_clipping_bound():
    # With a large budget the noise is negligible: the start must land on the exact posterior
    # (mean and precision: Fisher = diag(1, 16) per record) although the declared bound 1.0
    # clips nearly every gradient at the public starting point.
    fit = private_newton(jax.random.key(0), _model(), DATA, np.zeros(DIM),
                         newton_plan(N, DIM, 1e4, 1.0, rounds=4))
    sd = 1 / np.sqrt(PREC)
    assert np.all(np.abs(np.asarray(fit.mean) - POST_MEAN) < 0.05 * sd)
    np.testing.assert_allclose(np.diag(np.asarray(fit.precision)), PREC, rtol=0.05)


def test_affine_reparametrisation_maps_densities_and_draws():
    m = _model()
    shift, chol = np.array([1.0, -1.0]), np.array([[2.0, 0.0], [0.5, 0.3]])
    zm = affine(m, shift, chol)
    z = np.array([0.4, -0.7])
    th = shift + chol @ z
    assert float(zm.log_likelihood(z, DATA[0])) == pytest.approx(float(m.log_likelihood(th, DATA[0])))
    assert float(zm.log_prior(z)) == pytest.approx(float(m.log_prior(th)))
    np.testing.assert_allclose(to_theta(zm, z[None, :])[0], th)
    with pytest.raises(ValueError, match="chol"):
        affine(m, shift, np.zeros((2, 2)))


def test_rule_is_from_public_inputs_and_the_report_fits_the_budget():
    small = auto_config(N, DIM, 1.0, 1e-6, grad_clip=1.0)
    assert small.mode == "approximation" and small.iterations == 0
    assert small.report().epsilon == pytest.approx(1.0)       # the whole budget on the start
    assert "NOT MCMC" in str(small) and "approximate posterior" in str(small)
    forced = auto_config(N, DIM, 1.0, 1e-6, grad_clip=1.0, chain=True)
    assert forced.mode == "chain" and forced.iterations >= 1 and forced.time < min_time(DIM)
    report = forced.report()
    assert report.epsilon <= 1.0 * (1 + 1e-12)
    # The start is accounted as its own mechanism inside the one PLD.
    (start,) = [m for m in report.mechanisms if m.get("per_iteration") == 0]
    assert start["total_mu"] == pytest.approx(forced.start.mu_total)
    with pytest.raises(ValueError, match="grad_clip"):
        auto_config(N, DIM, 4.0, 1e-6)


@pytest.mark.slow  # ~5 CPU-s of PLD accounting; default guard: the forced chain above
def test_rule_runs_a_chain_when_the_budget_buys_its_langevin_time():
    big = auto_config(20_000, 1, 30.0, 1e-6, grad_clip=1.0)
    assert big.mode == "chain" and min_time(1) <= big.time <= 4 * min_time(1) + 0.02
    assert big.report().epsilon <= 30.0 * (1 + 1e-12)


def test_sample_auto_approximation_run_plan_and_ledger(tmp_path):
    ledger = dpmcmc.Ledger(tmp_path / "l.json", total_epsilon=5.0, total_delta=1e-5)
    kw = dict(epsilon=2.0, delta=1e-6, grad_clip=1.0, key=jax.random.key(2), progress=False)
    res = dpmcmc.sample(_model(), DATA, "auto", ledger=ledger, draws=200, **kw)
    assert res.algorithm == "auto" and res.params["mode"] == "approximation"
    assert res.samples.shape == (4, 200, DIM) and res.privacy.epsilon <= 2.0 * (1 + 1e-12)
    assert ledger.spent[0] == pytest.approx(res.privacy.epsilon)
    # Noise-aware draws: the exact posterior mean within a few of their own sds, which are at
    # least the posterior's (the privacy noise widens, never narrows).
    draws = res.samples.reshape(-1, DIM)
    assert np.all(np.abs(draws.mean(0) - POST_MEAN) < 3 * draws.std(0))
    assert np.all(draws.std(0) > 0.9 / np.sqrt(PREC))
    plan = dpmcmc.plan(_model(), N, "auto", epsilon=2.0, delta=1e-6, grad_clip=1.0)
    assert plan.algorithm == "auto" and plan.params["mode"] == "approximation"
    assert plan.epsilon_spent == pytest.approx(res.privacy.epsilon)


@pytest.mark.parametrize("extra, name", [(dict(iterations=10), "iterations"),
                                         (dict(tau=0.1), "tau"),
                                         (dict(theta0=np.zeros(DIM)), "theta0"),
                                         (dict(grad_clip=None), "grad_clip")])
def test_auto_refuses_what_it_does_not_take_before_any_data(extra, name):
    call = dict(epsilon=2.0, delta=1e-6, grad_clip=1.0, progress=False)
    call.update(extra)
    with pytest.raises(ValueError, match=name):
        dpmcmc.sample(_model(), np.full_like(DATA, np.nan), "auto", **call)


@pytest.mark.slow  # ~40 s (the ChaCha20 draws in the start's compiled round); default guard:
# test_sample_auto_approximation_run_plan_and_ledger runs the same path with jax.random
def test_auto_in_secure_mode_draws_the_start_from_chacha():
    kw = dict(epsilon=2.0, delta=1e-6, grad_clip=1.0, key=jax.random.key(2), progress=False,
              draws=50)
    a = dpmcmc.sample(_model(), DATA, "auto", secure=True, **kw)
    b = dpmcmc.sample(_model(), DATA, "auto", **kw)
    assert a.secure and not b.secure
    # The same key, another noise source: the released start differs.
    assert not np.allclose(a.params["mean"], b.params["mean"])


def test_auto_plans_through_the_one_planner_and_the_cli():
    """``dpmcmc plan`` and ``dpmcmc.plan`` build auto's plan with the planner every algorithm
    uses (a Request, make_plan): the Newton start is the plan's private start, the report is
    the accountant's, and the plan says in words that the draws are not MCMC."""
    import json

    from typer.testing import CliRunner

    from dpmcmc.cli import app

    p = dpmcmc.plan(_model(), N, "auto", epsilon=1.0, delta=1e-6, grad_clip=1.0)  # make_plan
    assert p.private_start.method == "newton" and p.private_start.share == pytest.approx(1.0)
    assert p.report.epsilon == pytest.approx(1.0) and p.iterations == 0
    out = CliRunner().invoke(app, ["plan", "-a", "auto", "--n", str(N), "--dim", str(DIM),
                                   "--epsilon", "1", "--delta", "1e-6", "-p", "grad_clip=1",
                                   "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert got["params"]["mode"] == "approximation" and got["private_start"]["method"] == "newton"
    assert any("NOT MCMC" in note for note in got["notes"])
    bad = CliRunner().invoke(app, ["plan", "-a", "auto", "--n", str(N), "--dim", str(DIM),
                                   "--epsilon", "1", "--delta", "1e-6", "-p", "grad_clip=1",
                                   "--iterations", "5"])
    assert bad.exit_code != 0 and "iterations" in bad.output


@pytest.mark.parametrize("option, value", [("warmup", 10), ("accountant", "rdp"),
                                           ("checkpoint", "run.ckpt"), ("init_share", 0.2),
                                           ("relation", "substitute-legacy")])
def test_request_refuses_what_auto_plans_itself(option, value):
    from dpmcmc.request import Request

    with pytest.raises(ValueError, match=option):
        Request.create("auto", epsilon=1.0, delta=1e-6, grad_clip=1.0, **{option: value})
    with pytest.raises(TypeError, match="chain"):
        Request.create("auto", epsilon=1.0, delta=1e-6, grad_clip=1.0, chain="yes")


def test_experiments_have_an_auto_line_in_its_own_start_mode():
    from dpmcmc.experiments import dphmc_paper, thesis

    for exp in (dphmc_paper, thesis):
        cfg = exp.config(False)
        auto = [c for c in exp.cells(cfg) if c["label"] == "auto"]
        assert auto and {c["start"] for c in auto} == {"private"}
        assert len({c["model"] for c in auto}) == len(cfg["models"])
        for m in cfg["models"].values():
            # Only the bounds of the tuned DP-HMC are declared.
            assert m["algorithms"]["auto"]["params"] == {
                k: m["algorithms"]["dp-hmc"]["params"][k] for k in ("clip", "grad_clip")}


def testwhitening_floor_never_claims_more_curvature_than_the_previous_whitening():
    # In whitened units a stage's outer-product sum is about n I when the last whitening is
    # right; a noise floor above n (a stage clipping far beyond its expected norm) must not
    # raise an unresolved eigenvalue above n, or the direction is lost round after round.
    from dpmcmc.samplers import private_newton as pn

    n, dim = 1000, 2
    quiet = pn.eigen_floor(1.0, dim)
    assert float(pn.whitening_floor(1.0, dim, n)) == pytest.approx(quiet)
    assert float(pn.whitening_floor(1e4, dim, n)) == pytest.approx(n)
    # Used as the eigenvalue floor of the stage's sum: an unresolved eigenvalue (50) rises to
    # n, the previous whitening's curvature, not to the noise floor's 2·10⁴·√2.
    floor = float(pn.whitening_floor(1e4, dim, n))
    np.testing.assert_allclose(np.maximum([50.0, 2e3], floor), [n, 2e3])
