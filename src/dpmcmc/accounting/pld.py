"""Numerical privacy-loss-distribution (PLD) accountant for the subsampled Gaussian mechanism.

Conventions
-----------
``sigma`` is the standard deviation of the Gaussian noise divided by the per-example clip
bound ``C``: each example's contribution to the released sum has norm at most ``C``, so in
units of ``C`` the noise is ``N(0, sigma^2)`` and two examples' contributions differ by at
most ``2``.

Adaptive composition and the order of a pair. A k-fold composition of one dominating pair
bounds k adaptively chosen releases only if that pair dominates *every* ordered neighbouring
pair of every step (Zhu, Dong & Wang 2022, Thm 10). Under replace-one both ``(D, D')`` and
``(D', D)`` are neighbours, and which order of the subsampled pair is the worse one at step
``t`` can depend on earlier outputs (other records' clipped values ``C sign(theta_t - a)``),
so the maximum over the two orders of separately composed deltas is NOT a bound: an adversary
that switches order adaptively attains more (sigma = 0.8, q = 0.05, k = 50, eps = 2: at least
0.367, against 0.347 for the per-order maximum; tests/accounting/test_adaptive_composition.py).
``relation="substitute"`` therefore composes one symmetric pair that dominates both orders at
once (:func:`_symmetrised_pld`; docs/neighbouring_relation.md).

* ``relation="substitute"`` (default): a batch of fixed size ``q * n`` is drawn without
  replacement and neighbouring data sets differ by replacing one record. The dominating pair
  for one release is

  ``P = (1 - q) N(0, sigma^2) + q N(2, sigma^2)``  vs  ``Q = N(0, sigma^2)``

  and the reverse order (Balle, Barthe & Gaboardi 2018, amplification by subsampling without
  replacement under substitution, which is tight; Zhu, Dong & Wang 2022, dominating pair
  ``(q P_0 + (1 - q) Q_0, Q_0)`` with the base mechanism's substitute pair
  ``(P_0, Q_0) = (N(2, sigma^2), N(0, sigma^2))``; see also Lebeda, Regehr, Kamath &
  Steinke 2024 on subsampling under substitution). Why: draw a batch ``T`` without the
  replaced record ``i`` and, with probability ``q``, swap a random member ``j`` of ``T`` for
  ``i``; this draws the batch correctly, and by joint convexity of the hockey-stick divergence
  the mechanism is then bounded by the worst pair
  ``(1-q) N(s) + q N(s + x_i - x_j)`` vs ``(1-q) N(s) + q N(s + x_i' - x_j)`` with all
  contributions in ``[-1, 1]``. The cited results show that the worst case is
  ``x_i - x_j = 2``, ``x_i' - x_j = 0`` (or the swap), and both orders are attained: all other
  records at ``-1``, record ``i`` at ``+1`` in one data set and ``-1`` in the other. Scaling
  by ``1/2`` makes this the add-remove computation below at ``sigma / 2``,
  ``delta_substitute(sigma, q, k, eps) = delta_add-remove(sigma / 2, q, k, eps)``, which is
  how the pairs are computed. Both orders are composed together through their symmetrisation
  (pair ``"symmetric"``): the PLD that equals the "remove" pair's on losses ``l > 0``, its
  mirror image ``e^{-l}`` times it on ``-l`` and an atom at 0; its privacy profile is the max
  of the two orders' profiles at every ``eps`` in R (the trade-off function
  ``min{f, f^-1}**`` of Dong, Roth & Su 2022), since ``delta_remove(eps) >= delta_add(eps)``
  for ``eps >= 0`` (checked in the tests).
* ``relation="add-remove"``: Poisson sampling with rate ``q``, neighbouring data sets differ
  by adding or removing one record, the sums differ by at most ``1``. Dominating pairs are
  ``P = (1 - q) N(0, sigma^2) + q N(1, sigma^2)`` vs ``Q = N(0, sigma^2)`` ("remove") and the
  reverse order ("add"). Here the max over the two orders of separate k-fold compositions IS
  a valid adaptive bound: for a pair of data sets ``D' = D + {x}`` the order is fixed by which
  of them holds ``x``, the same at every step whatever the adversary does, so the ordered pair
  ``(D', D)`` is dominated by "remove" at every step and ``(D, D')`` by "add".
* ``relation="substitute-legacy"``: the symmetric pair

  ``P = (1 - q) N(0, sigma^2) + q N(1, sigma^2)``  vs
  ``Q = (1 - q) N(0, sigma^2) + q N(-1, sigma^2)``

  the convention of the papers' code, of the Fourier accountant's ``get_delta_S`` and of
  dp-accounting's ``REPLACE_ONE`` relation (sensitivity 1). It is NOT a dominating pair for
  fixed-size batches drawn without replacement: with every other record contributing ``-1``
  and record ``i`` contributing ``+1`` in ``D`` and ``-1`` in ``D'``, batches without ``i``
  sum to ``-b`` in both, batches with ``i`` to ``-b + 2`` in ``D`` and ``-b`` in ``D'``, so
  ``M(D) = (1-q) N(-b) + q N(-b+2)`` and ``M(D') = N(-b)``: the substitute pair above. For
  one release at ``sigma = 1, q = 0.1, eps = 0.5`` the legacy pair gives ``delta = 3.34e-3``
  while this pair of data sets attains ``3.30e-2``; at ``sigma = 2, q = 0.01, eps = 0.5``,
  ``1.9e-19`` against ``2.2e-7``. It is kept only to reproduce published numbers and the
  held reference values; never use it for a privacy guarantee. The pair is symmetric
  (``P(x) = Q(-x)``), so one order suffices.

Scale of the papers' code: the thesis (001, minibatch penalty) normalises the released value
to sensitivity 1 before calling ``get_delta_S``, i.e. it passes noise std / ``2 C``: the legacy
pair at ``sigma / 2`` in these units, components ``N(2, .)`` and ``N(-2, .)``. At the points
we checked that gave a larger delta than the valid substitute pair at ``sigma``, but it is not
proven to dominate it. The held reference values for DP-SGLD/DP-SGNHT are the legacy pair at
``sigma`` itself.

Method
------
The privacy loss ``L(x) = log P(x)/Q(x)`` is monotone in ``x`` for these pairs, so the
probability that ``L`` falls in a grid bin ``[l_j, l_j + h]`` is an exact difference of Gaussian
CDFs at the preimages of the bin edges, both under ``P`` and under ``Q``
(``Q(bin) = E_P[exp(-L); bin]``). Each bin's ``P``-mass is split between its two edges so that
both the mass and ``E_P[exp(-L)]`` are preserved (the "connect-the-dots" discretisation of
Doroshenko et al., 2022). With ``Y = exp(-L)`` the hockey-stick divergence of a k-fold
composition is ``E[(1 - e^eps Y_1 ... Y_k)_+]``, a function that is convex in each ``Y_i``
separately; the split is a mean-preserving spread of each ``Y_i``, so by Jensen's inequality
the discretised PLD gives an upper bound on delta for every epsilon and every k, while its
bias is only of second order in ``h`` (rounding every loss up to the grid would shift the
composed loss by about ``k h / 2``). Mass whose loss lies beyond the grid's upper end is
treated as loss ``+inf`` (it contributes fully to delta); mass below the lower end is moved up
to the lowest grid point.

The k-fold self-composition is one real FFT raised to the k-th power. The FFT length covers a
window ``[lo, hi]`` of composed losses chosen with Chernoff bounds from the exact moment
generating function of the discretised PLD; the circular convolution folds the mass outside
the window into it (only ever adding non-negative contributions), and the Chernoff bound on
the mass above ``hi`` is added to delta as mass at ``+inf``. The result is a rigorous upper
bound up to floating-point round-off (about ``1e-15`` absolute).

The grid step defaults to ``s / 128`` where ``s`` is the standard deviation of one release's
privacy loss: the spread adds about ``h^2 / 6`` per release to the variance of the loss, a
relative change of ``h^2 / (6 s^2) ~ 1e-5`` at any k, which keeps the relative error in delta
well under 0.2 % at the deltas met in practice (``>= 1e-10``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import fft as _fft
from scipy import special

from dpmcmc.accounting._checks import (
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
)

__all__ = [
    "PrivacyLossDistribution",
    "default_grid_step",
    "subsampled_gaussian_pld",
    "gaussian_pld",
    "subsampled_gaussian_delta",
    "subsampled_gaussian_epsilon",
]

RELATIONS = ("substitute", "add-remove", "substitute-legacy")
#: Low-level pairs of :func:`subsampled_gaussian_pld`. The substitute relation uses
#: "symmetric" (one pair dominating both "remove" and "add") at ``sigma / 2``; "add-remove"
#: uses "remove" and "add" separately; "substitute-legacy" is the papers' non-dominating pair.
PAIRS = ("remove", "add", "symmetric", "substitute-legacy")

# Gaussian tails beyond this many standard deviations (about 4e-26 each) are handled
# conservatively rather than discretised.
_X_TAIL_Z = 10.5
# Bins per standard deviation of one release's privacy loss.
_BINS_PER_STD = 128.0
# Mass allowed outside the composition window (bounded rigorously by Chernoff).
_WINDOW_TAIL = 1e-20
# Exponential tilt, in composed standard deviations, of the second (tail) FFT pass.
_TILT_SDS = 3.0
# Size caps: beyond them the grid is coarsened (still a rigorous bound, less tight).
_MAX_STEP_BINS = 1 << 22
_MAX_WINDOW = 1 << 23


class _WindowTooLarge(ValueError):
    """The k-fold composition would need an FFT window beyond ``_MAX_WINDOW``."""

    def __init__(self, message: str, n_window: int):
        super().__init__(message)
        self.n_window = n_window


def _check_q(q) -> float:
    q = check_positive("q", q)
    if q > 1.0:
        raise ValueError(f"q must lie in (0, 1], got {q!r}")
    return q


@dataclass(frozen=True, eq=False)
class PrivacyLossDistribution:
    """A discretised privacy-loss distribution on the grid ``{j * grid_step}``.

    Parameters
    ----------
    grid_step : float
        Spacing ``h`` of the loss grid.
    offset : int
        Grid index of ``probs[0]``: ``probs[i]`` is the mass at loss ``(offset + i) * h``.
    probs : numpy.ndarray
        Non-negative masses (float64). They may sum to slightly more than ``1 - infinity_mass``
        where conservative steps duplicated mass; that only makes delta larger.
    infinity_mass : float
        Mass at loss ``+inf``, counted in full in every delta.

    Notes
    -----
    ``get_delta`` returns ``sum_l p(l) (1 - exp(eps - l))_+ + infinity_mass``, which is an upper
    bound on the hockey-stick divergence of the mechanism whenever the PLD was built by the
    pessimistic constructors of this module.
    """

    grid_step: float
    offset: int
    probs: np.ndarray
    infinity_mass: float

    def __post_init__(self):
        object.__setattr__(self, "grid_step", check_positive("grid_step", self.grid_step))
        p = np.array(self.probs, dtype=np.float64).ravel()
        if p.size == 0 or not np.all(np.isfinite(p)) or np.any(p < 0):
            raise ValueError("probs must be a non-empty array of finite non-negative masses")
        inf_mass = check_nonnegative("infinity_mass", self.infinity_mass)
        if inf_mass > 1.0:
            raise ValueError(f"infinity_mass must be <= 1, got {inf_mass!r}")
        object.__setattr__(self, "infinity_mass", inf_mass)
        p.setflags(write=False)
        object.__setattr__(self, "probs", p)
        object.__setattr__(self, "offset", int(self.offset))

    @property
    def losses(self) -> np.ndarray:
        """Loss value at each entry of ``probs``."""
        return (self.offset + np.arange(self.probs.size)) * self.grid_step

    @property
    def finite_mass(self) -> float:
        """Total mass at finite losses."""
        return float(self.probs.sum())

    # ------------------------------------------------------------------ delta / epsilon
    def get_delta(self, epsilon: float) -> float:
        """Upper bound on delta(epsilon) (hockey-stick divergence of order ``e^epsilon``).

        Parameters
        ----------
        epsilon : float
            Non-negative privacy parameter.

        Returns
        -------
        float
            ``sum_{l > eps} p(l) (1 - exp(eps - l)) + infinity_mass``, capped at 1.
        """
        epsilon = check_nonnegative("epsilon", epsilon)
        h = self.grid_step
        # first entry with loss strictly above epsilon
        i0 = max(0, math.floor(epsilon / h) + 1 - self.offset)
        if i0 < self.probs.size:
            losses = (self.offset + np.arange(i0, self.probs.size)) * h
            finite = _dot(self.probs[i0:], -np.expm1(epsilon - losses))
        else:
            finite = 0.0
        return min(1.0, finite + self.infinity_mass)

    def get_epsilon(self, delta: float) -> float:
        """Smallest epsilon >= 0 with ``get_delta(epsilon) <= delta``.

        Returns ``math.inf`` when the mass at ``+inf`` alone exceeds ``delta``. The value
        returned is checked against ``get_delta`` so the pair is consistent.
        """
        delta = check_probability("delta", delta)
        if self.infinity_mass >= delta:
            return math.inf
        if self.get_delta(0.0) <= delta:
            return 0.0
        h = self.grid_step
        p = self.probs
        n = p.size
        target = delta - self.infinity_mass
        # Suffix sums: S0[i] = sum_{m>=i} p_m, T[i] = sum_{m>=i} p_m exp(l_i - l_m); then for
        # eps in [l_{i-1}, l_i], delta_finite(eps) = S0[i] - exp(eps - l_i) T[i].
        # Imported here: scipy.signal (with the scipy.stats it loads) is ~0.5 s of every
        # process's start-up, and only this recursion needs it.
        from scipy import signal

        s0 = np.cumsum(p[::-1])[::-1]
        t = signal.lfilter([1.0], [1.0, -math.exp(-h)], p[::-1])[::-1]
        # delta at grid point l_i uses entries m >= i + 1
        d_grid = np.empty(n)
        d_grid[:-1] = s0[1:] - math.exp(-h) * t[1:]
        d_grid[-1] = 0.0
        # d_grid is non-increasing; first grid index with d_grid <= target
        idx = int(np.searchsorted(-d_grid, -target, side="left"))
        idx = min(idx, n - 1)
        # solve on (l_{idx-1}, l_idx] (or below l_0 when idx = 0), where only entries
        # m >= idx count: S0[idx] - exp(eps - l_idx) T[idx] = target
        l_idx = (self.offset + idx) * h
        num = s0[idx] - target
        eps = l_idx + math.log(num / t[idx]) if num > 0 and t[idx] > 0 else l_idx
        eps = min(eps, l_idx)
        if idx > 0:
            eps = max(eps, l_idx - h)
        eps = max(eps, 0.0)
        # Guard against round-off: move up until the direct sum agrees.
        step = max(abs(eps), h) * 1e-12
        while self.get_delta(eps) > delta:
            eps += step
            step *= 2.0
        return float(eps)

    # ------------------------------------------------------------------ composition
    def compose(self, other: "PrivacyLossDistribution") -> "PrivacyLossDistribution":
        """PLD of the composition with ``other`` (same grid step), by linear convolution.

        One FFT pass without tilting: entries below about ``1e-16`` of the largest one are
        round-off, so prefer :meth:`self_compose` for long homogeneous compositions.
        """
        if not isinstance(other, PrivacyLossDistribution):
            raise TypeError("other must be a PrivacyLossDistribution")
        if other.grid_step != self.grid_step:
            raise ValueError("other must have the same grid_step")
        n = self.probs.size + other.probs.size - 1
        nf = _fft.next_fast_len(n, real=True)
        conv = _fft.irfft(_fft.rfft(self.probs, nf) * _fft.rfft(other.probs, nf), nf)[:n]
        np.maximum(conv, 0.0, out=conv)
        f1, f2 = self.finite_mass, other.finite_mass
        inf = (f1 + self.infinity_mass) * (f2 + other.infinity_mass) - f1 * f2
        return PrivacyLossDistribution(self.grid_step, self.offset + other.offset, conv,
                                       min(1.0, inf))

    def self_compose(self, k: int, *, tail_mass: float = _WINDOW_TAIL) -> "PrivacyLossDistribution":
        """PLD of the k-fold composition of this PLD with itself.

        Parameters
        ----------
        k : int
            Number of copies composed (>= 1).
        tail_mass : float
            Mass allowed outside the FFT window on each side.

        Returns
        -------
        PrivacyLossDistribution

        Notes
        -----
        The k-th power of one real FFT over a window that holds all but ``tail_mass`` of the
        composed mass on each side (Chernoff bounds from the exact moment generating function).
        The bound on the mass above the window is added to ``infinity_mass``; mass folded in
        from outside the window stays in ``probs``, so the result remains pessimistic.

        FFT round-off is about ``1e-16`` of the largest entry, which would swamp the far upper
        tail that small deltas depend on. The composition is therefore also computed for the
        exponentially tilted measure ``p(l) e^{theta l}`` (tilting commutes with convolution)
        with ``theta`` placing the tilted mean about three composed standard deviations up,
        and each entry is taken from whichever of the two passes has the smaller round-off.
        """
        k = check_int("k", k, minimum=1)
        tail_mass = check_probability("tail_mass", tail_mass)
        if k == 1:
            return self
        h = self.grid_step
        f = self.finite_mass
        nz = np.flatnonzero(self.probs)
        if nz.size == 0:
            return PrivacyLossDistribution(h, self.offset * k, np.zeros(1),
                                           min(1.0, (f + self.infinity_mass) ** k))
        first, last = int(nz[0]), int(nz[-1])
        p = self.probs[first:last + 1]
        j0 = self.offset + first
        # Work in grid indices relative to j0: a composed index s means loss (k j0 + s) h.
        idx = np.arange(p.size, dtype=np.float64)
        logp = np.log(p, where=p > 0, out=np.full(p.size, -np.inf))
        pos_idx = idx[p > 0]
        pos_logp = logp[p > 0]

        buf = np.empty(pos_idx.size)

        def log_mgf(t: float) -> float:
            # The same operations as exp(max(t idx + logp - zmax, -700)).sum(), in one buffer:
            # the chernoff searches call this ~80 times per composition, and the temporaries
            # cost more than the arithmetic (same values bit for bit).
            z = np.multiply(pos_idx, t, out=buf)
            z += pos_logp
            zmax = float(z.max())
            z -= zmax
            # flooring at e^-700 avoids slow subnormals and only enlarges the bound
            np.maximum(z, -700.0, out=z)
            return zmax + math.log(float(np.exp(z, out=z).sum()))

        total = float(p.sum())
        mean1 = _dot(p, idx) / total
        var1 = _dot(p, (idx - mean1) ** 2) / total
        mean, sd = k * mean1, math.sqrt(max(k * var1, 1e-12))
        log_tail = math.log(tail_mass)
        n_max = float(k * (p.size - 1))
        t_gauss = math.sqrt(2.0 * -log_tail) / sd
        theta = _tilt_for_mean(pos_idx, pos_logp, k, mean + _TILT_SDS * sd, _TILT_SDS / sd)
        # the tilted values are used only at positions >= x_min
        x_min = mean + 0.5 * _TILT_SDS * sd if theta > 0 else n_max

        # lower end: untilted measure of {S < lo} <= tail
        lo = _chernoff_end(lambda t: k * log_mgf(-t) - log_tail, t_gauss)
        lo = max(math.floor(-lo), 0)
        # upper end: untilted measure of {S > hi} <= tail, and the tilted mass folded onto
        # positions >= x_min stays below tail (sum_{s > hi} p_s e^{theta (s - x_min)})
        hi_plain, t_plain = _chernoff_end(lambda t: k * log_mgf(t) - log_tail, t_gauss,
                                          return_t=True)
        hi_tilt = _chernoff_end(lambda t: k * log_mgf(theta + t) - theta * x_min - log_tail,
                                t_gauss) if theta > 0 else hi_plain
        hi = min(math.ceil(max(hi_plain, hi_tilt)), int(n_max))
        if hi >= n_max:
            upper = 0.0
        else:
            upper = math.exp(min(0.0, k * log_mgf(t_plain) - t_plain * (hi + 1)))
        n_win = _fft.next_fast_len(hi - lo + 1, real=True)
        if n_win > _MAX_WINDOW:
            raise _WindowTooLarge(
                f"composition window of {n_win} grid points exceeds {_MAX_WINDOW}; "
                "use a coarser grid_step", n_win)
        # absolute composed index of window position i is k*j0 + lo + i
        pos = np.arange(n_win, dtype=np.float64) + lo
        shift = (-lo) % n_win

        res = _circular_power(p, k, n_win, shift)
        if theta > 0:
            log_w = logp + theta * idx
            c = float(special.logsumexp(log_w))  # normalise so that |FFT| <= 1
            tilted = _circular_power(np.exp(log_w - c), k, n_win, shift)
            # untilt: p_s = tilted_s * exp(k c - theta s). Round-off of each pass is about
            # eps times its largest entry (after untilting for the tilted one): use the tilted
            # values from where that bound is the smaller one.
            cross = (k * c + math.log(max(tilted.max(), 1e-300))
                     - math.log(max(res.max(), 1e-300))) / theta
            use = np.flatnonzero(pos >= max(cross, x_min))
            with np.errstate(divide="ignore"):
                res[use] = np.exp(np.log(tilted[use]) + (k * c - theta * pos[use]))
        inf_mass = _power_difference(f, self.infinity_mass, k) + upper
        return PrivacyLossDistribution(h, k * j0 + lo, res, min(1.0, inf_mass))


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``sum(a * b)`` by NumPy's pairwise summation rather than BLAS ``ddot``.

    OpenBLAS splits a long ``ddot`` over threads that busy-wait for each other, which costs
    most when the cores are busy: ``max_iterations`` of DP-SGLD (n = 10^5, b = 1000, eps = 6)
    measured 1.40 s of CPU through BLAS against 0.35 s with this (``benchmarks/bench_pld.py``,
    interleaved, a busy 2-core machine). The product and sum costs one temporary array and
    never starts a thread.
    """
    return float(np.multiply(a, b).sum())


def _circular_power(w: np.ndarray, k: int, n: int, shift: int) -> np.ndarray:
    """k-fold circular self-convolution of ``w`` (folded to length n), rolled by ``shift``."""
    arr = np.bincount(np.arange(w.size) % n, weights=w, minlength=n)
    spec = _fft.rfft(arr)
    # phi^k = exp(k log phi); frequencies where |phi|^k underflows stay zero
    with np.errstate(divide="ignore"):
        log_abs = 0.5 * np.log(spec.real ** 2 + spec.imag ** 2)
    keep = np.flatnonzero(k * log_abs > -745.0)
    powered = np.zeros_like(spec)
    powered[keep] = np.exp(k * (log_abs[keep] + 1j * np.angle(spec[keep])))
    res = _fft.irfft(powered, n)
    np.maximum(res, 0.0, out=res)
    return np.roll(res, shift)


def _power_difference(f: float, i: float, k: int) -> float:
    """(f + i)^k - f^k without cancellation."""
    if i <= 0.0:
        return 0.0
    if f <= 0.0:
        return i ** k
    return f ** k * math.expm1(k * math.log1p(i / f))


def _tilt_for_mean(idx: np.ndarray, logp: np.ndarray, k: int, target: float,
                   theta_max: float) -> float:
    """Tilt theta in [0, theta_max] whose k-fold tilted mean is ``target`` (capped)."""
    def excess(theta):
        log_w = logp + theta * idx
        w = np.exp(np.maximum(log_w - log_w.max(), -700.0))
        return k * _dot(w, idx) / float(w.sum()) - target

    if not math.isfinite(theta_max) or theta_max <= 0:
        return 0.0
    if excess(theta_max) <= 0:
        return float(theta_max)
    from scipy import optimize  # on first use: see _chernoff_end

    return float(optimize.brentq(excess, 0.0, theta_max, xtol=1e-3 * theta_max))


def _chernoff_end(numerator, t_guess: float, return_t: bool = False):
    """min over t > 0 of numerator(t) / t, searched in log t around ``t_guess``.

    With ``numerator(t) = k log M(t) - log(tail)`` this is the point beyond which the k-fold
    measure has at most ``tail`` mass (Chernoff); any t gives a valid bound, so the search
    only needs to be good, not exact.
    """
    def f(u):
        t = math.exp(u)
        return numerator(t) / t

    # scipy.optimize is imported where it is used (~0.3 CPU-s of imports, its whole package):
    # importing dpmcmc.cli or dpmcmc.accounting (the CLI's start) does not pay for it.
    from scipy import optimize

    u0 = math.log(t_guess)
    r = optimize.minimize_scalar(f, bounds=(u0 - 6.0, u0 + 4.0), method="bounded",
                                 options={"xatol": 0.1, "maxiter": 25})
    if return_t:
        return float(r.fun), math.exp(float(r.x))
    return float(r.fun)


# ---------------------------------------------------------------------- subsampled Gaussian
def _log_ratio_fns(sigma: float, q: float, pair: str):
    """Loss L(x), its inverse, the sign of dL/dx and the mixture components of P and Q."""
    s2 = sigma * sigma
    log1mq = math.log1p(-q) if q < 1.0 else -math.inf
    logq = math.log(q)
    with np.errstate(divide="ignore"):
        if pair == "substitute-legacy":
            comps_p = [(1.0 - q, 0.0), (q, 1.0)]
            comps_q = [(1.0 - q, 0.0), (q, -1.0)]

            def loss(x):
                x = np.asarray(x, dtype=float)
                return (np.logaddexp(log1mq, logq + (2 * x - 1) / (2 * s2))
                        - np.logaddexp(log1mq, logq + (-2 * x - 1) / (2 * s2)))

            # L(x) = l  <=>  x = s2 (l/2 + asinh(B)),  B = (1-q)/q e^{1/(2 s2)} sinh(l/2)
            def inverse(l):
                l = np.asarray(l, dtype=float)
                out = 0.5 * s2 * l
                if q < 1.0:
                    a = np.abs(l) / 2
                    with np.errstate(divide="ignore", invalid="ignore"):
                        log_sinh = a + np.log1p(-np.exp(-2 * a)) - math.log(2.0)
                    log_b = log1mq - logq + 1.0 / (2 * s2) + log_sinh
                    small = log_b < 300
                    asinh = np.where(small, np.arcsinh(np.exp(np.minimum(log_b, 300))),
                                     log_b + math.log(2.0))
                    out = out + s2 * np.sign(l) * asinh
                return out

            sign = 1
        else:
            mix = [(1.0 - q, 0.0), (q, 1.0)]
            base = [(1.0, 0.0)]

            def log_mix_ratio(x):  # log of mixture / N(0, s2)
                return np.logaddexp(log1mq, logq + (2 * np.asarray(x, float) - 1) / (2 * s2))

            def inv_mix_ratio(v):  # x with log_mix_ratio(x) = v, -inf below log(1-q)
                v = np.asarray(v, dtype=float)
                with np.errstate(divide="ignore", invalid="ignore"):
                    # log(e^v - (1-q)) computed stably
                    if q < 1.0:
                        lg = np.where(v > log1mq,
                                      v + np.log(-np.expm1(log1mq - np.maximum(v, log1mq))),
                                      -np.inf)
                    else:
                        lg = v
                return 0.5 + s2 * (lg - logq)

            if pair == "remove":
                comps_p, comps_q = mix, base
                loss, inverse, sign = log_mix_ratio, inv_mix_ratio, 1
            else:
                comps_p, comps_q = base, mix

                def loss(x):
                    return -log_mix_ratio(x)

                def inverse(l):
                    return inv_mix_ratio(-np.asarray(l, dtype=float))

                sign = -1
    return loss, inverse, sign, comps_p, comps_q


def _interval_masses(x_edges: np.ndarray, mean: float, sigma: float) -> np.ndarray:
    """Masses of N(mean, sigma^2) between consecutive increasing edges, accurate in both tails."""
    z = (x_edges - mean) / sigma
    with np.errstate(invalid="ignore"):
        tail = special.ndtr(-np.abs(z))  # the smaller tail at each edge, no cancellation
    za, zb = z[:-1], z[1:]
    ta, tb = tail[:-1], tail[1:]
    # both edges above the mean: difference of upper tails; both below: of lower tails;
    # straddling the mean: one minus both tails.
    return np.where(za >= 0, ta - tb, np.where(zb <= 0, tb - ta, 1.0 - ta - tb))


@lru_cache(maxsize=1)
def _hermite_nodes(n: int = 120):
    z, w = np.polynomial.hermite_e.hermegauss(n)
    return z, w / math.sqrt(2 * math.pi)


def _loss_moments(sigma: float, q: float, pair: str) -> tuple[float, float]:
    """Mean and standard deviation of one release's privacy loss under P (Gauss-Hermite)."""
    loss, _, _, comps_p, _ = _log_ratio_fns(sigma, q, pair)
    z, w = _hermite_nodes()
    m1 = m2 = 0.0
    for weight, mu in comps_p:
        vals = loss(mu + sigma * z)
        m1 += weight * float(np.dot(w, vals))
        m2 += weight * float(np.dot(w, vals * vals))
    return m1, math.sqrt(max(m2 - m1 * m1, 0.0))


def _step_pld(sigma: float, q: float, pair: str, h: float) -> PrivacyLossDistribution:
    """Connect-the-dots PLD of one release on the grid ``h Z``."""
    loss, inverse, sign, comps_p, comps_q = _log_ratio_fns(sigma, q, pair)
    means = [m for _, m in comps_p + comps_q]
    x_lo = min(means) - _X_TAIL_Z * sigma
    x_hi = max(means) + _X_TAIL_Z * sigma
    l_ends = np.sort(loss(np.array([x_lo, x_hi])))
    j_min = math.floor(l_ends[0] / h)
    j_max = math.ceil(l_ends[1] / h)
    if j_max == j_min:
        j_max += 1
    n_bins = j_max - j_min
    if n_bins > _MAX_STEP_BINS:
        raise ValueError(f"grid_step {h} needs {n_bins} bins for one release; use a coarser one")
    l_edges = (j_min + np.arange(n_bins + 1)) * h
    x_edges = inverse(l_edges)
    if sign < 0:
        x_edges = x_edges[::-1]
    # Intervals in increasing x: (-inf, e_0], bins..., [e_n, inf); in increasing loss order
    # after flipping back when L decreases in x.
    full = np.concatenate(([-np.inf], x_edges, [np.inf]))

    component = {mu: _interval_masses(full, mu, sigma) for mu in set(means)}

    def mixture_masses(comps):
        out = np.zeros(full.size - 1)
        for weight, mu in comps:
            out += weight * component[mu]
        return out if sign > 0 else out[::-1]

    pm = mixture_masses(comps_p)
    qm = mixture_masses(comps_q)
    below, above = pm[0], pm[-1]
    pb, qb = pm[1:-1], qm[1:-1]
    # Split each bin's P-mass between its edges preserving E_P[exp(-L)] (= Q-mass of the bin):
    # upper share a with a e^{-h} + (pb - a) = qb e^{l_j}.
    with np.errstate(divide="ignore"):
        q_scaled = np.exp(np.log(qb) + l_edges[:-1])
    upper = np.clip((pb - q_scaled) / -math.expm1(-h), 0.0, pb)
    lower = pb - upper
    probs = np.zeros(n_bins + 1)
    probs[:-1] += lower
    probs[1:] += upper
    probs[0] += below  # losses below the grid, moved up to its lowest point
    return PrivacyLossDistribution(h, j_min, probs, float(above))


def _symmetrised_pld(remove: PrivacyLossDistribution) -> PrivacyLossDistribution:
    """The symmetric pair dominating both orders of a pair, from the PLD of its worse order.

    ``remove`` is a pessimistic PLD ``(P_R, Q_R)`` (``Q_R(l) = e^{-l} P_R(l)``) whose
    profile dominates the reverse order for every ``eps >= 0``: ``delta_R(eps) >=
    delta_A(eps)``. The result ``(P*, Q*)`` keeps ``P_R`` on losses ``l > 0``, puts
    ``Q_R``'s mass of loss ``l`` at loss ``-l`` (so ``P*(-l) = e^{-l} P_R(l)`` and
    ``Q*(x) = P*(-x)``: swapping the two data sets mirrors the pair) and the rest,
    ``1 - P_R(L > 0) - Q_R(L > 0) - P_R(+inf)``, at loss 0. Its profile is ``delta_R(eps)`` for
    ``eps >= 0`` and ``1 - e^eps + e^eps delta_R(-eps)`` for ``eps < 0``, which is at least the
    profile of either order at every ``eps`` in R (for ``eps < 0`` by
    ``H_{e^eps}(P||Q) = 1 - e^eps + e^eps H_{e^-eps}(Q||P)``). This is the privacy profile of
    the symmetrised trade-off function ``min{f, f^-1}**`` (Dong, Roth & Su 2022, Prop. F.2 /
    Thm 4.2's explicit form for subsampling), i.e. the conjugate of the max of the two orders'
    profiles. So ``(P*, Q*)`` is a dominating pair, in both orders, of every step whatever
    order an adversary picks there, and its self-composition bounds every adaptive
    order-switching strategy (Zhu, Dong & Wang 2022, Thm 10).
    """
    h = remove.grid_step
    losses_idx = remove.offset + np.arange(remove.probs.size)
    pos = losses_idx > 0
    p_pos = remove.probs[pos]
    j_pos = losses_idx[pos]
    q_pos = p_pos * np.exp(-j_pos * h)
    atom = 1.0 - remove.infinity_mass - float(p_pos.sum()) - float(q_pos.sum())
    # P_R(L > 0) + Q_R(L > 0) <= 1 for the subsampled Gaussian pairs (their losses are
    # positive on x > 1/2 only, where Q = N(0) has less mass than P has below it); a negative
    # atom would mean the input was not such a pair.
    if atom < -1e-12:
        raise AssertionError(f"symmetrisation needs P(L>0) + Q(L>0) <= 1, off by {-atom:.3g}")
    top = int(j_pos.max()) if j_pos.size else 0
    probs = np.zeros(2 * top + 1)
    probs[top + j_pos] += p_pos  # losses l > 0: P_R
    probs[top - j_pos] += q_pos  # losses -l: Q_R's mass of loss l
    probs[top] += max(atom, 0.0)
    return PrivacyLossDistribution(h, -top, probs, remove.infinity_mass)


def default_grid_step(sigma: float, q: float, k: int = 1, *, pair: str) -> float:
    """Grid step used by default for one pair of :data:`PAIRS`: ``s / 128`` for the
    per-release loss std ``s``, coarsened only when the composition window or the per-release
    grid would exceed the size caps. ``"symmetric"`` uses the grid of ``"remove"``, from which
    it is built."""
    pair = "remove" if pair == "symmetric" else pair
    _, s = _loss_moments(sigma, q, pair)
    h = s / _BINS_PER_STD
    # window of the k-fold composition is about 2 * 9.5 sqrt(k) s wide
    h = max(h, 20.0 * math.sqrt(k) * s / (_MAX_WINDOW / 2))
    loss, _, _, comps_p, comps_q = _log_ratio_fns(sigma, q, pair)
    means = [m for _, m in comps_p + comps_q]
    ends = loss(np.array([min(means) - _X_TAIL_Z * sigma, max(means) + _X_TAIL_Z * sigma]))
    width = float(abs(ends[1] - ends[0]))
    h = max(h, 1.01 * width / _MAX_STEP_BINS)
    return float(h)


def _validate(sigma, q, k, relation):
    sigma = check_positive("sigma", sigma)
    q = _check_q(q)
    k = check_int("k", k, minimum=1)
    check_choice("relation", relation, RELATIONS)
    return sigma, q, k, relation


def _pairs(sigma: float, relation: str) -> tuple[tuple[float, str], ...]:
    """(sigma, pair) of each order to evaluate; delta is the largest of them."""
    if relation == "substitute-legacy":
        return ((sigma, "substitute-legacy"),)
    if relation == "substitute":
        # one pair dominating both orders of the add-remove pairs with mixture component
        # N(2, sigma^2) (scaled by 1/2), so that order switching between steps is covered
        return ((0.5 * sigma, "symmetric"),)
    # add-remove: the order is fixed by which data set holds the extra record
    return ((sigma, "remove"), (sigma, "add"))


def _pair_step_pld(sigma: float, q: float, pair: str, h: float) -> PrivacyLossDistribution:
    """One release's pessimistic PLD of any pair of :data:`PAIRS` on the grid ``h Z``."""
    if pair == "symmetric":
        return _symmetrised_pld(_step_pld(sigma, q, "remove", h))
    return _step_pld(sigma, q, pair, h)


@lru_cache(maxsize=32)
def _cached_step(sigma: float, q: float, pair: str, h: float) -> PrivacyLossDistribution:
    return _pair_step_pld(sigma, q, pair, h)


@lru_cache(maxsize=16)
def _cached_composed(sigma: float, q: float, k: int, pair: str) -> PrivacyLossDistribution:
    h = default_grid_step(sigma, q, k, pair=pair)
    while True:
        try:
            return _cached_step(sigma, q, pair, h).self_compose(k)
        except _WindowTooLarge as err:
            # heavy-tailed compositions (tiny sigma and q) need a wider window than the
            # Gaussian estimate in default_grid_step: coarsen, which stays an upper bound
            h *= max(1.25, 1.1 * err.n_window / _MAX_WINDOW)


def subsampled_gaussian_pld(sigma: float, q: float, k: int = 1, *, pair: str,
                            grid_step: float | None = None) -> PrivacyLossDistribution:
    """Pessimistic PLD of k releases of the subsampled Gaussian mechanism for one pair order.

    Parameters
    ----------
    sigma : float
        Noise standard deviation divided by the per-example clip bound.
    q : float
        Sampling rate in (0, 1].
    k : int
        Number of releases composed.
    pair : {"remove", "add", "symmetric", "substitute-legacy"}
        ``"remove"``: ``(1-q)N(0,s^2) + qN(1,s^2)`` vs ``N(0,s^2)``; ``"add"``: the reverse;
        ``"symmetric"``: one pair dominating both orders (see :func:`_symmetrised_pld`);
        ``"substitute-legacy"``: ``(1-q)N(0,s^2) + qN(1,s^2)`` vs ``(1-q)N(0,s^2) + qN(-1,s^2)``
        (not dominating for fixed-size batches; see the module docstring). The pair of
        ``relation="substitute"`` is ``"symmetric"`` at ``sigma / 2``.
    grid_step : float, optional
        Loss grid spacing; default :func:`default_grid_step`.

    Returns
    -------
    PrivacyLossDistribution
    """
    sigma = check_positive("sigma", sigma)
    q = _check_q(q)
    k = check_int("k", k, minimum=1)
    check_choice("pair", pair, PAIRS)
    if grid_step is None:
        return _cached_composed(sigma, q, k, pair)
    h = check_positive("grid_step", grid_step)
    return _pair_step_pld(sigma, q, pair, h).self_compose(k)


def gaussian_pld(mu: float, grid_step: float) -> PrivacyLossDistribution:
    """Pessimistic PLD of a full-data Gaussian mechanism of cost ``mu`` on the grid ``h Z``.

    ``mu`` in the units of :mod:`dpmcmc.accounting.gaussian` (μ = Δ²/(2σ²), additive over
    releases): the pair ``N(Δ, σ²)`` vs ``N(0, σ²)``, whose privacy loss is ``N(μ, 2μ)`` under
    the first. It is symmetric (swapping the data sets mirrors it), so it dominates both orders
    of every step: composed with a PLD that does too (the ``"symmetric"`` pair of the
    substitute relation, or either order of add-remove), the result bounds the adaptive
    composition (Zhu, Dong & Wang 2022, Thm 10). It is the ``"remove"`` pair at ``q = 1``
    (``N(1, s²)`` vs ``N(0, s²)``) with ``s = 1/√(2μ)``, discretised by the same
    connect-the-dots rule (an upper bound on delta).
    """
    mu = check_positive("mu", mu)
    h = check_positive("grid_step", grid_step)
    return _step_pld(1.0 / math.sqrt(2.0 * mu), 1.0, "remove", h)


def _with_start(pld: PrivacyLossDistribution, init_mu: float) -> PrivacyLossDistribution:
    """``pld`` composed with a Gaussian start of cost ``init_mu`` (if any) on its grid."""
    if not init_mu:
        return pld
    return pld.compose(gaussian_pld(init_mu, pld.grid_step))


# The values themselves, per order: a plan, its warnings and a budget search ask for the same
# (sigma, q, k) at the same delta or epsilon again and again (a grid search of ~10 ms each).
@lru_cache(maxsize=256)
def _cached_delta(sigma: float, q: float, k: int, pair: str, init_mu: float, epsilon: float) -> float:
    return _with_start(_cached_composed(sigma, q, k, pair), init_mu).get_delta(epsilon)


@lru_cache(maxsize=256)
def _cached_epsilon(sigma: float, q: float, k: int, pair: str, init_mu: float, delta: float) -> float:
    return _with_start(_cached_composed(sigma, q, k, pair), init_mu).get_epsilon(delta)


def subsampled_gaussian_delta(sigma: float, q: float, k: int, epsilon: float,
                              relation: str = "substitute", *, init_mu: float = 0.0) -> float:
    """Upper bound on delta(epsilon) of k adaptive releases of the subsampled Gaussian mechanism.

    Parameters
    ----------
    sigma : float
        Noise standard deviation divided by the per-example clip bound (> 0).
    q : float
        Sampling rate in (0, 1]: batch fraction (substitute relations) or Poisson rate
        (add-remove).
    k : int
        Number of releases (>= 1).
    epsilon : float
        Privacy parameter (>= 0).
    relation : {"substitute", "add-remove", "substitute-legacy"}
        Neighbouring relation; see the module docstring for the dominating pairs.
        ``"substitute"`` (fixed-size batches without replacement, replace one record)
        composes the symmetrisation of the ``"add-remove"`` pairs at ``sigma / 2``, valid
        when the worse order changes from release to release; ``"add-remove"`` takes the max
        of its two orders' separate compositions (valid there: the order is fixed by the
        pair of data sets). ``"substitute-legacy"`` is the papers' symmetric pair
        ``(1-q)N(0,s^2) + qN(±1,s^2)`` (Fourier accountant ``get_delta_S``, dp-accounting
        ``REPLACE_ONE``); it is NOT an upper bound for fixed-size batches and may understate
        delta by orders of magnitude, so use it only to reproduce published numbers.
    init_mu : float, optional
        Keyword only. μ of full-data Gaussian releases made before the k releases (a private
        start), composed with them through :func:`gaussian_pld` on the same grid (keeping
        the bound on delta, and its validity under adaptive composition).

    Returns
    -------
    float
        A rigorous upper bound on the hockey-stick divergence of k adaptive releases under the
        relation, within about 0.2 % of the exact value of the composed pair(s).

    Raises
    ------
    ValueError
        Naming the offending argument.
    """
    sigma, q, k, relation = _validate(sigma, q, k, relation)
    epsilon = check_nonnegative("epsilon", epsilon)
    init_mu = check_nonnegative("init_mu", init_mu)
    return max(_cached_delta(s, q, k, pair, init_mu, epsilon) for s, pair in _pairs(sigma, relation))


def subsampled_gaussian_epsilon(sigma: float, q: float, k: int, delta: float,
                                relation: str = "substitute", *, init_mu: float = 0.0) -> float:
    """Smallest epsilon with ``subsampled_gaussian_delta(sigma, q, k, epsilon) <= delta``.

    Parameters
    ----------
    sigma, q, k, relation, init_mu
        As in :func:`subsampled_gaussian_delta`.
    delta : float
        Target delta in (0, 1).

    Returns
    -------
    float
        epsilon >= 0 (``math.inf`` if no finite epsilon reaches ``delta``).
    """
    sigma, q, k, relation = _validate(sigma, q, k, relation)
    delta = check_probability("delta", delta)
    init_mu = check_nonnegative("init_mu", init_mu)
    return max(_cached_epsilon(s, q, k, pair, init_mu, delta) for s, pair in _pairs(sigma, relation))
