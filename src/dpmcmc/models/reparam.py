"""An affine reparametrisation of a model: θ = shift + chol · z.

A sampler run on the returned model works in the coordinates ``z``; its draws map back by
:func:`to_theta`. With ``shift`` and ``chol`` from a released Gaussian approximation of the
posterior (``chol chol ᵀ`` its covariance), ``z`` is whitened: a random-walk proposal of
identity covariance in ``z`` is one of covariance ``chol cholᵀ`` in θ, DP-HMC's unit mass in
``z`` a dense mass ``(chol cholᵀ)⁻¹`` in θ, and a clip bound b‖z′ − z‖ on the log-likelihood
ratio a bound b‖θ′ − θ‖ in the metric of the approximation's precision. Both matrices must be
public (data-independent, or functions of released values): they enter every compiled program
as constants. The Jacobian of the map is constant, so the posterior of ``z`` is the posterior of
θ pushed through the map; no density correction is needed.
"""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from .base import Model

__all__ = ["affine", "to_theta"]


def affine(model: Model, shift: Any, chol: Any) -> Model:
    """``model`` in the coordinates ``z`` of ``θ = shift + chol · z``.

    Parameters
    ----------
    model : Model
    shift : array (dim,)
    chol : array (dim, dim)
        Invertible (a Cholesky factor of a covariance, say).

    Returns
    -------
    Model
        Same dimension, temperature and record shape; ``log_likelihood(z, x) =
        model.log_likelihood(shift + chol z, x)``, ``log_prior(z) = model.log_prior(shift +
        chol z)``; the vectorised functions are wrapped when the model has them (the gradient by
        the chain rule, ``∇_z = cholᵀ ∇_θ``). No prior sampler and no exact posterior.
    """
    shift = np.asarray(shift, dtype=np.float64).reshape(model.dim)
    chol = np.asarray(chol, dtype=np.float64).reshape(model.dim, model.dim)
    if not (np.all(np.isfinite(shift)) and np.all(np.isfinite(chol))):
        raise ValueError("shift and chol must be finite")
    if abs(np.linalg.det(chol)) == 0.0:
        raise ValueError("chol must be invertible")
    ll, lp = model.log_likelihood, model.log_prior

    def theta_of(z):
        z = jnp.asarray(z)
        return jnp.asarray(shift, z.dtype) + jnp.asarray(chol, z.dtype) @ z

    def log_likelihood(z, x):
        return ll(theta_of(z), x)

    def log_prior(z):
        return lp(theta_of(z))

    batch = grad_batch = None
    if model.log_likelihood_batch is not None:
        lb = model.log_likelihood_batch

        def batch(z, data):
            return lb(theta_of(z), data)
    if model.grad_log_likelihood_batch is not None:
        gb = model.grad_log_likelihood_batch

        def grad_batch(z, data):
            return gb(theta_of(z), data) @ jnp.asarray(chol, z.dtype)
    return Model(log_likelihood, log_prior, model.dim, temperature=model.temperature,
                 name=f"{model.name} (affine)", log_likelihood_batch=batch,
                 grad_log_likelihood_batch=grad_batch, record_shape=model.record_shape,
                 param_names=None, metadata={"shift": shift, "chol": chol})


def to_theta(reparametrised: Model, z: Any) -> np.ndarray:
    """Map draws ``z`` (..., dim) of a model from :func:`affine` back to θ."""
    shift, chol = reparametrised.metadata["shift"], reparametrised.metadata["chol"]
    return shift + np.asarray(z, dtype=np.float64) @ chol.T
