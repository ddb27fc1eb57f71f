"""Deliberately wrong pieces of the private samplers: TESTING ONLY.

The tests (and the audit) show they have power by running a sampler with one shared piece
swapped for a wrong one. No public builder takes a flag for this: the variant kernel is built
from the algorithm module's tapped core (``tapped_*``), passing one of these pieces, e.g.
``tapped_dp_penalty(..., accept=uncorrected_accept).kernel()``. The other miscalibrations (noise
scaled down, sensitivity under-counted) are a :class:`~dpmcmc.kernels.mechanisms.NoiseSource`
with ``noise_scale`` / ``sensitivity_factor`` (:func:`dpmcmc.audit.audit`'s ``_miscalibration``).

Never use any of them in a real run.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp

from dpmcmc.kernels.mechanisms import NoiseSource
from dpmcmc.kernels.penalty import mh_accept

Array = Any

__all__ = ["uncorrected_accept", "uncorrected_statistic", "noiseless_mechanism",
           "logistic_correction"]


def uncorrected_accept(key: Array, noisy_log_ratio: Array, noise_sd: Array) -> tuple[Array, Array]:
    """The penalty test without its ``−noise_sd²/2`` term (DP penalty, DP-HMC ``accept=``).

    Plain MH on the noisy log ratio: the chain over-accepts and is too wide.
    """
    return mh_accept(key, noisy_log_ratio)


def uncorrected_statistic(r: Array, k: Array) -> Array:
    """``k Σ r``: the minibatch penalty statistic without ``−σ_b²/2`` (``statistic=``)."""
    return k * jnp.sum(r)


def noiseless_mechanism(key: Array, value: Array, sigma: Array,
                        noise: Optional[NoiseSource] = None) -> Array:
    """Release ``value`` itself (DP Barker ``mechanism=``): no privacy at all.

    With :func:`logistic_correction` it gives the exact Barker test, the limit the privacy noise
    approximates; alone it shows the exact means the audit's design assumes.
    """
    return value


def logistic_correction(key: Array, dtype: Any, noise: Optional[NoiseSource] = None) -> Array:
    """An exact standard logistic draw in place of ``X_corr`` (DP Barker ``correction=``)."""
    return jax.random.logistic(key, (), dtype=dtype)
