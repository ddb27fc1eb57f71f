"""The algorithm spec: everything about one algorithm, held by its own module.

Each algorithm module (``rwmh``, ``hmc``, ``dp_penalty``, ``dp_hmc``, ``barker``,
``minibatch_penalty``, ``dp_sgld``, ``dp_sgnht``) defines one :class:`AlgorithmSpec` named
``SPEC``; :mod:`dpmcmc.samplers._registry` collects them into ``ALGORITHMS``. Nothing else keeps
a table keyed by algorithm name: the accountant reads ``SPEC.releases``, the run reads
``SPEC.data_access``, the audit resolves ``SPEC.audit``.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, NamedTuple, Optional

import jax.numpy as jnp

from dpmcmc.accounting._checks import check_int, check_param_names
from dpmcmc.accounting.events import Release, ReleaseSpec
from dpmcmc.samplers._layout import PreparedData
from dpmcmc.samplers._sharding import ShardedRows
from dpmcmc.samplers._types import Kernel

__all__ = ["AlgorithmSpec", "FULL", "SUBSAMPLED", "DATA_ACCESS", "check_common", "as_data", "optional_block"]

#: ``data_access`` of an algorithm whose every data access is a full-data pass (split over a
#: mesh by ``_sharding.shard_data``; the data are laid out in blocks).
FULL = "full"
#: ``data_access`` of an algorithm that gathers a fixed-size batch of rows per iteration
#: (``_sharding.shard_rows``; the data stay one device array).
SUBSAMPLED = "subsampled"
DATA_ACCESS = (FULL, SUBSAMPLED)


class AlgorithmSpec(NamedTuple):
    """One algorithm: its parameters, kernel, releases, data access and audit.

    Attributes
    ----------
    name : str
    private : bool
        Whether the algorithm is differentially private (its data accesses are accounted).
    prepare : callable
        ``prepare(params: dict, model, n) -> dict``: validate (ValueError/TypeError naming the
        argument) and fill defaults. Touches no data.
    build : callable
        ``build(model, data, params) -> Kernel`` from prepared params; the private algorithms'
        also take ``noise=`` (a :class:`~dpmcmc.samplers._mechanisms.NoiseSource`, the kernel's
        privacy-noise source; default ``jax.random``).
    data_access : {"full", "subsampled"}
        How an iteration reads the data: full-data passes, or a fixed-size batch of rows.
    releases : ReleaseSpec or None
        What one iteration releases (``None``: non-private). The accountant composes these
        events; the kernel's mechanisms draw their noise from the same event constructors.
    audit : str or None
        Key of the algorithm's design in ``dpmcmc.audit.AUDITS`` (the audit is a layer above the
        samplers: its designs build data sets and read kernel taps, so they stay there and the
        spec names them). ``None``: not audited.
    """

    name: str
    private: bool
    prepare: Callable[[dict, Any, int], dict]
    build: Callable[..., Kernel]
    data_access: str
    releases: Optional[ReleaseSpec] = None
    audit: Optional[str] = None

    def accounting_params(self, params: dict) -> dict:
        """The keyword arguments of ``dpmcmc.accounting.max_iterations/spent`` from prepared
        ``params``: the privacy parameters its release declaration names (empty if non-private).
        """
        if self.releases is None:
            return {}
        names = self.releases.required + self.releases.optional
        return {k: params[k] for k in names if params.get(k) is not None}

    def events(self, n: int, params: dict) -> tuple[Release, ...]:
        """What one iteration releases on ``n`` records with prepared ``params`` (non-private: ())."""
        if self.releases is None:
            return ()
        return self.releases.build(n, self.accounting_params(params))


def check_common(algorithm: str, params: dict, allowed, required: tuple, model, n) -> None:
    """The checks every ``prepare`` starts with: parameter names, ``n`` and ``model``."""
    check_param_names(algorithm, params, allowed, required)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not hasattr(model, "dim"):
        raise TypeError("model must be a dpmcmc Model")


def as_data(data):
    """``data`` for a kernel builder: laid out data as given, else a non-empty device array."""
    if isinstance(data, (PreparedData, ShardedRows)):  # laid out (possibly sharded) by the caller
        return data
    data = jnp.asarray(data)
    if data.ndim < 1 or data.shape[0] < 1:
        raise ValueError(f"data must have at least one row, got shape {data.shape}")
    return data


def optional_block(value) -> Optional[int]:
    """``block_size``: None (automatic) or a positive integer."""
    return None if value is None else check_int("block_size", value, minimum=1, strict=True)
