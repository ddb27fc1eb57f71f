"""The algorithm card: everything about one algorithm, held by its own module.

Each algorithm module (``rwmh``, ``hmc``, ``dp_penalty``, ``dp_hmc``, ``barker``,
``minibatch_penalty``, ``dp_sgld``, ``dp_sgnht``) defines one :class:`AlgorithmSpec` named
``SPEC``; :mod:`dpmcmc.samplers.registry` collects them into ``ALGORITHMS``. Nothing else keeps
a table keyed by algorithm name (``tests/samplers/test_samplers_registry.py`` walks the package for one):
the accountant reads ``SPEC.releases``, the run lays its data out with ``SPEC.layout`` (from
``SPEC.data_access``), the model contract reads ``SPEC.gradient``, the warm-up
``SPEC.adaptation``, the plan ``SPEC.noise_lines``, the table path ``SPEC.defaults`` and the
audit ``SPEC.audit``.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Optional

import jax.numpy as jnp
from scipy.special import ndtr

from dpmcmc.accounting._checks import check_int, check_param_names
from dpmcmc.accounting.events import ReleaseEvent, ReleaseSpec
from dpmcmc.records.layout import prepare_data
from dpmcmc.records.sharding import ShardedRows, shard_rows
from dpmcmc.kernels.types import Kernel

__all__ = ["AlgorithmSpec", "NoiseLine", "acceptance_line", "FULL", "SUBSAMPLED", "DATA_ACCESS",
           "check_common", "as_rows", "optional_block"]

#: ``data_access`` of an algorithm whose every data access is a full-data pass (split over a
#: mesh by ``_sharding.shard_data``; the data are laid out in blocks).
FULL = "full"
#: ``data_access`` of an algorithm that gathers a fixed-size batch of rows per iteration
#: (``_sharding.shard_rows``; the data stay one device array).
SUBSAMPLED = "subsampled"
DATA_ACCESS = (FULL, SUBSAMPLED)


@dataclass(frozen=True)
class NoiseLine:
    """One privacy-noise figure of a plan (:class:`dpmcmc.Plan`), from public inputs only.

    Attributes
    ----------
    name : str
        What the noise perturbs, e.g. ``"log-likelihood ratio"``.
    noise_sd : float
        Standard deviation of the privacy noise on that quantity (per coordinate for vectors).
    reference : str
        What it is compared with.
    ratio : float
        ``noise_sd`` divided by the reference (or the derived figure named in ``reference``).
    """

    name: str
    noise_sd: float
    reference: str
    ratio: float

    @property
    def caps_acceptance(self) -> bool:
        """Whether ``ratio`` is a penalty test's acceptance ceiling 2Φ(−σ/2)."""
        return self.reference.startswith("acceptance ceiling")


def acceptance_line(release: ReleaseEvent, bound: float, step: float, what: str) -> NoiseLine:
    """A penalty test's noise line: the release event's σ (what the kernel draws) for a ratio
    bound ``bound`` (clip × move length), against the acceptance ceiling 2Φ(−σ/2) it allows on
    a flat target (accept iff N(−σ²/2, σ²) > log U)."""
    sigma = release.noise_std(bound)
    return NoiseLine(release.name, sigma,
                     f"acceptance ceiling 2Φ(−σ/2) for a {what} of length {step:.3g}",
                     float(2.0 * ndtr(-sigma / 2.0)))


def norm(values) -> float:
    """Euclidean norm of a parameter given as a scalar or per dimension (public arithmetic)."""
    return math.sqrt(sum(float(v) ** 2 for v in values))


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
        ``build(model, params, noise=None) -> Kernel`` from prepared params, without data: the
        kernel's ``init`` and ``step`` take the data (laid out by :meth:`layout`) as an
        argument. ``noise`` is the kernel's privacy-noise source (a
        :class:`~dpmcmc.kernels.mechanisms.NoiseSource`; ``None``: ``jax.random``); the
        non-private algorithms ignore it.
    data_access : {"full", "subsampled"}
        How an iteration reads the data: full-data passes, or a fixed-size batch of rows. It
        fixes the data's layout (:meth:`layout`).
    releases : ReleaseSpec or None
        What one iteration releases (``None``: non-private). The accountant composes these
        events; the kernel's mechanisms draw their noise from the same event constructors.
    audit : AuditEntry or None
        The algorithm's empirical privacy audit (:mod:`dpmcmc.samplers.audit_design`): its
        worst-case neighbouring design, tapped kernel and statistics; ``dpmcmc.audit`` runs it.
        ``None``: not audited (the non-private baselines).
    gradient : bool
        Whether the kernel differentiates the log-likelihood: the model contract then includes
        a gradient of shape ``(dim,)`` (``dpmcmc.models.check_model``).
    adaptation : Adaptation or None
        What ``warmup=W`` adapts (:mod:`dpmcmc.kernels.warmup`); ``None``: nothing.
    noise_lines : callable or None
        ``noise_lines(params, n, dim, temperature) -> tuple[NoiseLine, ...]``: the privacy noise
        next to the moves, for the plan (public inputs only); ``None``: no figure.
    defaults : callable or None
        ``defaults(scale: PublicScale) -> dict``: parameters from public inputs only
        (:mod:`dpmcmc.samplers.defaults`), used by the table path; ``None``: none.
    fit : callable or None
        One-shot algorithms only (no chain to run; ``build`` is ``None``): ``fit(key, data,
        plan, noise=None) -> dict`` of draws and released values, from the :class:`dpmcmc.Plan`
        that :func:`dpmcmc._plan.make_plan` made (its ``release_plan`` field). Their one
        (fixed) set of releases is what :meth:`events` declares, spent once whatever the
        number of chains (the chains are post-processing of the releases).
    split : callable or None
        One-shot algorithms: ``split(prepared, dim, epsilon, delta) -> dict``, the accounting
        parameters of a fit that divides the budget (ε, δ) over its releases.
    notes : callable or None
        One-shot algorithms: ``notes(params_and_split, n, dim) -> tuple[str, ...]``, the plan's
        notes from public inputs (e.g. a budget that leaves the posterior at the prior).
    """

    name: str
    private: bool
    prepare: Callable[[dict, Any, int], dict]
    build: Callable[..., Kernel]
    data_access: str
    releases: Optional[ReleaseSpec] = None
    audit: Any = None
    gradient: bool = False
    adaptation: Any = None
    noise_lines: Optional[Callable[..., tuple]] = None
    defaults: Optional[Callable[[Any], dict]] = None
    fit: Optional[Callable[..., dict]] = None
    split: Optional[Callable[..., dict]] = None
    notes: Optional[Callable[..., tuple]] = None

    @property
    def one_shot(self) -> bool:
        """A fixed set of releases and no chain (``fit``), e.g. the noise-aware GLM."""
        return self.fit is not None

    def accounting_params(self, params: dict) -> dict:
        """The keyword arguments of ``dpmcmc.accounting.max_iterations/spent`` from prepared
        ``params``: the privacy parameters its release declaration names (empty if non-private).
        """
        if self.releases is None:
            return {}
        names = self.releases.required + self.releases.optional
        return {k: params[k] for k in names if params.get(k) is not None}

    def layout(self, data, params: dict, model, mesh=None, axis_name: Optional[str] = None):
        """The data as this algorithm's kernel reads them: once per run, outside the step.

        Full-data algorithms: the rows in blocks (:func:`~dpmcmc.records.layout.prepare_data`
        with the prepared ``block_size`` and, for DP-HMC, the float32 copy its gradient passes
        read), split over ``mesh`` if given. Subsampled algorithms: the rows as one device array,
        or split in contiguous ranges over ``mesh``
        (:func:`~dpmcmc.records.sharding.shard_rows`). Data already laid out (a
        ``PreparedData`` or ``ShardedRows``) are returned as given. Decided from the shapes and
        dtypes and the prepared parameters only, never from the data's values.

        Parameters
        ----------
        data : array (n, ...)
        params : dict
            Prepared parameters (:attr:`prepare`).
        model : Model
            Picks the block layout (column-major unless it brings vectorised functions).
        mesh : jax.sharding.Mesh, optional
        axis_name : str, optional
            The mesh axis the rows are split over (default: its only axis).

        Returns
        -------
        PreparedData, ShardedRows or array
            The ``data`` argument of the kernel's ``init`` and ``step``.
        """
        if self.data_access == FULL:
            return prepare_data(data, model=model, block_size=params.get("block_size"),
                                grad_dtype=params.get("grad_dtype"), mesh=mesh,
                                axis_name=axis_name)
        if isinstance(data, ShardedRows) or mesh is None:
            return as_rows(data)
        return shard_rows(data, mesh, axis_name=axis_name)

    def events(self, n: int, params: dict) -> tuple[ReleaseEvent, ...]:
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


def as_rows(data):
    """The subsampled samplers' rows: a ``ShardedRows`` as given, else a non-empty device array."""
    if isinstance(data, ShardedRows):  # split over a mesh by the caller
        return data
    data = jnp.asarray(data)
    if data.ndim < 1 or data.shape[0] < 1:
        raise ValueError(f"data must have at least one row, got shape {data.shape}")
    return data


def optional_block(value) -> Optional[int]:
    """``block_size``: None (automatic) or a positive integer."""
    return None if value is None else check_int("block_size", value, minimum=1, strict=True)
