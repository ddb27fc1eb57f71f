"""Bayesian logistic regression.

Each record is a row ``(features..., label)`` of length ``dim + 1`` with the label in {0, 1};
``theta`` holds the ``dim`` coefficients (add a column of ones to the features for an
intercept)::

    theta ~ N(0, prior_var I),    y | f ~ Bernoulli(sigmoid(f^T theta)).

The per-example log-likelihood ``y z - softplus(z)``, ``z = f^T theta``, has gradient
``(y - sigmoid(z)) f``, so it is Lipschitz in theta with constant ``||f||``: for bounded features
the log-likelihood ratios are bounded without clipping (000 §2, citing Yildirim & Ermis). No
exact posterior sampler exists.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._common import as_shape, as_vector, check_dim, check_key, check_n, check_positive, check_temperature
from .base import Model

__all__ = ["logistic_regression"]


def logistic_regression(
    dim: int,
    *,
    prior_var: float = 1.0,
    temperature: float = 1.0,
    theta_true: Any = None,
    name: Optional[str] = None,
) -> Model:
    """Bayesian logistic regression as a :class:`Model`.

    Parameters
    ----------
    dim : int
        Number of coefficients (feature columns).
    prior_var : float, default 1
        Variance of the isotropic Gaussian prior.
    temperature : float, default 1
    theta_true : array (dim,), optional
        Coefficients used by the data generator; default ``linspace(-1, 1, dim)``.
    name : str, optional

    Notes
    -----
    ``metadata["generate_data"](key, n, theta=None)`` draws standard normal features and labels
    from the model; it returns rows ``(features, label)`` of width ``dim + 1``.
    """
    dim = check_dim(dim)
    prior_var = check_positive("prior_var", prior_var)
    temperature = check_temperature(temperature)
    if theta_true is None:
        theta_true = np.linspace(-1.0, 1.0, dim) if dim > 1 else np.ones(1)
    theta_true = as_vector("theta_true", theta_true, dim)
    log_norm_prior = float(-0.5 * dim * np.log(2.0 * np.pi * prior_var))

    def log_likelihood(theta, x):
        z = x[:dim] @ theta
        return x[dim] * z - jax.nn.softplus(z)

    def log_likelihood_batch(theta, data):
        z = data[:, :dim] @ theta
        return data[:, dim] * z - jax.nn.softplus(z)

    def grad_log_likelihood_batch(theta, data):
        feats = data[:, :dim]
        resid = data[:, dim] - jax.nn.sigmoid(feats @ theta)
        return resid[:, None] * feats

    def log_prior(theta):
        return log_norm_prior - 0.5 * jnp.sum(theta * theta) / prior_var

    def sample_prior(key, shape=()):
        key = check_key(key)
        return np.sqrt(prior_var) * jax.random.normal(key, as_shape(shape) + (dim,))

    def generate_data(key, n, theta=None):
        key = check_key(key)
        n = check_n(n)
        th = theta_true if theta is None else as_vector("theta", theta, dim)
        k_f, k_y = jax.random.split(key)
        feats = jax.random.normal(k_f, (n, dim))
        p = jax.nn.sigmoid(feats @ jnp.asarray(th, feats.dtype))
        y = jax.random.bernoulli(k_y, p).astype(feats.dtype)
        return jnp.concatenate([feats, y[:, None]], axis=1)

    metadata = {
        "family": "logistic_regression",
        "prior_var": prior_var,
        "theta_true": theta_true,
        "record_width": dim + 1,
        "generate_data": generate_data,
    }
    return Model(
        log_likelihood=log_likelihood,
        log_prior=log_prior,
        dim=dim,
        temperature=temperature,
        name=name or f"logistic-{dim}d",
        sample_prior=sample_prior,
        exact_posterior=None,
        log_likelihood_batch=log_likelihood_batch,
        grad_log_likelihood_batch=grad_log_likelihood_batch,
        metadata=metadata,
        record_shape=(dim + 1,),
    )
