"""Built-in models: vectorised functions, samplers, exact posteriors against closed forms."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpmcmc
from dpmcmc.models import (
    Model,
    banana,
    banana_inverse,
    circle,
    correlated_covariance,
    gaussian,
    gaussian_mixture,
    generate_data,
    logistic_regression,
    random_covariance,
)
from dpmcmc.models.circle import circle_log_density

KEY = jax.random.key(20240601)


def _models():
    cov = random_covariance(jax.random.key(3), 4)
    return {
        "banana-2d": banana(2),
        "banana-5d-shifted-tempered": banana(5, a=3.0, b=0.7, m=-0.4, sigma_sq=(2.0, 0.5, 1.5, 3.0, 0.8),
                                             sigma0_sq=50.0, temperature=0.05),
        "gaussian-random-4d": gaussian(cov, prior_mean=0.3, prior_cov=20.0, temperature=0.5),
        "gaussian-correlated": gaussian(correlated_covariance(), prior_cov=100.0),
        "circle": circle(1e-2),
        "mixture": gaussian_mixture(temperature=0.1),
        "logistic-3d": logistic_regression(3, prior_var=2.0),
    }


MODELS = _models()


# slow: guard in default: test_batch_functions_match_vmap[banana-5d-shifted-tempered] (the same
# banana batch functions, with every parameter away from its default)
@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.slow) if k == "banana-2d" else k
                                  for k in sorted(MODELS)])
def test_batch_functions_match_vmap(name):
    model = MODELS[name]
    k1, k2, k3 = jax.random.split(jax.random.fold_in(KEY, sorted(MODELS).index(name)), 3)
    # The data are drawn in the compiled program below (op by op, each generator compiles a
    # program per operation: ~0.2 CPU-s a model), except the banana's, whose generator computes
    # its mean in NumPy and so runs eagerly only.
    eager = MODELS[name].metadata["family"] == "banana"
    eager_data = generate_data(model, k1, 257) if eager else None

    def evaluate(theta, data):
        return (
            jax.vmap(model.log_likelihood, (None, 0))(theta, data),
            jax.vmap(jax.grad(model.log_likelihood), (None, 0))(theta, data),
            model.log_likelihood_batch(theta, data),
            model.grad_log_likelihood_batch(theta, data),
            model.loglik_per_example(theta, data),
            model.grad_per_example(theta, data),
            model.log_prior(theta),
        )

    # The θ (draws of the prior, perturbed) and every function at them in one compiled program,
    # not one per operation (sample_prior runs eagerly in dpmcmc.sample's default start; the
    # unjitted batch function is checked below).
    @jax.jit
    def thetas_and_values(a, b, k):
        data = eager_data if eager else generate_data(model, k, 257)
        thetas = model.sample_prior(a, (5,)) * 0.5 + 0.3 * jax.random.normal(b, (5, model.dim))
        return data, thetas, jax.vmap(lambda t: evaluate(t, data))(thetas)

    data, thetas, (ll_ref, g_ref, ll, g, ll_view, g_view, lp) = thetas_and_values(k2, k3, k1)
    assert data.dtype == jnp.float64
    assert ll.shape == (5, 257) and g.shape == (5, 257, model.dim)
    assert ll.dtype == jnp.float64 and g.dtype == jnp.float64
    np.testing.assert_allclose(ll, ll_ref, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-10)
    # The Model views use the vectorised versions.
    np.testing.assert_allclose(ll_view, ll_ref, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(g_view, g_ref, rtol=1e-12, atol=1e-10)
    # Unjitted single call agrees with the jitted one (no tracing-only code paths), and the
    # jitted prior is finite at every θ (draws of the prior, perturbed).
    np.testing.assert_allclose(model.log_likelihood_batch(thetas[0], data), ll[0], rtol=1e-12, atol=1e-10)
    assert lp.shape == (5,) and np.all(np.isfinite(lp))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_sample_prior_shapes(name):
    # Traced, not run: each new shape run op by op compiles every operation again. (Each model's
    # sample_prior runs in test_batch_functions_match_vmap, whose θ are prior draws, and the
    # banana's law is test_banana_prior_sampler_matches_log_prior.)
    model = MODELS[name]

    def shape_of(shape):
        return jax.eval_shape(lambda k: model.sample_prior(k, shape), KEY)

    assert shape_of(()).shape == (model.dim,)
    assert shape_of(7).shape == (7, model.dim)
    draws = shape_of((3, 4))
    assert draws.shape == (3, 4, model.dim) and draws.dtype == jnp.float64


def test_model_reexported():
    assert dpmcmc.models.Model is Model
    assert dpmcmc.Model is Model


def test_banana_prior_sampler_matches_log_prior():
    # Prior draws mapped back by g^{-1} are N(0, sigma0^2 I); log_prior is that density.
    model = banana(3, a=2.0, b=0.5, m=1.0, sigma0_sq=4.0)

    @jax.jit  # one compiled program, not one per operation
    def prior_draws(key):
        d = model.sample_prior(key, (20000,))
        return banana_inverse(d, 2.0, 0.5, 1.0), jax.vmap(model.log_prior)(d[:10])

    z, lp = prior_draws(KEY)
    z = np.asarray(z)
    np.testing.assert_allclose(z.mean(0), 0.0, atol=5 * 2.0 / np.sqrt(20000))
    np.testing.assert_allclose(z.std(0), 2.0, rtol=0.03)
    np.testing.assert_allclose(lp, stats.norm(0, 2.0).logpdf(z[:10]).sum(1), rtol=1e-12)


def test_banana_log_likelihood_closed_form():
    model = banana(3, a=2.0, b=0.5, m=1.0, sigma_sq=(2.0, 3.0, 4.0))
    theta = jnp.array([0.3, -1.0, 2.0])
    x = jnp.array([0.1, 0.4, 1.0])
    mean = np.array([0.3, -1.0 + 2.0 * (0.3 - 1.0) ** 2 + 0.5, 2.0])
    ref = stats.norm(mean, np.sqrt([2.0, 3.0, 4.0])).logpdf(np.asarray(x)).sum()
    np.testing.assert_allclose(float(model.log_likelihood(theta, x)), ref, rtol=1e-13)


def test_banana_sigma_sq_default_and_fill():
    assert banana(4).metadata["sigma_sq"] == (20.0, 2.5, 1.0, 1.0)
    assert banana(2, sigma_sq=(2000.0, 2500.0)).metadata["sigma_sq"] == (2000.0, 2500.0)
    with pytest.raises(ValueError, match="sigma_sq"):
        banana(3, sigma_sq=(1.0, 2.0, 3.0, 4.0))
    with pytest.raises(ValueError, match="sigma_sq"):
        banana(2, sigma_sq=(1.0, -2.0))


# (The tempered case is slow since stop 41, the untempered one since stop 42: tests/suite_budget.py,
# with their guards.)
@pytest.mark.parametrize("temperature", [1.0, 0.01])
def test_banana_exact_posterior_transforms_to_gaussian(temperature):
    # 001 Thm 13: g^{-1}(theta) ~ N(mu, diag(var)) under the (tempered) posterior. Each
    # coordinate is checked with a KS test at alpha = 1e-3 (fixed seed), and the moments
    # against the closed form computed here independently.
    a, b, m = 20.0, 0.3, -0.2
    sig = np.array([20.0, 2.5, 1.0, 1.0])
    model = banana(4, a=a, b=b, m=m, sigma_sq=sig, sigma0_sq=1000.0, temperature=temperature)
    data = generate_data(model, jax.random.key(1), 5000)
    n = 5000
    xbar = np.asarray(data).mean(0)
    prec = temperature * n / sig + 1.0 / 1000.0
    mu = temperature * n / sig * xbar / prec
    var = 1.0 / prec
    # The draws, their map back by g^{-1} and the model's posterior mean in one compiled
    # program (not one per operation).
    @jax.jit
    def exact(k, d):
        x = model.exact_posterior(k, d, 20000)
        return x, banana_inverse(x, a, b, m), model.metadata["posterior_mean"](d)

    draws, z, pm = exact(jax.random.key(2), data)
    assert draws.shape == (20000, 4) and draws.dtype == jnp.float64
    z, pm = np.asarray(z), np.asarray(pm)
    for i in range(4):
        assert stats.kstest(z[:, i], stats.norm(mu[i], np.sqrt(var[i])).cdf).pvalue > 1e-3
    assert np.all(np.abs(z.mean(0) - mu) < 5 * np.sqrt(var / 20000))
    np.testing.assert_allclose(z.var(0), var, rtol=0.05)
    # The exact posterior mean E[theta_2] = mu_2 - a (var_1 + (mu_1 - m)^2) - b.
    np.testing.assert_allclose(pm[1], mu[1] - a * (var[0] + (mu[0] - m) ** 2) - b, rtol=1e-10)
    assert np.all(np.abs(np.asarray(draws).mean(0) - pm) < 6 * np.asarray(draws).std(0) / np.sqrt(20000))


def _density_difference_check(model, data, log_density, key, pairs=200, rtol=1e-7):
    """log q(t1) - log q(t2) of the sampler equals the model's log_posterior difference.

    ``log_density(theta, data)``: the sampler's density, evaluated with the draws and the model's
    log posterior in one compiled program (not one per operation)."""
    lp, lq = jax.jit(lambda k, d: _model_and_sampler_log_densities(model, d, log_density, k, pairs))(
        key, data)
    _check_density_differences(lp, lq, pairs, rtol)


def _model_and_sampler_log_densities(model, data, log_density, key, pairs):
    """The model's log posterior and ``log_density`` at ``2 * pairs`` exact draws (traced)."""
    pts = model.exact_posterior(key, data, 2 * pairs)
    return jax.vmap(model.log_posterior, (0, None))(pts, data), log_density(pts, data)


def _check_density_differences(lp, lq, pairs, rtol):
    """log q(t1) - log q(t2) (``lq``) equals the log_posterior difference (``lp``), pair by
    pair."""
    lp, lq = np.asarray(lp), np.asarray(lq)
    d_model = lp[:pairs] - lp[pairs:]
    d_sampler = lq[:pairs] - lq[pairs:]
    scale = np.maximum(1.0, np.abs(d_model))
    assert np.max(np.abs(d_model - d_sampler) / scale) < rtol
    # The points are not all equal, so the check compares non-trivial differences.
    assert np.std(d_model) > 0.1


def test_tempered_banana_density_matches_log_posterior():
    a, b, m = 5.0, 0.4, 0.3
    sig = np.array([2.0, 0.5, 1.5])
    model = banana(3, a=a, b=b, m=m, sigma_sq=sig, sigma0_sq=10.0, temperature=0.02)
    data = generate_data(model, jax.random.key(5), 3000)

    def log_q(theta, data):
        mu, var = model.metadata["posterior_params"](data)
        z = banana_inverse(theta, a, b, m)  # unit Jacobian
        return jnp.sum(jax.scipy.stats.norm.logpdf(z, mu, jnp.sqrt(var)), axis=-1)

    _density_difference_check(model, data, log_q, jax.random.key(6))
    # 001 Thm 13's Gaussian of g^{-1}(theta), computed here independently (conjugate update of
    # each coordinate, tempered), and the exact posterior mean E[theta_2] = mu_2 - a (var_1 +
    # (mu_1 - m)^2) - b, in one compiled program. (The exact draws' law, KS tests against these
    # closed forms, is test_banana_exact_posterior_transforms_to_gaussian's, slow.)
    (mu, var), pm = jax.jit(lambda d: (model.metadata["posterior_params"](d),
                                       model.metadata["posterior_mean"](d)))(data)
    prec = 0.02 * 3000 / sig + 1.0 / 10.0
    mu_ref, var_ref = 0.02 * 3000 / sig * np.asarray(data).mean(0) / prec, 1.0 / prec
    np.testing.assert_allclose(mu, mu_ref, rtol=1e-10)
    np.testing.assert_allclose(var, var_ref, rtol=1e-12)
    pm_ref = mu_ref.copy()
    pm_ref[1] -= a * (var_ref[0] + (mu_ref[0] - m) ** 2) + b
    np.testing.assert_allclose(pm, pm_ref, rtol=1e-10)


# A tempered Gaussian with a correlated likelihood and an informative, correlated prior away
# from 0: the conjugate update (test_gaussian_posterior_closed_form) and the
# sampler's density (test_tempered_gaussian_density_matches_log_posterior) of one model.
_GAUSS_COV = np.array([[2.0, 0.6], [0.6, 1.0]])
_GAUSS_PRIOR_COV = np.array([[5.0, 1.0], [1.0, 3.0]])
_GAUSS_PRIOR_MEAN = np.array([0.5, -0.5])
_GAUSS_T = 0.25


@pytest.fixture(scope="module")
def tempered_gaussian():
    """The model, its data, and in one compiled program (shared by the two tests below) its
    posterior mean and covariance, and the model's log posterior and the exact posterior's log
    density at 400 points about the posterior mean (drawn with NumPy: the exact sampler's draws
    are test_gaussian_exact_posterior_draws_have_the_posterior_moments', slow)."""
    model = gaussian(_GAUSS_COV, prior_mean=_GAUSS_PRIOR_MEAN, prior_cov=_GAUSS_PRIOR_COV,
                     temperature=_GAUSS_T)
    log_q = lambda t, d: jax.scipy.stats.multivariate_normal.logpdf(  # noqa: E731
        t, model.metadata["posterior_mean"](d), model.metadata["posterior_cov"](d))
    # The posterior sd is about 0.2 (n T = 50 records' worth of a unit-scale likelihood).
    z = 0.3 * np.random.default_rng(9).normal(size=(400, 2))

    @jax.jit  # the data drawn in the same program (op by op, each draw compiles its operations)
    def everything(k0, z):
        d = generate_data(model, k0, 200)
        mean = model.metadata["posterior_mean"](d)
        pts = mean + z
        return d, (mean, model.metadata["posterior_cov"](d),
                   (jax.vmap(model.log_posterior, (0, None))(pts, d), log_q(pts, d)))

    data, out = everything(jax.random.key(10), z)
    return model, data, out


def test_tempered_gaussian_density_matches_log_posterior(tempered_gaussian):
    _, _, (_, _, (lp, lq)) = tempered_gaussian
    _check_density_differences(lp, lq, 200, rtol=1e-6)


def _gaussian_posterior(data):
    # Conjugate update computed here with explicit inverses (BDA §3.5).
    cov, pc, mu0, t = _GAUSS_COV, _GAUSS_PRIOR_COV, _GAUSS_PRIOR_MEAN, _GAUSS_T
    n = 200
    post_cov = np.linalg.inv(np.linalg.inv(pc) + t * n * np.linalg.inv(cov))
    post_mean = post_cov @ (np.linalg.inv(pc) @ mu0 + t * n * np.linalg.inv(cov) @ np.asarray(data).mean(0))
    return post_mean, post_cov


def test_gaussian_posterior_closed_form(tempered_gaussian):
    # The conjugate update against the model.
    _, data, (mean, pcov, _) = tempered_gaussian
    post_mean, post_cov = _gaussian_posterior(data)
    np.testing.assert_allclose(mean, post_mean, rtol=1e-10)
    np.testing.assert_allclose(pcov, post_cov, rtol=1e-10)


def test_gaussian_exact_posterior_draws_have_the_posterior_moments(tempered_gaussian):
    """40000 exact draws: their mean within 5 standard errors of the closed form's, their
    covariance within 4 %. Slow (tests/suite_budget.py, SLOW_CASES_C4), with its guards."""
    model, data, _ = tempered_gaussian
    post_mean, post_cov = _gaussian_posterior(data)
    draws = np.asarray(jax.jit(lambda k, d: model.exact_posterior(k, d, 40000))(
        jax.random.key(11), data))
    se = np.sqrt(np.diag(post_cov) / 40000)
    assert np.all(np.abs(draws.mean(0) - post_mean) < 5 * se)
    np.testing.assert_allclose(np.cov(draws.T), post_cov, rtol=0.04, atol=0.04 * post_cov.max())


def test_gaussian_data_generator_moments():
    cov = correlated_covariance(0.999)
    model = gaussian(cov, prior_cov=100.0)
    # Drawn in one compiled program (op by op, each draw compiles its operations).
    data = np.asarray(jax.jit(lambda k: generate_data(model, k, 50000))(jax.random.key(12)))
    np.testing.assert_allclose(data.mean(0), [0.0, 3.0], atol=0.03)
    np.testing.assert_allclose(np.corrcoef(data.T)[0, 1], 0.999, atol=5e-4)


def test_random_covariance():
    c1 = random_covariance(jax.random.key(0), 10)
    c2 = random_covariance(jax.random.key(0), 10)
    c3 = random_covariance(jax.random.key(1), 10)
    np.testing.assert_array_equal(c1, c2)
    assert not np.allclose(c1, c3)
    np.testing.assert_allclose(c1, c1.T, atol=0)
    assert np.all(np.linalg.eigvalsh(c1) > 0)
    # The eigenvalues are the Gamma(0.5, 1) draws: mean 0.5 over many.
    eig = np.concatenate([np.linalg.eigvalsh(random_covariance(jax.random.key(s), 20)) for s in range(50)])
    assert abs(eig.mean() - 0.5) < 0.05
    assert stats.kstest(eig, stats.gamma(0.5).cdf).pvalue > 1e-3


def test_circle_log_likelihood_and_exact_density():
    """The likelihood's closed form, and the exact posterior's normalised density
    (circle_log_density, the law test_circle_exact_posterior_draws samples) against the model's
    log posterior: their differences agree between points near the circle."""
    model = circle(1e-3, temperature=0.5)
    theta = jnp.array([1.0, 2.0])
    np.testing.assert_allclose(float(model.log_likelihood(theta, jnp.array([3.0]))), -1e-3 * (5.0 - 9.0) ** 2)
    # Points near the posterior's ring (radius^2 about E[x^2] = 10, its sd about 0.7), drawn with
    # NumPy: the exact sampler's draws are test_circle_exact_posterior_draws' (slow).
    rng = np.random.default_rng(15)
    r, phi = np.sqrt(10.0 + 0.7 * rng.normal(size=400)), rng.uniform(-np.pi, np.pi, 400)
    pts = np.stack([r * np.cos(phi), r * np.sin(phi)], 1)

    @jax.jit  # the data, their posterior mean and both densities in one compiled program
    def everything(k, pts):
        d = generate_data(model, k, 2000)
        return d, model.metadata["posterior_mean"](d), (
            jax.vmap(model.log_posterior, (0, None))(pts, d), circle_log_density(pts, d, 1e-3, 0.5))

    data, pmean, (lp, lq) = everything(jax.random.key(13), pts)
    assert data.shape == (2000, 1)
    np.testing.assert_allclose(np.asarray(data).mean(), 3.0, atol=0.1)
    np.testing.assert_allclose(pmean, [0.0, 0.0])
    _check_density_differences(lp, lq, 200, rtol=1e-7)


def test_circle_exact_posterior_draws():
    """20000 exact draws: rho = |theta|^2 follows the truncated normal of circle_radius_params,
    the angle is uniform, the mean is 0 (KS tests at alpha = 1e-3, fixed seeds). Slow
    (tests/suite_budget.py, SLOW_CASES_C4), with its guards."""
    model = circle(1e-3, temperature=0.5)

    @jax.jit  # the data and the draws in one compiled program (op by op, each compiles its operations)
    def everything(k):
        d = generate_data(model, k, 2000)
        return d, model.exact_posterior(jax.random.key(14), d, 20000)

    data, draws = everything(jax.random.key(13))
    draws = np.asarray(draws)
    rho = (draws**2).sum(1)
    loc = np.mean(np.asarray(data)[:, 0] ** 2)
    scale = 1 / np.sqrt(2 * 0.5 * 1e-3 * 2000)
    assert stats.kstest(rho, stats.truncnorm(-loc / scale, np.inf, loc, scale).cdf).pvalue > 1e-3
    assert np.linalg.norm(draws.mean(0)) < 5 * np.sqrt(loc / 20000)
    assert stats.kstest(np.arctan2(draws[:, 1], draws[:, 0]), stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 1e-3


def test_circle_exact_density_normalised():
    # circle_log_density integrates to 1 over the plane (polar quadrature).
    model = circle(1e-2)
    data = generate_data(model, jax.random.key(16), 100)
    r = np.linspace(1e-6, 6.0, 20001)
    # One compiled program for the density (not one per operation).
    log_density = jax.jit(lambda t, d: circle_log_density(t, d, 1e-2))
    dens = np.exp(np.asarray(log_density(np.stack([r, 0 * r], 1), data)))
    total = np.trapezoid(2 * np.pi * r * dens, r)
    np.testing.assert_allclose(total, 1.0, rtol=1e-6)


def test_mixture_data_and_likelihood():
    model = gaussian_mixture()
    # Drawn in one compiled program (op by op, each draw compiles its operations).
    data = np.asarray(jax.jit(lambda k: generate_data(model, k, 100000))(jax.random.key(17)))
    # x ~ 0.5 N(0, 2) + 0.5 N(1, 2): mean 0.5, variance 2 + 0.25.
    np.testing.assert_allclose(data.mean(), 0.5, atol=0.02)
    np.testing.assert_allclose(data.var(), 2.25, rtol=0.02)
    theta = jnp.array([0.2, 0.9])
    x = 1.3
    ref = np.log(0.5 * stats.norm(0.2, np.sqrt(2)).pdf(x) + 0.5 * stats.norm(1.1, np.sqrt(2)).pdf(x))
    np.testing.assert_allclose(float(model.log_likelihood(theta, jnp.array([x]))), ref, rtol=1e-12)
    assert model.exact_posterior is None


def test_logistic_regression():
    model = logistic_regression(3, theta_true=(1.0, -2.0, 0.5))
    # Drawn in one compiled program (op by op, each draw compiles its operations).
    data = np.asarray(jax.jit(lambda k: generate_data(model, k, 20000))(jax.random.key(18)))
    assert data.shape == (20000, 4)
    assert set(np.unique(data[:, 3])) == {0.0, 1.0}
    theta = jnp.array([0.3, -0.1, 0.2])
    x = jnp.array([1.0, 2.0, -1.0, 1.0])
    z = 0.3 - 0.2 - 0.2
    np.testing.assert_allclose(float(model.log_likelihood(theta, x)), -np.log1p(np.exp(-z)), rtol=1e-12)


# slow (suite budget, stop 41: an optimisation over 20000 records, ~0.5 CPU-s): guard in default:
# test_logistic_regression (the generator's records and labels, the likelihood's closed form) and
# test_batch_functions_match_vmap[logistic-3d] (the batch functions and gradients this MLE
# minimises, against vmap of that likelihood).
@pytest.mark.slow
def test_logistic_regression_mle_recovers_theta_true():
    """The MLE on many records recovers theta_true (well-specified model)."""
    from scipy.optimize import minimize

    model = logistic_regression(3, theta_true=(1.0, -2.0, 0.5))
    data = np.asarray(generate_data(model, jax.random.key(18), 20000))
    dj = jnp.asarray(data)
    # Value and gradient in one compiled program.
    f = jax.jit(jax.value_and_grad(lambda t: -jnp.sum(model.log_likelihood_batch(t, dj))))

    def value_and_grad(t):
        v, g = f(jnp.asarray(t))
        return float(v), np.asarray(g)

    res = minimize(value_and_grad, np.zeros(3), jac=True, method="BFGS")
    np.testing.assert_allclose(res.x, [1.0, -2.0, 0.5], atol=0.1)


def test_argument_errors():
    with pytest.raises(ValueError, match="dim"):
        banana(1)
    with pytest.raises(ValueError, match="temperature"):
        banana(2, temperature=1.5)
    with pytest.raises(ValueError, match="sigma0_sq"):
        banana(2, sigma0_sq=0.0)
    with pytest.raises(ValueError, match="cov"):
        gaussian(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="a must be positive"):
        circle(-1.0)
    with pytest.raises(TypeError, match="key"):
        banana(2).sample_prior(0, (3,))
    with pytest.raises(ValueError, match="data"):
        banana(2).exact_posterior(KEY, jnp.zeros((10, 3)), 5)
    with pytest.raises(ValueError, match="num_draws"):
        banana(2).exact_posterior(KEY, jnp.zeros((10, 2)), 0)
    with pytest.raises(ValueError, match="n must"):
        generate_data(banana(2), KEY, 0)
    with pytest.raises(ValueError, match="rho"):
        correlated_covariance(1.0)
