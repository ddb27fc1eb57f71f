"""RDP curves, subsampling amplification (WBK Thm 9), composition and conversion."""
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpmcmc.accounting import (
    barker_orders,
    barker_rdp,
    default_orders,
    gaussian_rdp,
    rdp_to_epsilon,
    subsampled_rdp,
    zcdp_epsilon,
)


def _mp_thm9(alpha, q, base_eps):
    """WBK19 Thm 9 (ε(∞) = ∞) at 60 digits; base_eps(j) returns an mpf. Includes j = α."""
    with mp.workdps(60):
        q = mp.mpf(q)
        e2 = base_eps(2)
        total = 1 + q**2 * mp.binomial(alpha, 2) * min(4 * (mp.exp(e2) - 1), 2 * mp.exp(e2))
        for j in range(3, alpha + 1):
            total += 2 * q**j * mp.binomial(alpha, j) * mp.exp((j - 1) * base_eps(j))
        return min(mp.log(total) / (alpha - 1), base_eps(alpha))


@pytest.mark.parametrize("sigma", [0.8, 2.0, 7.9])
@pytest.mark.parametrize("q", [1e-3, 0.01, 0.2])
def test_subsampled_gaussian_matches_mpmath(sigma, q):
    mu = 2.0 / sigma**2  # pld units: sensitivity 2
    orders = [2, 3, 4, 7, 16, 41, 100, 256]  # alpha >~ 40 overflows a naive double evaluation
    ours = subsampled_rdp(orders, q, lambda js: gaussian_rdp(js, mu))
    for a, value in zip(orders, ours):
        ref = _mp_thm9(a, q, lambda j: j * mp.mpf(mu))
        assert math.isfinite(value)
        assert value == pytest.approx(float(ref), rel=1e-11), a


@pytest.mark.parametrize("b", [100, 1000])
def test_subsampled_barker_matches_mpmath(b):
    n = 100_000

    def mp_barker(j):
        j, bb = mp.mpf(j), mp.mpf(b)
        return 5 / (2 * bb) + mp.log(2 * bb / (bb - 5 * j)) / (2 * (j - 1)) + 2 * j / (bb - 5 * j)

    orders = barker_orders(b)
    ours = subsampled_rdp(orders, b / n, lambda js: barker_rdp(js, b))
    for a in [2, 3, int(orders[len(orders) // 2]), int(orders[-1])]:
        i = int(np.where(orders == a)[0][0])
        assert ours[i] == pytest.approx(float(_mp_thm9(a, b / n, mp_barker)), rel=1e-11)


def test_barker_curve_closed_form():
    b = 1000
    a = np.array([2, 10, 199])
    expected = 5 / (2 * b) + np.log(2 * b / (b - 5 * a)) / (2 * (a - 1)) + 2 * a / (b - 5 * a)
    np.testing.assert_allclose(barker_rdp(a, b), expected, rtol=1e-15)
    np.testing.assert_array_equal(barker_orders(1000), np.arange(2, 200))  # alpha < b/5 = 200
    np.testing.assert_array_equal(barker_orders(1001), np.arange(2, 201))


def test_barker_order_limits():
    with pytest.raises(ValueError, match="batch_size"):
        barker_orders(10)  # needs an order 2 <= alpha < 2
    with pytest.raises(ValueError, match="alpha"):
        barker_rdp([200], 1000)


@pytest.mark.oracle
def test_autodp_theorem9_agrees():
    # autodp's anaRDPacct.compose_subsampled_mechanism (improved_bound_flag=False) implements
    # WBK19 Thm 9 for subsampling without replacement under the replace-one (= substitute)
    # relation - the same relation and theorem as ours, including the cap by the base curve.
    rdp_acct = pytest.importorskip("autodp.rdp_acct")
    q, sigma = 0.01, 3.0
    mu = 2.0 / sigma**2
    acct = rdp_acct.anaRDPacct()
    acct.compose_subsampled_mechanism(lambda x: x * mu, q)
    orders = np.array([2, 3, 5, 10, 20, 40, 64, 100])
    np.testing.assert_allclose(
        subsampled_rdp(orders, q, lambda js: gaussian_rdp(js, mu)), acct.get_rdp(orders), rtol=1e-10
    )


@pytest.mark.oracle
def test_dp_accounting_sampled_without_replacement():
    # dp-accounting's REPLACE_ONE / sampling-without-replacement RDP uses WBK19 Thm 27, which
    # takes the min of Thm 9's terms and tighter forward-difference terms for alpha <= 256 and
    # Thm 9's terms alone above 256. Its noise multiplier is std / sensitivity = sigma / 2 in
    # our pld units. So: equal above 256, never larger below.
    mod = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")
    q, sigma = 0.01, 3.0
    mu = 2.0 / sigma**2
    high = [300, 400]
    ours_high = subsampled_rdp(high, q, lambda js: gaussian_rdp(js, mu))
    np.testing.assert_allclose(ours_high, mod._compute_rdp_sample_wor_gaussian(q, sigma / 2, high), rtol=1e-10)
    low = [2, 5, 10, 50, 100, 256]
    theirs = mod._compute_rdp_sample_wor_gaussian(q, sigma / 2, low)
    ours = subsampled_rdp(low, q, lambda js: gaussian_rdp(js, mu))
    assert np.all(ours >= theirs * (1 - 1e-12))
    assert ours[0] == pytest.approx(theirs[0], rel=1e-10)  # the alpha = 2 terms coincide


def test_amplification_never_exceeds_base_and_q1_is_base():
    mu = 0.5
    orders = default_orders()
    base = gaussian_rdp(orders, mu)
    amp = subsampled_rdp(orders, 0.3, lambda js: gaussian_rdp(js, mu))
    assert np.all(amp <= base)
    np.testing.assert_allclose(subsampled_rdp(orders, 1.0, lambda js: gaussian_rdp(js, mu)), base)


@given(st.floats(min_value=1e-4, max_value=0.5), st.floats(min_value=0.5, max_value=20.0))
def test_amplified_curve_monotone_in_q(q, sigma):
    mu = 2.0 / sigma**2
    orders = np.arange(2, 65)
    small = subsampled_rdp(orders, q, lambda js: gaussian_rdp(js, mu))
    large = subsampled_rdp(orders, min(1.0, 2 * q), lambda js: gaussian_rdp(js, mu))
    assert np.all(np.isfinite(small))
    assert np.all(large >= small * (1 - 1e-12))
    assert np.all(small <= gaussian_rdp(orders, mu) * (1 + 1e-12))


def test_conversion_equals_zcdp_at_integer_optimum():
    # min over continuous alpha of alpha*rho + L/(alpha-1) is the zCDP conversion rho + 2 sqrt(rho L),
    # attained at alpha* = 1 + sqrt(L / rho). With alpha* an integer the integer minimum equals it.
    delta = 1e-6
    L = -math.log(delta)
    for a_star in (5, 17, 100):
        rho = L / (a_star - 1) ** 2
        eps, order = rdp_to_epsilon(default_orders(), gaussian_rdp(default_orders(), rho), delta)
        assert order == a_star
        assert eps == pytest.approx(zcdp_epsilon(rho, delta), rel=1e-13)


@given(st.floats(min_value=1e-4, max_value=10.0), st.floats(min_value=-12.0, max_value=-2.0))
def test_integer_conversion_not_below_zcdp(rho, log10_d):
    d = 10.0**log10_d
    eps, _ = rdp_to_epsilon(default_orders(), gaussian_rdp(default_orders(), rho), d)
    assert eps >= zcdp_epsilon(rho, d) * (1 - 1e-12)


def test_composition_scales_curve():
    q, mu, d = 0.01, 1.0, 1e-6
    orders = default_orders()
    curve = subsampled_rdp(orders, q, lambda js: gaussian_rdp(js, mu))
    e1, _ = rdp_to_epsilon(orders, 100 * curve, d)
    e2, _ = rdp_to_epsilon(orders, 1000 * curve, d)
    assert e2 > e1
    # conversion formula at a fixed order
    i = 10
    manual = 100 * curve[i] + math.log(1 / d) / (orders[i] - 1)
    assert e1 <= manual


def test_rdp_argument_errors():
    with pytest.raises(ValueError, match="orders"):
        gaussian_rdp([1.5], 1.0)
    with pytest.raises(ValueError, match="mu"):
        gaussian_rdp([2], -1.0)
    with pytest.raises(ValueError, match="q"):
        subsampled_rdp([2], 1.5, lambda js: gaussian_rdp(js, 1.0))
    with pytest.raises(ValueError, match="delta"):
        rdp_to_epsilon([2], [1.0], 0.0)
    with pytest.raises(ValueError, match="rdp"):
        rdp_to_epsilon([2, 3], [1.0], 0.1)


def test_logspace_sums_equal_scipy_to_the_last_bit():
    # dpmcmc.accounting._logspace replaces scipy.special.logsumexp in the accountants' loops
    # (the RDP amplification, the pure-DP atoms); it must give SciPy's values exactly, ties,
    # -inf entries and every scale included, so that no accounted value moves.
    from scipy import special

    from dpmcmc.accounting._logspace import grouped_logsumexp, logsumexp

    rng = np.random.default_rng(20261126)
    for _ in range(300):
        n = int(rng.integers(1, 200))
        a = rng.normal(0.0, rng.choice([1e-3, 1.0, 30.0, 800.0]), n)
        if rng.random() < 0.3:
            a[rng.integers(0, n, size=max(1, n // 5))] = -np.inf
        if rng.random() < 0.3:
            a = np.round(a)  # ties at the maximum
        if not np.isfinite(a).any():
            continue
        assert logsumexp(a) == float(special.logsumexp(a))
        # Groups of at most 7 entries (the contract: NumPy sums fewer than 8 terms in order;
        # the atoms' groups hold at most two), in shuffled positions.
        finite = np.isfinite(a)
        a = a[finite]
        size = -(-a.size // int(rng.integers(1, 8)))
        groups = rng.permutation(np.arange(a.size) % size)
        got = grouped_logsumexp(a, groups, size)
        # SciPy's value of every group, in one call: the groups as the rows of a table padded
        # with −∞ after their entries (exp(−∞ − max) = 0 adds nothing to a row's sum, and a row
        # of at most 7 terms is summed in order, like a group alone). It equals one call per
        # group bit for bit (checked on all 10278 groups of these cases; one call per group
        # cost ~2 CPU-s), and the first group is still compared with its own call.
        counts = np.bincount(groups, minlength=size)
        order = np.argsort(groups, kind="stable")
        table = np.full((size, counts.max()), -np.inf)
        table[groups[order], np.arange(a.size) - np.repeat(np.cumsum(counts) - counts, counts)] = a[order]
        want = special.logsumexp(table, axis=1)
        assert got[0] == float(special.logsumexp(a[groups == 0]))
        for j in range(size):
            assert got[j] == want[j], (j, got[j], want[j])
    assert logsumexp([-np.inf, -np.inf]) == -np.inf
