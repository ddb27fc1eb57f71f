"""Tight (ε, δ) of Gaussian mechanisms composed with pure ε-DP mechanisms.

A release whose mechanism is pure ``εᵢ``-DP (a Laplace or K-norm mechanism calibrated to the
release's sensitivity set) is ``f_{εᵢ,0}``-DP in the language of Dong, Roth & Su (2022), and
``f_{εᵢ,0}`` is the trade-off function of randomized response: the pair

    RRᵢ = ( Bernoulli(e^{εᵢ}/(1+e^{εᵢ})),  Bernoulli(1/(1+e^{εᵢ})) )

dominates every pure ``εᵢ``-DP mechanism (Kairouz, Oh & Viswanath 2015). A composition of
Gaussian mechanisms of total μ (this package's unit, ``Σ Δ²/(2σ²)``) is dominated by the
Gaussian pair whose privacy-loss distribution (PLD) is N(μ, 2μ) (:mod:`.gaussian`). The
composition theorem of f-DP (Dong, Roth & Su 2022, Thm 3.2) holds for *adaptive* composition,
and every pair above is symmetric (swapping the two neighbouring data sets gives the same
trade-off function), so the tensor product

    G_μ ⊗ RR₁ ⊗ … ⊗ RR_m

bounds the whole run whatever order of the neighbouring pair an adversary picks at each step
and whatever it chooses from earlier outputs. Its PLD is the convolution of N(μ, 2μ) with the
atoms ``L = Σ ±εᵢ`` (``+εᵢ`` with probability ``e^{εᵢ}/(1+e^{εᵢ})``), so, exactly,

    δ(ε) = Σ_atoms p(L) · δ_G(ε − L),    δ_G(t) = E[(1 − e^{t − Z})₊],  Z ~ N(μ, 2μ),

with ``δ_G`` the Gaussian privacy profile (:func:`.gaussian.log_gaussian_delta` for t ≥ 0;
for t < 0 the same expectation, ``Φ((μ−t)/√(2μ)) − e^t Φ((−μ−t)/√(2μ))``, where nothing
overflows) and ``δ_G(t) = (1 − e^t)₊`` when μ = 0. The sum is taken in log space.

Used by the noise-aware GLM (:mod:`dpmcmc.samplers.noise_aware_glm`), whose last round releases
through the ℓ∞ K-norm mechanism (pure DP) after Gaussian rounds: at the δ users ask for
(≈1e-6) a pure mechanism adds 2–3 times less noise to a low-dimensional statistic than a
Gaussian one of the same ε.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np
from scipy import special

from ._checks import check_nonnegative, check_positive, check_probability
from ._logspace import grouped_logsumexp, logsumexp
from .gaussian import _log_delta_many

__all__ = ["composed_delta", "composed_epsilon", "max_pure_scale"]

# Atoms of the pure part whose privacy losses agree to this many digits are merged.
_MERGE_DECIMALS = 12
_MAX_PURE = 24  # 2^24 atoms at most before merging: far beyond any use here


# gaussian.py's profile is accurate for μ in this range; 0 means "no Gaussian release".
_MU_RANGE = (1e-12, 1e8)


def _check_mu(mu: float) -> float:
    mu = check_nonnegative("mu", mu)
    if mu != 0.0 and not _MU_RANGE[0] <= mu <= _MU_RANGE[1]:
        raise ValueError(f"mu must be 0 or lie in [{_MU_RANGE[0]:g}, {_MU_RANGE[1]:g}], got {mu!r}")
    return mu


def _check_pure(pure: Sequence[float]) -> tuple:
    if isinstance(pure, (str, bytes)) or not hasattr(pure, "__iter__"):
        raise TypeError(f"pure must be a sequence of ε values, got {type(pure).__name__}")
    out = tuple(check_positive(f"pure[{i}]", e) for i, e in enumerate(pure))
    if len(out) > _MAX_PURE:
        raise ValueError(f"pure: at most {_MAX_PURE} pure releases, got {len(out)}")
    return out


def _atoms(pure: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Privacy losses L and log-probabilities of the product of the RR pairs (under P)."""
    loss = np.zeros(1)
    logp = np.zeros(1)
    for e in pure:
        lp_plus = -math.log1p(math.exp(-e))       # log e^ε/(1+e^ε)
        lp_minus = -e - math.log1p(math.exp(-e))  # log 1/(1+e^ε)
        loss = np.concatenate([loss + e, loss - e])
        logp = np.concatenate([logp + lp_plus, logp + lp_minus])
        key = np.round(loss, _MERGE_DECIMALS)
        uniq, inv = np.unique(key, return_inverse=True)
        loss, logp = uniq, grouped_logsumexp(logp, inv, uniq.shape[0])
    return loss, logp


def _log_profile(mu: float, t: np.ndarray) -> np.ndarray:
    """log δ_G(t) of the Gaussian PLD N(μ, 2μ) (μ = 0: the identity mechanism), any real t
    (an array: every atom of the pure part at once)."""
    t = np.asarray(t, dtype=np.float64)
    out = np.full(t.shape, -np.inf)
    neg = t < 0.0
    tn = t[neg]
    if mu == 0.0:
        out[neg] = np.log(-np.expm1(tn))
        return out
    if (~neg).any():
        out[~neg] = _log_delta_many(mu, t[~neg])
    s = math.sqrt(2.0 * mu)
    value = special.ndtr((mu - tn) / s) - np.exp(tn) * special.ndtr((-mu - tn) / s)
    with np.errstate(divide="ignore"):
        out[neg] = np.where(value > 0, np.log(np.maximum(value, 0.0)), -np.inf)
    return out


def _log_composed_delta(mu: float, pure: tuple, epsilon: float) -> float:
    loss, logp = _atoms(pure)
    return logsumexp(logp + _log_profile(mu, epsilon - loss))


def composed_delta(epsilon: float, *, mu: float = 0.0, pure: Sequence[float] = ()) -> float:
    """Tight δ(ε) of Gaussian mechanisms of total ``mu`` composed with pure ``εᵢ``-DP ones.

    Parameters
    ----------
    epsilon : float
        ε ≥ 0.
    mu : float, default 0
        Total μ = Σ Δ²/(2σ²) of the Gaussian releases: 0 (none) or in [1e-12, 1e8].
    pure : sequence of float
        ε of each pure release (each > 0).

    Returns
    -------
    float
        δ ∈ [0, 1] (see the module docstring; valid under adaptive composition, either order).

    Examples
    --------
    >>> round(composed_delta(1.0, pure=[2.0]), 12)  # one RR pair: (1 − e^{1−2}) e²/(1+e²)
    0.557187369062
    """
    epsilon = check_nonnegative("epsilon", epsilon)
    mu = _check_mu(mu)
    pure = _check_pure(pure)
    if not pure and mu == 0.0:
        return 0.0
    log_delta = _log_composed_delta(mu, pure, epsilon)
    return min(1.0, math.exp(log_delta)) if log_delta > -745.2 else 0.0


def composed_epsilon(delta: float, *, mu: float = 0.0, pure: Sequence[float] = ()) -> float:
    """Smallest ε ≥ 0 with :func:`composed_delta` (ε) ≤ ``delta``.

    Parameters
    ----------
    delta : float
        δ in (0, 1).
    mu, pure
        As in :func:`composed_delta`.

    Returns
    -------
    float
        ε to relative accuracy ~1e-12; never above ``Σ pure + ε_G(μ, δ)`` (basic composition).
    """
    delta = check_probability("delta", delta)
    mu = _check_mu(mu)
    pure = _check_pure(pure)
    if not pure and mu == 0.0:
        return 0.0
    log_target = math.log(delta)
    if _log_composed_delta(mu, pure, 0.0) <= log_target:
        return 0.0
    # Basic composition bounds the answer: Σ εᵢ plus the Gaussian's own ε at δ.
    from .gaussian import gaussian_epsilon

    hi = sum(pure) + (gaussian_epsilon(mu, delta) if mu > 0 else 0.0)
    hi = max(hi, 1e-12)
    while _log_composed_delta(mu, pure, hi) > log_target:  # rounding at the bracket only
        hi *= 1.0 + 1e-9
    from scipy import optimize  # on first use (pld._chernoff_end says why)

    return float(optimize.brentq(lambda e: _log_composed_delta(mu, pure, e) - log_target,
                                 0.0, hi, xtol=1e-300, rtol=1e-13, maxiter=500))


def max_pure_scale(epsilon: float, delta: float, shares: Sequence[float], *,
                   mu: float = 0.0) -> float:
    """Largest ``s`` such that Gaussian μ plus pure releases ``s · shares`` satisfy (ε, δ).

    ``δ(ε)`` of the composition increases with every εᵢ, so this is the root of
    ``composed_delta(ε, mu, s·shares) = δ``; it is at least ``(ε − ε_G) / Σ shares`` when the
    Gaussian part alone leaves ε_G < ε at δ/2 (basic composition), and 0 when the Gaussian part
    alone already spends (ε, δ).

    Parameters
    ----------
    epsilon, delta : float
        The budget: ε > 0, δ in (0, 1).
    shares : sequence of float
        Relative sizes of the pure releases (each > 0).
    mu : float, default 0
        Total μ of the Gaussian releases composed with them.

    Returns
    -------
    float
        ``s`` ≥ 0, to relative accuracy ~1e-12; ``composed_delta(ε, mu, s·shares) ≤ δ``.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_probability("delta", delta)
    mu = _check_mu(mu)
    shares = _check_pure(shares)
    if not shares:
        raise ValueError("shares: need at least one pure release")
    return _max_pure_scale(float(epsilon), float(delta), tuple(float(a) for a in shares),
                           float(mu))


# A pure function of public numbers, solved to ~1e-13 (a few hundred evaluations of the composed
# δ); one fit plans its releases several times (the plan, its checks, the report), and a session
# fits a table at the same budget more than once: the root is solved once per distinct input.
@functools.lru_cache(maxsize=1024)
def _max_pure_scale(epsilon: float, delta: float, shares: tuple, mu: float) -> float:
    log_target = math.log(delta)

    def excess(s: float) -> float:
        return _log_composed_delta(mu, tuple(s * a for a in shares), epsilon) - log_target

    if mu > 0 and _log_profile(mu, np.array([epsilon]))[0] >= log_target:
        return 0.0
    lo = 0.0
    hi = 2.0 * epsilon / min(shares)
    while excess(hi) < 0:
        lo, hi = hi, 2.0 * hi
    tiny = 1e-12 * hi
    if excess(tiny) >= 0:
        return 0.0
    from scipy import optimize  # on first use (pld._chernoff_end says why)

    s = float(optimize.brentq(excess, max(lo, tiny), hi, xtol=1e-300, rtol=1e-13, maxiter=500))
    if excess(s) <= 0:
        return s
    # The root may sit a few hundred units in the last place above δ (rtol = 1e-13 is ~450 of
    # them). Search the floats below it for the boundary: gallop down, then bisect, counting in
    # units of the last place (a positive float's bits, read as an integer, order as the floats
    # do). ~20 evaluations of δ instead of one per float stepped; the result is feasible, and
    # where δ is monotone at this scale it is the largest feasible float below the root.
    bad = int(np.float64(s).view(np.int64))
    step = 1
    while True:
        ok = bad - step
        if excess(_float_at(ok)) <= 0:
            break
        bad, step = ok, 2 * step
    while bad - ok > 1:
        mid = (bad + ok) // 2
        if excess(_float_at(mid)) <= 0:
            ok = mid
        else:
            bad = mid
    return _float_at(ok)


def _float_at(bits: int) -> float:
    """The float64 whose bit pattern is the integer ``bits`` (≥ 0: a non-negative float)."""
    return float(np.int64(bits).view(np.float64))
