"""Mean error and convergence diagnostics (R-hat, ESS) on released draws."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["mean_error", "rhat", "ess"]


def mean_error(draws: Any, true_mean: Any) -> float:
    """Euclidean distance between the mean of ``draws`` and the true posterior mean.

    The papers' "mean error" (000 §4: distance between the mean of the chains and the true
    posterior sample mean; 001 §6.3: distance of the circle sample mean from the origin).

    Parameters
    ----------
    draws : array (..., dim)
        Draws with any leading axes (e.g. ``(chains, draws, dim)``); all are pooled.
    true_mean : array (dim,) or (k, dim)
        The exact mean, or a reference posterior sample whose mean is used.

    Returns
    -------
    float
    """
    d = np.asarray(draws, dtype=np.float64)
    if d.ndim < 1 or d.size == 0:
        raise ValueError("draws must be a non-empty array of shape (..., dim)")
    if d.ndim == 1:
        d = d[:, None]
    ref = np.asarray(true_mean, dtype=np.float64)
    if ref.ndim == 2:
        ref = ref.mean(axis=0)
    ref = np.atleast_1d(ref)
    if ref.ndim != 1 or ref.shape[0] != d.shape[-1]:
        raise ValueError(f"true_mean must have shape ({d.shape[-1]},) or (k, {d.shape[-1]}), got "
                         f"{np.shape(true_mean)}")
    return float(np.linalg.norm(d.reshape(-1, d.shape[-1]).mean(axis=0) - ref))


def _as_chains(draws: Any) -> np.ndarray:
    d = np.asarray(draws, dtype=np.float64)
    if d.ndim == 2:
        d = d[:, :, None]
    if d.ndim != 3:
        raise ValueError(f"draws must have shape (chains, draws, dim) or (chains, draws), got {d.shape}")
    if d.shape[1] < 4:
        raise ValueError(f"draws must have at least 4 draws per chain, got {d.shape[1]}")
    return d


def rhat(draws: Any, method: str = "rank") -> np.ndarray:
    """Split R-hat per dimension via ArviZ.

    Parameters
    ----------
    draws : array (chains, draws, dim) or (chains, draws)
    method : str, default "rank"
        ArviZ's method ("rank" = rank-normalised split R-hat of Vehtari et al. 2021, "split",
        "folded", "z_scale", "identity").

    Returns
    -------
    ndarray (dim,)
    """
    import arviz as az

    d = _as_chains(draws)
    out = az.rhat(az.convert_to_dataset(d), method=method)
    return np.asarray(out["x"].values, dtype=np.float64).reshape(d.shape[2])


def ess(draws: Any, method: str = "bulk") -> np.ndarray:
    """Effective sample size per dimension via ArviZ.

    Parameters
    ----------
    draws : array (chains, draws, dim) or (chains, draws)
    method : str, default "bulk"
        ArviZ's method ("bulk", "tail", "mean", "sd", ...).

    Returns
    -------
    ndarray (dim,)
    """
    import arviz as az

    d = _as_chains(draws)
    out = az.ess(az.convert_to_dataset(d), method=method)
    res = np.asarray(out["x"].values, dtype=np.float64).reshape(d.shape[2])
    return np.where(np.isfinite(res), res, math.nan)
