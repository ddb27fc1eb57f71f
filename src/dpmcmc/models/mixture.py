"""The 2-d Gaussian mixture model of 002 §4 (after Welling & Teh 2011, Seita et al. 2017).

Model (002 eqs. 32-33), each record a scalar (data shape ``(n, 1)``)::

    theta_j ~ N(0, sigma_j^2), j = 1, 2
    x_i ~ 0.5 N(theta_1, sigma_x^2) + 0.5 N(theta_1 + theta_2, sigma_x^2)

with ``sigma_1^2 = 10``, ``sigma_2^2 = 1``, ``sigma_x^2 = 2`` and data generated at
``theta = (0, 1)``. The posterior is bimodal and has no closed form, so no exact sampler is
given.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._common import (
    as_shape,
    as_vector,
    check_key,
    check_n,
    check_positive,
    check_temperature,
    positive_vector,
)
from .base import Model

__all__ = ["gaussian_mixture"]


def gaussian_mixture(
    *,
    prior_var: Any = (10.0, 1.0),
    sigma_x_sq: float = 2.0,
    temperature: float = 1.0,
    theta_true: Any = (0.0, 1.0),
    name: Optional[str] = None,
) -> Model:
    """The Gaussian mixture of 002 §4 as a :class:`Model`.

    Parameters
    ----------
    prior_var : pair of floats, default (10, 1)
        Prior variances ``sigma_1^2, sigma_2^2``.
    sigma_x_sq : float, default 2
        Component variance.
    temperature : float, default 1
        002 uses ``T = N0 / N`` with ``N0 = 100``.
    theta_true : pair, default (0, 1)
        Parameter used by the data generator.
    name : str, optional
    """
    pv = positive_vector("prior_var", prior_var, 2)
    sx2 = check_positive("sigma_x_sq", sigma_x_sq)
    temperature = check_temperature(temperature)
    theta_true = as_vector("theta_true", theta_true, 2)
    log_norm = float(np.log(0.5) - 0.5 * np.log(2.0 * np.pi * sx2))
    log_norm_prior = float(-0.5 * np.sum(np.log(2.0 * np.pi * pv)))
    inv_pv = 1.0 / pv

    def _components(theta, x):
        r1 = x - theta[0]
        r2 = x - theta[0] - theta[1]
        return r1, r2, -0.5 * r1 * r1 / sx2, -0.5 * r2 * r2 / sx2

    def log_likelihood(theta, x):
        _, _, l1, l2 = _components(theta, x[0])
        return log_norm + jnp.logaddexp(l1, l2)

    def log_likelihood_batch(theta, data):
        _, _, l1, l2 = _components(theta, data[:, 0])
        return log_norm + jnp.logaddexp(l1, l2)

    def grad_log_likelihood_batch(theta, data):
        r1, r2, l1, l2 = _components(theta, data[:, 0])
        # Responsibility of the second component, computed stably as a sigmoid.
        w2 = jax.nn.sigmoid(l2 - l1)
        w1 = 1.0 - w2
        g1 = (w1 * r1 + w2 * r2) / sx2
        g2 = w2 * r2 / sx2
        return jnp.stack([g1, g2], axis=1)

    def log_prior(theta):
        return log_norm_prior - 0.5 * jnp.sum(jnp.asarray(inv_pv, theta.dtype) * theta * theta)

    def sample_prior(key, shape=()):
        key = check_key(key)
        eps = jax.random.normal(key, as_shape(shape) + (2,))
        return jnp.asarray(np.sqrt(pv), eps.dtype) * eps

    def generate_data(key, n, theta=None):
        key = check_key(key)
        n = check_n(n)
        th = theta_true if theta is None else as_vector("theta", theta, 2)
        k_c, k_x = jax.random.split(key)
        second = jax.random.bernoulli(k_c, 0.5, (n, 1))
        eps = jax.random.normal(k_x, (n, 1))
        mean = th[0] + jnp.where(second, th[1], 0.0).astype(eps.dtype)
        return mean + np.sqrt(sx2) * eps

    metadata = {
        "family": "gaussian_mixture",
        "prior_var": tuple(float(v) for v in pv),
        "sigma_x_sq": sx2,
        "theta_true": theta_true,
        "generate_data": generate_data,
        "source": "002 §4, eqs. (32)-(33)",
    }
    return Model(
        log_likelihood=log_likelihood,
        log_prior=log_prior,
        dim=2,
        temperature=temperature,
        name=name or "gaussian-mixture-2d",
        sample_prior=sample_prior,
        exact_posterior=None,
        log_likelihood_batch=log_likelihood_batch,
        grad_log_likelihood_batch=grad_log_likelihood_batch,
        metadata=metadata,
        record_shape=(1,),
    )
