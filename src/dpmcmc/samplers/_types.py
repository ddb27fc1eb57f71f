"""Shared types of the sampler layer: the kernel interface and the per-iteration info."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

Array = Any
PRNGKey = Any

__all__ = ["Kernel", "TappedKernel", "Info", "HMCInfo"]


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
    """

    init: Callable[[Array, Any], Any]
    step: Callable[[PRNGKey, Any, Any], tuple]


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
    """

    init: Callable[[Array, Any], Any]
    transition: Callable[[PRNGKey, Any, Any], tuple]

    def kernel(self) -> Kernel:
        """The public kernel: the same transition, its taps dropped."""
        transition = self.transition

        def step(key, state, data):
            new_state, info, _ = transition(key, state, data)
            return new_state, info

        return Kernel(self.init, step)


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
