"""From the outcomes of a distinguishing test to a lower bound on ε (NumPy/SciPy only).

If a mechanism M is (ε, δ)-DP then for every event R and both orders of the neighbouring pair

    P[M(D) ∈ R] ≤ e^ε P[M(D') ∈ R] + δ,      so      ε ≥ log((P_A(R) − δ) / P_B(R))

for (A, B) = (D, D') or (D', D). With a test statistic s that tends to be larger on D, the
events are R = {s ≥ t} with (A, B) = (D, D') (``"D"``: true- over false-positive rate), and
R = {s < t} with (A, B) = (D', D) (``"D'"``: the roles swapped, true-negative over
false-negative rate). Each rate is replaced by a one-sided Clopper–Pearson bound at level
(1 − confidence)/2: the lower bound of the numerator rate and the upper bound of the
denominator rate hold together with probability ≥ ``confidence`` (union bound), and then so
does the ε lower bound.

The threshold t and the role (``"D"`` or ``"D'"``) are chosen on a calibration split that the
final bound never sees, so the bound needs no correction for the selection.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

__all__ = [
    "clopper_pearson",
    "epsilon_lower_bound",
    "AuditOutcome",
    "select_threshold",
    "evaluate_threshold",
]

ROLES = ("D", "D'")


def _check_confidence(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)):
        raise TypeError(f"confidence must be a number in (0, 1), got {confidence!r}")
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return c


def clopper_pearson(successes, trials, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Clopper–Pearson interval for a binomial proportion.

    Each end is a one-sided bound at level ``(1 − confidence) / 2``:
    ``lower = Beta⁻¹(α/2; k, N − k + 1)`` (0 when k = 0) and
    ``upper = Beta⁻¹(1 − α/2; k + 1, N − k)`` (1 when k = N), α = 1 − confidence.

    Parameters
    ----------
    successes : int or array of int
        k, with 0 ≤ k ≤ N.
    trials : int or array of int
        N ≥ 1.
    confidence : float, default 0.95
        Coverage of the two-sided interval.

    Returns
    -------
    lower, upper : ndarray (float64)
        Broadcast shape of the inputs.
    """
    alpha = 1.0 - _check_confidence(confidence)
    k = np.asarray(successes)
    n = np.asarray(trials)
    if not (np.issubdtype(k.dtype, np.integer) and np.issubdtype(n.dtype, np.integer)):
        raise TypeError("successes and trials must be integers")
    if np.any(n < 1):
        raise ValueError("trials must be >= 1")
    if np.any((k < 0) | (k > n)):
        raise ValueError("successes must lie in [0, trials]")
    k, n = np.broadcast_arrays(k.astype(np.float64), n.astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k > 0, stats.beta.ppf(alpha / 2, np.maximum(k, 1), n - k + 1), 0.0)
        upper = np.where(k < n, stats.beta.ppf(1 - alpha / 2, k + 1, np.maximum(n - k, 1)), 1.0)
    return np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)


def epsilon_lower_bound(rate_a_low, rate_b_high, delta: float) -> np.ndarray:
    """``log((rate_a_low − δ) / rate_b_high)``, or −inf where the numerator is not positive.

    Parameters
    ----------
    rate_a_low : float or array
        Lower confidence bound of P[M(A) ∈ R].
    rate_b_high : float or array
        Upper confidence bound of P[M(B) ∈ R] (> 0).
    delta : float
        δ of the claimed guarantee.
    """
    a = np.asarray(rate_a_low, dtype=np.float64) - float(delta)
    b = np.asarray(rate_b_high, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((a > 0) & (b > 0), np.log(np.where(a > 0, a, 1.0) / np.where(b > 0, b, 1.0)),
                        -np.inf)


class AuditOutcome(NamedTuple):
    """One distinguishing test evaluated on held-out runs.

    Attributes
    ----------
    statistic : str
        ``"releases"`` or ``"draws"``.
    epsilon_lower : float
        The lower bound on ε (0.0 when the test gives no evidence).
    role : str
        ``"D"``: event {s ≥ t}, ``tpr`` = P[M(D) ∈ R], ``fpr`` = P[M(D') ∈ R];
        ``"D'"``: event {s < t}, ``tpr`` = P[M(D') ∈ R], ``fpr`` = P[M(D) ∈ R].
    threshold : float
        t, chosen on the calibration split.
    tpr, fpr : float
        Empirical rates on the held-out runs.
    tpr_ci, fpr_ci : tuple of float
        Their two-sided Clopper–Pearson intervals at ``confidence``; the bound uses
        ``tpr_ci[0]`` and ``fpr_ci[1]``.
    trials : int
        Held-out runs per data set.
    calibration_trials : int
        Runs per data set used to choose ``threshold`` and ``role``.
    """

    statistic: str
    epsilon_lower: float
    role: str
    threshold: float
    tpr: float
    fpr: float
    tpr_ci: tuple
    fpr_ci: tuple
    trials: int
    calibration_trials: int

    def to_dict(self) -> dict:
        d = self._asdict()
        d["tpr_ci"] = list(self.tpr_ci)
        d["fpr_ci"] = list(self.fpr_ci)
        return d


def _candidate_thresholds(s_d: np.ndarray, s_dp: np.ndarray, count: int = 2000) -> np.ndarray:
    """Pooled order statistics at geometrically spaced ranks from both ends (all scales of rates)."""
    pooled = np.sort(np.concatenate([s_d, s_dp]))
    m = pooled.size
    ranks = np.unique(np.round(np.geomspace(1, m, count)).astype(np.int64)) - 1
    idx = np.unique(np.concatenate([ranks, m - 1 - ranks]))
    # Thresholds sit at data points; s >= t includes the point itself.
    return np.unique(pooled[idx])


def _counts(s_d_sorted: np.ndarray, s_dp_sorted: np.ndarray, t: np.ndarray):
    """#{s ≥ t} on D and on D' for sorted samples."""
    above_d = s_d_sorted.size - np.searchsorted(s_d_sorted, t, side="left")
    above_dp = s_dp_sorted.size - np.searchsorted(s_dp_sorted, t, side="left")
    return above_d, above_dp


def _bounds(above_d, above_dp, n_d, n_dp, delta, confidence):
    """ε bounds of both roles for counts of {s ≥ t} out of n_d (D) and n_dp (D') runs."""
    above_d = np.asarray(above_d, dtype=np.int64)
    above_dp = np.asarray(above_dp, dtype=np.int64)
    tpr_lo, _ = clopper_pearson(above_d, n_d, confidence)
    _, fpr_hi = clopper_pearson(above_dp, n_dp, confidence)
    eps_d = epsilon_lower_bound(tpr_lo, fpr_hi, delta)
    # Roles swapped: R = {s < t}, A = D', B = D.
    tnr_lo, _ = clopper_pearson(n_dp - above_dp, n_dp, confidence)
    _, fnr_hi = clopper_pearson(n_d - above_d, n_d, confidence)
    eps_dp = epsilon_lower_bound(tnr_lo, fnr_hi, delta)
    return eps_d, eps_dp


def select_threshold(s_d, s_dp, delta: float, confidence: float, test_trials: tuple[int, int]
                     ) -> tuple[float, str]:
    """Choose (threshold, role) on calibration runs, for evaluation on ``test_trials`` runs.

    The criterion is the bound the held-out split would give if its rates equalled the
    calibration rates: counts are rescaled to the held-out sizes before the Clopper–Pearson
    bounds, so the choice accounts for the width of the intervals the final bound will use.

    Parameters
    ----------
    s_d, s_dp : array
        Calibration statistics of the runs on D and on D'.
    delta, confidence : float
    test_trials : (int, int)
        Held-out runs on D and on D'.

    Returns
    -------
    threshold : float
    role : {"D", "D'"}
    """
    s_d = np.sort(np.asarray(s_d, dtype=np.float64))
    s_dp = np.sort(np.asarray(s_dp, dtype=np.float64))
    t = _candidate_thresholds(s_d, s_dp)
    above_d, above_dp = _counts(s_d, s_dp, t)
    n_d, n_dp = test_trials
    scaled_d = np.round(above_d * (n_d / s_d.size)).astype(np.int64)
    scaled_dp = np.round(above_dp * (n_dp / s_dp.size)).astype(np.int64)
    eps_d, eps_dp = _bounds(scaled_d, scaled_dp, n_d, n_dp, delta, confidence)
    i_d, i_dp = int(np.argmax(eps_d)), int(np.argmax(eps_dp))
    if eps_d[i_d] >= eps_dp[i_dp]:
        return float(t[i_d]), "D"
    return float(t[i_dp]), "D'"


def evaluate_threshold(statistic: str, s_d, s_dp, threshold: float, role: str, delta: float,
                       confidence: float, calibration_trials: int) -> AuditOutcome:
    """The ε lower bound of a fixed (threshold, role) on held-out statistics.

    Parameters
    ----------
    statistic : str
        Label stored in the outcome.
    s_d, s_dp : array
        Held-out statistics of the runs on D and on D'.
    threshold : float
    role : {"D", "D'"}
    delta, confidence : float
    calibration_trials : int
        Recorded in the outcome.

    Returns
    -------
    AuditOutcome
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    s_d = np.asarray(s_d, dtype=np.float64)
    s_dp = np.asarray(s_dp, dtype=np.float64)
    if not (np.all(np.isfinite(s_d)) and np.all(np.isfinite(s_dp))):
        raise ValueError("the test statistics contain NaN or inf")
    n_d, n_dp = s_d.size, s_dp.size
    above_d = int(np.sum(s_d >= threshold))
    above_dp = int(np.sum(s_dp >= threshold))
    if role == "D":
        k_a, n_a, k_b, n_b = above_d, n_d, above_dp, n_dp
    else:
        k_a, n_a, k_b, n_b = n_dp - above_dp, n_dp, n_d - above_d, n_d
    a_lo, a_hi = clopper_pearson(k_a, n_a, confidence)
    b_lo, b_hi = clopper_pearson(k_b, n_b, confidence)
    eps = float(epsilon_lower_bound(a_lo, b_hi, delta))
    return AuditOutcome(
        statistic=statistic,
        epsilon_lower=max(0.0, eps) if math.isfinite(eps) else 0.0,
        role=role,
        threshold=float(threshold),
        tpr=k_a / n_a,
        fpr=k_b / n_b,
        tpr_ci=(float(a_lo), float(a_hi)),
        fpr_ci=(float(b_lo), float(b_hi)),
        trials=int(min(n_d, n_dp)),
        calibration_trials=int(calibration_trials),
    )
