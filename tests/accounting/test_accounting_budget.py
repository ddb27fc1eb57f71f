"""max_iterations / spent / releases / PrivacyReport, and the demo's budget table."""
import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpmcmc.accounting import (
    RELATIONS,
    PrivacyReport,
    gaussian_delta,
    max_iterations,
    releases,
    spent,
    subsampled_gaussian_delta,
    supported_accountants,
    supported_relations,
    zcdp_rho,
)
from dpmcmc import accounting
from dpmcmc.accounting import budget as _budget

N = 100_000
HMC = {"tau_l": 0.1, "tau_g": 0.55, "leapfrog_steps": 25}


# ---- what one iteration releases -----------------------------------------------------------


def test_hmc_releases_match_paper_convention():
    rl, rg = releases("dp-hmc", N, **HMC)
    assert (rl.kind, rl.per_iteration) == ("gaussian", 1)
    assert (rg.kind, rg.per_iteration) == ("gaussian", 26)  # L + 1 gradients (000 Algorithm 1)
    assert rl.mu == pytest.approx(1 / (2 * 0.1**2 * N), rel=1e-15)
    assert rg.mu == pytest.approx(1 / (2 * 0.55**2 * N), rel=1e-15)
    # the noise a sampler draws: sigma_l = 2 tau_l sqrt(n) b_l |theta-theta'|, sigma_g = 2 tau_g sqrt(n) b_g
    assert rl.noise_std(0.3) == pytest.approx(2 * 0.1 * math.sqrt(N) * 0.3, rel=1e-15)
    assert rg.noise_std(2.0) == pytest.approx(2 * 0.55 * math.sqrt(N) * 2.0, rel=1e-15)
    for r in (rl, rg):  # the accounted mu is the one of that noise: (2 bound)^2 / (2 std^2)
        assert (2 * 0.3) ** 2 / (2 * r.noise_std(0.3) ** 2) == pytest.approx(r.mu, rel=1e-14)


def test_subsampled_releases():
    (r,) = releases("minibatch-penalty", N, tau=2.0, batch_size=500)
    assert r.kind == "subsampled-gaussian"
    assert r.sigma == pytest.approx(2 * math.sqrt(2.0))  # noise variance tau c^2 with bound c/2
    assert r.mu == pytest.approx(1 / (2 * 2.0))  # Thm 8's per-release RDP alpha/(2 tau)
    assert r.q == pytest.approx(500 / N)
    (g,) = releases("dp-sgld", N, noise_multiplier=1.3, batch_size=100)
    assert (g.sigma, g.q, g.batch_size) == (1.3, 100 / N, 100)
    (b,) = releases("dp-barker", N, batch_size=1000)
    assert b.kind == "barker" and b.noise_variance == 2.0
    assert b.clip_bound == pytest.approx(math.sqrt(1000) / N)
    (b0,) = releases("dp-barker", N, batch_size=1000, n0=1000)
    assert b0.clip_bound == pytest.approx(math.sqrt(1000) / 1000)


def test_supported_accountants():
    assert supported_accountants("dp-penalty") == ("pld", "rdp", "zcdp")
    assert supported_accountants("dp-hmc") == ("pld", "rdp", "zcdp")
    assert supported_accountants("dp-sgld") == ("pld", "rdp")
    assert supported_accountants("minibatch-penalty") == ("pld", "rdp")
    assert supported_accountants("dp-barker") == ("rdp-direct", "rdp")


# ---- exactness of max_iterations at the boundary -------------------------------------------

_SGD = {"noise_multiplier": 1.5, "batch_size": 100}
_SGD_WIDE = {"noise_multiplier": 2.5, "batch_size": 100}
CASES = [
    # algorithm, params, accountant, epsilon, delta, n, chains[, relation]
    ("dp-penalty", {"tau": 0.1}, "pld", 4.0, 1e-6, N, 1),
    ("dp-penalty", {"tau": 0.17}, "pld", 1.0, 1e-6, N, 3),
    ("dp-penalty", {"tau": 0.1}, "rdp", 4.0, 1e-6, N, 2),
    ("dp-penalty", {"tau": 0.1}, "zcdp", 4.0, 1e-6, N, 1),
    ("dp-hmc", HMC, "pld", 4.0, 1e-6, N, 4),
    ("dp-hmc", HMC, "rdp", 6.0, 1e-6, N, 4),
    ("dp-hmc", HMC, "zcdp", 2.0, 1e-6, N, 1),
    ("minibatch-penalty", {"tau": 1.0, "batch_size": 1000}, "rdp", 4.0, 1e-6, N, 2),
    ("minibatch-penalty", {"tau": 4.0, "batch_size": 100}, "pld", 1.0, 1e-5, 10_000, 1),
    ("minibatch-penalty", {"tau": 4.0, "batch_size": 100}, "pld", 1.0, 1e-5, 10_000, 1, "substitute-legacy"),
    ("dp-barker", {"batch_size": 1000}, "rdp", 2.0, 1e-6, N, 1),
    ("dp-barker", {"batch_size": 500, "n0": 1000}, "rdp", 1.0, 1e-6, 1_000_000, 3),
    ("dp-barker", {"batch_size": 1000}, "rdp-direct", 2.0, 1e-6, N, 1),
    ("dp-barker", {"batch_size": 60, "n0": 500}, "rdp-direct", 4.0, 1e-5, 1000, 2),
    ("dp-sgld", _SGD, "pld", 1.0, 1e-5, 10_000, 2),
    ("dp-sgld", _SGD_WIDE, "pld", 1.0, 1e-5, 10_000, 2),
    ("dp-sgld", _SGD, "pld", 1.0, 1e-5, 10_000, 2, "substitute-legacy"),
    ("dp-sgnht", _SGD_WIDE, "pld", 2.0, 1e-6, 10_000, 1, "substitute-legacy"),
    ("dp-sgld", {"noise_multiplier": 4.0, "batch_size": 100}, "rdp", 1.0, 1e-5, 10_000, 1),
    ("dp-sgnht", {"noise_multiplier": 4.0, "batch_size": 100}, "rdp", 2.0, 1e-5, 10_000, 2),
]


def _total_mu(alg, params, n, iterations, chains):
    return sum(r.mu * r.per_iteration for r in releases(alg, n, **params)) * iterations * chains


CASES = [c if len(c) == 8 else c + ("substitute",) for c in CASES]


@pytest.mark.parametrize(
    "alg, params, acc, eps, delta, n, chains, relation",
    CASES,
    ids=[f"{c[0]}-{c[2]}-{c[7]}-{'-'.join(f'{v:g}' for v in c[1].values())}-eps{c[3]:g}-chains{c[6]}"
         for c in CASES],
)
def test_max_iterations_is_exact(alg, params, acc, eps, delta, n, chains, relation):
    k = max_iterations(alg, eps, delta, n, chains=chains, accountant=acc, relation=relation, **params)
    assert k >= 1
    kinds = {r.kind for r in releases(alg, n, **params)}
    if acc == "pld" and kinds == {"gaussian"}:
        # tight Gaussian PLD: delta(k) <= delta < delta(k+1)
        assert gaussian_delta(_total_mu(alg, params, n, k, chains), eps) <= delta
        assert gaussian_delta(_total_mu(alg, params, n, k + 1, chains), eps) > delta
    elif acc == "pld":
        (r,) = releases(alg, n, **params)
        assert subsampled_gaussian_delta(r.sigma, r.q, k * chains, eps, relation) <= delta
        assert subsampled_gaussian_delta(r.sigma, r.q, (k + 1) * chains, eps, relation) > delta
    else:
        assert spent(alg, k, delta, n, chains=chains, accountant=acc, **params).epsilon <= eps
        assert spent(alg, k + 1, delta, n, chains=chains, accountant=acc, **params).epsilon > eps
    # the report of the run it allows stays within the budget, under the relation asked for
    rep = spent(alg, k, delta, n, chains=chains, accountant=acc, relation=relation, **params)
    assert rep.epsilon <= eps * (1 + 1e-9)
    assert rep.relation == relation


def test_supported_relations():
    assert RELATIONS == ("substitute", "substitute-legacy")
    for alg in ("dp-sgld", "dp-sgnht", "minibatch-penalty"):
        assert supported_relations(alg) == ("substitute", "substitute-legacy")
        assert supported_relations(alg, "rdp") == ("substitute",)
    for alg in ("dp-penalty", "dp-hmc"):
        for acc in ("pld", "rdp", "zcdp"):
            assert supported_relations(alg, acc) == ("substitute",)
    assert supported_relations("dp-barker", "rdp") == ("substitute",)


def test_default_relation_is_more_conservative_than_legacy():
    """The legacy pair understates delta, so it allows more iterations (or a smaller epsilon);
    minibatch-penalty with tau is the same release as dp-sgld with noise multiplier 2 sqrt(tau)."""
    k = {rel: max_iterations("minibatch-penalty", 1.0, 1e-5, 10_000, chains=1, relation=rel, tau=4.0, batch_size=100)
         for rel in RELATIONS}
    assert k["substitute"] < k["substitute-legacy"]
    for rel in RELATIONS:
        assert k[rel] == max_iterations("dp-sgld", 1.0, 1e-5, 10_000, chains=1, relation=rel, noise_multiplier=4.0,
                                        batch_size=100)
    eps = {rel: spent("dp-sgld", 500, 1e-5, 10_000, chains=1, relation=rel, **_SGD).epsilon for rel in RELATIONS}
    assert eps["substitute"] > eps["substitute-legacy"]


@pytest.mark.parametrize("relation", RELATIONS)
def test_pld_guesses_bracket_the_answer(relation):
    """The search starts from the RDP answer (a valid bound, so never above the tight one, and
    the legacy answer is larger still) and the relation's CLT point, which at a large noise
    multiplier lies within 1 % of the answer."""
    params = {"noise_multiplier": 7.905694150420947, "batch_size": 1000}
    acc = _budget._Accounting(releases("dp-sgld", 100_000, **params), "pld", relation)
    lower, upper = acc.guesses(2.0, 1e-6, 1)
    k = max_iterations("dp-sgld", 2.0, 1e-6, 100_000, chains=1, relation=relation, **params)
    assert lower <= k
    # The CLT point is that of one order's pair; "substitute" now composes the symmetrised pair
    # (issue 11), whose answer is ~17 % lower at this point (the search only starts there).
    tol = 0.25 if relation == "substitute" else 1e-2
    assert abs(upper / k - 1) < tol


def test_zcdp_closed_forms():
    # 001 Thm 5 (alpha = 1/2): k = floor(2 tau^2 n rho); DP-HMC (000 convention, k(L+1) gradients):
    # k = floor(rho / (rho_l + (L+1) rho_g)); chains share the budget.
    for eps in (1.0, 4.0, 10.0):
        rho = zcdp_rho(eps, 1e-6)
        assert max_iterations("dp-penalty", eps, 1e-6, N, chains=1, accountant="zcdp", tau=0.1) == math.floor(
            2 * 0.1**2 * N * rho
        )
        per_iter = 1 / (2 * 0.1**2 * N) + 26 / (2 * 0.55**2 * N)
        assert max_iterations("dp-hmc", eps, 1e-6, N, chains=4, accountant="zcdp", **HMC) == math.floor(
            rho / (4 * per_iter)
        )


def test_chains_compose():
    total = max_iterations("dp-hmc", 4.0, 1e-6, N, chains=1, **HMC)
    for chains in (2, 3, 4, 7):
        assert max_iterations("dp-hmc", 4.0, 1e-6, N, chains=chains, **HMC) == total // chains
    for acc in ("pld", "rdp", "zcdp"):
        a = spent("dp-penalty", 50, 1e-6, N, chains=4, accountant=acc, tau=0.1)
        b = spent("dp-penalty", 200, 1e-6, N, chains=1, accountant=acc, tau=0.1)
        assert a.epsilon == pytest.approx(b.epsilon, rel=1e-12)


def test_tight_accountant_allows_most():
    for eps in (1.0, 4.0, 10.0):
        k = {acc: max_iterations("dp-hmc", eps, 1e-6, N, chains=1, accountant=acc, **HMC) for acc in ("pld", "rdp", "zcdp")}
        assert k["pld"] > k["zcdp"] >= k["rdp"] - 1
        assert k["pld"] > k["rdp"]


@settings(max_examples=25)
@given(st.floats(min_value=0.5, max_value=20.0), st.floats(min_value=1.01, max_value=3.0))
def test_max_iterations_monotone_in_epsilon(eps, factor):
    a = max_iterations("dp-penalty", eps, 1e-6, N, chains=1, tau=0.1)
    b = max_iterations("dp-penalty", eps * factor, 1e-6, N, chains=1, tau=0.1)
    assert b >= a


@settings(max_examples=25)
@given(st.integers(min_value=1, max_value=5000), st.sampled_from(["pld", "rdp", "zcdp"]))
def test_spent_monotone_in_iterations(k, acc):
    a = spent("dp-hmc", k, 1e-6, N, chains=1, accountant=acc, **HMC).epsilon
    b = spent("dp-hmc", k + 1, 1e-6, N, chains=1, accountant=acc, **HMC).epsilon
    assert b > a


def test_budget_too_small():
    with pytest.raises(ValueError, match="budget too small for one iteration.*epsilon=0.001.*delta=1e-06"):
        max_iterations("dp-penalty", 0.001, 1e-6, 100, chains=1, tau=0.1)
    with pytest.raises(ValueError, match="budget too small for one iteration"):
        max_iterations("dp-barker", 0.01, 1e-6, N, chains=1, accountant="rdp", batch_size=1000)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(algorithm="dp-nuts", tau=0.1), ValueError, "algorithm"),
        (dict(algorithm="dp-penalty", tau=0.1, epsilon=0.0), ValueError, "epsilon"),
        (dict(algorithm="dp-penalty", tau=0.1, delta=1.0), ValueError, "delta"),
        (dict(algorithm="dp-penalty", tau=0.1, delta=0.0), ValueError, "delta"),
        (dict(algorithm="dp-penalty", tau=0.1, n=0), ValueError, "n"),
        (dict(algorithm="dp-penalty", tau=0.1, chains=0), ValueError, "chains"),
        (dict(algorithm="dp-penalty", tau=-0.1), ValueError, "tau"),
        (dict(algorithm="dp-penalty", tau=0.1, accountant="moments"), ValueError, "accountant"),
        (dict(algorithm="dp-penalty", tau=0.1, tau_g=0.5), TypeError, "tau_g"),
        (dict(algorithm="dp-penalty"), TypeError, "tau"),
        (dict(algorithm="dp-hmc", tau_l=0.1, tau_g=0.5, leapfrog_steps=0), ValueError, "leapfrog_steps"),
        (dict(algorithm="dp-hmc", tau_l=0.1, tau_g=0.5, leapfrog_steps=2.5), TypeError, "leapfrog_steps"),
        (dict(algorithm="dp-sgld", noise_multiplier=1.0, batch_size=N + 1), ValueError, "batch_size"),
        (dict(algorithm="dp-sgld", noise_multiplier=0.0, batch_size=10), ValueError, "noise_multiplier"),
        (dict(algorithm="dp-sgld", noise_multiplier=1.0, batch_size=10, accountant="zcdp"), ValueError, "accountant"),
        (dict(algorithm="dp-barker", batch_size=1000, accountant="pld"), ValueError, "accountant"),  # only rdp
        (dict(algorithm="dp-barker", batch_size=10, accountant="rdp"), ValueError, "batch_size"),
        (dict(algorithm="dp-barker", batch_size=100, n0=-1.0, accountant="rdp"), ValueError, "n0"),
        (dict(algorithm="minibatch-penalty", tau=1.0), TypeError, "batch_size"),
        (dict(algorithm="dp-sgld", noise_multiplier=1.0, batch_size=10, relation="replace"), ValueError, "relation"),
        (dict(algorithm="dp-sgld", noise_multiplier=1.0, batch_size=10, relation=None), ValueError, "relation"),
        # Poisson sampling's relation does not describe fixed-size batches
        (dict(algorithm="dp-sgld", noise_multiplier=1.0, batch_size=10, relation="add-remove"), ValueError,
         "relation 'add-remove'"),
        (dict(algorithm="minibatch-penalty", tau=1.0, batch_size=10, relation="add-remove"), ValueError, "relation"),
        # the legacy pair exists only for the subsampled Gaussian PLD
        (dict(algorithm="dp-sgld", noise_multiplier=1.0, batch_size=10, accountant="rdp",
              relation="substitute-legacy"), ValueError, "relation"),
        (dict(algorithm="dp-hmc", tau_l=0.1, tau_g=0.5, leapfrog_steps=2, relation="substitute-legacy"),
         ValueError, "relation"),
        (dict(algorithm="dp-penalty", tau=0.1, accountant="zcdp", relation="substitute-legacy"), ValueError,
         "relation"),
        (dict(algorithm="dp-barker", batch_size=1000, accountant="rdp", relation="substitute-legacy"), ValueError,
         "relation"),
    ],
)
def test_argument_errors_name_the_argument(kwargs, exc, name):
    args = dict(epsilon=1.0, delta=1e-6, n=N)
    args.update(kwargs)
    alg = args.pop("algorithm")
    with pytest.raises(exc, match=name):
        max_iterations(alg, args.pop("epsilon"), args.pop("delta"), args.pop("n"), **args)
    rest = {k: v for k, v in kwargs.items() if k not in ("algorithm", "epsilon")}
    if "epsilon" in kwargs:  # spent takes no epsilon: check its iterations argument instead
        with pytest.raises(ValueError, match="iterations"):
            spent(alg, 0, 1e-6, N, **rest)
    else:
        call = dict(delta=1e-6, n=N)
        call.update(rest)
        with pytest.raises(exc, match=name):
            spent(alg, 10, call.pop("delta"), call.pop("n"), **call)


# ---- the report ------------------------------------------------------------------------------


def test_report_contents_and_round_trip():
    rep = spent("dp-hmc", 100, 1e-6, N, chains=4, **HMC)
    assert (rep.relation, rep.accountant, rep.algorithm, rep.iterations, rep.chains, rep.n) == (
        "substitute", "pld", "dp-hmc", 100, 4, N
    )
    llr, grad = rep.mechanisms
    assert llr["count"] == 400 and grad["count"] == 400 * 26
    assert llr["total_mu"] + grad["total_mu"] == pytest.approx(rep.details["total_mu"], rel=1e-14)
    assert gaussian_delta(rep.details["total_mu"], rep.epsilon) == pytest.approx(1e-6, rel=1e-9)
    assert rep.params == HMC
    assert PrivacyReport.from_json(rep.to_json()) == rep
    assert PrivacyReport.from_dict(json.loads(json.dumps(rep.to_dict()))) == rep
    text = str(rep)
    for piece in ("dp-hmc", "substitute", "pld", "4 chains", "gradient", f"{rep.epsilon:.6g}"):
        assert piece in text


def test_legacy_report_says_it_may_understate_delta():
    rep = spent("dp-sgld", 200, 1e-5, 10_000, chains=1, relation="substitute-legacy", **_SGD)
    assert rep.relation == "substitute-legacy"
    assert PrivacyReport.from_json(rep.to_json()) == rep
    text = str(rep)
    assert "substitute-legacy" in text and "NOT a dominating pair" in text and "understate δ" in text
    default = spent("dp-sgld", 200, 1e-5, 10_000, chains=1, **_SGD)
    assert default.relation == "substitute" and "understate" not in str(default)


def test_report_rdp_details_and_errors():
    rep = spent("dp-barker", 3000, 1e-6, N, chains=1, accountant="rdp", batch_size=1000)
    assert rep.details["rdp_order"] == 8
    assert PrivacyReport.from_json(rep.to_json(indent=2)) == rep
    bad = rep.to_dict()
    bad["colour"] = "red"
    with pytest.raises(ValueError, match="colour"):
        PrivacyReport.from_dict(bad)
    del bad["colour"], bad["epsilon"]
    with pytest.raises(ValueError, match="epsilon"):
        PrivacyReport.from_dict(bad)
    with pytest.raises(TypeError):
        PrivacyReport.from_json(3)


# ---- demo ----------------------------------------------------------------------------------


def test_demo_budget_table():
    from dpmcmc.demo import budget_rows, print_budget_table

    rows = budget_rows(epsilons=(4.0,))
    hmc = next(r for r in rows if r["algorithm"] == "dp-hmc")
    assert hmc["pld"] == max_iterations("dp-hmc", 4.0, 1e-6, N, chains=4, **HMC)
    assert hmc["pld"] > hmc["zcdp"]
    out = io.StringIO()
    print_budget_table(file=out, epsilons=(4.0,))
    assert "dp-penalty" in out.getvalue() and str(hmc["pld"]) in out.getvalue()


# ---- accounting-side bad input (issue 11 §5): a clear error naming the argument, at once ------


@settings(max_examples=25, deadline=2000)
@given(exponent=st.sampled_from([-300, -200, -160, 160, 200, 300]),
       case=st.sampled_from([("dp-penalty", "tau", {}), ("dp-hmc", "tau_l", dict(tau_g=1.0, leapfrog_steps=3)),
                             ("dp-hmc", "tau_g", dict(tau_l=1.0, leapfrog_steps=3)),
                             ("minibatch-penalty", "tau", dict(batch_size=10)),
                             ("dp-sgld", "noise_multiplier", dict(batch_size=10)),
                             ("dp-sgnht", "noise_multiplier", dict(batch_size=10))]),
       which=st.sampled_from(["max_iterations", "spent"]))
def test_extreme_noise_scale_is_rejected_by_name(exponent, case, which):
    """tau = 1e-300 used to raise ZeroDivisionError (and 1e300 a ZeroDivisionError or an error
    naming mu): a noise scale whose per-release mu is not accountable is a ValueError naming it."""
    algorithm, name, rest = case
    params = {name: 10.0 ** exponent, **rest}
    if algorithm == "minibatch-penalty" and exponent > 0:
        params[name] = 1e305  # mu = 1/(2 tau) falls below the range only for huge tau
    with pytest.raises(ValueError, match=name):
        if which == "max_iterations":
            max_iterations(algorithm, 1.0, 1e-5, 1000, chains=1, **params)
        else:
            spent(algorithm, 10, 1e-5, 1000, chains=1, **params)


@settings(max_examples=10, deadline=2000)
@given(n=st.integers(min_value=10**7, max_value=10**15), algorithm=st.sampled_from(["dp-sgld", "dp-sgnht"]))
def test_tiny_sampling_ratio_is_refused_by_pld_naming_batch_size(n, algorithm):
    """n = 1e12 with batch_size 1 used to fail inside the FFT ("Target length must be positive")
    or brentq: below PLD_MIN_Q the PLD accountant refuses, naming batch_size/n."""
    with pytest.raises(ValueError, match="batch_size/n"):
        max_iterations(algorithm, 1.0, 1e-5, n, chains=1, noise_multiplier=1.0, batch_size=1)
    with pytest.raises(ValueError, match="batch_size/n"):
        spent(algorithm, 10, 1e-5, n, chains=1, noise_multiplier=1.0, batch_size=1)


@settings(max_examples=10, deadline=2000)
@given(n=st.integers(min_value=11, max_value=10**6), extra=st.floats(min_value=1e-6, max_value=1e6))
def test_barker_n0_above_n_is_rejected_like_sample(n, extra):
    """The accounting validator applies dpmcmc.sample's rule 0 < n0 <= n with its message."""
    from dpmcmc.accounting._checks import check_n0

    n0 = n * (1 + extra)
    msg = f"n0 must satisfy 0 < n0 <= n = {n}"
    with pytest.raises(ValueError, match=msg):
        max_iterations("dp-barker", 1.0, 1e-5, n, chains=1, accountant="rdp", batch_size=11, n0=n0)
    with pytest.raises(ValueError, match=msg):
        spent("dp-barker", 10, 1e-5, n, chains=1, accountant="rdp", batch_size=11, n0=n0)
    with pytest.raises(ValueError, match=msg):
        check_n0(n0, n)
    assert check_n0(n, n) == n


def test_unaffordable_epsilon_error_names_epsilon():
    """An epsilon too small for one iteration keeps its current behaviour (an error), and the
    message names epsilon."""
    for algorithm, params in [("dp-penalty", dict(tau=1.0)),
                              ("dp-sgld", dict(noise_multiplier=1.0, batch_size=10))]:
        with pytest.raises(ValueError, match="budget too small for one iteration: epsilon=1e-09"):
            max_iterations(algorithm, 1e-9, 1e-5, 1000, chains=1, **params)


@pytest.mark.parametrize("algorithm, params", [
    ("dp-penalty", dict(tau=0.1)),
    ("dp-hmc", dict(tau_l=0.1, tau_g=0.5, leapfrog_steps=3)),
    ("minibatch-penalty", dict(tau=4.0, batch_size=1000)),
    ("dp-barker", dict(batch_size=1000)),
    ("dp-sgld", dict(noise_multiplier=1.5, batch_size=1000)),
    ("dp-sgnht", dict(noise_multiplier=1.5, batch_size=1000)),
])
def test_defaults_are_sample_s_defaults(algorithm, params):
    # issue 12 §4: accountant=None is the tightest valid accountant and chains defaults to 4,
    # in max_iterations and spent as in dpmcmc.sample (which uses supported_accountants()[0]).
    import inspect

    import dpmcmc

    assert inspect.signature(dpmcmc.sample).parameters["chains"].default == 4
    for fn in (max_iterations, spent):
        assert inspect.signature(fn).parameters["chains"].default == 4
    tightest = accounting.supported_accountants(algorithm)[0]
    k = max_iterations(algorithm, 2.0, 1e-6, N, **params)
    assert k == max_iterations(algorithm, 2.0, 1e-6, N, chains=4, accountant=tightest, **params)
    report = spent(algorithm, k, 1e-6, N, **params)
    assert report.accountant == tightest and report.chains == 4
    assert report.epsilon <= 2.0 < spent(algorithm, k + 1, 1e-6, N, **params).epsilon
