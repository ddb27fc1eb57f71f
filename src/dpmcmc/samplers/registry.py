"""The algorithm registry: ``ALGORITHMS``, built from the algorithms' own specs.

Each algorithm module defines one :class:`~dpmcmc.samplers.spec.AlgorithmSpec` (``SPEC``:
parameter preparation, kernel builder, release declaration, data access, audit design); this
module only collects them. To add an algorithm, write its module with a ``SPEC`` and list it in
``_MODULES``.

Parameters of each algorithm (``prepare`` fills the defaults shown; "required" ones must be given):

``"rwmh"`` (non-private)
    ``proposal_std`` (required; scalar or one per dimension, > 0), ``clip`` (None: no clipping;
    else b > 0), ``block_size`` (None).
``"hmc"`` (non-private)
    ``step_size`` (required, > 0), ``leapfrog_steps`` (10), ``mass`` (1.0; scalar or per
    dimension, > 0), ``clip`` (None), ``jitter`` (True: randomised-Halton step sizes),
    ``block_size`` (None).
``"dp-penalty"``
    ``tau`` (required, > 0), ``clip`` (required, b > 0), ``proposal_std`` (required), ``mode``
    ("random-walk"; or "one-component", "guided-walk"), ``block_size`` (None).
``"dp-hmc"``
    ``tau_l``, ``tau_g``, ``clip`` (b_l), ``grad_clip`` (b_g), ``step_size`` (all required,
    > 0), ``leapfrog_steps`` (10), ``mass`` (1.0), ``jitter`` (True), ``grad_method`` ("auto";
    or "reverse", "forward", "vmap"), ``grad_dtype`` ("float32": dtype of the per-example
    gradient passes; or "float64"), ``block_size`` (None).

``"dp-barker"``
    ``batch_size`` (required, 11 ≤ b ≤ n), ``proposal_std`` (required), ``n0`` (None:
    ``model.temperature * n``; tempering T = n0/n, clip bound √b/n0), ``mode`` ("random-walk").
``"minibatch-penalty"``
    ``tau``, ``batch_size`` (1 ≤ b ≤ n), ``clip`` (L), ``proposal_std`` (all required), ``mode``
    ("random-walk").

``"dp-sgld"``
    ``step_size`` (η), ``batch_size`` (1 ≤ b ≤ n), ``noise_multiplier``, ``grad_clip`` (all
    required, > 0), ``grad_method`` ("auto"), ``block_size`` (None).
``"dp-sgnht"``
    As ``"dp-sgld"``, plus ``friction`` (A of Ding et al., 1.0).

``block_size`` scans the data in blocks of that many rows in every per-example pass (bounds
memory for large n); it does not change the result beyond float rounding. ``None`` picks
``dpmcmc.records.layout.auto_block_size`` (4096 rows on CPU for n > 8192, one pass on
accelerators).
"""
from __future__ import annotations

from typing import Any, Optional

from dpmcmc.samplers import (barker, dp_hmc, dp_penalty, dp_sgld, dp_sgnht, hmc, minibatch_penalty,
                             noise_aware_glm, rwmh)
from dpmcmc.records.layout import data_axis
from dpmcmc.samplers.spec import AlgorithmSpec

__all__ = ["AlgorithmSpec", "ALGORITHMS", "SAMPLERS", "check_mesh"]

_MODULES = (rwmh, hmc, dp_penalty, dp_hmc, barker, minibatch_penalty, dp_sgld, dp_sgnht,
            noise_aware_glm)

#: ``name -> AlgorithmSpec`` of every registered algorithm.
ALGORITHMS: dict[str, AlgorithmSpec] = {m.SPEC.name: m.SPEC for m in _MODULES}
#: The algorithms that run Markov chains (a kernel; what :func:`dpmcmc.sample` runs). The
#: others are one-shot (``spec.fit``: the noise-aware GLM, which :func:`dpmcmc.glm` runs).
SAMPLERS: dict[str, AlgorithmSpec] = {k: v for k, v in ALGORITHMS.items() if not v.one_shot}


def check_mesh(mesh: Any, algorithm: str, axis_name: Optional[str] = None) -> str:
    """Validate ``mesh`` for ``algorithm``; return the data axis name.

    Every registered algorithm accepts a mesh: its spec's ``data_access`` says how its data are
    split (``_sharding.shard_data`` for full-data passes, ``shard_rows`` for subsampled ones).

    Raises
    ------
    TypeError
        ``mesh`` is not a ``jax.sharding.Mesh``.
    ValueError
        ``algorithm`` is not registered, or the mesh has several axes and no ``axis_name``
        picks one.
    """
    from jax.sharding import Mesh

    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    if algorithm not in SAMPLERS:
        raise ValueError(f"mesh is supported for the algorithms {tuple(SAMPLERS)}, not {algorithm!r}")
    return data_axis(mesh, axis_name)
