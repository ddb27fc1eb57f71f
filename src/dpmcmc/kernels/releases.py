"""The accounted releases of the private samplers (each one Gaussian mechanism).

These functions are the only way DP penalty and DP-HMC read the data. Each returns the noisy,
UNTEMPERED statistic together with the noise standard deviation it used; callers multiply both
by the temperature T (tempering acts after clipping and after the noise, as in both papers'
reference code: ``T · (Σ_j clip(r_j) + ξ)`` and ``T · (Σ_j clip(∇ℓ_j) + ξ_g)``). The noise
standard deviation is read from the release event the accountant composes
(:func:`dpmcmc.accounting.events.gaussian_release`, the constructor the algorithms'
declarations use), so there is one formula for σ and μ. They are also the test hooks that show
the drawn noise has exactly the standard deviation the accountant charges for.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax.numpy as jnp

from dpmcmc.accounting.events import gaussian_release
from dpmcmc.records.layout import num_rows
from dpmcmc.kernels.mechanisms import NoiseSource, gaussian_mechanism
from dpmcmc.records.passes import clipped_grad_sum, clipped_llr_sum, clipped_llr_sum_cached

Array = Any

__all__ = ["NoisySum", "release_llr", "release_llr_cached", "release_grad"]


class NoisySum(NamedTuple):
    """One Gaussian release: the noisy value, its noise std, and a NON-private clip count."""

    value: Array
    sigma: Array
    clip_count: Array


def release_llr(key: Array, model, data: Array, theta: Array, theta_new: Array, tau: float,
                clip: float, *, block_size: Optional[int] = None,
                noise: Optional[NoiseSource] = None) -> NoisySum:
    """NoisySum ``Σ_j clip_c(ℓ_j(θ') − ℓ_j(θ)) + N(0, σ²)``, ``c = b‖θ−θ'‖``, ``σ = 2τ√n c``.

    Parameters
    ----------
    key : PRNG key
    model : Model
    data : array (n, ...)
    theta, theta_new : array (dim,)
    tau : float
        τ_l (thesis convention): one release costs μ = 1/(2 τ² n).
    clip : float
        b_l, the per-example log-likelihood-ratio bound per unit of ‖θ−θ'‖.
    block_size : int, optional
        See :mod:`dpmcmc.records.passes`.
    noise : NoiseSource, optional
        The kernel's noise source (default: ``jax.random``).

    Returns
    -------
    NoisySum
    """
    def ratio_pass(clip_to):
        total, count = clipped_llr_sum(model, data, theta, theta_new, clip_to, nan_to_bound=True,
                                       block_size=block_size)
        return total, count, None

    return _llr_release(key, data, theta, theta_new, tau, clip, noise, ratio_pass)[0]


def release_llr_cached(key: Array, model, data: Array, cache: Array, theta: Array,
                       theta_new: Array, tau: float, clip: float, *,
                       block_size: Optional[int] = None, noise: Optional[NoiseSource] = None
                       ) -> tuple[NoisySum, Array]:
    """:func:`release_llr` with ℓ_j(θ) read from the chunk-local ``cache``
    (``_passes.loglik_rows(model, data, θ)``): the same release, bit for bit, for one model
    evaluation per row instead of two.

    Returns
    -------
    release : NoisySum
    rows : array
        ℓ_j(θ') per row, laid out like ``cache``: the cache if the move is accepted. Computed
        from the raw data and NOT private (see :class:`~dpmcmc.kernels.types.ChunkCache`).
    """
    def ratio_pass(clip_to):
        return clipped_llr_sum_cached(model, data, cache, theta_new, clip_to, nan_to_bound=True,
                                      block_size=block_size)

    return _llr_release(key, data, theta, theta_new, tau, clip, noise, ratio_pass)


def _llr_release(key, data, theta, theta_new, tau, clip, noise, ratio_pass
                 ) -> tuple[NoisySum, Any]:
    """The one Gaussian mechanism of the log-likelihood ratio: bound, clipped pass
    (``ratio_pass(clip_to) -> (total, count, rows)``), noise. Returns the release and the
    pass's rows."""
    n = num_rows(data)
    dtype = jnp.result_type(theta, jnp.float32)
    bound = jnp.asarray(clip, dtype) * jnp.linalg.norm(theta_new - theta)
    clip_to = bound if noise is None else noise.clip_bound(bound)
    total, count, rows = ratio_pass(clip_to)
    sigma = gaussian_release("log-likelihood ratio", 1, tau, n).noise_std(bound)
    return NoisySum(gaussian_mechanism(key, total, sigma, noise), sigma, count), rows


def release_grad(key: Array, model, data: Array, theta: Array, tau_g: float, grad_clip: float, *,
                 method: str = "auto", block_size: Optional[int] = None,
                 grad_dtype: Optional[str] = None, noise: Optional[NoiseSource] = None) -> NoisySum:
    """NoisySum ``Σ_j clip_{b_g}(∇ℓ_j(θ)) + N(0, σ_g² I)`` with ``σ_g = 2 τ_g √n b_g``.

    Parameters
    ----------
    key : PRNG key
    model : Model
    data : array (n, ...) or PreparedData
    theta : array (dim,)
    tau_g : float
        τ_g: one release costs μ = 1/(2 τ_g² n).
    grad_clip : float
        b_g, the per-example gradient norm bound.
    method, block_size, grad_dtype
        See :mod:`dpmcmc.records.passes`: the per-example gradients may be computed in
        float32; the noise is float64 and the released sum float64.
    noise : NoiseSource, optional
        The kernel's noise source (default: ``jax.random``).

    Returns
    -------
    NoisySum
    """
    n = num_rows(data)
    dtype = jnp.result_type(theta, jnp.float32)
    bound = jnp.asarray(grad_clip, dtype)
    clip_to = bound if noise is None else noise.clip_bound(bound)
    total, count = clipped_grad_sum(model, data, theta, clip_to,
                                    method=method, block_size=block_size, grad_dtype=grad_dtype)
    sigma = gaussian_release("gradient", 1, tau_g, n, "tau_g").noise_std(bound)
    return NoisySum(gaussian_mechanism(key, total, sigma, noise), sigma, count)
