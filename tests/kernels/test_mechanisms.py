"""The privacy noise: its scale matches the accountant's μ, and clipping bounds every term.

Statistical checks use a fixed key. The empirical standard deviation of N independent noisy
releases has relative standard error 1/sqrt(2N); tolerances are set at >= 5 standard errors,
so the false-alarm probability of each check is below 1e-6.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.models.base import Model
from dpmcmc.accounting import gaussian_release, releases
from dpmcmc.samplers import gaussian_mechanism, sensitivity
from dpmcmc.records.clip import clip_gradients, clip_ratios
from dpmcmc.records.passes import (
    clipped_grad_sum,
    clipped_llr_sum,
    loglik_sum,
    loglik_sum_and_grad,
    per_example_grads,
)
from dpmcmc.kernels.releases import release_grad, release_llr

N_DRAWS = 20000
REL_TOL = 5.0 / math.sqrt(2 * N_DRAWS)  # 5 standard errors of an empirical std: 2.5%


def gaussian_model(dim, temperature=1.0, **kw):
    return Model(
        log_likelihood=lambda th, x: -0.5 * jnp.sum((x - th) ** 2) - 0.5 * dim * jnp.log(2 * jnp.pi),
        log_prior=lambda th: -0.5 * jnp.sum(th ** 2) / 100.0,
        dim=dim,
        temperature=temperature,
        **kw,
    )


def make_data(n, dim, seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(0.3, 1.5, size=(n, dim)))


# ------------------------------------------------------------------ the noise scale

@pytest.mark.parametrize("tau,n,bound", [(0.1, 1000, 0.7), (2.0, 17, 3.0), (0.013, 10**5, 1e-3)])
def test_noise_std_matches_accountant_mu(tau, n, bound):
    # One path: the release event gives both the σ the mechanism draws and the μ charged.
    event = gaussian_release("log-likelihood ratio", 1, tau, n)
    sigma = event.noise_std(bound)
    assert sigma == pytest.approx(2 * tau * math.sqrt(n) * bound, rel=1e-14)
    # μ = Δ²/(2σ²) with the substitute sensitivity Δ = 2·bound is the accountant's 1/(2τ²n).
    mu = sensitivity(bound) ** 2 / (2 * sigma ** 2)
    assert mu == pytest.approx(1 / (2 * tau ** 2 * n), rel=1e-12)
    assert event.mu == pytest.approx(mu, rel=1e-12)


def test_noise_std_agrees_with_accounting_release_description():
    # The σ the kernels' releases draw is the σ of the events the accountant composes.
    n, tau, tau_g, L, bound = 5000, 0.2, 0.7, 6, 0.35
    model = gaussian_model(1)
    data = make_data(n, 1)
    theta, theta_new = jnp.asarray([0.1]), jnp.asarray([0.1 + bound])  # ratio bound = 1·|Δθ|
    (rel,) = releases("dp-penalty", n, tau=tau)
    # Both releases in one compiled program.
    drawn, drawn_g = jax.jit(lambda d, a, b: (
        release_llr(jax.random.key(0), model, d, a, b, tau, 1.0).sigma,
        release_grad(jax.random.key(1), model, d, a, tau_g, bound).sigma))(data, theta, theta_new)
    assert float(drawn) == pytest.approx(rel.noise_std(bound), rel=1e-12)
    assert rel.mu == pytest.approx(sensitivity(bound) ** 2 / (2 * float(drawn) ** 2), rel=1e-12)
    llr, grad = releases("dp-hmc", n, tau_l=tau, tau_g=tau_g, leapfrog_steps=L)
    assert llr.noise_std(bound) == pytest.approx(float(drawn), rel=1e-12)
    assert grad.noise_std(bound) == pytest.approx(float(drawn_g), rel=1e-12)
    assert grad.mu == pytest.approx(sensitivity(bound) ** 2 / (2 * float(drawn_g) ** 2), rel=1e-12)
    assert grad.per_iteration == L + 1  # the paper's k(L+1) gradient releases, no reuse


def test_gaussian_mechanism_std_and_mean():
    value = jnp.asarray([1.5, -2.0, 0.0])
    sigma = 0.37
    keys = jax.random.split(jax.random.key(0), N_DRAWS)
    out = np.asarray(jax.jit(jax.vmap(lambda k: gaussian_mechanism(k, value, sigma)))(keys))
    assert out.shape == (N_DRAWS, 3)
    np.testing.assert_allclose(out.std(axis=0, ddof=1), sigma, rtol=REL_TOL)
    np.testing.assert_allclose(out.mean(axis=0), value, atol=5 * sigma / math.sqrt(N_DRAWS))


def test_released_llr_noise_is_exactly_what_the_accountant_charges():
    n, dim, tau, clip = 400, 2, 0.15, 2.0
    model = gaussian_model(dim)
    data = make_data(n, dim)
    theta = jnp.asarray([0.2, 0.1])
    theta_new = jnp.asarray([0.5, -0.3])
    keys = jax.random.split(jax.random.key(1), N_DRAWS)
    rel = jax.jit(jax.vmap(lambda k: release_llr(k, model, data, theta, theta_new, tau, clip)))(keys)
    values = np.asarray(rel.value)

    # The exact clipped sum, computed independently in NumPy.
    x, t0, t1 = np.asarray(data), np.asarray(theta), np.asarray(theta_new)
    r = -0.5 * np.sum((x - t1) ** 2, 1) + 0.5 * np.sum((x - t0) ** 2, 1)
    c = clip * np.linalg.norm(t1 - t0)
    exact = np.clip(r, -c, c).sum()
    sigma = 2 * tau * math.sqrt(n) * c
    assert 0 < int(rel.clip_count[0]) < n  # some, not all, ratios clipped
    assert int(rel.clip_count[0]) == int(np.sum(np.abs(r) > c))
    np.testing.assert_allclose(np.asarray(rel.sigma), sigma, rtol=1e-12)
    emp_sd = values.std(ddof=1)
    assert emp_sd == pytest.approx(sigma, rel=REL_TOL)
    assert values.mean() == pytest.approx(exact, abs=5 * sigma / math.sqrt(N_DRAWS))
    # μ implied by the noise actually drawn vs. the μ the accountant charges per release.
    mu_empirical = (2 * c) ** 2 / (2 * emp_sd ** 2)
    assert mu_empirical == pytest.approx(1 / (2 * tau ** 2 * n), rel=2.2 * REL_TOL)


def test_released_gradient_noise_is_exactly_what_the_accountant_charges():
    n, dim, tau_g, grad_clip = 300, 3, 0.4, 1.2
    model = gaussian_model(dim)
    data = make_data(n, dim, seed=3)
    theta = jnp.asarray([0.1, -0.2, 0.4])
    keys = jax.random.split(jax.random.key(2), N_DRAWS)
    rel = jax.jit(jax.vmap(lambda k: release_grad(k, model, data, theta, tau_g, grad_clip)))(keys)
    values = np.asarray(rel.value)

    g = np.asarray(data) - np.asarray(theta)  # per-example gradients of the Gaussian
    norms = np.linalg.norm(g, axis=1)
    exact = (g * np.minimum(1, grad_clip / norms)[:, None]).sum(0)
    sigma = 2 * tau_g * math.sqrt(n) * grad_clip
    assert int(rel.clip_count[0]) == int(np.sum(norms > grad_clip))
    np.testing.assert_allclose(values.std(axis=0, ddof=1), sigma, rtol=REL_TOL)
    np.testing.assert_allclose(values.mean(axis=0), exact, atol=5 * sigma / math.sqrt(N_DRAWS))
    # Independent coordinates: the L2 sensitivity 2 b_g applies to the vector.
    corr = np.corrcoef(values.T)
    assert np.max(np.abs(corr - np.eye(dim))) < 5 / math.sqrt(N_DRAWS)


def test_noise_drawn_in_float32_mode_too():
    # A float32 statistic gets the same noise, drawn and released in float64 (it used to be
    # float32, whose normal sampler truncates near 5.3σ: the bug this assertion now guards).
    value = jnp.asarray([0.0, 1.0], dtype=jnp.float32)
    out = jax.jit(jax.vmap(lambda k: gaussian_mechanism(k, value, 2.0)))(
        jax.random.split(jax.random.key(5), 4000))
    assert out.dtype == jnp.float64
    assert float(np.asarray(out)[:, 0].std()) == pytest.approx(2.0, rel=5 / math.sqrt(8000))


# ------------------------------------------------------------------ clipping

def test_clip_ratios_bounds_every_term_including_nonfinite():
    r = jnp.asarray([0.1, -5.0, 7.0, jnp.nan, jnp.inf, -jnp.inf, 0.5])
    c, was = jax.jit(clip_ratios)(r, 0.5)  # one program, not one per operation
    np.testing.assert_array_equal(np.asarray(c), [0.1, -0.5, 0.5, -0.5, 0.5, -0.5, 0.5])
    np.testing.assert_array_equal(np.asarray(was), [False, True, True, True, True, True, False])


def test_clip_gradients_bounds_norms_and_zeroes_nonfinite_rows():
    g = jnp.asarray([[3.0, 4.0], [0.3, 0.4], [jnp.nan, 1.0], [jnp.inf, 0.0], [0.0, 0.0]])
    c, was = jax.jit(clip_gradients)(g, 1.0)  # one program, not one per operation
    c = np.asarray(c)
    np.testing.assert_allclose(c[0], [0.6, 0.8])
    np.testing.assert_allclose(c[1], [0.3, 0.4])
    np.testing.assert_array_equal(c[2:], 0.0)
    assert np.all(np.linalg.norm(c, axis=1) <= 1.0 + 1e-12)
    np.testing.assert_array_equal(np.asarray(was), [True, False, True, True, False])


def test_private_llr_sum_stays_bounded_when_loglik_is_nan():
    # A record whose log-likelihood is NaN at the proposal cannot push the private sum outside
    # [-n c, n c]: the NaN ratio is replaced by -c (and counted as clipped).
    model = Model(lambda th, x: jnp.where(th[0] > 1.0, jnp.nan, -0.5 * jnp.sum((x - th) ** 2)),
                  lambda th: 0.0, 1)
    data = make_data(50, 1)
    (total, count), (raw_total, _) = jax.jit(lambda d, a, b: (
        clipped_llr_sum(model, d, a, b, 0.3),
        clipped_llr_sum(model, d, a, b, 0.3, nan_to_bound=False)))(
            data, jnp.asarray([0.5]), jnp.asarray([1.5]))
    assert float(total) == pytest.approx(-50 * 0.3)
    assert int(count) == 50
    assert np.isnan(float(raw_total))


# ------------------------------------------------------------------ per-example passes

# 203 rows: 7 gives 29 full blocks; 64 several blocks, the last one padded; 1000 one padded
# block; None the unblocked pass. (7 is slow since stop 38, None and 1000 since stop 39:
# tests/suite_budget.py, with their guards.)
@pytest.mark.parametrize("block_size", [None, 7, 64, 1000])
def test_blocked_passes_equal_one_pass(block_size):
    n, dim = 203, 3
    model = gaussian_model(dim)
    data = make_data(n, dim, seed=4)
    th0, th1 = jnp.asarray([0.1, 0.2, 0.3]), jnp.asarray([0.4, 0.0, 0.5])

    @jax.jit
    def passes(data, th0, th1):
        # Every pass, one pass and blocked, in one compiled program.
        return (clipped_llr_sum(model, data, th0, th1, 0.9),
                clipped_llr_sum(model, data, th0, th1, 0.9, block_size=block_size),
                clipped_grad_sum(model, data, th0, 1.5),
                clipped_grad_sum(model, data, th0, 1.5, block_size=block_size),
                loglik_sum(model, data, th0, block_size=block_size),
                loglik_sum_and_grad(model, data, th0, block_size=block_size),
                jnp.sum(model.loglik_per_example(th0, data)))

    ref_llr, llr, ref_g, g, ll, llg, ll_ref = passes(data, th0, th1)
    assert float(llr[0]) == pytest.approx(float(ref_llr[0]), rel=1e-12)
    assert int(llr[1]) == int(ref_llr[1]) > 0
    np.testing.assert_allclose(np.asarray(g[0]), np.asarray(ref_g[0]), rtol=1e-12)
    assert int(g[1]) == int(ref_g[1]) > 0
    assert float(ll) == pytest.approx(float(ll_ref), rel=1e-12)
    assert float(llg[0]) == pytest.approx(float(ll), rel=1e-12)
    np.testing.assert_allclose(np.asarray(llg[1]), np.asarray(data - th0).sum(0), rtol=1e-10)


def test_per_example_gradient_methods_agree_and_batch_hooks_are_used():
    dim = 3
    data = make_data(40, dim, seed=5)
    theta = jnp.asarray([0.3, -0.1, 0.2])
    model = gaussian_model(dim)
    exact = np.asarray(data - theta)
    methods = ("auto", "forward", "reverse")
    got = jax.jit(lambda th, d: [per_example_grads(model, th, d, m) for m in methods])(theta, data)
    for g in got:
        np.testing.assert_allclose(np.asarray(g), exact, rtol=1e-12)
    calls = []

    def ll_batch(th, x):
        calls.append("ll")
        return -0.5 * jnp.sum((x - th) ** 2, axis=1) - 0.5 * dim * jnp.log(2 * jnp.pi)

    def grad_batch(th, x):
        calls.append("grad")
        return x - th

    hooked = gaussian_model(dim, log_likelihood_batch=ll_batch, grad_log_likelihood_batch=grad_batch)
    # The hooks are called while tracing: one compiled program for the three passes.
    (g, _), (llr, _), (ref, _) = jax.jit(lambda th, d: (
        clipped_grad_sum(hooked, d, th, 10.0),
        clipped_llr_sum(hooked, d, th, th + 0.1, 10.0),
        clipped_llr_sum(model, d, th, th + 0.1, 10.0)))(theta, data)
    assert "grad" in calls and "ll" in calls
    np.testing.assert_allclose(np.asarray(g), exact.sum(0), rtol=1e-12)
    assert float(llr) == pytest.approx(float(ref), rel=1e-12)


def test_knorm_mechanism_draws_the_linf_k_norm_law():
    """z = release − value: its K-norm ‖z‖_K = max |z_j|/w_j follows Gamma(m, 1/ε) (the volume
    of rK grows as r^m) and, given the norm, the direction is uniform on the box surface, so each
    coordinate has variance (m+1)(m+2)w_j²/(3ε²) and no correlation. KS at false alarm 1e-3;
    variances within 5 % (4000 draws: the sampling sd of a variance ratio is ~3 %)."""
    from scipy import stats

    from dpmcmc.kernels.mechanisms import knorm_mechanism

    widths, eps = jnp.array([2.0, 2.0, 0.5, 1.0]), 1.7
    value = jnp.array([10.0, -3.0, 0.0, 1.0], jnp.float32)
    keys = jax.random.split(jax.random.key(4), 4000)
    with jax.enable_x64(True):
        out = jax.jit(jax.vmap(lambda k: knorm_mechanism(k, value, widths, eps)))(keys)
    assert out.dtype == jnp.float64
    z = np.asarray(out) - np.asarray(value, np.float64)
    norm = np.max(np.abs(z) / np.asarray(widths), axis=1)
    m = 4
    assert stats.kstest(norm, stats.gamma(m, scale=1 / eps).cdf).pvalue > 1e-3
    expect = (m + 1) * (m + 2) * np.asarray(widths) ** 2 / (3 * eps ** 2)
    np.testing.assert_allclose(z.var(0) / expect, 1.0, atol=0.05 * 3)
    assert np.max(np.abs(np.corrcoef(z.T) - np.eye(m))) < 0.1
    # With the noise scaled (the audit's miscalibrated source) the law is wrong: KS rejects.
    from dpmcmc.kernels.mechanisms import NoiseSource

    with jax.enable_x64(True):
        bad = jax.jit(jax.vmap(lambda k: knorm_mechanism(k, value, widths, eps,
                                                         NoiseSource(noise_scale=0.7))))(keys)
    bad_norm = np.max(np.abs(np.asarray(bad) - np.asarray(value, np.float64)) / np.asarray(widths), axis=1)
    assert stats.kstest(bad_norm, stats.gamma(m, scale=1 / eps).cdf).pvalue < 1e-3


def test_knorm_mechanism_in_secure_mode_uses_the_secret():
    from dpmcmc.kernels.mechanisms import NoiseSource, knorm_mechanism
    from dpmcmc.secure import secure_key

    key = jax.random.key(1)
    with jax.enable_x64(True):
        # The secret an argument of one compiled program (as the driver passes it), beside the
        # same release from the public key.
        both = jax.jit(lambda words: (
            knorm_mechanism(key, jnp.zeros(8), 1.0, 2.0, NoiseSource(words)),
            knorm_mechanism(key, jnp.zeros(8), 1.0, 2.0)))

        def draw(seed):
            return [np.asarray(x) for x in both(secure_key(seed).words)]

        a, public = draw(1)
        np.testing.assert_array_equal(a, draw(1)[0])
        assert np.all(a != draw(2)[0])
        assert np.all(a != public)
