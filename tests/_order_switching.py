"""Order-switching attack on replace-one composition: a rigorous lower bound on attainable delta.

Under replace-one, each step of a subsampled Gaussian release is, for data sets built as in the
module docstring of :mod:`dpmcmc.accounting.pld`, either the "remove" pair
``R = ((1-q)N(0,s^2) + qN(1,s^2), N(0,s^2))`` or its reverse ``A``, and which one is chosen by
the other records' clipped values (e.g. ``C sign(theta - a)``), i.e. by earlier outputs. An
adversary that picks the order of step ``t`` from the privacy loss ``c`` accumulated so far
attains ``V_0(0)`` with

    V_k(c) = (1 - e^{eps - c})_+,   V_t(c) = max_{o in {R, A}} E_{L ~ omega_o}[V_{t+1}(c + L)].

Lower bound, rigorously: every step's output is first *garbled* (post-processed with
randomness independent of the data) so that its privacy loss lies exactly on the grid
``h Z``: the output space is cut into the intervals whose loss lies in ``[l_j, l_j + h)``
(exact masses from Gaussian CDFs), and each interval is merged with a fraction of the
intervals below it until the merged output's likelihood ratio is exactly ``e^{l_j}``. A
strategy that sees only garbled outputs is a strategy, and garbling never increases a
hockey-stick divergence, so the value of the garbled game is attainable. It is then lowered
further, never raised: losses under the kernel's range are dropped (value 0 <= true value);
states beyond the top of the state range take ``(1 - e^{eps - c})_+``, a lower bound on
the value of any continuation (Jensen: ``E_P[e^{-L}] <= 1``), and states below its bottom
take 0; each step subtracts an allowance for FFT round-off. Any leftover excess at the bottom
of the merge is rounded down (the value is non-decreasing in ``c``).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import signal, special

# FFT round-off allowance per step (values are <= 1; the error of one convolution of arrays
# of a few 1e5 entries is below 1e-12 by a wide margin).
_ROUNDOFF = 1e-12


def _norm_masses(x_edges: np.ndarray, mean: float, s: float) -> np.ndarray:
    """Masses of N(mean, s^2) between consecutive increasing edges (tail-accurate)."""
    z = (x_edges - mean) / s
    tail = special.ndtr(-np.abs(z))
    za, zb = z[:-1], z[1:]
    ta, tb = tail[:-1], tail[1:]
    return np.where(za >= 0, ta - tb, np.where(zb <= 0, tb - ta, 1.0 - ta - tb))


def _x_of_remove_loss(l: np.ndarray, s: float, q: float) -> np.ndarray:
    """x with log((1-q) + q e^{(2x-1)/(2 s^2)}) = l (-inf below log(1-q))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.where(l > math.log1p(-q), l + np.log(-np.expm1(math.log1p(-q) - l)), -np.inf)
    return 0.5 + s * s * (lg - math.log(q))


def _bin_masses(s: float, q: float, order: str, edges: np.ndarray):
    """(P, Q) masses of the loss intervals ``[edges_i, edges_{i+1})`` of one order."""
    mix = lambda xe: (1 - q) * _norm_masses(xe, 0.0, s) + q * _norm_masses(xe, 1.0, s)
    base = lambda xe: _norm_masses(xe, 0.0, s)
    if order == "R":  # loss increasing in x
        xe = _x_of_remove_loss(edges, s, q)
        return mix(xe), base(xe)
    # "A": loss(x) = -L_R(x), decreasing in x: loss in [a, b) <=> L_R in (-b, -a]
    xe = _x_of_remove_loss(-edges[::-1], s, q)
    return base(xe)[::-1], mix(xe)[::-1]


def garbled_kernel(s: float, q: float, order: str, h: float, j_lo: int, j_hi: int) -> np.ndarray:
    """P-masses at losses ``j h`` (``j_lo <= j <= j_hi``) of a garbling of one order's output.

    Mass with loss below ``j_lo h`` is dropped; loss above ``j_hi h`` is merged into the top.
    """
    edges = np.concatenate((np.arange(j_lo, j_hi + 1) * h, [np.inf]))
    p, qm = _bin_masses(s, q, order, edges)
    p, qm = p.astype(float).copy(), qm.astype(float).copy()
    ratio = np.exp(np.arange(j_lo, j_hi + 1) * h)
    out = np.zeros(p.size)
    for j in range(p.size - 1, -1, -1):
        acc_p, acc_q = p[j], qm[j]
        p[j] = qm[j] = 0.0
        r = ratio[j]
        i = j - 1
        excess = acc_p - r * acc_q
        while excess > 0.0 and i >= 0:
            deficit = r * qm[i] - p[i]
            if deficit <= 0.0:
                i -= 1
                continue
            phi = min(1.0, excess / deficit)
            acc_p += phi * p[i]
            acc_q += phi * qm[i]
            p[i] *= 1.0 - phi
            qm[i] *= 1.0 - phi
            if phi < 1.0:
                break
            excess = acc_p - r * acc_q
            i -= 1
        # the merged output has likelihood ratio e^{l_j} (or more, if nothing was left below:
        # then its loss is rounded down to l_j)
        out[j] = acc_p
    return out


def attack_delta(sigma: float, q: float, k: int, eps: float, *, h: float = 2e-3,
                 loss_range=(-1.0, 6.0), state_range=(-4.0, 8.0)) -> float:
    """Lower bound on the delta(eps) an order-switching adversary attains in k releases.

    ``sigma`` in the units of :func:`dpmcmc.accounting.subsampled_gaussian_delta` (the pairs
    are evaluated at ``sigma / 2``); ranges are relative to 0 and to ``eps`` respectively.
    """
    s = sigma / 2
    j_lo, j_hi = math.floor(loss_range[0] / h), math.ceil(loss_range[1] / h)
    kernels = [garbled_kernel(s, q, o, h, j_lo, j_hi) for o in ("R", "A")]
    i_lo, i_hi = math.floor((eps + state_range[0]) / h), math.ceil((eps + state_range[1]) / h)
    c = np.arange(i_lo, i_hi + 1) * h
    # extended states for c + l: indices i_lo + j_lo .. i_hi + j_hi
    c_ext = np.arange(i_lo + j_lo, i_hi + j_hi + 1) * h
    terminal_ext = np.maximum(-np.expm1(eps - c_ext), 0.0)
    below = c_ext < c[0]
    above = c_ext > c[-1]
    inside = ~(below | above)
    v = np.maximum(-np.expm1(eps - c), 0.0)
    for _ in range(k):
        ext = np.where(above, terminal_ext, 0.0)
        ext[inside] = v
        best = None
        for ker in kernels:
            val = signal.fftconvolve(ext, ker[::-1], mode="valid")
            best = val if best is None else np.maximum(best, val)
        v = np.clip(best - _ROUNDOFF, 0.0, 1.0)
    return float(v[int(round(-i_lo))]) if i_lo <= 0 <= i_hi else math.nan
