"""The Gaussian model with known covariance (001 §5.1, 000 §4), with tempering.

Model::

    theta ~ N(mu0, Sigma0),    x_i ~ N(theta, Sigma)  (Sigma known)

With the likelihood raised to T the posterior is Gaussian with precision
``Lambda = Sigma0^{-1} + T n Sigma^{-1}`` and mean
``Lambda^{-1} (Sigma0^{-1} mu0 + T n Sigma^{-1} xbar)`` (conjugate update, BDA §3.5).

Covariances used by the seeds:

- :func:`random_covariance`: 000 §4 ("after Hoffman et al."): eigenvalues drawn from a gamma
  distribution with shape 0.5 and scale 1, eigenvectors from orthonormalising (QR) the columns of a
  matrix of Uniform[0, 1] entries.
- :func:`correlated_covariance`: 001 §5.4, ``[[1, 0.999], [0.999, 1]]``.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .. import linalg
from ._common import (
    as_shape,
    as_vector,
    check_data,
    check_dim,
    check_key,
    check_n,
    check_num_draws,
    check_positive,
    check_real,
    check_temperature,
    spd_matrix,
)
from .base import Model

__all__ = ["gaussian", "random_covariance", "correlated_covariance", "gaussian_posterior_params"]


def random_covariance(key: Any, dim: int, shape: float = 0.5, scale: float = 1.0) -> np.ndarray:
    """Random covariance of 000 §4: ``Q diag(lambda) Q^T``.

    Parameters
    ----------
    key : JAX PRNG key
    dim : int
    shape, scale : float
        Gamma distribution of the eigenvalues (000 §4: shape 0.5, scale 1).

    Returns
    -------
    ndarray (dim, dim), float64
        Symmetric positive definite (gamma eigenvalues are positive almost surely; with shape 0.5
        some are small, so the matrix can be ill-conditioned, as in the paper).
    """
    key = check_key(key)
    dim = check_dim(dim)
    shape = check_positive("shape", shape)
    scale = check_positive("scale", scale)
    # A NumPy generator seeded from the key: float64 throughout, and it avoids compiling JAX's
    # gamma sampler (seconds) for a one-off (dim, dim) draw.
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key), dtype=np.uint32).tolist())
    eig = rng.gamma(shape, scale, size=dim)
    # A gamma(0.5) draw can be tiny; keep the matrix numerically positive definite.
    eig = np.maximum(eig, 1e-300)
    mat = rng.uniform(0.0, 1.0, size=(dim, dim))
    q, _ = np.linalg.qr(mat)
    cov = (q * eig) @ q.T
    return 0.5 * (cov + cov.T)


def correlated_covariance(rho: float = 0.999) -> np.ndarray:
    """The 2x2 covariance ``[[1, rho], [rho, 1]]`` of 001 §5.4 (rho = 0.999)."""
    rho = check_real("rho", rho)
    if not -1.0 < rho < 1.0:
        raise ValueError(f"rho must lie in (-1, 1), got {rho!r}")
    return np.array([[1.0, rho], [rho, 1.0]])


def gaussian_posterior_params(
    data: Any, cov: Any, prior_mean: Any, prior_cov: Any, temperature: float = 1.0
) -> tuple[jax.Array, jax.Array]:
    """Mean and precision of the tempered Gaussian posterior.

    Returns
    -------
    mean : array (d,)
    precision : array (d, d)
        ``Sigma0^{-1} + T n Sigma^{-1}``.
    """
    data = jnp.asarray(data)
    n = data.shape[0]
    dt = data.dtype
    p = jnp.asarray(np.linalg.inv(np.asarray(cov, dtype=np.float64)), dt)
    p0 = jnp.asarray(np.linalg.inv(np.asarray(prior_cov, dtype=np.float64)), dt)
    p = 0.5 * (p + p.T)
    p0 = 0.5 * (p0 + p0.T)
    prec = p0 + temperature * n * p
    rhs = p0 @ jnp.asarray(prior_mean, dt) + temperature * n * (p @ jnp.mean(data, axis=0))
    chol = linalg.cholesky(prec)
    mean = linalg.cho_solve(chol, rhs)
    return mean, prec


def gaussian(
    cov: Any,
    *,
    prior_mean: Any = 0.0,
    prior_cov: Any = 1.0e4,
    temperature: float = 1.0,
    theta_true: Any = None,
    name: Optional[str] = None,
) -> Model:
    """Gaussian model with known covariance as a :class:`Model`.

    Parameters
    ----------
    cov : array-like (d, d)
        Known likelihood covariance Sigma (symmetric positive definite). A scalar or a vector
        means a diagonal covariance; the dimension is taken from it (a scalar gives d = 1).
    prior_mean : float or array (d,), default 0
    prior_cov : float, array (d,) or array (d, d), default 1e4
        Prior covariance; a scalar ``s`` means ``s I`` (000 §4 uses ``sigma_0 = 100``, i.e.
        ``1e4 I``).
    temperature : float, default 1
    theta_true : array (d,), optional
        Parameter used by the data generator; default ``theta_2 = 3``, others 0 (001 §5.4).
    name : str, optional

    Returns
    -------
    Model
        With vectorised batch functions, ``sample_prior``, ``exact_posterior`` (tempered) and
        ``metadata`` holding ``cov``, ``prior_mean``, ``prior_cov`` and the callables
        ``generate_data(key, n, theta=None)``, ``posterior_params(data) -> (mean, precision)``,
        ``posterior_mean(data)`` and ``posterior_cov(data)``.
    """
    cov_arr = np.asarray(cov, dtype=np.float64)
    if cov_arr.ndim == 0:
        cov_arr = cov_arr.reshape(1, 1)
    elif cov_arr.ndim == 1:
        cov_arr = np.diag(cov_arr)
    dim = cov_arr.shape[0]
    cov_arr = spd_matrix("cov", cov_arr, dim)
    mu0 = as_vector("prior_mean", prior_mean, dim)
    pc = np.asarray(prior_cov, dtype=np.float64)
    if pc.ndim == 0:
        pc = check_positive("prior_cov", float(pc)) * np.eye(dim)
    elif pc.ndim == 1:
        pc = np.diag(pc)
    pc = spd_matrix("prior_cov", pc, dim)
    temperature = check_temperature(temperature)
    if theta_true is None:
        theta_true = np.zeros(dim)
        if dim >= 2:
            theta_true[1] = 3.0
    theta_true = as_vector("theta_true", theta_true, dim)

    prec_np = np.linalg.inv(cov_arr)
    prec_np = 0.5 * (prec_np + prec_np.T)
    prec0_np = np.linalg.inv(pc)
    prec0_np = 0.5 * (prec0_np + prec0_np.T)
    chol_np = np.linalg.cholesky(cov_arr)
    chol0_np = np.linalg.cholesky(pc)
    _, logdet = np.linalg.slogdet(cov_arr)
    _, logdet0 = np.linalg.slogdet(pc)
    log_norm_lik = float(-0.5 * (dim * np.log(2.0 * np.pi) + logdet))
    log_norm_prior = float(-0.5 * (dim * np.log(2.0 * np.pi) + logdet0))

    def log_likelihood(theta, x):
        r = x - theta
        return log_norm_lik - 0.5 * r @ (jnp.asarray(prec_np, r.dtype) @ r)

    def log_likelihood_batch(theta, data):
        r = data - theta[None, :]
        rp = r @ jnp.asarray(prec_np, r.dtype)
        return log_norm_lik - 0.5 * jnp.sum(rp * r, axis=1)

    def grad_log_likelihood_batch(theta, data):
        # grad_theta of -(x - theta)^T P (x - theta) / 2 is P (x - theta); P is symmetric.
        return (data - theta[None, :]) @ jnp.asarray(prec_np, data.dtype)

    def log_prior(theta):
        r = theta - jnp.asarray(mu0, theta.dtype)
        return log_norm_prior - 0.5 * r @ (jnp.asarray(prec0_np, r.dtype) @ r)

    def sample_prior(key, shape=()):
        key = check_key(key)
        eps = jax.random.normal(key, as_shape(shape) + (dim,))
        return jnp.asarray(mu0, eps.dtype) + eps @ jnp.asarray(chol0_np.T, eps.dtype)

    def posterior_params(data):
        data = check_data(data, dim)
        return gaussian_posterior_params(data, cov_arr, mu0, pc, temperature)

    def exact_posterior(key, data, num_draws):
        key = check_key(key)
        num_draws = check_num_draws(num_draws)
        mean, prec = posterior_params(data)
        chol = linalg.cholesky(prec)
        eps = jax.random.normal(key, (num_draws, dim), dtype=mean.dtype)
        # With Lambda = L L^T, L^{-T} eps has covariance Lambda^{-1}; a triangular solve is
        # stabler than inverting the (possibly ill-conditioned) precision.
        z = linalg.solve_triangular(chol.T, eps.T, lower=False).T
        return mean + z

    def posterior_mean(data):
        return posterior_params(data)[0]

    def posterior_cov(data):
        prec = posterior_params(data)[1]
        c = linalg.inv(prec)
        return 0.5 * (c + c.T)

    def generate_data(key, n, theta=None):
        key = check_key(key)
        n = check_n(n)
        th = theta_true if theta is None else as_vector("theta", theta, dim)
        eps = jax.random.normal(key, (n, dim))
        return jnp.asarray(th, eps.dtype) + eps @ jnp.asarray(chol_np.T, eps.dtype)

    metadata = {
        "family": "gaussian",
        "cov": cov_arr,
        "prior_mean": mu0,
        "prior_cov": pc,
        "theta_true": theta_true,
        "generate_data": generate_data,
        "posterior_params": posterior_params,
        "posterior_mean": posterior_mean,
        "posterior_cov": posterior_cov,
        "source": "001 §5.1; 000 §4 (Gaussian Model)",
    }
    return Model(
        log_likelihood=log_likelihood,
        log_prior=log_prior,
        dim=dim,
        temperature=temperature,
        name=name or f"gaussian-{dim}d",
        sample_prior=sample_prior,
        exact_posterior=exact_posterior,
        log_likelihood_batch=log_likelihood_batch,
        grad_log_likelihood_batch=grad_log_likelihood_batch,
        metadata=metadata,
        record_shape=(dim,),
    )
