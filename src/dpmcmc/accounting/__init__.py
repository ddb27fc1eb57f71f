"""Privacy accounting for DP MCMC: pure NumPy/SciPy, no JAX.

It imports nothing else of dpmcmc at import time. One upward edge exists, taken at call time:
the name-based budget functions (:func:`max_iterations`, :func:`spent`, :func:`releases`, ...
and :data:`ALGORITHMS`) read an algorithm's release declaration from its spec in
``dpmcmc.samplers`` (ARCHITECTURE.md). The event-based pieces (:mod:`~dpmcmc.accounting.events`)
and the accountants below need nothing else.

* :mod:`~dpmcmc.accounting.gaussian`: tight δ(ε) of Gaussian compositions (Gaussian PLD).
* :mod:`~dpmcmc.accounting.pure`: Gaussian compositions together with pure ε-DP releases
  (exact profile of G_μ ⊗ randomized response).
* :mod:`~dpmcmc.accounting.zcdp`: zCDP conversions.
* :mod:`~dpmcmc.accounting.rdp`: RDP curves, subsampling amplification, conversion.
* :mod:`~dpmcmc.accounting.pld`: numerical PLD of the subsampled Gaussian mechanism.
* :mod:`~dpmcmc.accounting.events`: release events (:class:`ReleaseEvent`) and their constructors,
  and :class:`ReleaseSpec`, the type of an algorithm's release declaration.
* :mod:`~dpmcmc.accounting.budget`: events composed under an accountant;
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
    BudgetTooSmall,
    RELATION,
    RELATIONS,
    algorithm_params,
    max_iterations,
    releases,
    spent,
    supported_accountants,
    supported_relations,
)
from .events import (
    BARKER,
    GAUSSIAN,
    SUBSAMPLED_GAUSSIAN,
    ReleaseEvent,
    ReleaseSpec,
    barker_release,
    gaussian_release,
    subsampled_gaussian_release,
)
from .gaussian import gaussian_delta, gaussian_epsilon, gaussian_mu, log_gaussian_delta
from .pld import subsampled_gaussian_delta, subsampled_gaussian_epsilon
from .pure import composed_delta, composed_epsilon, max_pure_scale
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
    "BudgetTooSmall",
    "ALGORITHMS",
    "BARKER",
    "GAUSSIAN",
    "MAX_ORDER",
    "RELATION",
    "RELATIONS",
    "SUBSAMPLED_GAUSSIAN",
    "PrivacyReport",
    "ReleaseEvent",
    "ReleaseSpec",
    "algorithm_params",
    "barker_release",
    "composed_delta",
    "composed_epsilon",
    "max_pure_scale",
    "gaussian_release",
    "subsampled_gaussian_release",
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


def __getattr__(name: str):
    # ALGORITHMS: the names of the private algorithms, read from their specs on first use
    # (see dpmcmc.accounting.budget._declarations).
    if name == "ALGORITHMS":
        from . import budget

        return budget.ALGORITHMS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
