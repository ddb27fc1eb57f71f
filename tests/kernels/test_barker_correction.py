"""The DP Barker correction distribution X_corr (002 §2.3, §3.3, App. D).

Targets (the issue): sup_x |F_{N(0,C)+X_corr} − S| ≤ 1.5e-3 and
sup_{|Δ|≤10} |logit P(accept | Δ) − Δ| ≤ 1e-2, for C = 2 (shipped fit). On-demand fits meet the
targets for C ≤ 2.04 and miss them above (C = 2.5: 6.5e-3 and 4.5e-2), which is tested too.
"""
import json
import math
import warnings
from importlib import resources

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.signal import fftconvolve
from scipy.special import expit, logit, ndtr

from dpmcmc.kernels.barker_correction import (
    LOG_ODDS_TARGET,
    SUP_CDF_TARGET,
    acceptance_probability,
    correction_error,
    correction_mixture,
    fit_correction,
    sample_correction,
)


def _fft_errors(mix, max_abs_delta=10.0, h=0.005, half_width=60.0):
    """Errors of N(0, C) + X_corr against the logistic by FFT convolution of the two densities.

    Independent of the package's closed form (which adds component variances): the densities
    are tabulated, convolved numerically and integrated to a survival function.
    """
    x = np.arange(-round(half_width / h), round(half_width / h) + 1) * h
    f_norm = np.exp(-0.5 * x**2 / mix.C) / math.sqrt(2 * math.pi * mix.C)
    f_corr = np.zeros_like(x)
    for w, m, s in zip(*mix.components()):
        f_corr += w * np.exp(-0.5 * ((x - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))
    f_y = fftconvolve(f_norm, f_corr, mode="same") * h
    f_y = np.clip(f_y, 0.0, None)
    # Trapezoid survival from the right keeps relative precision in the far tail.
    tail = np.cumsum(f_y[::-1])[::-1] * h
    q = tail - 0.5 * h * f_y
    pos = x >= 0
    xp, qp = x[pos], q[pos]
    sup_cdf = float(np.max(np.abs(qp - expit(-xp))))
    sel = xp <= max_abs_delta + 1e-12
    log_odds = float(np.max(np.abs(np.log1p(-qp[sel]) - np.log(qp[sel]) - xp[sel])))
    mass = float(np.sum(f_y) * h)
    return sup_cdf, log_odds, mass


def _quadrature_acceptance(delta, mix, nodes=60):
    """P(Δ + N(0,C) + X_corr > 0) = E_X[Φ((Δ + X)/√C)] by Gauss–Hermite over each component."""
    z, wq = np.polynomial.hermite_e.hermegauss(nodes)
    wq = wq / wq.sum()
    delta = np.asarray(delta, dtype=np.float64)[:, None, None]
    out = 0.0
    for w, m, s in zip(*mix.components()):
        out = out + w * np.sum(wq * ndtr((delta + m + s * z) / math.sqrt(mix.C)), axis=-1)
    return out[:, 0]


# ------------------------------------------------------------------------------------------
# C = 2: accuracy
# ------------------------------------------------------------------------------------------

def test_c2_meets_targets_by_closed_form():
    err = correction_error(2.0)
    assert set(err) == {"sup_cdf", "log_odds"}
    assert err["sup_cdf"] <= SUP_CDF_TARGET
    assert err["log_odds"] <= LOG_ODDS_TARGET
    # Not better than what any distribution can reach (LP bound 5.87e-4 for C = 2) nor the
    # log-odds floor (~6.4e-3): a measurement reporting less would be wrong.
    assert err["sup_cdf"] >= 5.8e-4
    assert err["log_odds"] >= 6.0e-3


def test_c2_meets_targets_by_independent_fft_convolution():
    mix = correction_mixture(2.0)
    sup_cdf, log_odds, mass = _fft_errors(mix)
    assert abs(mass - 1.0) < 1e-9
    assert sup_cdf <= SUP_CDF_TARGET
    assert log_odds <= LOG_ODDS_TARGET
    err = correction_error(2.0)
    # The grid maxima can only sit slightly below the polished continuous maxima.
    assert sup_cdf == pytest.approx(err["sup_cdf"], abs=2e-6)
    assert log_odds == pytest.approx(err["log_odds"], abs=2e-5)


def test_shipped_file_matches_measurement():
    text = resources.files("dpmcmc").joinpath("data", "barker_correction_C2.json").read_text()
    doc = json.loads(text)
    assert doc["C"] == 2.0
    err = correction_error(2.0)
    assert doc["errors"]["sup_cdf"] == pytest.approx(err["sup_cdf"], rel=1e-6)
    assert doc["errors"]["log_odds"] == pytest.approx(err["log_odds"], rel=1e-6)


def test_acceptance_probability_reproduces_barker_within_measured_log_odds():
    delta = np.linspace(-10.0, 10.0, 2001)
    mix = correction_mixture(2.0)
    p_quad = _quadrature_acceptance(delta, mix)
    p_closed = acceptance_probability(delta, 2.0)
    np.testing.assert_allclose(p_closed, p_quad, rtol=1e-10, atol=0)
    lo_err = np.abs(logit(p_quad) - delta)
    measured = correction_error(2.0)["log_odds"]
    assert np.max(lo_err) <= measured + 1e-9
    assert measured <= LOG_ODDS_TARGET
    # Symmetry of N(0,C) + X_corr: accepting at Δ and at −Δ are complementary.
    np.testing.assert_allclose(p_closed + acceptance_probability(-delta, 2.0), 1.0, atol=1e-14)


def test_log_odds_error_controlled_beyond_ten():
    # The fit constrains |Δ| ≤ 20; there the acceptance probability stays within 1 % relative.
    delta = np.linspace(-20.0, 20.0, 4001)
    p = acceptance_probability(delta, 2.0)
    assert np.max(np.abs(logit(p) - delta)) <= LOG_ODDS_TARGET


# ------------------------------------------------------------------------------------------
# Sampling
# ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def c2_draws():
    """10⁶ draws x of X_corr (C = 2) and y = √C·z + x of N(0, C) + X_corr, shared by the three
    sampling tests below (each keeps its own false-alarm rate; drawing 10⁶ correction values
    costs ~0.4 CPU-s a time)."""
    n, C = 1_000_000, 2.0
    k1, k2 = jax.random.split(jax.random.key(20190613))
    x = np.asarray(sample_correction(k2, (n,), C=C))
    y = np.asarray(math.sqrt(C) * jax.random.normal(k1, (n,)) + x)
    return x, y


def test_monte_carlo_sum_matches_logistic_dkw(c2_draws):
    n = 1_000_000
    C = 2.0
    y = c2_draws[1]
    assert y.shape == (n,) and y.dtype == np.float64
    # DKW: P(sup |F_n − F| > eps) ≤ 2 exp(−2 n eps²); false-alarm rate alpha = 1e-6.
    alpha = 1e-6
    eps = math.sqrt(math.log(2.0 / alpha) / (2 * n))
    y = np.sort(y)
    i = np.arange(1, n + 1)

    def ks(cdf_vals, at=slice(None)):
        return max(np.max(i[at] / n - cdf_vals), np.max(cdf_vals - (i[at] - 1) / n))

    # Against the exact law of N(0,C) + X_corr (checks the sampler), at every 50th order
    # statistic: the sup over those points is at most the sup over all, so the false-alarm rate
    # stays ≤ alpha, and between two of them F_n and F_Y (the draws' law) move by about
    # 50/n = 5e-5, all the power it gives away against eps = 2.7e-3. F_Y costs 24 normal CDFs a
    # point (most of this test's time at all 10⁶).
    every50 = slice(None, None, 50)
    assert ks(acceptance_probability(y[every50], C), every50) <= eps
    # ... and against the logistic, allowing the correction's own approximation error.
    assert ks(expit(y)) <= eps + correction_error(C)["sup_cdf"]


def test_monte_carlo_tail_frequencies(c2_draws):
    # The far tail is what the log-odds criterion is about; binomial test of the tail counts
    # against the exact mixture probabilities, two-sided, Bonferroni over 3 points, alpha = 1e-6.
    n = 1_000_000
    C = 2.0
    y = c2_draws[1]
    for t in (3.0, 6.0, 9.0):
        p = float(acceptance_probability(np.array([-t]), C)[0])
        count = int(np.sum(np.abs(y) > t))
        pval = stats.binomtest(count, n, 2 * p).pvalue
        assert pval > 1e-6 / 3, (t, count, 2 * p * n)


def test_correction_is_symmetric():
    mix = correction_mixture(2.0)
    assert np.all(mix.means >= 0)
    assert np.all(mix.stds > 0)
    assert np.all(mix.weights >= 0)
    assert math.isclose(float(np.sum(mix.weights)), 1.0, abs_tol=1e-12)
    w, m, s = mix.components()
    k = len(mix.weights)
    np.testing.assert_array_equal(m[:k], -m[k:])
    np.testing.assert_array_equal(w[:k], w[k:])
    np.testing.assert_array_equal(s[:k], s[k:])


# slow, like the other two sampling tests of c2_draws (tests/suite_budget.py, SLOW_CASES_A3):
# guard in default: test_correction_is_symmetric (the mixture the draws come from is
# symmetric) and tests/samplers/test_barker.py::test_noisy_test_matches_the_corrected_barker_
# probability (the law of N(0, C) + X_corr, drawn by sample_correction, at 13 points).
@pytest.mark.slow
def test_sampled_correction_is_symmetric(c2_draws):
    # P(X > t) = P(X < −t) for a few t, exact binomial test on the split of the |X| > t draws
    # between the two sides (alpha = 1e-6 overall).
    x = c2_draws[0]
    assert x.shape == (1_000_000,)
    for t in (0.0, 1.0, 2.7, 5.0):
        up, down = int(np.sum(x > t)), int(np.sum(x < -t))
        assert stats.binomtest(up, up + down, 0.5).pvalue > 1e-6 / 4, (t, up, down)


def test_mixture_variance_close_to_logistic_excess():
    # An exact correction would have variance π²/3 − C; a close CDF fit must come close.
    assert correction_mixture(2.0).variance() == pytest.approx(math.pi**2 / 3 - 2.0, abs=5e-3)


def test_sample_correction_is_pure_and_jittable():
    key = jax.random.key(0)
    f = jax.jit(lambda k: sample_correction(k, (3, 5), C=2.0))
    a, b = f(key), f(key)
    assert a.shape == (3, 5)
    assert a.dtype == jnp.float64
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(sample_correction(key, (3, 5))))
    assert not np.array_equal(np.asarray(a), np.asarray(f(jax.random.key(1))))
    # Shapes and dtypes of the other calls, traced (not run: each new shape run op by op
    # compiles every operation again).
    assert jax.eval_shape(lambda k: sample_correction(k), key).shape == ()
    assert jax.eval_shape(lambda k: sample_correction(k, (4,), dtype=jnp.float32),
                          key).dtype == jnp.float32


# ------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [0.0, -1.0, math.pi**2 / 3, 3.5, float("nan"), float("inf")])
def test_bad_C_raises_value_error_naming_C(bad):
    for call in (lambda: correction_error(bad), lambda: correction_mixture(bad),
                 lambda: acceptance_probability(0.0, bad)):
        with pytest.raises(ValueError, match="C"):
            call()
    with pytest.raises(ValueError, match="C"):
        sample_correction(jax.random.key(0), (2,), C=bad)
    with pytest.raises(ValueError, match="C"):
        fit_correction(bad)


@pytest.mark.parametrize("bad", ["2.0", None, True, [2.0]])
def test_non_numeric_C_raises_type_error(bad):
    with pytest.raises(TypeError, match="C"):
        correction_mixture(bad)


def test_fit_settings_validated():
    with pytest.raises(ValueError, match="log_odds_range"):
        fit_correction(2.0, log_odds_range=5.0)
    with pytest.raises(ValueError, match="component_std"):
        fit_correction(2.0, component_std=0.0)


# ------------------------------------------------------------------------------------------
# Other C (fitted on demand)
# ------------------------------------------------------------------------------------------

def test_refit_reproduces_shipped_c2():
    mix, info = fit_correction(2.0)
    shipped = correction_error(2.0)
    assert info["sup_cdf"] == pytest.approx(shipped["sup_cdf"], rel=1e-3)
    assert info["log_odds"] == pytest.approx(shipped["log_odds"], rel=1e-3)


# slow for C = 1.5: the same property (an on-demand fit below C = 2 meets a tenth of the
# targets, by closed form and by FFT, and samples the fitted variance) is checked at C = 1.0 in
# the default run; each C costs a fit and 10⁶ draws (~0.9 CPU-s).
@pytest.mark.parametrize("C", [1.0, pytest.param(1.5, marks=pytest.mark.slow)])
def test_smaller_C_meets_targets_by_fft(C):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mix = correction_mixture(C)
    err = correction_error(C)
    sup_cdf, log_odds, _ = _fft_errors(mix)
    for s, lo in ((err["sup_cdf"], err["log_odds"]), (sup_cdf, log_odds)):
        assert s <= SUP_CDF_TARGET / 10
        assert lo <= LOG_ODDS_TARGET / 10
    assert sup_cdf == pytest.approx(err["sup_cdf"], abs=2e-6)
    x = np.asarray(sample_correction(jax.random.key(11), (1_000_000,), C=C))
    # Variance π²/3 − C within 5 standard errors (fourth moment bounded via the sample).
    se = math.sqrt(np.var(x**2) / len(x))
    assert abs(np.mean(x**2) - (math.pi**2 / 3 - C)) < 5 * se


def test_large_C_warns_and_misses_targets():
    # Honest limit: near π²/3 no Gaussian-mixture correction (indeed no distribution) reaches
    # the targets; the on-demand fit warns.
    # The per-C cache warns once; start from an empty cache so the warning is observable.
    from dpmcmc.testing import clear_correction_cache

    clear_correction_cache()
    with pytest.warns(UserWarning, match="C=2.5"):
        correction_mixture(2.5)
    err = correction_error(2.5)
    assert err["sup_cdf"] > SUP_CDF_TARGET
    assert err["log_odds"] > LOG_ODDS_TARGET


