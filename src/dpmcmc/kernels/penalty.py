"""Metropolis–Hastings acceptance tests: exact, and with the penalty correction.

The penalty method (Ceperley & Dewing 1999; Yildirim & Ermis 2019; 001 §3.1, 000 §3): if the
log acceptance ratio is known only through ``λ̂ = λ + ξ`` with ``ξ ~ N(0, s²)`` and ``s``
symmetric in (θ, θ'), accepting with probability ``min(1, exp(λ̂ − s²/2))`` leaves the target
invariant. Here ``s`` is the standard deviation of the noise as it enters λ̂ (for a tempered
likelihood ``s = T σ``).
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

Array = Any

__all__ = ["mh_accept", "penalty_accept"]


def mh_accept(key: Array, log_ratio: Array) -> tuple[Array, Array]:
    """Accept with probability ``min(1, exp(log_ratio))``.

    Returns
    -------
    accepted : bool
        False whenever ``log_ratio`` is NaN (a NaN is never accepted); ``-inf`` rejects and
        ``+inf`` (leaving a state of zero density) accepts.
    nan : bool
        ``log_ratio`` is NaN: the caller reports a divergence.
    """
    log_u = jnp.log(jax.random.uniform(key, (), dtype=jnp.result_type(log_ratio, jnp.float32)))
    nan = jnp.isnan(log_ratio)
    return (~nan) & (log_u < log_ratio), nan


def penalty_accept(key: Array, noisy_log_ratio: Array, noise_sd: Array) -> tuple[Array, Array]:
    """Penalty-corrected test: accept with probability ``min(1, exp(λ̂ − noise_sd²/2))``.

    Parameters
    ----------
    key : PRNG key
    noisy_log_ratio : scalar
        λ̂: the log acceptance ratio containing the Gaussian privacy noise.
    noise_sd : scalar
        Standard deviation of that noise as it enters λ̂.

    Returns
    -------
    accepted, nan : bool
        As in :func:`mh_accept`.
    """
    return mh_accept(key, noisy_log_ratio - 0.5 * noise_sd * noise_sd)
