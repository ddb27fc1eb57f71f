"""The circle model of 001 §5.3.

Each record is a scalar ``r`` (data shape ``(n, 1)``) and ``theta = (x, y)``::

    log p(r | x, y) = -a (x^2 + y^2 - r^2)^2,      flat prior p(x, y) = 1.

The posterior is concentrated on a thin ring and is rotation invariant, so its mean is the
origin (001 §5.3). The thesis draws the data from ``r ~ N(3, 1)`` and uses ``a = 1e-5`` and
``n = 100000`` (Table 5.1).

Exact posterior (our derivation; the thesis gives only the mean). Write ``rho = x^2 + y^2`` and
``phi`` the angle. Since ``sum_i (rho - r_i^2)^2 = n (rho - mean(r^2))^2 + const``, the tempered
posterior is ``exp(-T a n (rho - mean(r^2))^2)`` in ``(x, y)``; the map ``(rho, phi) -> (x, y)``
has ``dx dy = (1/2) d rho d phi``, so ``phi ~ Uniform(0, 2 pi)`` independently of
``rho ~ N(mean(r^2), 1 / (2 T a n))`` truncated to ``rho > 0``. ``exact_posterior`` samples that.

The flat prior is improper and has nothing to sample, so ``sample_prior`` here draws from the
data-independent starting distribution of 001 §5.4 instead, ``N((0, 1), I)``: that is what
``Model.sample_prior`` is used for (default chain starting points).
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr

from ._common import (
    as_shape,
    check_data,
    check_key,
    check_n,
    check_num_draws,
    check_positive,
    check_real,
    check_temperature,
    shift_scale,
)
from .base import Model

__all__ = ["circle", "circle_radius_params", "circle_log_density"]

#: Centre of the starting-point distribution of 001 §5.4 for the circle experiment.
START_MEAN = (0.0, 1.0)


def circle_radius_params(data: Any, a: float, temperature: float = 1.0) -> tuple[jax.Array, jax.Array]:
    """Location and scale of the (untruncated) Gaussian law of ``rho = x^2 + y^2``.

    Returns ``(mean(r^2), 1 / sqrt(2 T a n))``.
    """
    data = jnp.asarray(data)
    n = data.shape[0]
    loc = jnp.mean(data[:, 0] ** 2)
    scale = 1.0 / jnp.sqrt(2.0 * temperature * a * n)
    return loc, scale


def circle_log_density(theta: Any, data: Any, a: float, temperature: float = 1.0) -> jax.Array:
    """Normalised log-density of the exact (tempered) circle posterior at ``theta (..., 2)``."""
    theta = jnp.asarray(theta)
    loc, scale = circle_radius_params(data, a, temperature)
    rho = jnp.sum(theta**2, axis=-1)
    z = (rho - loc) / scale
    log_rho = -0.5 * z**2 - 0.5 * jnp.log(2.0 * jnp.pi) - jnp.log(scale) - log_ndtr(loc / scale)
    # density in (x, y) = p(rho) p(phi) |d(rho, phi)/d(x, y)| = p(rho) / (2 pi) * 2.
    return log_rho - jnp.log(jnp.pi)


def circle(
    a: float = 1e-5,
    *,
    temperature: float = 1.0,
    r_mean: float = 3.0,
    r_std: float = 1.0,
    name: Optional[str] = None,
) -> Model:
    """The circle model of 001 §5.3 as a :class:`Model`.

    Parameters
    ----------
    a : float, default 1e-5
        Likelihood sharpness (001 Table 5.1).
    temperature : float, default 1
    r_mean, r_std : float, default 3 and 1
        The data generator draws ``r ~ N(r_mean, r_std^2)`` (001 §5.3).
    name : str, optional

    Returns
    -------
    Model
        ``log_prior`` is the flat prior (0); ``sample_prior`` draws from ``N((0, 1), I)``, the
        starting distribution of 001 §5.4 (see module docstring); ``exact_posterior`` samples
        the ring exactly; ``metadata["posterior_mean"]`` is the origin.
    """
    a = check_positive("a", a)
    temperature = check_temperature(temperature)
    r_mean = check_real("r_mean", r_mean)
    r_std = check_positive("r_std", r_std)

    def log_likelihood(theta, x):
        s = jnp.sum(theta**2) - x[0] ** 2
        return -a * s**2

    def log_likelihood_batch(theta, data):
        s = jnp.sum(theta**2) - data[:, 0] ** 2
        return -a * s**2

    def grad_log_likelihood_batch(theta, data):
        s = jnp.sum(theta**2) - data[:, 0] ** 2
        return (-4.0 * a * s)[:, None] * theta[None, :]

    def log_prior(theta):
        return jnp.zeros((), dtype=jnp.result_type(theta, float))

    def sample_prior(key, shape=()):
        key = check_key(key)
        eps = jax.random.normal(key, as_shape(shape) + (2,))
        return jnp.asarray(START_MEAN, eps.dtype) + eps

    def exact_posterior(key, data, num_draws):
        key = check_key(key)
        num_draws = check_num_draws(num_draws)
        data = check_data(data, 1)
        loc, scale = circle_radius_params(data, a, temperature)
        k_rho, k_phi = jax.random.split(key)
        lower = -loc / scale
        z = jax.random.truncated_normal(k_rho, lower, jnp.inf, (num_draws,), dtype=data.dtype)
        rho = jnp.maximum(loc + scale * z, 0.0)
        phi = jax.random.uniform(k_phi, (num_draws,), dtype=data.dtype, maxval=2.0 * jnp.pi)
        rad = jnp.sqrt(rho)
        return jnp.stack([rad * jnp.cos(phi), rad * jnp.sin(phi)], axis=1)

    def posterior_mean(data=None):
        return jnp.zeros(2)

    def generate_data(key, n, theta=None):
        # The thesis gives no generative model linking r to (x, y): theta is ignored.
        key = check_key(key)
        n = check_n(n)
        return shift_scale(r_mean, r_std, jax.random.normal(key, (n, 1)))

    metadata = {
        "family": "circle",
        "a": a,
        "r_mean": r_mean,
        "r_std": r_std,
        "theta_true": None,
        "start_mean": np.asarray(START_MEAN),
        "generate_data": generate_data,
        "posterior_mean": posterior_mean,
        "log_density": lambda theta, data: circle_log_density(theta, data, a, temperature),
        "source": "001 §5.3",
    }
    return Model(
        log_likelihood=log_likelihood,
        log_prior=log_prior,
        dim=2,
        temperature=temperature,
        name=name or "circle",
        sample_prior=sample_prior,
        exact_posterior=exact_posterior,
        log_likelihood_batch=log_likelihood_batch,
        grad_log_likelihood_batch=grad_log_likelihood_batch,
        metadata=metadata,
        record_shape=(1,),
    )
