"""DP Barker (002, Heikkilä et al. 2019): subsampled Barker test with a CLT correction.

Correction distribution
-----------------------
The acceptance test ``Δ* + X_nc + X_corr > 0`` needs ``X_corr`` with
``N(0, C) + X_corr ≈ Logistic(0, 1)``. The fit, its measured accuracy and sampling live in
:mod:`dpmcmc.samplers._barker_correction` and are re-exported here:
:func:`correction_mixture`, :func:`correction_error`, :func:`sample_correction`,
:func:`acceptance_probability`, :func:`fit_correction`.
"""
from dpmcmc.samplers._barker_correction import (
    LOG_ODDS_RANGE,
    LOG_ODDS_TARGET,
    LOGISTIC_VARIANCE,
    SUP_CDF_TARGET,
    CorrectionMixture,
    acceptance_probability,
    correction_error,
    correction_mixture,
    fit_correction,
    sample_correction,
    validate_correction_variance,
)

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
