"""The one place where privacy noise is drawn, and the one definition of its scale.

Convention (both papers' reference code, and ``dpmcmc.accounting``): a released statistic is a
sum over the n records of terms each bounded in norm by ``bound`` (a log-likelihood ratio clipped
to ``[-b‖θ−θ'‖, b‖θ−θ'‖]``, or a gradient clipped to norm ``b_g``). Under the substitute
relation its sensitivity is ``2 * bound``, and Gaussian noise of standard deviation

    σ = 2 τ √n · bound

makes one release cost ``μ = sensitivity² / (2 σ²) = 1 / (2 τ² n)`` in the Gaussian (PLD / GDP
style) composition of 000 Thm 2.4 and 001 Thms 6, 12. ``τ`` is the thesis' parametrisation (001
§4.2); the paper's τ (000 §3) equals ours times √n.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator

import jax
import jax.numpy as jnp

Array = Any

__all__ = ["noise_std", "sensitivity", "release_mu", "gaussian_mechanism"]


def sensitivity(bound: Array) -> Array:
    """L2 sensitivity, under the substitute relation, of a sum of terms each of norm ≤ ``bound``.

    Parameters
    ----------
    bound : float or array
        Per-term bound (``b‖θ−θ'‖`` for log-likelihood ratios, ``b_g`` for gradients).

    Returns
    -------
    float or array
        ``2 * bound``.
    """
    return 2.0 * bound


def noise_std(tau: float, n: int, bound: Array) -> Array:
    """Standard deviation of the Gaussian noise for one release: ``σ = 2 τ √n · bound``.

    The single source of truth for the noise scale of DP penalty and DP-HMC.

    Parameters
    ----------
    tau : float
        Noise parameter τ > 0 (thesis convention: one release costs ``μ = 1/(2 τ² n)``).
    n : int
        Number of records in the data set.
    bound : float or array
        Per-term bound of the released sum (see :func:`sensitivity`).

    Returns
    -------
    float or array
        The noise standard deviation (not the variance).
    """
    return 2.0 * tau * math.sqrt(n) * bound


def release_mu(tau: float, n: int) -> float:
    """The μ charged per release: ``sensitivity(bound)² / (2 noise_std(tau, n, bound)²)``.

    Independent of ``bound``; equals ``1 / (2 τ² n)``.

    Parameters
    ----------
    tau : float
        Noise parameter τ > 0.
    n : int
        Number of records.

    Returns
    -------
    float
        μ of one Gaussian release.
    """
    return 1.0 / (2.0 * tau * tau * n)


def gaussian_mechanism(key: Array, value: Array, sigma: Array) -> Array:
    """Release ``value + N(0, sigma² I)``.

    Parameters
    ----------
    key : PRNG key
        Fresh key for this release (never reused).
    value : array
        The (clipped) statistic to release; its shape and floating dtype are kept.
    sigma : float or array
        Noise standard deviation, broadcast against ``value``; from :func:`noise_std`.

    Returns
    -------
    array
        The noisy statistic.
    """
    value = jnp.asarray(value)
    noise = jax.random.normal(key, value.shape, dtype=value.dtype)
    # 1.0 except inside the testing-only _miscalibrate; read at trace time.
    scale = _MISCALIBRATION["noise_scale"]
    if scale != 1.0:
        noise = scale * noise
    return value + jnp.asarray(sigma, dtype=value.dtype) * noise


# ---------------------------------------------------------------- testing-only miscalibration

# Read (at trace time) by gaussian_mechanism and by the clipping rules in _clip. Only
# _miscalibrate changes it; no public function, option or CLI flag reaches it.
_MISCALIBRATION = {"noise_scale": 1.0, "sensitivity_factor": 1.0}


@contextlib.contextmanager
def _miscalibrate(noise_scale: float = 1.0, sensitivity_factor: float = 1.0) -> Iterator[None]:
    """TESTING ONLY: make every private sampler traced inside the block deliberately wrong.

    Exists so that the empirical privacy audit (:mod:`dpmcmc.audit`) can show it has power: a
    sampler built and run inside the block must be flagged. Never use it in a real run.

    Parameters
    ----------
    noise_scale : float, default 1.0
        Multiplies the Gaussian noise that :func:`gaussian_mechanism` draws, while the σ that
        callers report (penalty correction, accountant) stays the claimed one.
    sensitivity_factor : float, default 1.0
        The fraction of the true sensitivity the noise accounts for: clipping (in
        :mod:`dpmcmc.samplers._clip`) uses ``bound / sensitivity_factor`` while the noise is
        still calibrated to ``bound``. ``0.5`` under-counts the sensitivity by a factor 2.

    Notes
    -----
    The settings are Python constants read while JAX traces, so they are baked into whatever is
    compiled inside the block. JAX's compilation caches are cleared on entry and on exit, so no
    function compiled inside leaks the setting out, and none compiled before leaks it in.
    """
    for name, value in (("noise_scale", noise_scale), ("sensitivity_factor", sensitivity_factor)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    saved = dict(_MISCALIBRATION)
    jax.clear_caches()
    _MISCALIBRATION.update(noise_scale=float(noise_scale), sensitivity_factor=float(sensitivity_factor))
    try:
        yield
    finally:
        _MISCALIBRATION.clear()
        _MISCALIBRATION.update(saved)
        jax.clear_caches()
