"""Diagnostics: MMD against closed forms, permutation-test size and power, R-hat/ESS, mean error."""
import numpy as np
import pytest

from dpmcmc.diagnostics import (
    ess,
    gaussian_mmd2,
    mean_error,
    median_bandwidth,
    mmd,
    mmd_squared,
    mmd_test,
    rhat,
)


def _brute_mmd2(x, y, h, unbiased):
    def k(a, b):
        d = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return np.exp(-d / (2 * h * h))

    n, m = len(x), len(y)
    kxx, kyy, kxy = k(x, x), k(y, y), k(x, y)
    if unbiased:
        return ((kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
                - 2 * kxy.mean())
    return kxx.mean() + kyy.mean() - 2 * kxy.mean()


@pytest.mark.parametrize("unbiased", [True, False])
def test_mmd_matches_brute_force_and_chunking(unbiased):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(97, 3)) + 100.0  # far from the origin: centring must avoid cancellation
    y = rng.normal(size=(61, 3)) * 1.5 + 100.0
    ref = _brute_mmd2(x, y, 1.3, unbiased)
    for chunk in (7, 50, 2048):
        val = mmd_squared(x, y, bandwidth=1.3, unbiased=unbiased, chunk_size=chunk)
        np.testing.assert_allclose(val, ref, rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(mmd(x, y, bandwidth=1.3, unbiased=unbiased), np.sqrt(abs(ref)), rtol=1e-10)
    np.testing.assert_allclose(mmd_squared(y, x, bandwidth=1.3, unbiased=unbiased), ref, rtol=1e-10, atol=1e-13)


def test_mmd_against_gaussian_closed_form():
    # Population MMD^2 between N(0, I) and N((0.5, 0), diag(1, 2)) with h = 1.2, vs the mean
    # of 10 unbiased estimates (n = m = 750); tolerance: 4 standard errors of that mean (false
    # alarm P(|t_9| > 4) < 0.004 for an unbiased estimator, whatever n; at n = 750 a standard
    # error is ~0.002 against a truth above 0.02, a quarter of the kernel sums of n = 1500).
    h = 1.2
    truth = gaussian_mmd2([0, 0], np.eye(2), [0.5, 0], np.diag([1.0, 2.0]), h)
    rng = np.random.default_rng(1)
    est = [mmd_squared(rng.normal(size=(750, 2)),
                       rng.normal(size=(750, 2)) * [1.0, np.sqrt(2.0)] + [0.5, 0.0], bandwidth=h)
           for _ in range(10)]
    assert truth > 0.02
    assert abs(np.mean(est) - truth) < 4 * np.std(est, ddof=1) / np.sqrt(10)


def test_gaussian_mmd2_closed_form_sanity():
    assert gaussian_mmd2([0.0], [[1.0]], [0.0], [[1.0]], 1.0) == pytest.approx(0.0, abs=1e-15)
    # 1-d, equal unit variances, mean shift s: 2 (h^2/(h^2+2))^{1/2} (1 - exp(-s^2 / (2 (h^2+2)))).
    s, h = 0.7, 0.9
    ref = 2 * np.sqrt(h**2 / (h**2 + 2)) * (1 - np.exp(-s**2 / (2 * (h**2 + 2))))
    assert gaussian_mmd2([0.0], [[1.0]], [s], [[1.0]], h) == pytest.approx(ref, rel=1e-12)


def test_unbiased_mmd_null_mean_zero():
    rng = np.random.default_rng(2)
    est = np.array([mmd_squared(rng.normal(size=(300, 2)), rng.normal(size=(300, 2)), bandwidth=1.0)
                    for _ in range(30)])
    assert abs(est.mean()) < 4 * est.std(ddof=1) / np.sqrt(30)
    assert np.any(est < 0)  # the U-statistic is unbiased, hence sometimes negative
    assert mmd_squared(rng.normal(size=(50, 2)), rng.normal(size=(50, 2)), bandwidth=1.0, unbiased=False) > 0


def test_default_bandwidth_is_paired_median():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(800, 2))
    y = rng.normal(size=(600, 2)) + 1.0
    h = median_bandwidth(x, y, 500, seed=5)
    r = np.random.default_rng(5)
    xs = x[r.integers(0, 800, 500)]
    ys = y[r.integers(0, 600, 500)]
    assert h == pytest.approx(np.median(np.linalg.norm(xs - ys, axis=1)), rel=1e-14)
    assert mmd(x, y, seed=5) == pytest.approx(mmd(x, y, bandwidth=h), rel=1e-14)
    assert mmd(x, y, seed=5) == mmd(x, y, seed=5)


@pytest.mark.slow  # 200 permutation tests: make test-all
def test_mmd_test_size():
    # Same-distribution samples, 100 seeds, alpha = 0.05: the false alarms are Binomial(100, <=0.05);
    # P(X >= 13) < 0.002, the chance of this check failing for a correct test.
    alarms = 0
    pvals = []
    for s in range(100):
        rng = np.random.default_rng(1000 + s)
        res = mmd_test(rng.normal(size=(60, 2)), rng.normal(size=(60, 2)), seed=s, num_permutations=99)
        pvals.append(res.p_value)
        alarms += res.p_value <= 0.05
    assert alarms <= 12
    assert 0.35 < np.mean(pvals) < 0.65  # roughly uniform p-values (mean 0.5)


def test_mmd_test_power():
    # A 1 sd mean shift with n = m = 200 is detected at alpha = 0.01 for every one of 5 seeds
    # (population MMD^2 about 0.06 with the median bandwidth, far above the null spread). The
    # same-distribution control (n = m = 100, 99 permutations: a quarter of the cost) is flagged
    # at most once: a permutation p-value is <= 0.01 with probability <= 0.01 under the null,
    # so P(>= 2 of 5) <= C(5, 2) 0.01^2 = 0.001. (5 seeds, 10 before: half the cost, ~0.4
    # CPU-s. The control's false-alarm rate went down; the power check is weaker: a test whose
    # power at this shift fell to 0.8 passes 0.8^5 = 33 % of the time, 11 % at 10 seeds, and
    # one that lost its power, p-values ~uniform, passes 0.01^5 of the time. The size on 100
    # seeds is test_mmd_test_size, slow; the experiments' 0.5 sd
    # shift at n = 1000 is tests/experiments/test_experiments.py::
    # test_mmd_detects_half_sd_mean_shift, slow.)
    false = 0
    for s in range(5):
        rng = np.random.default_rng(2000 + s)
        x = rng.normal(size=(200, 2))
        res = mmd_test(x, rng.normal(size=(200, 2)) + [1.0, 0.0], seed=s, num_permutations=199)
        assert res.p_value <= 0.01
        assert res.num_permutations == 199 and res.bandwidth > 0
        false += mmd_test(x[:100], rng.normal(size=(100, 2)), seed=s,
                          num_permutations=99).p_value <= 0.01
    assert false <= 1


def test_mmd_test_statistic_matches_mmd_squared():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(120, 3)), rng.normal(size=(80, 3)) + 0.2
    res = mmd_test(x, y, seed=0, num_permutations=20, bandwidth=0.8, chunk_size=37)
    assert res.statistic == pytest.approx(mmd_squared(x, y, bandwidth=0.8), rel=1e-10)


def test_mean_error():
    draws = np.zeros((4, 10, 2)) + [3.0, 4.0]
    assert mean_error(draws, [0.0, 0.0]) == pytest.approx(5.0)
    assert mean_error(draws, np.array([[0.0, 0.0], [6.0, 8.0]])) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="true_mean"):
        mean_error(draws, [0.0, 0.0, 0.0])


def test_rhat_and_ess():
    rng = np.random.default_rng(5)
    iid = rng.normal(size=(4, 1000, 3))
    r = rhat(iid)
    assert r.shape == (3,) and np.all(np.abs(r - 1) < 0.01)
    e = ess(iid)
    assert e.shape == (3,) and np.all(e > 0.7 * 4000)
    stuck = iid + np.array([0.0, 0.0, 3.0, 3.0])[:, None, None]
    assert np.all(rhat(stuck) > 1.5)
    # AR(1) chains with phi = 0.9 have ESS about n (1 - phi) / (1 + phi) = 4000 / 19.
    ar = np.zeros((4, 4000))
    eps = rng.normal(size=(4, 4000))
    for t in range(1, 4000):
        ar[:, t] = 0.9 * ar[:, t - 1] + eps[:, t]
    assert 0.5 * 16000 / 19 < float(ess(ar)[0]) < 1.5 * 16000 / 19
    with pytest.raises(ValueError, match="draws"):
        rhat(np.zeros(5))


def test_argument_errors():
    x = np.zeros((10, 2))
    with pytest.raises(ValueError, match="same dimension"):
        mmd(x, np.zeros((10, 3)))
    with pytest.raises(ValueError, match="kernel"):
        mmd(x, x, kernel="cosine")
    with pytest.raises(ValueError, match="bandwidth"):
        mmd(x, x, bandwidth=-1.0)
    with pytest.raises(ValueError, match="num_permutations"):
        mmd_test(x, x, seed=0, num_permutations=0)
    with pytest.raises(ValueError, match="non-finite"):
        mmd(np.full((5, 2), np.nan), x)
    with pytest.raises(TypeError, match="seed"):
        mmd_test(x, x, seed="abc")
