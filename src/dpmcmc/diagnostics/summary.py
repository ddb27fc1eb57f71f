"""Mean error and convergence diagnostics (R-hat, ESS) on released draws."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["mean_error", "rhat", "ess", "posterior_summary", "RHAT_WARN"]


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
    from dpmcmc.result import import_arviz

    az = import_arviz()

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
    from dpmcmc.result import import_arviz

    az = import_arviz()

    d = _as_chains(draws)
    out = az.ess(az.convert_to_dataset(d), method=method)
    res = np.asarray(out["x"].values, dtype=np.float64).reshape(d.shape[2])
    return np.where(np.isfinite(res), res, math.nan)


#: R-hat above this: the chains have not mixed (Vehtari et al. 2021 recommend 1.01 for final
#: results; 1.1 is the long-standing threshold below which draws are at least usable).
RHAT_WARN = 1.1


def posterior_summary(draws: Any, names: Any = None) -> tuple[str, list[str]]:
    """A plain-text table of released draws, one row per parameter in the given order, and
    warnings in plain words.

    Columns: mean, sd, the central 90 % interval (5 %, 95 %), the split rank R-hat and the bulk
    ESS of the released draws (ArviZ), each to 4 significant digits so that small coefficients
    (a coefficient per dollar) stay readable. Reads the released draws only.

    Parameters
    ----------
    draws : array (chains, draws, dim)
    names : sequence of str, optional
        One per parameter, in the order to print (default ``theta[0]``, ...).

    Returns
    -------
    (table, warnings)
        ``warnings`` says which parameters have R-hat above :data:`RHAT_WARN` (the chains have
        not converged: not a posterior sample). Independent draws (R-hat ≈ 1) give none.
    """
    d = np.asarray(draws, dtype=np.float64)
    if d.ndim != 3:
        raise ValueError(f"draws must have shape (chains, draws, dim), got {d.shape}")
    dim = d.shape[2]
    names = [f"theta[{j}]" for j in range(dim)] if names is None else [str(n) for n in names]
    flat = d.reshape(-1, dim)
    lo, hi = np.percentile(flat, [5.0, 95.0], axis=0)
    if d.shape[1] >= 4:
        r, e = rhat(d), ess(d)
    else:
        r = e = np.full(dim, math.nan)
    rows = [("", "mean", "sd", "5%", "95%", "r_hat", "ess_bulk")]
    for j, name in enumerate(names):
        rows.append((name, f"{flat[:, j].mean():.4g}", f"{flat[:, j].std(ddof=1):.4g}",
                     f"{lo[j]:.4g}", f"{hi[j]:.4g}", f"{r[j]:.3f}", f"{e[j]:.0f}"))
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    table = "\n".join("  ".join(cell.ljust(w) if k == 0 else cell.rjust(w)
                                for k, (cell, w) in enumerate(zip(row, widths))) for row in rows)
    warnings = []
    bad = [name for name, value in zip(names, r) if not value <= RHAT_WARN]
    if bad and d.shape[0] > 1 and d.shape[1] >= 4:
        warnings.append(f"R-hat above {RHAT_WARN} for {', '.join(bad)}: the chains have not "
                        "converged, so these draws are not a sample of the posterior; do not report "
                        "them as one (run longer, with a larger budget, or use the default algorithm)")
    return table, warnings
