"""Rényi DP: per-release curves, amplification by subsampling, composition, conversion.

Curves are arrays of ε(α) over integer orders α ≥ 2 (the orders the subsampling bound
and the conversion use). Composition of RDP mechanisms adds their curves at each
order (002 Prop. 1), so T iterations of a mechanism with curve ε(α) have curve T·ε(α).

* Gaussian mechanism with μ = Δ²/(2σ²): ε(α) = α μ (001 Thm 4).
* DP Barker acceptance test on a minibatch of size b (002 Thm 2, 001 Thm 7):
  ε(α) = 5/(2b) + ln(2b/(b − 5α)) / (2(α − 1)) + 2α/(b − 5α), valid for α < b/5.
* The same release bounded directly (:func:`barker_direct_rdp`, ours): the closed-form Rényi
  divergence of the two Gaussians a neighbouring pair of batches can release, maximised over
  the box of means and variances that clipping allows. Always below Thm 2 (0.01–0.997 of it),
  and at small and moderate b by a large factor.
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
* Adaptive composition: adding curves is valid when each step's curve bounds D_α for EVERY
  ordered neighbouring pair (D, D') and (D', D), whatever the earlier outputs. The Gaussian
  curve αμ is symmetric; WBK Thm 9 is stated as a sup over both orders of substitute
  neighbours; 002 Thm 2 and :func:`barker_direct_rdp` bound both orders (the latter's box is
  symmetric under swapping the two releases). See docs/neighbouring_relation.md.
* Conversion to (ε, δ)-DP (002 Prop. 3, 001 Thm 1): ε = min_α ε_RDP(α) + ln(1/δ)/(α − 1);
  ``improved=True`` subtracts ln(α)/(α − 1) − ln(1 − 1/α) (Balle et al. 2020, Thm 21), used
  by ``accountant="rdp-direct"`` only, so that ``"rdp"`` keeps the papers' numbers.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import gammaln

from ._checks import check_int, check_positive, check_probability
from ._logspace import logsumexp

__all__ = [
    "MAX_ORDER",
    "default_orders",
    "barker_orders",
    "gaussian_rdp",
    "barker_rdp",
    "barker_direct_rdp",
    "subsampled_rdp",
    "rdp_to_epsilon",
    "conversion_offset",
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


def _barker_args(orders, batch_size) -> tuple[int, np.ndarray]:
    """Validated (b, float orders) for the DP Barker curves (both need 2 ≤ α < b/5)."""
    b = check_int("batch_size", batch_size, minimum=1)
    alpha = _orders_array(orders).astype(np.float64)
    if np.any(5.0 * alpha >= b):
        raise ValueError(f"orders must satisfy alpha < batch_size/5 = {b / 5:g} for DP Barker")
    return b, alpha


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
    b, alpha = _barker_args(orders, batch_size)
    gap = b - 5.0 * alpha
    return 2.5 / b + np.log(2.0 * b / gap) / (2.0 * (alpha - 1.0)) + 2.0 * alpha / gap


def barker_direct_rdp(orders, batch_size: int) -> np.ndarray:
    """RDP curve of one DP Barker release on a batch of size b, from the Gaussian divergence.

    What one DP Barker iteration releases, given its batch, is one Gaussian draw
    ``Δ̃ ~ N(m, v)`` with ``m = √b · mean(u)`` and ``v = C − Var(u)``, ``C = 2``, where
    ``u_j = r_j / c ∈ [−1, 1]`` are the clipped ratios in units of their bound ``c = √b/n₀``
    and ``Var`` is the plain ``1/b`` batch variance (so ``Var(u) ≤ 1`` and ``v ∈ [1, 2]``; the
    kernel computes exactly ``s² = Var(u)``). Substituting one record changes ``mean(u)`` by at
    most ``2/b`` (so ``|m − m'| ≤ 2/√b``) and ``Var(u)`` by at most ``1/b + 4/b = 5/b``
    (``mean(u²)`` moves by ≤ 1/b, ``mean(u)²`` by ≤ (2/b)·2; 002 App. B uses the same 5/b).
    The Rényi divergence of two Gaussians is (Gil, Alajaji & Linder 2013)

        D_α(N(m₁, v₁) ‖ N(m₂, v₂)) = α (m₁ − m₂)² / (2 v_α)
                                     + [(1 − α) ln v₁ + α ln v₂ − ln v_α] / (2(α − 1)),

    ``v_α = α v₂ + (1 − α) v₁``, finite iff ``v_α > 0``. Its supremum over the box
    ``|m₁ − m₂| ≤ 2/√b``, ``v₁, v₂ ∈ [1, 2]``, ``|v₁ − v₂| ≤ 5/b`` (a relaxation of the set
    neighbouring batches reach, hence an upper bound) is at most the sum of the two terms'
    suprema:

    * mean term: ``v_α = v₂ − (α − 1)(v₁ − v₂) ≥ 1 − 5(α − 1)/b``, so it is at most
      ``2α / (b − 5(α − 1))``, finite for ``α < 1 + b/5``;
    * variance term: with ``t = (v₁ − v₂)/v₂`` it equals
      ``g(t) = [(1 − α) ln(1 + t) − ln(1 − (α − 1) t)] / (2(α − 1))``, independent of the
      scale; ``g(0) = g'(0) = 0`` and ``g`` is convex, so over ``|t| ≤ 5/b`` (``v₂ ≥ 1``) its
      maximum is ``max(g(5/b), g(−5/b)) ≈ 25α/(4b²)``.

    ``ε(α) = 2α/(b − 5(α − 1)) + max(g(5/b), g(−5/b))``. Compared with 002 Thm 2 it drops the
    ``ln(2b/(b − 5α))/(2(α − 1)) ≥ ln 2/(2(α − 1))`` term, which does not vanish as b grows
    and dominates Thm 2 at small orders. The curve is evaluated on the orders of
    :func:`barker_orders` (α < b/5, inside its domain), so both bounds use the same orders.

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
    b, alpha = _barker_args(orders, batch_size)
    am1 = alpha - 1.0
    t = 5.0 / b
    mean_term = 2.0 * alpha / (b - 5.0 * am1)

    def g(tt: float) -> np.ndarray:
        return (-am1 * np.log1p(tt) - np.log1p(-am1 * tt)) / (2.0 * am1)

    return mean_term + np.maximum(g(t), g(-t))


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
        amplified = logsumexp(terms) / (af - 1.0)
        out[i] = min(amplified, base_at[a])
    return out


def conversion_offset(orders, delta: float, improved: bool = False) -> np.ndarray:
    """What the RDP → (ε, δ) conversion adds to ε(α) at each order.

    ``ln(1/δ)/(α − 1)`` (002 Prop. 3), or with ``improved`` the bound of Balle, Barthe,
    Gaboardi, Hsu & Sato (2020, Thm 21; also Canonne, Kamath & Steinke 2020):
    ``ln(1/δ)/(α − 1) + ln(1 − 1/α) − ln(α)/(α − 1)``, smaller at every α ≥ 2.
    """
    delta = check_probability("delta", delta)
    a = _orders_array(orders).astype(np.float64)
    offset = (-math.log(delta)) / (a - 1.0)
    if improved:
        offset = offset + np.log1p(-1.0 / a) - np.log(a) / (a - 1.0)
    return offset


def rdp_to_epsilon(orders, rdp, delta: float, improved: bool = False) -> tuple[float, int]:
    """Convert an RDP curve to (ε, δ)-DP: ε = min_α ε(α) + ln(1/δ)/(α − 1) (002 Prop. 3).

    Parameters
    ----------
    orders : sequence of int
        Orders α ≥ 2.
    rdp : sequence of float
        ε(α) at those orders (e.g. a per-iteration curve times the number of iterations).
    delta : float
        δ in (0, 1).
    improved : bool, default False
        Use the tighter conversion of :func:`conversion_offset` (``accountant="rdp-direct"``);
        the default is the one the papers and the held reference values use. The result is
        floored at 0.

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
    eps = values + conversion_offset(alphas, delta, improved)
    i = int(np.argmin(eps))
    return max(float(eps[i]), 0.0), int(alphas[i])
