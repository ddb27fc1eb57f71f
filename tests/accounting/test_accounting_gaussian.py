"""Gaussian PLD bound (gaussian_delta, log_gaussian_delta, gaussian_epsilon, gaussian_mu) and zCDP."""
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special

from dpmcmc.accounting import (
    gaussian_delta,
    gaussian_epsilon,
    gaussian_mu,
    log_gaussian_delta,
    zcdp_epsilon,
    zcdp_rho,
)

log_mu = st.floats(min_value=math.log(1e-10), max_value=math.log(1e6))
eps_st = st.floats(min_value=0.0, max_value=1000.0)


def _mp_delta(mu, eps, dps=50):
    """Reference δ with mpmath at `dps` digits (the textbook form; mpmath has no overflow)."""
    with mp.workdps(dps):
        mu, eps = mp.mpf(mu), mp.mpf(eps)
        s = mp.sqrt(mu)
        return 0.5 * (mp.erfc((eps - mu) / (2 * s)) - mp.exp(eps) * mp.erfc((eps + mu) / (2 * s)))


# A modest grid spanning mu in [1e-10, 1e6] and eps in [0, 1000], with the cancelling regime
# (tiny mu, eps of a few sqrt(mu)) and the underflow regime (delta far below 1e-300) included.
_MUS = [1e-10, 3e-9, 1e-7, 1e-6, 1e-4, 3e-3, 0.05, 0.5, 1.0, 7.0, 100.0, 1e4, 1e6]
_EPS = [0.0, 1e-5, 1e-4, 1e-3, 0.01, 0.03, 0.1, 0.5, 1.0, 3.0, 10.0, 40.0, 200.0, 709.0, 711.0, 1000.0]


def _grid():
    pts = [(m, e) for m in _MUS for e in _EPS]
    # Cancelling regime: eps a few multiples of sqrt(mu) above mu, where the two erfc terms agree
    # to many digits (the issue's example mu = 1e-6, eps = 0.01 among them).
    for m in (1e-10, 1e-8, 1e-6, 1e-4):
        pts += [(m, m + c * 2 * math.sqrt(m)) for c in (0.01, 0.5, 2.0, 5.0, 10.0, 20.0, 26.0)]
    return pts


def test_mpmath_grid_relative_accuracy():
    worst = 0.0
    checked = 0
    for mu, eps in _grid():
        ref = _mp_delta(mu, eps)
        value = gaussian_delta(mu, eps)
        assert math.isfinite(value) and 0.0 <= value <= 1.0
        if ref >= mp.mpf("1e-300"):
            rel = float(abs(mp.mpf(value) - ref) / ref)
            worst = max(worst, rel)
            assert rel <= 1e-9, (mu, eps, value, ref)
            checked += 1
        else:
            assert value < 1e-300
        if ref > 0:  # the log form keeps accuracy far below the double range of delta
            log_ref = float(mp.log(ref))
            assert abs(log_gaussian_delta(mu, eps) - log_ref) <= 1e-12 * max(1.0, abs(log_ref))
    assert checked > 150
    assert worst < 1e-11  # measured ~3e-13; the promise is 1e-9


def test_issue_example_cancellation():
    # Each erfc term is ~1e-11..1e-16 while delta is 1.49e-16.
    assert gaussian_delta(1e-6, 0.01) == pytest.approx(1.4887678369836977e-16, rel=1e-12)


@pytest.mark.parametrize("mu", [1e-10, 1e-6, 0.01, 1.0, 50.0, 1e6])
def test_delta_at_zero_is_erf(mu):
    # delta(0) = 1/2 (erfc(-s/2) - erfc(s/2)) = erf(sqrt(mu)/2)
    assert gaussian_delta(mu, 0.0) == pytest.approx(special.erf(math.sqrt(mu) / 2), rel=1e-12)


def test_large_epsilon_no_overflow():
    # e^eps overflows doubles past ~709.8; the scaled form does not.
    for eps in (709.0, 710.0, 800.0, 1000.0):
        mu = eps  # delta is then of order 1/2 - sizeable, no underflow
        ref = float(_mp_delta(mu, eps))
        assert gaussian_delta(mu, eps) == pytest.approx(ref, rel=1e-10)


def test_underflow_gives_zero_and_finite_log():
    assert gaussian_delta(1e-10, 1000.0) == 0.0
    value = log_gaussian_delta(1e-10, 1000.0)
    assert math.isfinite(value) and value < -1e15


@given(log_mu, eps_st)
def test_never_nan_negative_or_inf(lm, eps):
    value = gaussian_delta(math.exp(lm), eps)
    assert math.isfinite(value) and 0.0 <= value <= 1.0
    assert not math.isnan(log_gaussian_delta(math.exp(lm), eps))


@given(log_mu, eps_st, st.floats(min_value=1e-6, max_value=5.0))
def test_monotone_in_epsilon(lm, eps, step):
    mu = math.exp(lm)
    assert log_gaussian_delta(mu, eps + step) <= log_gaussian_delta(mu, eps)


@given(log_mu, eps_st, st.floats(min_value=1e-6, max_value=3.0))
def test_monotone_in_mu(lm, eps, factor):
    mu = math.exp(lm)
    assert log_gaussian_delta(mu * (1.0 + factor), eps) >= log_gaussian_delta(mu, eps)


@given(st.floats(min_value=math.log(1e-8), max_value=math.log(1e5)), st.floats(min_value=1e-3, max_value=300.0))
def test_epsilon_inverts_delta(lm, eps):
    mu = math.exp(lm)
    d = gaussian_delta(mu, eps)
    # Near delta = 1 the map eps -> delta is flat to within rounding, so eps is ill-determined by
    # a double delta; DP budgets live far below 0.5.
    if not 1e-300 < d < 0.5:
        return
    assert gaussian_epsilon(mu, d) == pytest.approx(eps, rel=1e-9, abs=1e-12)


@given(st.floats(min_value=math.log(1e-10), max_value=math.log(1e6)), st.floats(min_value=-690.0, max_value=-0.01))
def test_delta_inverts_epsilon(lm, log_d):
    mu, d = math.exp(lm), math.exp(log_d)
    eps = gaussian_epsilon(mu, d)
    if eps == 0.0:
        assert gaussian_delta(mu, 0.0) <= d
    else:
        assert gaussian_delta(mu, eps) == pytest.approx(d, rel=1e-9)


@given(st.floats(min_value=0.01, max_value=100.0), st.floats(min_value=-300.0, max_value=-1.0))
def test_gaussian_mu_is_the_largest_mu(eps, log10_d):
    d = 10.0**log10_d
    mu = gaussian_mu(eps, d)
    assert gaussian_delta(mu, eps) == pytest.approx(d, rel=1e-9)
    assert gaussian_delta(mu * (1 + 1e-6), eps) > d


def test_gaussian_epsilon_zero_when_delta_large():
    mu = 1e-4
    assert gaussian_epsilon(mu, 0.5) == 0.0  # delta(0) = erf(0.005) ~ 0.0056 < 0.5


def test_gaussian_epsilon_tiny_delta():
    eps = gaussian_epsilon(1.0, 1e-300)
    assert gaussian_delta(1.0, eps) == pytest.approx(1e-300, rel=1e-9)


@pytest.mark.parametrize(
    "call, kwargs, name",
    [
        (gaussian_delta, dict(mu=0.0, epsilon=1.0), "mu"),
        (gaussian_delta, dict(mu=-1.0, epsilon=1.0), "mu"),
        (gaussian_delta, dict(mu=float("inf"), epsilon=1.0), "mu"),
        (gaussian_delta, dict(mu=1.0, epsilon=-0.1), "epsilon"),
        (gaussian_delta, dict(mu=1.0, epsilon=float("nan")), "epsilon"),
        (log_gaussian_delta, dict(mu=1.0, epsilon=-1.0), "epsilon"),
        (gaussian_epsilon, dict(mu=1.0, delta=0.0), "delta"),
        (gaussian_epsilon, dict(mu=1.0, delta=1.0), "delta"),
        (gaussian_epsilon, dict(mu=0.0, delta=0.1), "mu"),
        (gaussian_mu, dict(epsilon=0.0, delta=0.1), "epsilon"),
        (gaussian_mu, dict(epsilon=1.0, delta=1.5), "delta"),
        (zcdp_rho, dict(epsilon=-1.0, delta=0.1), "epsilon"),
        (zcdp_rho, dict(epsilon=1.0, delta=0.0), "delta"),
        (zcdp_epsilon, dict(rho=-1.0, delta=0.1), "rho"),
        (zcdp_epsilon, dict(rho=1.0, delta=2.0), "delta"),
    ],
)
def test_invalid_arguments_named(call, kwargs, name):
    with pytest.raises(ValueError, match=name):
        call(**kwargs)


def test_type_errors_named():
    with pytest.raises(TypeError, match="mu"):
        gaussian_delta("abc", 1.0)
    with pytest.raises(TypeError, match="epsilon"):
        gaussian_delta(1.0, None)


# ---- zCDP ------------------------------------------------------------------------------------


@pytest.mark.parametrize("rho, delta", [(0.01, 1e-6), (1.0, 1e-6), (5.0, 1e-10)])
def test_zcdp_epsilon_closed_form(rho, delta):
    assert zcdp_epsilon(rho, delta) == pytest.approx(rho + math.sqrt(4 * rho * math.log(1 / delta)), rel=1e-14)


@given(st.floats(min_value=1e-4, max_value=100.0), st.floats(min_value=-200.0, max_value=-0.5))
def test_zcdp_rho_inverts_epsilon(eps, log10_d):
    d = 10.0**log10_d
    assert zcdp_epsilon(zcdp_rho(eps, d), d) == pytest.approx(eps, rel=1e-12)


@given(st.floats(min_value=1e-4, max_value=20.0), st.floats(min_value=-12.0, max_value=-1.0))
def test_zcdp_is_looser_than_tight_gaussian_bound(rho, log10_d):
    # A Gaussian composition with total mu is mu-zCDP; converting via zCDP may only overstate
    # epsilon, so the tight delta at the zCDP epsilon is at most delta.
    d = 10.0**log10_d
    assert gaussian_delta(rho, zcdp_epsilon(rho, d)) <= d * (1 + 1e-12)
    eps = gaussian_epsilon(rho, d)
    if eps > 0:
        assert zcdp_rho(eps, d) <= rho * (1 + 1e-12)
