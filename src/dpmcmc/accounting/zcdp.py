"""Zero-concentrated DP (ρ-zCDP) conversions (thesis 001 Thm 1 and Thm 5).

A Gaussian release with sensitivity Δ and noise standard deviation σ is
μ-zCDP with μ = Δ²/(2σ²), and zCDP composes additively, so a composition of
Gaussian mechanisms with total μ is μ-zCDP. The conversion to (ε, δ)-DP is
ε = ρ + √(4ρ ln(1/δ)); its inverse, the largest ρ meeting (ε, δ), is
ρ = (√(ε + ln(1/δ)) − √(ln(1/δ)))². Both are valid but loose compared with the
tight Gaussian bound of :mod:`dpmcmc.accounting.gaussian`.
"""
from __future__ import annotations

import math

from ._checks import check_nonnegative, check_positive, check_probability

__all__ = ["zcdp_rho", "zcdp_epsilon"]


def zcdp_epsilon(rho: float, delta: float) -> float:
    """ε of the (ε, δ)-DP guarantee implied by ρ-zCDP: ε = ρ + √(4ρ ln(1/δ)).

    Parameters
    ----------
    rho : float
        ρ ≥ 0.
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        ε ≥ 0.
    """
    rho = check_nonnegative("rho", rho)
    delta = check_probability("delta", delta)
    return rho + math.sqrt(4.0 * rho * -math.log(delta))


def zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest ρ such that ρ-zCDP implies (ε, δ)-DP: ρ = (√(ε − ln δ) − √(−ln δ))².

    Evaluated as ε² / (√(ε + L) + √L)² with L = ln(1/δ), which avoids the cancellation
    of the difference of square roots when ε ≪ L.

    Parameters
    ----------
    epsilon : float
        ε > 0.
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        ρ > 0.
    """
    epsilon = check_positive("epsilon", epsilon)
    delta = check_probability("delta", delta)
    log_inv_delta = -math.log(delta)
    return epsilon * epsilon / (math.sqrt(epsilon + log_inv_delta) + math.sqrt(log_inv_delta)) ** 2
