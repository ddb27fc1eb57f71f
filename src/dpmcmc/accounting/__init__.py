"""Privacy accounting for DP MCMC: pure NumPy/SciPy, no JAX, nothing else of dpmcmc.

* :mod:`~dpmcmc.accounting.gaussian`: tight δ(ε) of Gaussian compositions (Gaussian PLD).
* :mod:`~dpmcmc.accounting.zcdp`: zCDP conversions.
* :mod:`~dpmcmc.accounting.rdp`: RDP curves, subsampling amplification, conversion.
* :mod:`~dpmcmc.accounting.pld`: numerical PLD of the subsampled Gaussian mechanism.
* :mod:`~dpmcmc.accounting.budget`: what each algorithm releases per iteration,
  :func:`max_iterations` and :func:`spent`.
* :class:`PrivacyReport`: the (ε, δ) of a run and what it was spent on.

The neighbouring relation is "substitute" (replace one record) throughout. For subsampled
Gaussian samplers under the PLD accountant, ``relation="substitute-legacy"`` reproduces the
papers' numbers with a pair that is not an upper bound for fixed-size batches (see
:mod:`dpmcmc.accounting.pld`); the report then says so.
"""
from __future__ import annotations

from .budget import (
    ACCOUNTANTS,
    ALGORITHMS,
    BARKER,
    GAUSSIAN,
    RELATION,
    RELATIONS,
    SUBSAMPLED_GAUSSIAN,
    Release,
    algorithm_params,
    max_iterations,
    releases,
    spent,
    supported_accountants,
    supported_relations,
)
from .gaussian import gaussian_delta, gaussian_epsilon, gaussian_mu, log_gaussian_delta
from .pld import subsampled_gaussian_delta, subsampled_gaussian_epsilon
from .rdp import (
    MAX_ORDER,
    barker_orders,
    barker_direct_rdp,
    barker_rdp,
    default_orders,
    gaussian_rdp,
    conversion_offset,
    rdp_to_epsilon,
    subsampled_rdp,
)
from .report import PrivacyReport
from .zcdp import zcdp_epsilon, zcdp_rho

__all__ = [
    "ACCOUNTANTS",
    "ALGORITHMS",
    "BARKER",
    "GAUSSIAN",
    "MAX_ORDER",
    "RELATION",
    "RELATIONS",
    "SUBSAMPLED_GAUSSIAN",
    "PrivacyReport",
    "Release",
    "algorithm_params",
    "barker_orders",
    "barker_direct_rdp",
    "barker_rdp",
    "default_orders",
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_mu",
    "gaussian_rdp",
    "log_gaussian_delta",
    "max_iterations",
    "conversion_offset",
    "rdp_to_epsilon",
    "releases",
    "spent",
    "subsampled_gaussian_delta",
    "subsampled_gaussian_epsilon",
    "subsampled_rdp",
    "supported_accountants",
    "supported_relations",
    "zcdp_epsilon",
    "zcdp_rho",
]
