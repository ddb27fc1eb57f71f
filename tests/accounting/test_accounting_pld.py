"""Tests of the numerical PLD accountant (dpmcmc.accounting.pld)."""
from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special

from dpmcmc.accounting.pld import (
    PrivacyLossDistribution,
    default_grid_step,
    subsampled_gaussian_delta,
    subsampled_gaussian_epsilon,
    subsampled_gaussian_pld,
)

REL_HIGH = 2e-3  # the accuracy promise: at most 0.2 % above the exact delta
ROUNDOFF = 1e-12  # relative slack for float round-off where an exact inequality holds
RELATIONS = ("substitute", "add-remove", "substitute-legacy")
# (shift of the mixture component, pairs) of one release of each relation at noise sigma;
# written out independently of the implementation's sigma/2 scaling for "substitute".
RELATION_PAIRS = {"substitute": (2.0, ("remove", "add")),
                  "add-remove": (1.0, ("remove", "add")),
                  "substitute-legacy": (1.0, ("substitute-legacy",))}


# ------------------------------------------------------------------ exact references (mpmath)
def _mp_gaussian_delta(mu, eps):
    """Closed-form delta(eps) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    mu, eps = mp.mpf(mu), mp.mpf(eps)
    phi = lambda z: mp.erfc(-z / mp.sqrt(2)) / 2  # noqa: E731
    return phi(-eps / mu + mu / 2) - mp.exp(eps) * phi(-eps / mu - mu / 2)


def _mp_pair(sigma, q, pair, shift=1.0):
    """Densities (P, Q) of one release's pair, as mpmath functions: "remove" is
    (1-q)N(0,s^2) + qN(shift,s^2) vs N(0,s^2), "add" the reverse, "substitute-legacy"
    (1-q)N(0,s^2) + qN(1,s^2) vs (1-q)N(0,s^2) + qN(-1,s^2)."""
    s, q, shift = mp.mpf(sigma), mp.mpf(q), mp.mpf(shift)

    def n(x, m):
        return mp.npdf(x, m, s)

    mix = lambda x: (1 - q) * n(x, 0) + q * n(x, shift)  # noqa: E731
    if pair == "substitute-legacy":
        return mix, lambda x: (1 - q) * n(x, 0) + q * n(x, -shift)
    if pair == "remove":
        return mix, lambda x: n(x, 0)
    return (lambda x: n(x, 0)), mix


def _mp_hockey_stick(sigma, q, eps, pair, reverse=False, shift=1.0):
    """delta(eps) = int (P - e^eps Q)_+ dx by mpmath quadrature, split where P = e^eps Q.

    ``reverse`` swaps the roles of P and Q.

    20 digits (the tests compare to 1e-12 relative at the tightest) and a root bracketed to
    2^-64 of its bracket (below 1e-16 absolute): an error in the split point changes the
    integral only to second order, the integrand vanishing there. Against 30 digits and 120
    halvings, the 15 values of test_single_release_matches_mpmath_hockey_stick agree to 2e-20
    relative, at two thirds of the CPU time.
    """
    mp.mp.dps = 20
    p, qd = _mp_pair(sigma, q, pair, shift)
    increasing = pair in ("substitute-legacy", "remove")  # sign of d/dx log(P/Q)
    if reverse:
        p, qd, increasing = qd, p, not increasing
    e = mp.exp(mp.mpf(eps))
    g = lambda x: p(x) - e * qd(x)  # noqa: E731
    # bracket the unique root of P = e^eps Q
    a, b = mp.mpf(-50) * sigma - 5 * shift, mp.mpf(50) * sigma + 5 * shift
    if g(b if increasing else a) <= 0:
        return mp.mpf(0)  # loss never exceeds eps (bounded loss of "add")
    if g(a) * g(b) >= 0:  # P > e^eps Q everywhere on the bracket
        return mp.quad(g, [-mp.inf, 0, mp.inf])
    # bisection on the monotone log-ratio (robust where it flattens, as for "add")
    excess = lambda x: mp.log(p(x)) - mp.log(qd(x)) - eps  # noqa: E731
    sa = excess(a) > 0
    for _ in range(64):
        m = (a + b) / 2
        if (excess(m) > 0) == sa:
            a = m
        else:
            b = m
    x0 = (a + b) / 2
    lim = [x0, x0 + 10 * sigma, mp.inf] if increasing else [-mp.inf, x0 - 10 * sigma, x0]
    return mp.quad(g, lim)


def _mp_relation_delta(sigma, q, eps, relation):
    """Exact k = 1 delta of a relation: the larger hockey-stick over its pairs' orders."""
    shift, pairs = RELATION_PAIRS[relation]
    return max(_mp_hockey_stick(sigma, q, eps, pair, shift=shift) for pair in pairs)


# ------------------------------------------------------------------ held reference values
def _reference_ids(entries):
    return [f"s={e['args']['sigma']:.4g},q={e['args']['q']},k={e['args']['k']},"
            f"eps={e['args']['epsilon']}" for e in entries]


def _load_reference():
    import json
    import os

    here = os.path.dirname(__file__)
    for path in (os.environ.get("DPMCMC_REFERENCE", ""),
                 os.path.join(here, "..", "..", "..", "shared", "reference", "accounting.json"),
                 os.path.join(here, "..", "data", "accounting_reference.json")):
        if path and os.path.exists(path):
            with open(path) as f:
                return [e for e in json.load(f) if e["call"] == "subsampled_gaussian_delta"]
    return []


_REF = _load_reference()


def test_reference_entries_present(reference_entries):
    held = [e for e in reference_entries if e["call"] == "subsampled_gaussian_delta"]
    assert len(held) >= 10
    # the parametrised test below covers exactly these entries
    assert sorted(map(str, held)) == sorted(map(str, _REF))


@pytest.mark.parametrize("entry", _REF, ids=_reference_ids(_REF))
def test_reference_value(entry):
    """The held values (args relation "substitute") were computed with the papers' symmetric
    pair (their source: "S: (1-q)N(0,s^2)+qN(1,s^2) vs (1-q)N(0,s^2)+qN(-1,s^2)"), i.e. our
    "substitute-legacy": value (1 - rel_low) <= legacy <= value (1 + rel_high). The valid
    default is strictly more conservative than the held value."""
    tol = entry["tolerance"]
    args = dict(entry["args"])
    assert args.pop("relation") == "substitute"
    value = entry["value"]
    legacy = subsampled_gaussian_delta(**args, relation="substitute-legacy")
    assert value * (1 - tol["rel_low"]) <= legacy <= value * (1 + tol["rel_high"]), (legacy, value)
    default = subsampled_gaussian_delta(**args)
    assert default > value * (1 + tol["rel_high"]), (default, value)


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("sigma,k,eps", [(2.0, 1, 0.5), (5.0, 10, 1.0), (20.0, 1000, 2.0),
                                         (10.0, 100, 6.0), (50.0, 10000, 3.0)])
@pytest.mark.parametrize("relation", RELATIONS)
def test_full_batch_reduces_to_gaussian(sigma, k, eps, relation):
    """q = 1: k releases of N(., sigma^2) with shift 2 (both substitute relations: N(2) vs N(0)
    and N(1) vs N(-1)) or 1 (add-remove) are mu-GDP with mu = shift sqrt(k) / sigma, i.e. our
    mu = mu_gdp^2 / 2 = 2k / sigma^2 for substitute."""
    shift = 1.0 if relation == "add-remove" else 2.0
    exact = float(_mp_gaussian_delta(shift * math.sqrt(k) / sigma, eps))
    got = subsampled_gaussian_delta(sigma, 1.0, k, eps, relation)
    assert exact * (1 - ROUNDOFF) <= got <= exact * (1 + REL_HIGH)


@pytest.mark.parametrize("sigma,q,eps", [(1.0, 0.01, 0.01), (1.0, 0.1, 0.5), (0.7, 0.05, 1.0),
                                         (3.0, 0.3, 0.2), (0.5, 0.02, 3.0)])
@pytest.mark.parametrize("relation", RELATIONS)
def test_single_release_matches_mpmath_hockey_stick(sigma, q, eps, relation):
    """k = 1: an upper bound on the exact hockey-stick divergence of the relation's own
    pair(s), within 0.2 %. For "substitute" that is the counterexample pair
    (1-q)N(0,s^2) + qN(2,s^2) vs N(0,s^2), max over both orders, evaluated at sigma itself."""
    exact = float(_mp_relation_delta(sigma, q, eps, relation))
    got = subsampled_gaussian_delta(sigma, q, 1, eps, relation)
    assert exact * (1 - ROUNDOFF) <= got <= exact * (1 + REL_HIGH), (got, exact)


def test_legacy_pair_is_symmetric():
    """P(x) = Q(-x) for the legacy pair, so one order is enough: check with mpmath."""
    a = _mp_hockey_stick(1.3, 0.05, 0.3, "substitute-legacy")
    b = _mp_hockey_stick(1.3, 0.05, 0.3, "substitute-legacy", reverse=True)
    assert abs(a - b) < 1e-15 * a
    # whereas the add-remove orders differ
    r = _mp_hockey_stick(1.3, 0.05, 0.3, "remove")
    d = _mp_hockey_stick(1.3, 0.05, 0.3, "add")
    assert abs(r - d) > 1e-3 * r
    # and so do the orders of the substitute pair, each attained (by swapping D and D')
    r2 = _mp_hockey_stick(1.3, 0.05, 0.3, "remove", shift=2.0)
    d2 = _mp_hockey_stick(1.3, 0.05, 0.3, "add", shift=2.0)
    assert abs(r2 - d2) > 1e-3 * r2


# ------------------------------------------------------------------ explicit neighbouring data sets
def _wor_sum_law(x, b):
    """Law of the batch sum of the fixed-size-without-replacement subsampled sum mechanism on
    contributions ``x`` (before noise), by enumerating every batch: [(probability, sum)]."""
    batches = list(itertools.combinations(range(len(x)), b))
    counts = {}
    for batch in batches:
        total = round(math.fsum(x[j] for j in batch), 12)  # merge sums equal up to round-off
        counts[total] = counts.get(total, 0) + 1
    return [(mp.mpf(c) / len(batches), mp.mpf(total)) for total, c in sorted(counts.items())]


def _mp_mixture_hockey_stick(p_comps, q_comps, sigma, eps):
    """Exact int (P - e^eps Q)_+ for Gaussian mixtures with a common sd ``sigma``.

    P - e^eps Q changes sign only at roots of log P - log Q - eps: they are bracketed on a
    fine grid and refined by Brent's method (float64, log space; an error in a root changes
    the integral only to second order, the integrand vanishing there); between roots the
    integral is a sum of normal CDF differences at 40 digits, free of cancellation."""
    mp.mp.dps = 40
    s, e = mp.mpf(sigma), mp.exp(mp.mpf(eps))

    def weights_and_means(comps):
        # Converted once, not at every call of log_excess (Brent's method calls it often).
        return (np.array([float(mp.log(c[0])) for c in comps]),
                np.array([float(c[1]) for c in comps]))

    p_wm, q_wm = weights_and_means(p_comps), weights_and_means(q_comps)

    def log_density(wm, x):
        # logsumexp over the components by hand: scipy's costs ~0.2 ms a call in checks of its
        # arguments, and Brent's method calls this hundreds of times per data set.
        w, m = wm
        x = np.atleast_1d(x)
        terms = w[:, None] - (x[None, :] - m[:, None]) ** 2 / (2 * sigma**2)
        top = terms.max(axis=0)
        return top + np.log(np.exp(terms - top).sum(axis=0))

    def log_excess(x):
        return log_density(p_wm, x) - log_density(q_wm, x) - eps

    means = [float(m) for _, m in p_comps + q_comps]
    grid = np.arange(min(means) - 40 * sigma, max(means) + 40 * sigma, sigma / 50)
    excess = log_excess(grid)
    roots = [mp.mpf(optimize.brentq(lambda x: float(log_excess(x)[0]), grid[i], grid[i + 1],
                                    xtol=1e-14, rtol=1e-15))
             for i in np.flatnonzero(np.sign(excess[:-1]) != np.sign(excess[1:]))]
    edges = [-mp.inf] + roots + [mp.inf]
    cdf = lambda x, m: mp.erfc(-(x - m) / (s * mp.sqrt(2))) / 2  # noqa: E731
    mass = lambda comps, a, b: mp.fsum(w * (cdf(b, m) - cdf(a, m)) for w, m in comps)  # noqa: E731
    total = mp.mpf(0)
    for j, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
        # sign on the piece: from the grid point just inside it
        inside = excess[0] if j == 0 else excess[min(np.searchsorted(grid, float(a)), grid.size - 1)]
        if inside > 0:
            total += mass(p_comps, a, b) - e * mass(q_comps, a, b)
    return total


def _neighbours_delta(others, x_i, x_i_prime, b, sigma, eps):
    """Hockey-stick divergence, worse order, of the subsampled sum mechanism on the data sets
    ``others + [x_i]`` and ``others + [x_i_prime]`` (one record replaced)."""
    law = _wor_sum_law(list(others) + [x_i], b)
    law_prime = _wor_sum_law(list(others) + [x_i_prime], b)
    return max(_mp_mixture_hockey_stick(law, law_prime, sigma, eps),
               _mp_mixture_hockey_stick(law_prime, law, sigma, eps))


# sigma, n, batch size, eps: the first four are the settings of the module docstring's table
_COUNTEREXAMPLE_SETTINGS = [(1.0, 10, 1, 0.5), (2.0, 100, 1, 0.5), (1.1785113019775793, 100, 1, 0.5),
                            (7.9, 100, 1, 0.001), (1.0, 10, 3, 0.5), (1.5, 10, 2, 1.0)]


@pytest.mark.parametrize("sigma,n,b,eps", _COUNTEREXAMPLE_SETTINGS)
def test_counterexample_defeats_legacy_pair_and_attains_default(sigma, n, b, eps):
    """Every other record contributes -1; record i contributes +1 in D and -1 in D'. The exact
    output laws (all C(n, b) batches enumerated) are (1-q)N(-b) + qN(-b+2) vs N(-b): the legacy
    pair's delta lies below the delta these neighbours attain, so it is not an upper bound,
    while the default relation's delta bounds it and is attained (within the 0.2 % slack)."""
    q = b / n
    attained = float(_neighbours_delta([-1.0] * (n - 1), 1.0, -1.0, b, sigma, eps))
    legacy = subsampled_gaussian_delta(sigma, q, 1, eps, "substitute-legacy")
    default = subsampled_gaussian_delta(sigma, q, 1, eps)
    assert legacy < attained * (1 - 0.05), (legacy, attained)
    assert attained * (1 - ROUNDOFF) <= default <= attained * (1 + REL_HIGH), (default, attained)


@pytest.mark.parametrize("sigma,n,b,eps", [
    (1.0, 6, 2, 0.5),
    # slow: guard in default: test_default_bounds_every_neighbouring_pair_searched[1.0-6-2-0.5]
    # (the same brute-force search, a smaller population)
    pytest.param(2.0, 10, 3, 1.0, marks=pytest.mark.slow)])
def test_default_bounds_every_neighbouring_pair_searched(sigma, n, b, eps):
    """Brute force over neighbouring data sets with contributions in [-1, 1]: the other records
    take every multiset of values in {-1, 0, 1}, the replaced record moves between two values
    of {-1, 0, 1}, plus random data sets with uniform contributions (fixed seed). The default
    delta bounds the attained delta of every one, and the worst one attains it; the legacy
    pair's delta (attained with the other records at 0) is exceeded."""
    q = b / n
    default = subsampled_gaussian_delta(sigma, q, 1, eps)
    legacy = subsampled_gaussian_delta(sigma, q, 1, eps, "substitute-legacy")
    cases = [(list(others), x, y)
             for others in itertools.combinations_with_replacement((-1.0, 0.0, 1.0), n - 1)
             for x, y in ((1.0, -1.0), (1.0, 0.0), (0.0, -1.0))]
    rng = np.random.default_rng(20240611)
    cases += [(list(rng.uniform(-1, 1, n - 1)), *rng.uniform(-1, 1, 2)) for _ in range(8)]
    attained = [float(_neighbours_delta(o, x, y, b, sigma, eps)) for o, x, y in cases]
    assert max(attained) <= default * (1 + ROUNDOFF)
    assert max(attained) >= default * (1 - REL_HIGH)
    assert max(attained) > legacy * 1.05
    # the legacy value is what the "others at 0, +1 -> -1" data set attains
    at_zero = attained[cases.index(([0.0] * (n - 1), 1.0, -1.0))]
    assert at_zero * (1 - ROUNDOFF) <= legacy <= at_zero * (1 + REL_HIGH)


# ------------------------------------------------------------------ discretisation
@pytest.mark.parametrize("sigma,q,k,eps,pair", [
    (1.0, 0.01, 2000, 2.0, "substitute-legacy"), (1.1785113019775793, 0.01, 1000, 2.0, "substitute-legacy"),
    (0.9, 0.05, 50, 3.0, "substitute-legacy"),
    # the pairs of relation "substitute" at sigma = 2 and 3.95 (evaluated at sigma / 2)
    (1.0, 0.01, 2000, 2.0, "remove"), (1.976, 0.01, 20000, 1.0, "add"),
])
def test_halving_grid_changes_little_and_stays_below(sigma, q, k, eps, pair):
    """Connect-the-dots on h is a mean-preserving spread of connect-the-dots on h/2, so the
    coarse delta is an upper bound on the fine one; both agree within 0.2 %."""
    h = default_grid_step(sigma, q, k, pair=pair)
    coarse = subsampled_gaussian_pld(sigma, q, k, pair=pair, grid_step=h).get_delta(eps)
    fine = subsampled_gaussian_pld(sigma, q, k, pair=pair, grid_step=h / 2).get_delta(eps)
    assert fine <= coarse * (1 + 1e-9)
    assert coarse <= fine * (1 + REL_HIGH)
    # the error shrinks like h^2: a much coarser grid is further off
    rough = subsampled_gaussian_pld(sigma, q, k, pair=pair, grid_step=8 * h).get_delta(eps)
    assert rough >= coarse * (1 - 1e-9)
    assert rough - fine > 3 * (coarse - fine)


def test_single_step_pld_preserves_mass_and_exp_moment():
    """The split keeps total mass 1 and E_P[exp(-L)] <= 1 (a valid PLD up to truncation)."""
    for pair in ("substitute-legacy", "remove", "add"):
        pld = subsampled_gaussian_pld(1.2, 0.03, 1, pair=pair)
        total = pld.finite_mass + pld.infinity_mass
        assert abs(total - 1.0) < 1e-12
        exp_moment = float(np.dot(pld.probs, np.exp(-pld.losses)))
        assert 1 - 1e-9 < exp_moment <= 1 + 1e-12


@pytest.mark.parametrize("sigma,pair,eps", [
    (1.1785113019775793, "substitute-legacy", [6.0, 8.0, 10.0]),
    (1.5, "remove", [2.0, 3.0, 4.0]),  # relation "substitute" at sigma = 3
])
def test_small_delta_tail_is_resolved(sigma, pair, eps):
    """Far-tail deltas (1e-10 .. 1e-14) are not swamped by FFT round-off: they agree between
    grids and fall like a Gaussian tail (log delta concave in eps)."""
    q, k = 0.01, 5000
    h = default_grid_step(sigma, q, k, pair=pair)
    a = subsampled_gaussian_pld(sigma, q, k, pair=pair, grid_step=h)
    b = subsampled_gaussian_pld(sigma, q, k, pair=pair, grid_step=h / 2)
    da, db = [a.get_delta(e) for e in eps], [b.get_delta(e) for e in eps]
    for x, y in zip(da, db):
        assert y <= x * (1 + 1e-9) and x <= y * (1 + 5e-3)
    assert 1e-15 < da[2] < 1e-12
    logs = np.log(da)
    assert logs[2] - logs[1] < logs[1] - logs[0]


# ------------------------------------------------------------------ properties
_sigmas = st.floats(0.8, 6.0)
_relations = st.sampled_from(RELATIONS)
# The sampling rates the properties below are drawn at, as a parameter of each test: q = 0.001
# (with σ near 1, grids of 10⁶ points: ~0.2 CPU-s a composition on average, up to 2 s) is the
# slow twin of each (tests/suite_budget.py), q = 0.01 to 1 the default run's.
Q_RATES = [pytest.param([0.01, 0.05, 0.2, 1.0], id="q>=0.01"), pytest.param([0.001], id="q=0.001")]


@pytest.mark.parametrize("rates", Q_RATES)
@settings(max_examples=12)
@given(data=st.data(), sigma=_sigmas, k=st.integers(1, 3000), e1=st.floats(0, 8),
       e2=st.floats(0, 8), relation=_relations)
def test_delta_nonincreasing_in_epsilon(rates, data, sigma, k, e1, e2, relation):
    q = data.draw(st.sampled_from(rates), label="q")
    lo, hi = sorted((e1, e2))
    d_lo = subsampled_gaussian_delta(sigma, q, k, lo, relation)
    d_hi = subsampled_gaussian_delta(sigma, q, k, hi, relation)
    # Monotone up to rounding: near δ = 1 (e.g. σ=2.125, q=1, k=1578, add-remove: δ = 1 − 4.6e-14)
    # consecutive values differ by one ulp either way.
    assert d_hi <= d_lo * (1 + 1e-12)
    assert 0.0 <= d_hi <= 1.0


@pytest.mark.parametrize("rates", Q_RATES)
@settings(max_examples=6)
@given(data=st.data(), sigma=_sigmas, k=st.integers(1, 1000), extra=st.integers(1, 1000),
       eps=st.floats(0, 4), relation=_relations)
def test_delta_nondecreasing_in_k(rates, data, sigma, k, extra, eps, relation):
    q = data.draw(st.sampled_from(rates), label="q")
    d1 = subsampled_gaussian_delta(sigma, q, k, eps, relation)
    d2 = subsampled_gaussian_delta(sigma, q, k + extra, eps, relation)
    assert d1 <= d2 * (1 + 1e-9) + 1e-15


# 6 examples (10 until stop 42, ~0.06 CPU-s each): the inversion is also exercised by every
# max_iterations and spent test of a subsampled release (tests/accounting/test_accounting_budget.py:
# the spent epsilon of the iterations allowed stays within the budget, at k and k + 1).
@pytest.mark.parametrize("rates", Q_RATES)
@settings(max_examples=6)
@given(data=st.data(), sigma=_sigmas, k=st.integers(1, 3000), log_delta=st.floats(-12, -1),
       relation=_relations)
def test_epsilon_inverts_delta(rates, data, sigma, k, log_delta, relation):
    q = data.draw(st.sampled_from(rates), label="q")
    delta = 10.0 ** log_delta
    eps = subsampled_gaussian_epsilon(sigma, q, k, delta, relation)
    assert math.isfinite(eps) and eps >= 0
    # rigorous side: the returned epsilon meets the target
    assert subsampled_gaussian_delta(sigma, q, k, eps, relation) <= delta
    # and it is the smallest such epsilon (up to a relative 1e-6)
    if eps > 0:
        below = max(0.0, eps - 1e-6 * max(eps, 1e-3))
        assert subsampled_gaussian_delta(sigma, q, k, below, relation) > delta


def test_epsilon_zero_when_delta_already_met():
    d0 = subsampled_gaussian_delta(50.0, 0.01, 10, 0.0)
    assert subsampled_gaussian_epsilon(50.0, 0.01, 10, min(0.99, d0 * 1.01)) == 0.0


def test_add_remove_takes_the_worse_order():
    sigma, q, k, eps = 0.9, 0.05, 300, 1.5
    both = [subsampled_gaussian_pld(sigma, q, k, pair=p).get_delta(eps) for p in ("remove", "add")]
    assert subsampled_gaussian_delta(sigma, q, k, eps, "add-remove") == max(both)
    assert both[0] != both[1]


def test_substitute_dominates_add_remove():
    """A replacement is an add and a remove: substitute delta >= add-remove delta."""
    for args in [(1.0, 0.01, 1000, 1.0), (2.0, 0.1, 100, 0.5)]:
        assert (subsampled_gaussian_delta(*args, "substitute")
                >= subsampled_gaussian_delta(*args, "add-remove"))


@pytest.mark.parametrize("sigma,q,k,eps", [(1.0, 0.01, 1000, 1.0), (2.0, 0.1, 100, 0.5),
                                           (7.905694150420947, 0.01, 3000, 0.3)])
def test_substitute_is_symmetrised_add_remove_at_half_sigma(sigma, q, k, eps):
    """Scaling by 1/2 maps (1-q)N(0,s^2) + qN(2,s^2) vs N(0,s^2) onto the add-remove pairs at
    s/2. One release: the symmetrised pair's delta at eps >= 0 is exactly that of the "remove"
    order, the worse one for eps >= 0 (test_adaptive_composition checks this on exact values).
    k releases: the substitute relation composes the symmetrised pair (order switching between
    releases is allowed), so it is at least the add-remove max of two separate compositions.
    (Before issue 11 this test asserted equality at every k: that was the bug.)"""
    assert (subsampled_gaussian_delta(sigma, q, 1, eps)
            == subsampled_gaussian_pld(sigma / 2, q, 1, pair="remove").get_delta(eps))
    assert (subsampled_gaussian_delta(sigma, q, k, eps)
            == subsampled_gaussian_pld(sigma / 2, q, k, pair="symmetric").get_delta(eps))
    assert (subsampled_gaussian_delta(sigma, q, k, eps)
            > subsampled_gaussian_delta(sigma / 2, q, k, eps, "add-remove"))
    assert (subsampled_gaussian_epsilon(sigma, q, k, 1e-5)
            > subsampled_gaussian_epsilon(sigma / 2, q, k, 1e-5, "add-remove"))


@pytest.mark.parametrize("rates", [pytest.param([0.01, 0.05, 0.2], id="q>=0.01"), Q_RATES[1]])
@settings(max_examples=5)
@given(data=st.data(), sigma=_sigmas, k=st.integers(1, 2000), eps=st.floats(0, 6))
def test_substitute_dominates_legacy(rates, data, sigma, k, eps):
    """The legacy pair is one of the coupled pairs the substitute pair dominates (others at 0,
    record i from +1 to -1), so its delta is never larger, up to the 0.2 % grid slack."""
    q = data.draw(st.sampled_from(rates), label="q")
    legacy = subsampled_gaussian_delta(sigma, q, k, eps, "substitute-legacy")
    assert legacy <= subsampled_gaussian_delta(sigma, q, k, eps) * (1 + REL_HIGH) + 1e-15


# ------------------------------------------------------------------ PrivacyLossDistribution
def test_compose_matches_self_compose():
    one = subsampled_gaussian_pld(1.5, 0.05, 1, pair="remove")
    three = one.compose(one).compose(one)
    direct = one.self_compose(3)
    for eps in (0.0, 0.3, 1.0):
        a, b = three.get_delta(eps), direct.get_delta(eps)
        assert abs(a - b) <= 1e-12 + 1e-9 * a


def test_pld_object_argument_errors():
    one = subsampled_gaussian_pld(1.5, 0.05, 1, pair="remove")
    other = subsampled_gaussian_pld(1.5, 0.05, 1, pair="remove", grid_step=1e-3)
    with pytest.raises(ValueError, match="grid_step"):
        one.compose(other)
    with pytest.raises(TypeError, match="other"):
        one.compose(3)
    with pytest.raises(ValueError, match="k"):
        one.self_compose(0)
    with pytest.raises(ValueError, match="epsilon"):
        one.get_delta(-1.0)
    with pytest.raises(ValueError, match="delta"):
        one.get_epsilon(1.5)
    with pytest.raises(ValueError, match="pair"):
        subsampled_gaussian_pld(1.0, 0.1, pair="replace")
    # the old name of the legacy pair is gone, so it cannot be taken for the valid relation
    with pytest.raises(ValueError, match="pair"):
        subsampled_gaussian_pld(1.0, 0.1, pair="substitute")
    with pytest.raises(TypeError, match="pair"):
        subsampled_gaussian_pld(1.0, 0.1)
    with pytest.raises(ValueError, match="grid_step"):
        PrivacyLossDistribution(0.0, 0, np.array([1.0]), 0.0)
    with pytest.raises(ValueError, match="probs"):
        PrivacyLossDistribution(0.1, 0, np.array([1.1, -0.1]), 0.0)
    with pytest.raises(ValueError, match="infinity_mass"):
        PrivacyLossDistribution(0.1, 0, np.array([1.0]), -0.1)


def test_infinity_mass_counts_in_full():
    pld = PrivacyLossDistribution(0.1, 0, np.array([0.5, 0.4]), 0.1)
    assert pld.get_delta(10.0) == pytest.approx(0.1)
    assert pld.get_epsilon(0.05) == math.inf
    # delta(0) = 0.4 (1 - e^{-0.1}) + 0.1
    assert pld.get_delta(0.0) == pytest.approx(0.4 * -math.expm1(-0.1) + 0.1)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("kwargs,name", [
    (dict(sigma=0.0), "sigma"), (dict(sigma=-1.0), "sigma"), (dict(sigma=float("nan")), "sigma"),
    (dict(q=0.0), "q"), (dict(q=1.5), "q"), (dict(q=-0.1), "q"),
    (dict(k=0), "k"), (dict(relation="replace-one"), "relation"), (dict(relation=None), "relation"),
    (dict(epsilon=-0.5), "epsilon"),
])
def test_delta_argument_errors(kwargs, name):
    args = dict(sigma=1.0, q=0.01, k=10, epsilon=1.0, relation="substitute")
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        subsampled_gaussian_delta(**args)


@pytest.mark.parametrize("kwargs,name", [
    (dict(delta=0.0), "delta"), (dict(delta=1.0), "delta"), (dict(delta=-1e-5), "delta"),
    (dict(sigma=0.0), "sigma"), (dict(q=2.0), "q"), (dict(k=0), "k"),
    (dict(relation="poisson"), "relation"),
])
def test_epsilon_argument_errors(kwargs, name):
    args = dict(sigma=1.0, q=0.01, k=10, delta=1e-5, relation="substitute")
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        subsampled_gaussian_epsilon(**args)


def test_non_integer_k_is_a_type_error():
    with pytest.raises(TypeError, match="k"):
        subsampled_gaussian_delta(1.0, 0.01, 2.5, 1.0)


# ------------------------------------------------------------------ external accountants
# Each oracle is itself a numerical approximation; the comments state which direction of
# disagreement is acceptable. Points are small so that each test stays within a few seconds.
@pytest.mark.slow  # an oracle; the held reference values are the default run's
@pytest.mark.oracle
def test_against_dp_accounting():
    """dp-accounting's pessimistic connect-the-dots PLD is also an upper bound on the true
    delta (ours <= exact (1 + 0.2 %) <= theirs (1 + 0.2 %)); at interval 1e-4 it is within
    about 1 % of exact, so ours >= exact >= theirs (1 - 1 %). Its REPLACE_ONE relation is our
    "substitute-legacy" (the symmetric pair, sensitivity 1); our "substitute" is its
    ADD_OR_REMOVE_ONE pair (1-q)N(0,s^2) + qN(Delta,s^2) vs N(0,s^2), both orders, at
    sensitivity Delta = 2, symmetrised (so only bounded below by theirs; the order-by-order
    computation is our "add-remove" at sigma / 2)."""
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    pa = pytest.importorskip("dp_accounting.privacy_accountant")
    nr = pa.NeighboringRelation
    cases = [("substitute-legacy", nr.REPLACE_ONE, 1.0, 1.0, 0.01, 300, 1.0),
             ("substitute", nr.ADD_OR_REMOVE_ONE, 2.0, 2.0, 0.01, 300, 1.0),
             ("substitute", nr.ADD_OR_REMOVE_ONE, 2.0, 3.0, 0.01, 1000, 0.5),
             ("add-remove", nr.ADD_OR_REMOVE_ONE, 1.0, 0.8, 0.02, 100, 2.0)]
    for relation, neighbouring, sensitivity, sigma, q, k, eps in cases:
        theirs = pld_mod.from_gaussian_mechanism(
            sigma, sensitivity=sensitivity, sampling_prob=q, value_discretization_interval=1e-4,
            neighboring_relation=neighbouring).self_compose(k).get_delta_for_epsilon(eps)
        if relation == "substitute":
            # their ADD_OR_REMOVE_ONE is the max of the two orders' separate compositions,
            # our "add-remove" at sigma / 2; "substitute" composes the symmetrised pair that
            # also covers order switching (issue 11), so it is only bounded below by theirs
            sub = subsampled_gaussian_delta(sigma, q, k, eps, relation)
            assert sub >= theirs * (1 - 1e-2), (relation, sub, theirs)
            relation, sigma = "add-remove", sigma / 2
        ours = subsampled_gaussian_delta(sigma, q, k, eps, relation)
        assert ours <= theirs * (1 + REL_HIGH), (relation, ours, theirs)
        assert ours >= theirs * (1 - 1e-2), (relation, ours, theirs)


# slow: guard in default: test_reference_value (held values of the same pairs) and
# test_single_release_matches_mpmath_hockey_stick (exact deltas of every relation)
@pytest.mark.slow
@pytest.mark.oracle
def test_against_fourier_accountant():
    """The Fourier accountant's discretisation error has no fixed sign, so the check is two
    sided; with nx = 1e6, L = 20 at these moderate points it is within 0.1 % of exact. Its
    get_delta_S is our "substitute-legacy"; get_delta_R (Poisson, add/remove) at sigma / 2 is
    our "add-remove" at sigma / 2, a lower bound on our "substitute" at sigma."""
    fa = pytest.importorskip("fourier_accountant")
    sigma, q, k, eps = 1.0, 0.01, 1000, 1.0
    theirs_s = fa.get_delta_S(target_eps=eps, sigma=sigma, q=q, ncomp=k, nx=int(1e6), L=20.0)
    ours_s = subsampled_gaussian_delta(sigma, q, k, eps, "substitute-legacy")
    assert abs(ours_s / theirs_s - 1) < 1e-3
    theirs_r = fa.get_delta_R(target_eps=eps, sigma=sigma, q=q, ncomp=k, nx=int(1e6), L=20.0)
    ours_r = subsampled_gaussian_delta(sigma, q, k, eps, "add-remove")
    assert abs(ours_r / theirs_r - 1) < 1e-3
    sigma, k = 2.0, 300
    theirs_sub = fa.get_delta_R(target_eps=eps, sigma=sigma / 2, q=q, ncomp=k, nx=int(1e6), L=20.0)
    ours_sub = subsampled_gaussian_delta(sigma / 2, q, k, eps, "add-remove")
    assert abs(ours_sub / theirs_sub - 1) < 1e-3
    # "substitute" composes the symmetrised pair (order switching, issue 11): not below it
    assert subsampled_gaussian_delta(sigma, q, k, eps, "substitute") >= theirs_sub * (1 - 1e-3)


# slow: guard in default: test_reference_value (held values of the same pairs) and
# test_single_release_matches_mpmath_hockey_stick (exact deltas of every relation)
@pytest.mark.slow
@pytest.mark.oracle
def test_against_prv_accountant():
    """prv-accountant (Poisson, add/remove) returns certified lower and upper bounds on the
    exact delta: ours must not fall below the lower one and not exceed the upper one by more
    than our 0.2 % slack. Its mechanism at noise multiplier sigma / 2 is our "add-remove" at
    sigma / 2, a lower bound on our "substitute" at sigma."""
    prv = pytest.importorskip("prv_accountant")
    for relation, sigma, prv_sigma in [("add-remove", 0.8, 0.8), ("substitute", 1.6, 0.8)]:
        q, k, eps = 0.02, 100, 2.0
        acc = prv.PRVAccountant(
            prvs=[prv.PoissonSubsampledGaussianMechanism(noise_multiplier=prv_sigma,
                                                         sampling_probability=q)],
            max_self_compositions=[k], eps_error=1e-2, delta_error=1e-10)
        lower, _, upper = acc.compute_delta(eps, [k])
        if relation == "substitute":
            # symmetrised pair (order switching, issue 11): only bounded below by theirs
            assert subsampled_gaussian_delta(sigma, q, k, eps, relation) >= lower
            relation, sigma = "add-remove", prv_sigma
        ours = subsampled_gaussian_delta(sigma, q, k, eps, relation)
        assert lower <= ours <= upper * (1 + REL_HIGH), (relation, lower, ours, upper)


# ------------------------------------------------------------------ a Gaussian start composed in
@pytest.mark.parametrize("sigma, k, eps, init_mu", [(3.0, 20, 1.0, 0.3), (1.5, 5, 2.0, 0.05)])
def test_full_batch_with_gaussian_start_is_the_gaussian_sum(sigma, k, eps, init_mu):
    # q = 1 under substitute: k releases of N(2, σ²) vs N(0, σ²) (μ = 2/σ² each) and the start's
    # μ compose μ-additively; the composed PLD is an upper bound within the accuracy promise.
    exact = float(_mp_gaussian_delta(math.sqrt(2.0 * (2.0 * k / sigma ** 2 + init_mu)), eps))
    got = subsampled_gaussian_delta(sigma, 1.0, k, eps, init_mu=init_mu)
    assert exact * (1 - ROUNDOFF) <= got <= exact * (1 + REL_HIGH)


def test_gaussian_start_is_the_convolution_of_the_profiles():
    # δ of the composition is E[δ_sub(ε − L)] with L ~ N(μ, 2μ) the Gaussian's privacy loss
    # (independent under P); computed here by quadrature over the subsampled PLD's own profile
    # Σ_l p(l)(1 − e^{ε' − l})₊ + p(∞), written out since ε' = ε − L may be negative.
    from dpmcmc.accounting.pld import gaussian_pld

    sigma, q, k, eps, mu = 2.0, 0.1, 30, 1.5, 0.2
    sub = subsampled_gaussian_pld(sigma / 2.0, q, k, pair="symmetric")
    z, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / math.sqrt(2 * math.pi)
    losses = sub.losses

    def profile(e):
        return float(np.sum(sub.probs * np.maximum(-np.expm1(e - losses), 0.0))) + sub.infinity_mass

    ref = sum(wi * profile(eps - (mu + math.sqrt(2 * mu) * zi)) for zi, wi in zip(z, w))
    got = subsampled_gaussian_delta(sigma, q, k, eps, init_mu=mu)
    assert ref * (1 - 1e-3) <= got <= ref * (1 + REL_HIGH)
    assert got > subsampled_gaussian_delta(sigma, q, k, eps)
    # The Gaussian's own PLD, alone, is its closed form.
    g = gaussian_pld(mu, sub.grid_step)
    exact = float(_mp_gaussian_delta(math.sqrt(2 * mu), eps))
    assert exact * (1 - ROUNDOFF) <= g.get_delta(eps) <= exact * (1 + REL_HIGH)


def test_subsampled_budget_pays_for_a_gaussian_start():
    from dpmcmc import accounting

    kw = dict(noise_multiplier=2.0, batch_size=100)
    n, eps, delta, mu = 1000, 3.0, 1e-5, 0.1
    k0 = accounting.max_iterations("dp-sgld", eps, delta, n, **kw)
    k = accounting.max_iterations("dp-sgld", eps, delta, n, init_mu=mu, **kw)
    assert 1 <= k < k0
    assert accounting.spent("dp-sgld", k, delta, n, init_mu=mu, **kw).epsilon <= eps
    assert accounting.spent("dp-sgld", k + 1, delta, n, init_mu=mu, **kw).epsilon > eps
    report = accounting.spent("dp-sgld", k, delta, n, init_mu=mu, init_steps=7, **kw)
    (start,) = [m for m in report.mechanisms if m.get("per_iteration") == 0]
    assert start["total_mu"] == mu and start["count"] == 7
