"""The correction distribution X_corr of the subsampled Barker test (002 §2.3, §3.3, App. D).

The Barker test accepts a proposal with probability ``1 / (1 + exp(-Δ))``, i.e. it checks
``Δ + X_log > 0`` with ``X_log`` standard logistic. The DP Barker sampler only sees ``Δ`` through
a noisy minibatch estimate whose total noise (subsampling error plus privacy noise, topped up
to a fixed variance) is ``N(0, C)``. A symmetric correction variable ``X_corr`` with
``N(0, C) + X_corr ≈ X_log`` in distribution then makes ``Δ + N(0, C) + X_corr > 0`` accept
with approximately the logistic probability. No exact ``X_corr`` exists for ``C > 0`` (the
characteristic function ``πt / sinh(πt) · exp(C t² / 2)`` is unbounded), so an approximation
is fitted.

Form of the approximation
-------------------------
``X_corr`` is a symmetric Gaussian mixture stored as ``K`` *pairs* ``(w_k, m_k, s_k)``, pair
``k`` standing for ``w_k/2 · N(m_k, s_k²) + w_k/2 · N(-m_k, s_k²)`` (``m_k ≥ 0``, ``s_k > 0``,
``Σ w_k = 1``). Then ``Y = N(0, C) + X_corr`` is the mixture of ``N(±m_k, C + s_k²)`` with a
closed-form CDF, which is how the errors below are measured exactly (to grid resolution).

Fit
---
With the component shapes fixed on a dictionary (means on a grid, one narrow width ``s``),
``F_Y`` is linear in the weights, and both error measures are linear constraints:

* sup-CDF: ``|F_Y(x) − S(x)| ≤ λ · 1.5e-3``;
* log-odds: ``|logit F_Y(x) − x| ≤ ε`` is ``S(x − ε) ≤ F_Y(x) ≤ S(x + ε)``, linearised in
  ``ε = λ · 1e-2`` as ``|Q_Y(x) / S̄(x) − 1| ≤ λ · 1e-2 · S(x)`` with ``Q_Y = 1 − F_Y`` and
  ``S̄ = 1 − S``, which keeps the far-tail rows well scaled (relative error of a tail
  probability near ``e^{-x}``).

Minimising ``λ`` is a linear programme (HiGHS via :func:`scipy.optimize.linprog`), i.e. the
minimax of ``max(sup_cdf / 1.5e-3, log_odds / 1e-2)`` over the dictionary. A second LP refines
the means to a 0.01 grid around the support; adjacent atoms are then merged by matching their
first two moments. The log-odds criterion is enforced over ``|Δ| ≤ 20`` (not only the
``|Δ| ≤ 10`` of the targets): beyond it the acceptance probability is below ``2e-9``. The fit
is deterministic and takes a few seconds; :func:`correction_mixture` caches it per ``C`` and
loads shipped fits (``dpmcmc/data/barker_correction_C*.json``, currently ``C = 2``) instead of
refitting.

The best any distribution can do at ``C = 2`` is a sup-CDF error of about ``5.88e-4`` (the same
LP with point masses and no log-odds constraint) and a log-odds error over ``|Δ| ≤ 10`` of
about ``6.4e-3``; the two cannot be reached together, and the fit balances them.
"""
from __future__ import annotations

import functools
import json
import math
import numbers
import warnings
from importlib import resources
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import linprog, minimize_scalar
from scipy.special import expit, ndtr

__all__ = [
    "LOGISTIC_VARIANCE",
    "SUP_CDF_TARGET",
    "LOG_ODDS_TARGET",
    "LOG_ODDS_RANGE",
    "CorrectionMixture",
    "validate_correction_variance",
    "fit_correction",
    "correction_mixture",
    "correction_error",
    "acceptance_probability",
    "sample_correction",
]

LOGISTIC_VARIANCE: float = math.pi**2 / 3.0
"""Variance of the standard logistic distribution, the upper bound on ``C``."""

SUP_CDF_TARGET: float = 1.5e-3
"""Target for ``sup_x |F_{N(0,C)+X_corr}(x) − S(x)|``."""

LOG_ODDS_TARGET: float = 1e-2
"""Target for ``sup_{|Δ| ≤ 10} |logit P(accept | Δ) − Δ|``."""

LOG_ODDS_RANGE: float = 10.0
"""``|Δ|`` range of the log-odds error measure reported by :func:`correction_error`."""

_FIT_LOG_ODDS_RANGE = 20.0
_COMPONENT_STD = 0.1
_COARSE_MEAN_STEP = 0.1
_FINE_MEAN_STEP = 0.01
# Coarse LP objective above which the means are refined (below it the fit is far inside the
# targets and refining only costs time).
_REFINE_ABOVE = 0.1
_DATA_PACKAGE = "dpmcmc"
_DATA_DIR = "data"


class CorrectionMixture(NamedTuple):
    """Symmetric Gaussian mixture for ``X_corr`` at noise variance ``C``.

    Pair ``k`` is ``weights[k]/2 · N(means[k], stds[k]²) + weights[k]/2 · N(−means[k], stds[k]²)``.

    Attributes
    ----------
    C : float
        Variance of the Gaussian noise the mixture corrects.
    weights : numpy.ndarray
        ``(K,)`` pair weights, non-negative, summing to one.
    means : numpy.ndarray
        ``(K,)`` non-negative pair means.
    stds : numpy.ndarray
        ``(K,)`` positive component standard deviations.
    """

    C: float
    weights: np.ndarray
    means: np.ndarray
    stds: np.ndarray

    def components(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Expand the pairs into ``2K`` plain mixture components.

        Returns
        -------
        weights, means, stds : numpy.ndarray
            ``(2K,)`` arrays: the first ``K`` components at ``+means``, the last ``K`` at
            ``−means``, each with half the pair weight.
        """
        w = 0.5 * self.weights
        return (np.concatenate([w, w]), np.concatenate([self.means, -self.means]),
                np.concatenate([self.stds, self.stds]))

    def variance(self) -> float:
        """Variance of ``X_corr`` (``π²/3 − C`` for an exact correction)."""
        return float(np.sum(self.weights * (self.means**2 + self.stds**2)))

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form of the parameters."""
        return {"C": float(self.C), "weights": [float(v) for v in self.weights],
                "means": [float(v) for v in self.means], "stds": [float(v) for v in self.stds]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CorrectionMixture:
        """Inverse of :meth:`to_dict` (extra keys are ignored)."""
        w = np.asarray(d["weights"], dtype=np.float64)
        return cls(float(d["C"]), w / w.sum(), np.asarray(d["means"], dtype=np.float64),
                   np.asarray(d["stds"], dtype=np.float64))


def validate_correction_variance(C: Any) -> float:
    """Check the Barker noise variance ``C`` and return it as a float.

    Parameters
    ----------
    C : float
        Total Gaussian noise variance of the subsampled Barker test.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``C`` is not a real number.
    ValueError
        If ``C`` is not finite or not in ``(0, π²/3)``.
    """
    if isinstance(C, bool) or not isinstance(C, numbers.Real):
        raise TypeError(f"C must be a real number, got {type(C).__name__}")
    c = float(C)
    if not math.isfinite(c) or c <= 0.0 or c >= LOGISTIC_VARIANCE:
        raise ValueError(
            f"C must satisfy 0 < C < pi^2/3 = {LOGISTIC_VARIANCE:.6f} (the logistic variance), "
            f"got C={C!r}")
    return c


# --------------------------------------------------------------------------------------------
# Closed-form distribution of Y = N(0, C) + X_corr
# --------------------------------------------------------------------------------------------

def _pair_survival(x: np.ndarray, mix: CorrectionMixture) -> np.ndarray:
    """``P(Y_k > x)`` for each pair ``k``: shape ``x.shape + (K,)``."""
    sig = np.sqrt(mix.C + mix.stds**2)
    x = np.asarray(x, dtype=np.float64)[..., None]
    # ndtr(-z) keeps full relative precision of far-tail probabilities.
    return 0.5 * (ndtr(-(x - mix.means) / sig) + ndtr(-(x + mix.means) / sig))


def _survival(x: np.ndarray, mix: CorrectionMixture) -> np.ndarray:
    return _pair_survival(x, mix) @ mix.weights


def acceptance_probability(delta: Any, C: float = 2.0) -> np.ndarray:
    """Acceptance probability of the corrected test, ``P(Δ + N(0, C) + X_corr > 0)``.

    By symmetry of ``Y = N(0, C) + X_corr`` this is ``F_Y(Δ)``; an exact correction would give
    the Barker probability ``1 / (1 + exp(−Δ))``. Evaluated in closed form in float64.

    Parameters
    ----------
    delta : array_like
        Log acceptance ratios ``Δ``.
    C : float, default 2.0
        Noise variance, ``0 < C < π²/3``.

    Returns
    -------
    numpy.ndarray
        Probabilities, same shape as ``delta``.
    """
    mix = correction_mixture(C)
    return _survival(-np.asarray(delta, dtype=np.float64), mix)


def _cdf_error(x: np.ndarray, mix: CorrectionMixture) -> np.ndarray:
    """``F_Y(x) − S(x)`` (written as a difference of survival functions for precision)."""
    return expit(-x) - _survival(x, mix)


def _log_odds_error(x: np.ndarray, mix: CorrectionMixture) -> np.ndarray:
    """``logit F_Y(x) − x``, from the survival function so the tail keeps relative precision."""
    q = _survival(x, mix)
    return np.log1p(-q) - np.log(q) - x


def _sup_abs(fun, x: np.ndarray) -> float:
    """Sup of ``|fun|`` over ``[x[0], x[-1]]``: grid maximum polished by a bounded 1-d search."""
    vals = np.abs(fun(x))
    i = int(np.argmax(vals))
    best = float(vals[i])
    lo, hi = x[max(i - 1, 0)], x[min(i + 1, len(x) - 1)]
    if hi > lo:
        res = minimize_scalar(lambda t: -abs(float(fun(np.array([t]))[0])), bounds=(lo, hi),
                              method="bounded", options={"xatol": 1e-10})
        best = max(best, -float(res.fun))
    return best


def _measure(mix: CorrectionMixture, max_abs_delta: float = LOG_ODDS_RANGE,
             step: float = 1e-3) -> dict[str, float]:
    # Y and the logistic are both symmetric, so |F_Y − S| and |logit F_Y − x| are even in x.
    sig_max = float(np.sqrt(mix.C + np.max(mix.stds) ** 2))
    x_hi = max(float(np.max(mix.means)) + 40.0 * sig_max, 60.0)
    x = np.concatenate([np.arange(0.0, 30.0, step), np.arange(30.0, x_hi, 0.05)])
    sup_cdf = _sup_abs(lambda t: _cdf_error(t, mix), x)
    xl = np.linspace(0.0, max_abs_delta, int(round(max_abs_delta / step)) + 1)
    log_odds = _sup_abs(lambda t: _log_odds_error(t, mix), xl)
    return {"sup_cdf": sup_cdf, "log_odds": log_odds}


# --------------------------------------------------------------------------------------------
# Fitting (linear programme over a dictionary of narrow symmetric pairs)
# --------------------------------------------------------------------------------------------

def _solve_lp(C: float, means: np.ndarray, std: float, x_lo: np.ndarray,
              x_sup: np.ndarray) -> tuple[np.ndarray, float]:
    """Minimise λ over pair weights; ``x_lo`` carries both constraints, ``x_sup`` only sup-CDF."""
    x_all = np.concatenate([x_lo, x_sup])
    dict_mix = CorrectionMixture(C, np.ones_like(means), means, np.full_like(means, std))
    # Columns are scaled by the e^{-m} decay the tail weights must have, so that the
    # relative-tail rows stay O(1) far out instead of spanning e^{±20}.
    col = np.exp(-means)
    q = _pair_survival(x_all, dict_mix) * col
    sbar = expit(-x_all)
    n_lo = len(x_lo)
    q_rel = q[:n_lo] / sbar[:n_lo, None]
    tol_rel = (LOG_ODDS_TARGET * expit(x_lo))[:, None]
    ones = np.full((len(x_all), 1), SUP_CDF_TARGET)
    a_ub = np.vstack([np.hstack([q, -ones]), np.hstack([-q, -ones]),
                      np.hstack([q_rel, -tol_rel]), np.hstack([-q_rel, -tol_rel])])
    b_ub = np.concatenate([sbar, -sbar, np.ones(n_lo), -np.ones(n_lo)])
    a_eq = np.concatenate([col, [0.0]])[None, :]
    cost = np.zeros(len(means) + 1)
    cost[-1] = 1.0
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=[1.0], bounds=(0.0, None),
                  method="highs")
    if res.status != 0:
        raise RuntimeError(f"correction-distribution LP failed for C={C}: {res.message}")
    return res.x[:-1] * col, float(res.x[-1])


def _merge_adjacent(w: np.ndarray, m: np.ndarray, s: float,
                    gap: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge runs of atoms closer than ``gap`` into one component with the same two moments."""
    order = np.argsort(m)
    w, m = w[order], m[order]
    groups: list[list[int]] = []
    for i in range(len(m)):
        if groups and m[i] - m[groups[-1][-1]] <= gap:
            groups[-1].append(i)
        else:
            groups.append([i])
    ws, ms, ss = [], [], []
    for g in groups:
        wg = w[g].sum()
        mg = float(np.dot(w[g], m[g]) / wg)
        vg = float(np.dot(w[g], (m[g] - mg) ** 2) / wg)
        ws.append(wg)
        ms.append(mg)
        ss.append(math.sqrt(s**2 + vg))
    wa = np.array(ws)
    return wa / wa.sum(), np.array(ms), np.array(ss)


def fit_correction(C: float, *, log_odds_range: float = _FIT_LOG_ODDS_RANGE,
                   component_std: float = _COMPONENT_STD) -> tuple[CorrectionMixture, dict[str, Any]]:
    """Fit the symmetric Gaussian-mixture correction ``X_corr`` for noise variance ``C``.

    Deterministic (an LP solved by HiGHS); takes a few seconds. Prefer
    :func:`correction_mixture`, which caches fits and uses the shipped ones.

    Parameters
    ----------
    C : float
        Noise variance, ``0 < C < π²/3``.
    log_odds_range : float, default 20.0
        The log-odds constraint is imposed over ``|Δ| ≤ log_odds_range`` (at least 10).
    component_std : float, default 0.1
        Standard deviation of the dictionary components (kept positive so that ``X_corr`` has
        a density).

    Returns
    -------
    mixture : CorrectionMixture
    info : dict
        ``lp_objective`` (the minimax ratio ``max(sup/1.5e-3, log_odds/1e-2)`` of the LP,
        linearised), the measured ``sup_cdf`` and ``log_odds`` (over ``|Δ| ≤ 10``),
        ``log_odds_fit_range`` (the measured log-odds error over ``|Δ| ≤ log_odds_range``) and
        the fit settings.
    """
    C = validate_correction_variance(C)
    if not (isinstance(log_odds_range, numbers.Real) and LOG_ODDS_RANGE <= log_odds_range <= 30):
        raise ValueError(f"log_odds_range must be in [10, 30], got log_odds_range={log_odds_range!r}")
    if not (isinstance(component_std, numbers.Real) and 0 < component_std <= 1):
        raise ValueError(f"component_std must be in (0, 1], got component_std={component_std!r}")
    L = float(log_odds_range)
    s = float(component_std)
    sig = math.sqrt(C + s**2)
    # Atoms beyond L + a few σ cannot affect the constrained range.
    m_max = L + 4.0 * sig
    x_sup = np.arange(L + 0.25, m_max + 12.0 * sig, 0.25)

    means = np.arange(0.0, m_max + 1e-9, _COARSE_MEAN_STEP)
    w, lam1 = _solve_lp(C, means, s, np.arange(0.0, L + 1e-9, 0.05), x_sup)

    lam2 = lam1
    if lam1 > _REFINE_ABOVE:
        support = means[w > 1e-14]
        offsets = np.arange(-_COARSE_MEAN_STEP, _COARSE_MEAN_STEP + 1e-9, _FINE_MEAN_STEP)
        means = np.unique(np.round(np.clip((support[:, None] + offsets).ravel(), 0.0, None), 9))
        w, lam2 = _solve_lp(C, means, s, np.arange(0.0, L + 1e-9, 0.01), x_sup)
        # Adjacent fine-grid atoms stand for one atom between grid points; the moment-matched
        # merge changes F_Y only at third order in the 0.01 spacing.
        gap = 1.5 * _FINE_MEAN_STEP
    else:
        # Far inside the targets already (small C): keep the coarse solution as it is.
        gap = 0.0
    keep = w > 1e-14
    wm, mm, sm = _merge_adjacent(w[keep], means[keep], s, gap=gap)
    mix = CorrectionMixture(C, wm, mm, sm)
    errs = _measure(mix)
    info = {
        "lp_objective_coarse": lam1,
        "lp_objective": lam2,
        "sup_cdf": errs["sup_cdf"],
        "log_odds": errs["log_odds"],
        "log_odds_fit_range": _measure(mix, max_abs_delta=L)["log_odds"],
        "settings": {"log_odds_range": L, "component_std": s,
                     "coarse_mean_step": _COARSE_MEAN_STEP, "fine_mean_step": _FINE_MEAN_STEP,
                     "mean_max": m_max, "sup_cdf_target": SUP_CDF_TARGET,
                     "log_odds_target": LOG_ODDS_TARGET},
    }
    return mix, info


def _shipped_name(C: float) -> str:
    return f"barker_correction_C{C:g}.json"


def _load_shipped(C: float) -> CorrectionMixture | None:
    res = resources.files(_DATA_PACKAGE).joinpath(_DATA_DIR, _shipped_name(C))
    if not res.is_file():
        return None
    d = json.loads(res.read_text())
    if float(d["C"]) != C:
        return None
    return CorrectionMixture.from_dict(d)


@functools.lru_cache(maxsize=64)
def _cached_mixture(C: float) -> CorrectionMixture:
    mix = _load_shipped(C)
    if mix is None:
        mix, info = fit_correction(C)
        if info["sup_cdf"] > SUP_CDF_TARGET or info["log_odds"] > LOG_ODDS_TARGET:
            warnings.warn(
                f"the Barker correction for C={C} reaches sup-CDF error {info['sup_cdf']:.3g} "
                f"and log-odds error {info['log_odds']:.3g} (targets {SUP_CDF_TARGET:g}, "
                f"{LOG_ODDS_TARGET:g}); the test is further from the exact Barker test",
                stacklevel=3)
    # The cached object is shared by every caller: freeze its arrays.
    for arr in (mix.weights, mix.means, mix.stds):
        arr.flags.writeable = False
    return mix


def correction_mixture(C: float = 2.0) -> CorrectionMixture:
    """Mixture parameters of ``X_corr`` for noise variance ``C``.

    Loads the shipped fit when one exists for exactly this ``C`` (``C = 2``), otherwise fits
    on demand with :func:`fit_correction` (a few seconds) and caches the result; warns if an
    on-demand fit misses the targets (as it does for ``C`` close to ``π²/3``).

    Parameters
    ----------
    C : float, default 2.0
        Noise variance, ``0 < C < π²/3``.

    Returns
    -------
    CorrectionMixture
    """
    return _cached_mixture(validate_correction_variance(C))


def correction_error(C: float = 2.0) -> dict[str, float]:
    """Accuracy of ``N(0, C) + X_corr`` as a standard logistic, by exact convolution.

    Parameters
    ----------
    C : float, default 2.0
        Noise variance, ``0 < C < π²/3``.

    Returns
    -------
    dict
        ``sup_cdf``: ``sup_x |F_{N(0,C)+X_corr}(x) − 1/(1+e^{−x})|``;
        ``log_odds``: ``sup_{|Δ| ≤ 10} |logit P(accept | Δ) − Δ|`` with
        ``P(accept | Δ) = P(Δ + N(0,C) + X_corr > 0)``.
    """
    return _measure(correction_mixture(C))


# --------------------------------------------------------------------------------------------
# Sampling (JAX)
# --------------------------------------------------------------------------------------------

def sample_correction(key: Any, shape: tuple[int, ...] = (), C: float = 2.0,
                      dtype: Any = None, noise: Any = None) -> Any:
    """Draw ``X_corr`` for noise variance ``C``.

    Pure and jit-able for a fixed (static, Python) ``C``: the mixture parameters enter as
    constants. A pair is drawn by inverting the cumulative weights, then a random sign and the
    Gaussian, so the draws are symmetric by construction.

    Parameters
    ----------
    key : jax.Array
        PRNG key.
    shape : tuple of int, default ()
        Shape of the output.
    C : float, default 2.0
        Noise variance, ``0 < C < π²/3``; must be a Python number, not a traced value.
    dtype : optional
        Floating dtype; default the JAX default float (float64 with ``jax_enable_x64``). In
        float32 the smallest tail weights (below ~1e-7) are resolved only coarsely.
    noise : NoiseSource, optional
        The kernel's noise source (default ``jax.random``); the uniforms and the Gaussian are
        drawn from it, so a secure source keeps the correction secret.

    Returns
    -------
    jax.Array
        Draws of shape ``shape``.
    """
    mix = correction_mixture(C)
    if dtype is None:
        dtype = jnp.result_type(float)
    dtype = jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating dtype, got dtype={dtype}")
    shape = tuple(int(d) for d in shape)
    from dpmcmc.kernels.mechanisms import DEFAULT_NOISE

    # The noise source is an argument (its secret a traced leaf), so one cached program serves
    # every source of the same kind; under an outer jit the call is inlined.
    return _sample_mixture_jit(key, np.cumsum(mix.weights), mix.means, mix.stds, shape, dtype,
                               DEFAULT_NOISE if noise is None else noise)


def _sample_mixture(key, cum_weights, means, stds, shape, dtype, noise):
    cum = jnp.asarray(cum_weights, dtype)
    means = jnp.asarray(means, dtype)
    stds = jnp.asarray(stds, dtype)
    # Drawn through the privacy-noise generators so that secure mode (ChaCha20 under the run's
    # secret) covers the correction too; in the default mode they are jax.random's.
    from dpmcmc.kernels.mechanisms import noise_normal, noise_uniform

    k_pair, k_sign, k_norm = jax.random.split(key, 3)
    u = noise_uniform(k_pair, shape, dtype, noise) * cum[-1]
    idx = jnp.minimum(jnp.searchsorted(cum, u, side="right"), cum.shape[0] - 1)
    sign = jnp.where(noise_uniform(k_sign, shape, dtype, noise) < 0.5, 1.0, -1.0).astype(dtype)
    z = noise_normal(k_norm, shape, dtype, noise)
    return sign * means[idx] + stds[idx] * z


# One compiled program per (shape, dtype) for calls outside a run; inlined under an outer jit.
_sample_mixture_jit = jax.jit(_sample_mixture, static_argnums=(4, 5))
