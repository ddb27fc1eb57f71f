"""Empirical privacy audit: does a sampler leak more than its accountant claims?

- :func:`audit` — run a private sampler many times on worst-case neighbouring data sets and
  turn a distinguishing test into a lower bound on ε (Clopper–Pearson, stated confidence).
- :class:`AuditResult` — claimed ε, audited lower bounds (released statistics and final draws),
  rates and intervals, ``flagged``.
- :data:`AUDITS` — the :class:`AuditEntry` of every audited algorithm (the worst-case design,
  the tapped kernel, and the test statistics), read from its card (``SPEC.audit``); the designs
  and constants (``far_row_design``, ``one_sided_design``, ``FAR``, ...) come from
  :mod:`dpmcmc.samplers.audit_design`.
- :func:`clopper_pearson`, :func:`epsilon_lower_bound` — the statistics, reusable.

See docs/audit.md for the method, the measured table and how to add an algorithm.
"""
from dpmcmc.audit._core import AUDITS, DEFAULTS, STATISTICS, AuditResult, audit
from dpmcmc.samplers.audit_design import (FAR, MAX_DESIGN_ROWS, SUBSAMPLED_N, AuditDesign,
                                           AuditEntry, far_row_design, one_sided_design)
from dpmcmc.audit._stats import (
    AuditOutcome,
    clopper_pearson,
    epsilon_lower_bound,
    evaluate_threshold,
    select_threshold,
)

__all__ = [
    "audit",
    "AuditResult",
    "AUDITS",
    "AuditEntry",
    "AuditDesign",
    "far_row_design",
    "one_sided_design",
    "FAR",
    "SUBSAMPLED_N",
    "MAX_DESIGN_ROWS",
    "AuditOutcome",
    "clopper_pearson",
    "epsilon_lower_bound",
    "select_threshold",
    "evaluate_threshold",
    "DEFAULTS",
    "STATISTICS",
]
