"""Tight (ε, δ) bound of an adaptive composition of Gaussian mechanisms.

A composition of Gaussian mechanisms with sensitivities Δᵢ and noise standard
deviations σᵢ has the Gaussian privacy-loss distribution N(μ, 2μ) with
μ = Σ Δᵢ²/(2σᵢ²) (Sommer et al.; paper 000 Thm 2.4, thesis 001 Thm 4 and 12), and

    δ(ε) = ½ (erfc(a) − e^ε erfc(b)),   a = (ε − μ)/(2√μ),   b = (ε + μ)/(2√μ).

Numerics. ``b² − a² = ε``, so ``e^ε erfc(b) = e^{−a²} erfcx(b)`` and

    δ(ε) = ½ e^{−a²} (erfcx(a) − erfcx(b)),   b − a = √μ.

The prefactor is handled in log space, which removes the overflow of e^ε past
ε ≈ 710 and the underflow of both terms. What remains is the difference of two
scaled complementary error functions. Where it does not cancel badly (b − a not
small against the scale on which erfcx varies) it is evaluated directly and loses
at most about one digit. Where it does, it is written as the integral

    erfcx(a) − erfcx(b) = ∫_a^b g(t) dt,   g(t) = −erfcx'(t) = 2/√π − 2 t erfcx(t) > 0,

over the short interval [a, a + √μ], integrated by Gauss–Legendre quadrature (the
integrand is entire and nearly constant there, so 8 nodes are exact to rounding).
``g`` itself cancels for large t; there its asymptotic series is used. The
result keeps a relative error below 1e-12 on μ ∈ [1e-10, 1e6], ε ∈ [0, 1000]
wherever δ is a normal double (checked against mpmath in the tests).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special

from ._checks import check_nonnegative, check_positive, check_probability

__all__ = ["gaussian_delta", "log_gaussian_delta", "gaussian_epsilon", "gaussian_mu"]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LOG_HALF = math.log(0.5)
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(8)
# Above this t, 2/√π − 2t·erfcx(t) loses more than ~1e-13 relative; the asymptotic
# series is used instead (its first omitted term is < 1e-17 relative for t ≥ 20).
_ASYMPTOTIC_T = 20.0
# Use the quadrature when √μ is below this fraction of the local scale max(1, a).
_QUAD_FRACTION = 0.05


def _neg_erfcx_prime(t: np.ndarray) -> np.ndarray:
    """g(t) = −d/dt erfcx(t) = 2/√π − 2 t erfcx(t), accurate to a few ulp·t² for t < 20
    and to rounding above (asymptotic series)."""
    t = np.asarray(t, dtype=np.float64)
    out = np.empty_like(t)
    small = t < _ASYMPTOTIC_T
    ts = t[small]
    out[small] = _TWO_OVER_SQRT_PI - 2.0 * ts * special.erfcx(ts)
    tl = t[~small]
    if tl.size:
        # 2/√π Σ_{m≥1} (−1)^{m+1} (2m−1)!! / (2t²)^m
        x = 1.0 / (2.0 * tl * tl)
        term = x.copy()
        total = term.copy()
        for m in range(2, 14):
            term = -term * (2 * m - 1) * x
            total += term
        out[~small] = _TWO_OVER_SQRT_PI * total
    return out


def _log_delta_many(mu: float, epsilon: np.ndarray) -> np.ndarray:
    """ln δ(εⱼ) of N(μ, 2μ) for an array of ε ≥ 0 (see the module docstring for the numerics).

    One vectorised pass: the pure-DP composition (:mod:`.pure`) evaluates the profile at every
    atom of its privacy loss, a few hundred points per evaluation inside a root search."""
    epsilon = np.asarray(epsilon, dtype=np.float64)
    h = math.sqrt(mu)
    a = (epsilon - mu) / (2.0 * h)
    out = np.empty_like(a)
    # ε < μ with a wide interval: erfcx(a) may overflow, but erfc(a) ∈ (1, 2] and the
    # subtracted term is at most 1, so the plain form is safe and well conditioned.
    plain = (a < 0.0) & (h >= _QUAD_FRACTION)
    ap = a[plain]
    bp = (epsilon[plain] + mu) / (2.0 * h)
    out[plain] = _LOG_HALF + np.log(special.erfc(ap) - np.exp(-ap * ap) * special.erfcx(bp))
    # Elsewhere a ≥ −h/2 > −0.025 whenever a < 0, so erfcx(a) is finite; what is left is
    # log(erfcx(a) − erfcx(a + h)), taken without cancellation.
    rest = ~plain
    ar = a[rest]
    diff = np.empty_like(ar)
    # Short interval: integrate g over [a, a + h]; every term is positive.
    short = h < _QUAD_FRACTION * np.maximum(1.0, ar)
    t = ar[short, None] + 0.5 * h * (1.0 + _GL_NODES)[None, :]
    diff[short] = np.log(0.5 * h * (_neg_erfcx_prime(t) @ _GL_WEIGHTS))
    # Relative difference is at least ~5 %: direct subtraction is accurate.
    al = ar[~short]
    diff[~short] = np.log(special.erfcx(al) - special.erfcx(al + h))
    out[rest] = _LOG_HALF - ar * ar + diff
    return out


def _log_delta(mu: float, epsilon: float) -> float:
    return float(_log_delta_many(mu, np.array([epsilon], dtype=np.float64))[0])


def log_gaussian_delta(mu: float, epsilon: float) -> float:
    """Natural log of the tight δ(ε) of a Gaussian privacy-loss distribution N(μ, 2μ).

    Parameters
    ----------
    mu : float
        Total μ = Σ Δᵢ²/(2σᵢ²) of the composition, > 0.
    epsilon : float
        ε ≥ 0.

    Returns
    -------
    float
        ln δ(ε); finite for every valid input (far below the double range of δ itself).

    Raises
    ------
    ValueError, TypeError
        If ``mu`` is not a positive finite number or ``epsilon`` is negative.
    """
    mu = check_positive("mu", mu)
    epsilon = check_nonnegative("epsilon", epsilon)
    return _log_delta(mu, epsilon)


def gaussian_delta(mu: float, epsilon: float) -> float:
    """Tight δ(ε) of an adaptive composition of Gaussian mechanisms with total μ.

    ``δ(ε) = ½ (erfc((ε−μ)/(2√μ)) − e^ε erfc((ε+μ)/(2√μ)))`` (paper 000 Thm 2.4),
    evaluated without overflow or cancellation (see the module docstring).

    Parameters
    ----------
    mu : float
        Total μ = Σ Δᵢ²/(2σᵢ²) > 0; one release with sensitivity Δ and noise standard
        deviation σ contributes Δ²/(2σ²).
    epsilon : float
        ε ≥ 0.

    Returns
    -------
    float
        δ ∈ [0, 1]. Relative error below 1e-9 wherever δ ≥ 1e-300; exactly 0.0 only
        where δ underflows the double range (δ < 1e-300 or smaller).

    Examples
    --------
    >>> round(gaussian_delta(1.0, 1.0), 12)
    0.286208211922
    """
    log_delta = log_gaussian_delta(mu, epsilon)
    return min(1.0, math.exp(log_delta)) if log_delta > -745.2 else 0.0


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ε ≥ 0 with δ(ε) ≤ ``delta`` for a Gaussian PLD with total μ.

    Parameters
    ----------
    mu : float
        Total μ > 0.
    delta : float
        Target δ in (0, 1); values down to 1e-300 are supported.

    Returns
    -------
    float
        ε, to relative accuracy 1e-9 or better for ``delta`` ≤ 0.5 (0.0 if δ(0) ≤ ``delta``
        already). Close to δ = 1 the map ε ↦ δ is flat to within double rounding, so ε is only
        determined to about 1e-16 / |dδ/dε| there.
    """
    mu = check_positive("mu", mu)
    delta = check_probability("delta", delta)
    log_target = math.log(delta)
    if _log_delta(mu, 0.0) <= log_target:
        return 0.0
    # δ(ε) ≤ P(L > ε) for the loss L ~ N(μ, 2μ): this ε is always feasible.
    z = -special.ndtri(delta) if delta > 1e-300 else math.sqrt(-2.0 * math.log(delta))
    hi = mu + math.sqrt(2.0 * mu) * max(z, 1.0)
    while _log_delta(mu, hi) > log_target:  # guard; the tail bound makes this rare
        hi *= 2.0
    from scipy import optimize  # on first use (pld._chernoff_end says why)

    return float(
        optimize.brentq(
            lambda e: _log_delta(mu, e) - log_target, 0.0, hi, xtol=1e-300, rtol=1e-14, maxiter=500
        )
    )


def gaussian_mu(epsilon: float, delta: float) -> float:
    """Largest total μ whose Gaussian PLD satisfies (ε, δ)-DP.

    δ(ε; μ) increases in μ, so this is the root of δ(ε; μ) = δ. Useful to turn a budget
    into a number of Gaussian releases: k = ⌊gaussian_mu(ε, δ) / μ_per_release⌋.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        μ* with δ(ε; μ*) = δ, to relative accuracy ~1e-13.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_probability("delta", delta)
    log_target = math.log(delta)
    # zCDP is a valid but loose conversion, so its ρ is feasible: a lower bracket.
    log_delta_ln = -log_target
    lo = (math.sqrt(epsilon + log_delta_ln) - math.sqrt(log_delta_ln)) ** 2
    lo = max(lo, 1e-300)
    while _log_delta(lo, epsilon) > log_target:  # only from rounding at the bracket
        lo *= 0.5
    hi = max(2.0 * lo, 1e-300)
    while _log_delta(hi, epsilon) <= log_target:
        hi *= 2.0
    from scipy import optimize  # on first use (pld._chernoff_end says why)

    log_mu = optimize.brentq(
        lambda lm: _log_delta(math.exp(lm), epsilon) - log_target,
        math.log(lo),
        math.log(hi),
        xtol=1e-15,
        rtol=1e-15,
        maxiter=500,
    )
    return math.exp(log_mu)
