"""Evaluation diagnostics on released draws: MMD, the MMD two-sample test, mean error, R-hat, ESS.

These read only the (already released) draws and reference samples; nothing here touches the
private data. Pure NumPy (ArviZ for R-hat/ESS).
"""
from __future__ import annotations

from .mmd import MMDTestResult, gaussian_mmd2, median_bandwidth, mmd, mmd_squared, mmd_test
from .summary import RHAT_WARN, ess, mean_error, posterior_summary, rhat

__all__ = [
    "mmd",
    "mmd_squared",
    "mmd_test",
    "MMDTestResult",
    "median_bandwidth",
    "gaussian_mmd2",
    "mean_error",
    "rhat",
    "ess",
    "posterior_summary",
    "RHAT_WARN",
]
