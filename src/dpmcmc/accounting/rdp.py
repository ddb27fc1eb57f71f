"""Rényi DP: per-release curves, amplification by subsampling, composition, conversion.

Curves are arrays of ε(α) over integer orders α ≥ 2 (the orders the subsampling bound
and the conversion use). Composition of RDP mechanisms adds their curves at each
order (002 Prop. 1), so T iterations of a mechanism with curve ε(α) have curve T·ε(α).

* Gaussian mechanism with μ = Δ²/(2σ²): ε(α) = α μ (001 Thm 4).
* DP Barker acceptance test on a minibatch of size b (002 Thm 2, 001 Thm 7):
  ε(α) = 5/(2b) + ln(2b/(b − 5α)) / (2(α − 1)) + 2α/(b − 5α), valid for α < b/5.
* Amplification by subsampling without replacement, substitute relation
  (Wang, Balle & Kasiviswanathan 2019, Thm 9; 002 Prop. 2 and Cor. 3):

      ε'(α) = 1/(α−1) · ln(1 + q² C(α,2) min{4(e^{ε(2)} − 1), 2 e^{ε(2)}}
                             + 2 Σ_{j=3}^{α} q^j C(α,j) e^{(j−1) ε(j)}),

  for base mechanisms with ε(∞) = ∞ (Gaussian, Barker), where min{2, (e^{ε(∞)}−1)^j} = 2.
  The sum includes j = α. Every term is formed in log space (``gammaln``,
  ``logsumexp``): C(α,j) e^{(j−1)ε(j)} overflows doubles already near α ≈ 40. The result
  is also capped by the unamplified ε(α), which is valid because Rényi divergence is
  jointly quasi-convex and the subsampled mechanism is a mixture, over batches, of the
  base mechanism on substitute-neighbouring batches.
* Conversion to (ε, δ)-DP (002 Prop. 3, 001 Thm 1): ε = min_α ε_RDP(α) + ln(1/δ)/(α − 1).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import gammaln, logsumexp

from ._checks import check_int, check_positive, check_probability

__all__ = [
    "MAX_ORDER",
    "default_orders",
    "barker_orders",
    "gaussian_rdp",
    "barker_rdp",
    "subsampled_rdp",
    "rdp_to_epsilon",
]

#: Largest RDP order used by default (the conversion minimises over 2..MAX_ORDER).
MAX_ORDER = 256
# The Barker curve allows every integer α < b/5; the quadratic cost of the subsampling
# sum is bounded by capping the search there as well.
_MAX_BARKER_ORDER = 1000


def default_orders() -> np.ndarray:
    """Integer orders 2, 3, …, :data:`MAX_ORDER`."""
    return np.arange(2, MAX_ORDER + 1, dtype=np.int64)


def barker_orders(batch_size: int) -> np.ndarray:
    """Integer orders 2 ≤ α < b/5 on which the DP Barker bound (002 Thm 2) holds.

    Raises
    ------
    ValueError
        If ``batch_size`` ≤ 10, which leaves no admissible order.
    """
    b = check_int("batch_size", batch_size, minimum=1)
    top = min((b - 1) // 5, _MAX_BARKER_ORDER)  # largest integer α with 5α < b
    if top < 2:
        raise ValueError(
            f"batch_size must exceed 10 for the DP Barker RDP bound (it needs an order 2 ≤ α < "
            f"batch_size/5), got {b}"
        )
    return np.arange(2, top + 1, dtype=np.int64)


def _orders_array(orders) -> np.ndarray:
    arr = np.asarray(orders)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("orders must be a non-empty 1-d sequence of integers >= 2")
    if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)) or np.any(arr < 2):
        raise ValueError("orders must be integers >= 2")
    return arr.astype(np.int64)


def gaussian_rdp(orders, mu: float) -> np.ndarray:
    """RDP curve ε(α) = α μ of a Gaussian release with μ = Δ²/(2σ²).

    Parameters
    ----------
    orders : sequence of int
        Orders α ≥ 2.
    mu : float
        μ = Δ²/(2σ²) > 0 of one release (or of a composition: curves add).

    Returns
    -------
    numpy.ndarray
        ε(α) for each order.
    """
    mu = check_positive("mu", mu)
    return _orders_array(orders).astype(np.float64) * mu


def barker_rdp(orders, batch_size: int) -> np.ndarray:
    """RDP curve of one DP Barker acceptance test on a minibatch of size b (002 Thm 2).

    ε(α) = 5/(2b) + ln(2b/(b − 5α)) / (2(α − 1)) + 2α/(b − 5α), for integer 2 ≤ α < b/5,
    with total noise variance C = 2 and per-example log-likelihood ratios bounded by √b/n
    (or √b/n₀ with tempering T = n₀/n; the bound does not depend on n₀).

    Parameters
    ----------
    orders : sequence of int
        Orders with 2 ≤ α < b/5.
    batch_size : int
        Minibatch size b.

    Returns
    -------
    numpy.ndarray
        ε(α) for each order.
    """
    b = check_int("batch_size", batch_size, minimum=1)
    alpha = _orders_array(orders).astype(np.float64)
    if np.any(5.0 * alpha >= b):
        raise ValueError(f"orders must satisfy alpha < batch_size/5 = {b / 5:g} for DP Barker")
    gap = b - 5.0 * alpha
    return 2.5 / b + np.log(2.0 * b / gap) / (2.0 * (alpha - 1.0)) + 2.0 * alpha / gap


def _log_binom(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def subsampled_rdp(
    orders, q: float, base: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Amplify an RDP curve by subsampling without replacement (substitute relation).

    Wang–Balle–Kasiviswanathan (2019) Thm 9 as stated in 002 Prop. 2 / Cor. 3, for a base
    mechanism with ε(∞) = ∞, including the j = α term, capped by the base curve.

    Parameters
    ----------
    orders : sequence of int
        Orders α ≥ 2 at which to evaluate the amplified curve.
    q : float
        Sampling ratio b/n in (0, 1].
    base : callable
        ``base(alphas) -> eps`` giving the base mechanism's RDP at integer orders
        ``alphas`` (an int array containing 2, …, max(orders)).

    Returns
    -------
    numpy.ndarray
        ε'(α) for each order.
    """
    q = check_positive("q", q)
    if q > 1.0:
        raise ValueError(f"q must be <= 1, got {q!r}")
    alphas = _orders_array(orders)
    top = int(alphas.max())
    js = np.arange(2, top + 1, dtype=np.int64)
    base_eps = np.asarray(base(js), dtype=np.float64)
    if base_eps.shape != js.shape or np.any(np.isnan(base_eps)) or np.any(base_eps < 0):
        raise ValueError("base must return a non-negative RDP value for each order")
    base_at = dict(zip(js.tolist(), base_eps.tolist()))
    if q == 1.0:
        return np.array([base_at[int(a)] for a in alphas])
    log_q = math.log(q)
    eps2 = base_at[2]
    # min{4(e^{ε(2)} − 1), 2e^{ε(2)}} in log space; log(expm1) is safe for ε(2) > 0.
    log_j2_factor = min(math.log(4.0) + math.log(math.expm1(eps2)) if eps2 > 0 else -math.inf,
                        math.log(2.0) + eps2)
    jf = js.astype(np.float64)
    # Per-j part independent of α: log 2 + j log q + (j − 1) ε(j), for j ≥ 3.
    log_tail = math.log(2.0) + jf * log_q + (jf - 1.0) * base_eps
    out = np.empty(alphas.shape, dtype=np.float64)
    for i, a in enumerate(alphas.tolist()):
        af = float(a)
        terms = [0.0, 2.0 * log_q + float(_log_binom(np.float64(af), np.float64(2.0))) + log_j2_factor]
        if a >= 3:
            jj = jf[1 : a - 1]  # j = 3..α
            terms.extend((log_tail[1 : a - 1] + _log_binom(np.full_like(jj, af), jj)).tolist())
        amplified = float(logsumexp(terms)) / (af - 1.0)
        out[i] = min(amplified, base_at[a])
    return out


def rdp_to_epsilon(orders, rdp, delta: float) -> tuple[float, int]:
    """Convert an RDP curve to (ε, δ)-DP: ε = min_α ε(α) + ln(1/δ)/(α − 1) (002 Prop. 3).

    Parameters
    ----------
    orders : sequence of int
        Orders α ≥ 2.
    rdp : sequence of float
        ε(α) at those orders (e.g. a per-iteration curve times the number of iterations).
    delta : float
        δ in (0, 1).

    Returns
    -------
    (float, int)
        The smallest ε and the order attaining it.
    """
    delta = check_probability("delta", delta)
    alphas = _orders_array(orders)
    values = np.asarray(rdp, dtype=np.float64)
    if values.shape != alphas.shape:
        raise ValueError("rdp must have one value per order")
    eps = values + (-math.log(delta)) / (alphas - 1.0)
    i = int(np.argmin(eps))
    return float(eps[i]), int(alphas[i])
