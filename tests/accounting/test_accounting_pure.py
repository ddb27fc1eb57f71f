"""Composition of Gaussian and pure ε-DP releases (dpmcmc.accounting.pure)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dpmcmc.accounting.gaussian import gaussian_delta, gaussian_epsilon
from dpmcmc.accounting.pure import composed_delta, composed_epsilon, max_pure_scale


@pytest.mark.parametrize("mu, eps", [(0.01, 0.0), (0.3, 1.0), (2.0, 3.0), (50.0, 40.0)])
def test_without_pure_releases_it_is_the_gaussian_bound(mu, eps):
    assert composed_delta(eps, mu=mu) == pytest.approx(gaussian_delta(mu, eps), rel=1e-12)
    if gaussian_delta(mu, 0.0) > 1e-6:
        assert composed_epsilon(1e-6, mu=mu) == pytest.approx(gaussian_epsilon(mu, 1e-6), rel=1e-9)


@pytest.mark.parametrize("e1, e2", [(0.5, 1.5), (2.0, 2.0), (0.1, 3.0)])
def test_pure_only_is_the_randomized_response_profile(e1, e2):
    """μ = 0: the exact profile of RR_{e1} ⊗ RR_{e2}, written out by hand."""
    def p(e):
        return math.exp(e) / (1 + math.exp(e))

    atoms = [(s1 * e1 + s2 * e2, (p(e1) if s1 > 0 else 1 - p(e1)) * (p(e2) if s2 > 0 else 1 - p(e2)))
             for s1 in (1, -1) for s2 in (1, -1)]
    for eps in (0.0, 0.3, e1 + e2 - 0.2, e1 + e2, e1 + e2 + 1.0):
        exact = sum(q * max(0.0, 1 - math.exp(eps - loss)) for loss, q in atoms)
        assert composed_delta(eps, pure=[e1, e2]) == pytest.approx(exact, rel=1e-12, abs=1e-300)
    # A pure composition is (Σε, 0)-DP: δ vanishes at the sum and ε(δ) never exceeds it.
    assert composed_delta(e1 + e2, pure=[e1, e2]) == 0.0
    assert composed_epsilon(1e-9, pure=[e1, e2]) <= e1 + e2


@pytest.mark.oracle
@pytest.mark.parametrize("e, mu", [(1.0, 0.3), (2.5, 0.1), (0.5, 1.0), (3.0, 0.02)])
def test_matches_dp_accounting_pld_of_gaussian_and_randomized_response(e, mu):
    """dp-accounting's PLD accountant (pessimistic discretisation, REPLACE_ONE) composes the same
    dominating pairs: a Gaussian of noise multiplier √(2/μ) (sensitivity 2 under replace-one,
    i.e. our μ) and two binary randomized responses of ε = e. Its δ is an upper bound on the
    exact one: ours lies just below it."""
    import dp_accounting as dpa
    from dp_accounting.pld import pld_privacy_accountant as pld

    flip = 2 / (1 + math.exp(e))  # RandomizedResponseDpEvent's noise parameter for ε = e
    acc = pld.PLDAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE,
                            value_discretization_interval=1e-4)
    acc.compose(dpa.ComposedDpEvent([dpa.GaussianDpEvent(math.sqrt(2 / mu)),
                                     dpa.RandomizedResponseDpEvent(flip, 2),
                                     dpa.RandomizedResponseDpEvent(flip, 2)]))
    for eps in (0.5, 1.5, 3.0, 5.0):
        ours, theirs = composed_delta(eps, mu=mu, pure=[e, e]), acc.get_delta(eps)
        assert ours <= theirs * (1 + 1e-9)
        assert ours == pytest.approx(theirs, rel=2e-3)


@pytest.mark.parametrize("eps, delta, mu, shares", [(4.0, 1e-6, 0.07, [0.8, 0.2]), (1.0, 1e-6, 0.005, [0.8, 0.2]),
                                                    (0.5, 1e-5, 0.0, [1.0]), (8.0, 1e-8, 0.5, [0.6, 0.3, 0.1])])
def test_max_pure_scale_is_feasible_and_tight(eps, delta, mu, shares):
    s = max_pure_scale(eps, delta, shares, mu=mu)
    assert s > 0
    assert composed_delta(eps, mu=mu, pure=[s * a for a in shares]) <= delta
    assert composed_delta(eps, mu=mu, pure=[s * (1 + 1e-9) * a for a in shares]) > delta
    assert composed_epsilon(delta, mu=mu, pure=[s * a for a in shares]) <= eps * (1 + 1e-12)
    # Never below basic composition with the Gaussian part's own ε at δ.
    if mu > 0:
        assert s * sum(shares) >= eps - gaussian_epsilon(mu, delta) - 1e-9


@settings(max_examples=40, deadline=None)
@given(mu=st.one_of(st.just(0.0), st.floats(1e-9, 5.0)), e1=st.floats(0.01, 5.0), e2=st.floats(0.01, 5.0),
       eps=st.floats(0.0, 10.0), bump=st.floats(0.01, 1.0))
def test_delta_grows_with_every_release(mu, e1, e2, eps, bump):
    # Equal up to rounding is allowed: e.g. at ε = 0 a further release whose ±ε moves no atom
    # across 0 leaves the total variation distance unchanged.
    base = composed_delta(eps, mu=mu, pure=[e1, e2])
    tol = 1e-12 * base + 1e-300
    assert composed_delta(eps, mu=mu + bump, pure=[e1, e2]) >= base - tol
    assert composed_delta(eps, mu=mu, pure=[e1 + bump, e2]) >= base - tol
    assert composed_delta(eps, mu=mu, pure=[e1, e2, bump]) >= base - tol
    assert composed_delta(eps + bump, mu=mu, pure=[e1, e2]) <= base + tol


@pytest.mark.parametrize("call, name", [
    (lambda: composed_delta(-1.0, pure=[1.0]), "epsilon"),
    (lambda: composed_delta(1.0, mu=-0.1), "mu"),
    (lambda: composed_delta(1.0, mu=1e-300), "mu"),
    (lambda: composed_delta(1.0, pure=[1.0, 0.0]), r"pure\[1\]"),
    (lambda: composed_delta(1.0, pure="1.0"), "pure"),
    (lambda: composed_epsilon(1.5, pure=[1.0]), "delta"),
    (lambda: max_pure_scale(0.0, 1e-6, [1.0]), "epsilon"),
    (lambda: max_pure_scale(1.0, 1e-6, []), "shares"),
])
def test_bad_input_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()
