"""Shared types of the sampler layer: the kernel interface and the per-iteration info."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

Array = Any
PRNGKey = Any

__all__ = ["Kernel", "ChunkCache", "TappedKernel", "Info", "HMCInfo"]


class ChunkCache(NamedTuple):
    """A kernel's step with a per-record cache that lives inside one compiled chunk only.

    Some kernels recompute, at every iteration, per-record values at the current point that an
    earlier iteration already computed (DP penalty: the n log-likelihoods ℓ_j(θ) of its ratio
    ℓ_j(θ') − ℓ_j(θ)). Carrying them saves that work, but they are computed from the raw data and
    are NOT private: they must never reach a draw, an ``Info``, a checkpoint or anything a run
    returns. So they are not part of the kernel's state: the chain driver builds the cache from
    the state at the start of every compiled chunk (one extra evaluation per chunk), carries it
    through the chunk's ``lax.scan`` beside the state, and drops it at the chunk's end; it never
    leaves the compiled program.

    Contract (tested for every kernel that has one): for ``cache = init(state, data)``,
    ``step(key, state, cache, data)`` returns the ``(state, info)`` of the kernel's plain
    ``step(key, state, data)`` bit for bit, and a new cache equal bit for bit to
    ``init(new_state, data)``. The draws therefore do not depend on where chunks begin (chunk
    size, checkpoints, resumption).

    Attributes
    ----------
    init : callable
        ``init(state, data) -> cache`` for one chain.
    step : callable
        ``step(key, state, cache, data) -> (state, cache, info)``.
    """

    init: Callable[[Any, Any], Any]
    step: Callable[[PRNGKey, Any, Any, Any], tuple]


class Kernel(NamedTuple):
    """A Markov kernel as a pair of pure functions that take the data as an argument.

    A kernel is built from the model, its parameters and (private kernels) its noise source
    only; the data are an argument of every call, as NumPyro's kernels take their model
    arguments. Under ``jax.jit`` they are therefore a parameter of the compiled program, never a
    constant copied into it, and the same kernel runs on any data of the same layout. The
    layout is the algorithm's (``ALGORITHMS[name].layout``: blocks for the full-data passes,
    rows for the subsampled samplers); a full-data kernel also accepts raw rows, which its
    passes then lay out on the fly.

    Attributes
    ----------
    init : callable
        ``init(theta, data) -> State`` for one chain, ``theta`` of shape ``(dim,)``. ``State``
        is a NamedTuple pytree with at least a ``position`` field.
    step : callable
        ``step(key, state, data) -> (state, info)``: one iteration. Pure and jit-able; ``info``
        is an :class:`Info` (or :class:`HMCInfo`). Always exactly this pair.
    cached : ChunkCache or None
        The same step carrying a chunk-local per-record cache (see :class:`ChunkCache`), which
        the chain driver uses when present; ``None`` for kernels without one.
    """

    init: Callable[[Array, Any], Any]
    step: Callable[[PRNGKey, Any, Any], tuple]
    cached: Optional[ChunkCache] = None


class TappedKernel(NamedTuple):
    """A private kernel's core: its step also returns what it released.

    Each private algorithm module builds one; its public builder returns :meth:`kernel`, whose
    step drops the taps, and the privacy audit (:mod:`dpmcmc.audit`) steps ``transition`` itself
    to observe the released values. Nothing about the chain differs between the two.

    Attributes
    ----------
    init : callable
        As :attr:`Kernel.init`.
    transition : callable
        ``transition(key, state, data) -> (state, info, taps)``: one iteration; ``taps`` a dict of the
        released noisy values, their noise scale and the query they answer (see each builder).
        NOT part of a run's output: some taps (a batch, DP Barker's noise variance) are
        internals of the mechanism.
    cache_init, cached_transition : callable or None
        The kernel's chunk-local cache (:class:`ChunkCache`), if it has one:
        ``cache_init(state, data) -> cache`` and ``cached_transition(key, state, cache, data) ->
        (state, cache, info, taps)``, equal to ``transition`` bit for bit.
    """

    init: Callable[[Array, Any], Any]
    transition: Callable[[PRNGKey, Any, Any], tuple]
    cache_init: Optional[Callable[[Any, Any], Any]] = None
    cached_transition: Optional[Callable[[PRNGKey, Any, Any, Any], tuple]] = None

    def kernel(self) -> Kernel:
        """The public kernel: the same transition, its taps dropped."""
        transition = self.transition

        def step(key, state, data):
            new_state, info, _ = transition(key, state, data)
            return new_state, info

        cached = None
        if self.cached_transition is not None:
            cached_transition = self.cached_transition

            def cached_step(key, state, cache, data):
                new_state, new_cache, info, _ = cached_transition(key, state, cache, data)
                return new_state, new_cache, info

            cached = ChunkCache(self.cache_init, cached_step)
        return Kernel(self.init, step, cached)


class Info(NamedTuple):
    """Per-iteration diagnostics of one chain.

    For the private samplers ``accepted`` and ``diverged`` are post-processing of the noisy
    releases, covered by the guarantee (``Result.released``); ``clip_fraction`` is computed from
    the raw data and is NOT private. For the non-private samplers nothing is private. The
    argument, per sampler: ``docs/post_processing.md``.

    Attributes
    ----------
    accepted : bool
        Whether the proposal was accepted.
    clip_fraction : float
        Fraction of the n per-example log-likelihood ratios that were clipped in this iteration
        (a non-finite per-example ratio counts as clipped); 0.0 when nothing is clipped.
    diverged : bool
        A non-finite value was met (proposal, log-density, noisy log-ratio) and the proposal was
        rejected because of it.
    """

    accepted: Array
    clip_fraction: Array
    diverged: Array


class HMCInfo(NamedTuple):
    """Per-iteration diagnostics of the HMC-type samplers.

    As :class:`Info`: for DP-HMC ``accepted`` and ``diverged`` are covered by the guarantee,
    ``clip_fraction`` and ``grad_clip_fraction`` are NOT private, ``step_size`` is
    data-independent.

    Attributes
    ----------
    accepted, clip_fraction, diverged
        As in :class:`Info`.
    grad_clip_fraction : float
        Fraction of the per-example gradients clipped, averaged over the gradient evaluations of
        this iteration (0.0 for non-private HMC).
    step_size : float
        The leapfrog step size used in this iteration (data-independent: the base step size times
        a randomised Halton number).
    """

    accepted: Array
    clip_fraction: Array
    diverged: Array
    grad_clip_fraction: Array
    step_size: Array
