"""How an algorithm reads the records: once per run, outside the step, never a value-based branch.

- :mod:`~dpmcmc.records.layout` — the rows laid out in blocks (``PreparedData``), decided from
  shapes, dtypes and parameters only.
- :mod:`~dpmcmc.records.passes` — the per-record passes: clipped log-likelihood-ratio and
  gradient sums in one scan over the blocks (columnar, fused clipping).
- :mod:`~dpmcmc.records.clip` — the clipping rules (non-finite terms bounded like any other).
- :mod:`~dpmcmc.records.jaxpr_rewrite` — the rewrite of a per-record function into a
  per-column one (no padded cotangents).
- :mod:`~dpmcmc.records.sharding` — rows split over a device mesh
  (:func:`~dpmcmc.records.sharding.data_mesh`); the noise is still drawn once, on the assembled
  statistic.
"""
from dpmcmc.records.sharding import data_mesh

__all__ = ["data_mesh"]
