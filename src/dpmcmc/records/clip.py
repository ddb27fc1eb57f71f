"""Per-example clipping rules, written so that every clipped term respects its bound.

A clipped term must be bounded by the clip bound whatever the record is, since the noise
is calibrated to that bound. Non-finite per-example values therefore never reach a private sum:
a NaN log-likelihood ratio becomes ``-bound`` (as if the proposal had log-likelihood −∞ for that
record) and a non-finite gradient becomes zero. Both count as clipped.

The bound is the caller's: a sampler passes ``noise.clip_bound(bound)`` of its kernel's
:class:`~dpmcmc.kernels.mechanisms.NoiseSource`, which is ``bound`` itself except in the
privacy audit's deliberately miscalibrated kernels.
"""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp

Array = Any

__all__ = ["clip_ratios", "clip_gradients"]


def clip_ratios(r: Array, bound: Array) -> tuple[Array, Array]:
    """Clip per-example log-likelihood ratios to ``[-bound, bound]``.

    Parameters
    ----------
    r : array (m,)
        Per-example log-likelihood ratios; may contain ±inf or NaN.
    bound : float
        Non-negative clip bound (``b‖θ−θ'‖``).

    Returns
    -------
    clipped : array (m,)
        Every entry lies in ``[-bound, bound]``; NaN entries are set to ``-bound``.
    was_clipped : bool array (m,)
        True where ``|r| > bound`` or ``r`` is NaN.
    """
    nan = jnp.isnan(r)
    clipped = jnp.where(nan, -bound, jnp.clip(r, -bound, bound))
    return clipped, nan | (jnp.abs(r) > bound)


def clip_gradients(g: Array, bound: Array) -> tuple[Array, Array]:
    """Scale per-example gradients to L2 norm at most ``bound``.

    Parameters
    ----------
    g : array (m, d)
        Per-example gradients; rows may be non-finite.
    bound : float
        Positive clip bound ``b_g``.

    Returns
    -------
    clipped : array (m, d)
        ``g_j · min(1, bound/‖g_j‖)``; rows with a non-finite entry become zero.
    was_clipped : bool array (m,)
        True where ``‖g_j‖ > bound`` or the row is non-finite.
    """
    sq = jnp.sum(g * g, axis=-1)
    finite = jnp.isfinite(sq)
    # Where the norm is zero or not finite the scale is irrelevant; keep the division finite.
    safe_sq = jnp.where(finite & (sq > 0), sq, 1.0)
    scale = jnp.where(finite, jnp.minimum(1.0, bound / jnp.sqrt(safe_sq)), 0.0)
    clipped = jnp.where(finite[..., None], g, 0.0) * scale[..., None]
    return clipped, (~finite) | (sq > bound * bound)
