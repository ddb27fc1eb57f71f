"""Warm-up adaptation from released values only: a kernel wrapper.

During the first ``warmup`` iterations of a run, each chain adapts its step size (DP-HMC, HMC)
or the scale of its proposal (DP penalty, minibatch penalty, DP Barker, RWMH) by stochastic
approximation on the log scale (Robbins–Monro, Andrieu & Thoms 2008, with the iterate averaging
of Hoffman & Gelman's dual averaging) toward a target acceptance rate, and, for warm-ups of at least
:data:`MIN_DIAGONAL_WARMUP` iterations, a diagonal scale (proposal standard deviations, or the
inverse diagonal mass of HMC) from the variance of its own warm-up draws. From iteration
``warmup`` on, the adapted values are frozen and the chain is an ordinary, non-adaptive Markov
chain; its draws are the run's samples, the warm-up draws are discarded.

Why it costs no privacy (``docs/post_processing.md``, last section): the adaptation reads the
accept flags and the draws of earlier iterations, nothing else. Both are functions of the
accounted releases and of data-independent randomness, so the adapted values are
post-processing; the warm-up iterations' releases are charged like any other (the budget pays
for them: ``iterations`` counts them); and none of the adapted quantities changes what a release
costs (σ scales with the clip bound ``b‖θ′ − θ‖`` or is fixed). The clip fractions, the one
per-iteration output read from the raw data, never reach the adaptation: :func:`adaptive_kernel`
passes the inner kernel's ``Info.accepted`` only. ``tests/kernels/test_warmup.py`` checks it: with the
releases made data-independent, two different data sets give identical adaptation.

Windows (in the spirit of Stan's, scaled to the warm-up length ``W``): with
``W ≥ MIN_DIAGONAL_WARMUP``, the first half only adapts the step (the chains travel from their
starts), iterations ``[W/2, 0.85 W)`` also accumulate the draws' mean and variance (Welford); at
``0.85 W`` the diagonal scale is set from them and the step adaptation restarts; it runs to ``W``. Shorter warm-ups adapt the step alone. The state carries everything, so checkpoints and
resumed runs keep the adaptation.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from dpmcmc.kernels.types import ChunkCache, Kernel

Array = Any

__all__ = ["Adaptation", "RANDOM_WALK", "HAMILTONIAN", "LANGEVIN", "AdaptState", "DualAveraging", "adaptive_kernel",
           "da_init", "da_update", "MIN_DIAGONAL_WARMUP"]

#: Warm-ups shorter than this adapt the step only (too few draws for a variance per dimension).
MIN_DIAGONAL_WARMUP = 40


class Adaptation(NamedTuple):
    """What an algorithm adapts: ``step`` (a scalar parameter) and ``diagonal`` (a vector one).

    ``target`` is the acceptance rate the step is adapted toward (``None``: the step is not
    adapted). ``diagonal_from`` says how the diagonal is set from the warm-up draws' variance
    ``v``: ``"sd"`` (proposal standard deviations ∝ √v), ``"precision"`` (HMC mass ``1/v``) or
    ``"relative-sd"`` (a preconditioner ∝ √v with largest entry 1).
    """

    step: str
    target: Optional[float]
    diagonal: str
    diagonal_from: str


#: What the algorithms adapt (each spec names one as ``SPEC.adaptation``). Targets: 0.234 for
#: random-walk proposals (Roberts, Gelman & Gilks 1997), 0.65 for HMC (Beskos et al. 2013).
#: dp-sgld and dp-sgnht have no accept step and thus no acceptance to adapt a step size to
#: (``target=None``): their warm-up sets only a diagonal preconditioner from the warm-up draws,
#: relative (largest entry 1, so no coordinate's steps grow and the privacy noise per step stays
#: within the public rule that chose η).
RANDOM_WALK = Adaptation("proposal_std", 0.234, "proposal_std", "sd")
HAMILTONIAN = Adaptation("step_size", 0.65, "mass", "precision")
LANGEVIN = Adaptation("step_size", None, "precondition", "relative-sd")


class DualAveraging(NamedTuple):
    """Stochastic-approximation state of ``log x``: the iterate and its running average."""

    log_x: Array
    log_x_avg: Array
    count: Array


#: Gain exponent of the Robbins–Monro steps: gains (t + 1)^(−0.6) sum to ≈ 10 over 30
#: iterations, so a short warm-up can move the scale by a factor e^(±0.65·10) at most.
GAIN_EXPONENT = 0.6
GAIN = 2.0


def da_init(x0: Array) -> DualAveraging:
    """Start at ``x0``."""
    log_x0 = jnp.log(jnp.asarray(x0, jnp.float64))
    return DualAveraging(log_x0, log_x0, jnp.zeros((), jnp.float64))


def da_update(s: DualAveraging, accept: Array, target: float) -> DualAveraging:
    """One Robbins–Monro step of ``log x`` toward acceptance ``target`` (Andrieu & Thoms 2008).

    ``log x ← log x + (a − target)(t + 1)^(−0.6)`` with ``a`` the accept flag, and a running
    average of the iterates weighted ``t^(−0.75)`` (the averaging of Hoffman & Gelman's dual
    averaging) that becomes the frozen value. Hoffman & Gelman's dual averaging itself moved
    ``log x`` by tens of units within a few dozen iterations when a chain started far from the
    posterior (acceptance ≈ 0 there whatever the scale), which a private warm-up of a few dozen
    iterations cannot undo; these bounded gains cannot.
    """
    count = s.count + 1.0
    log_x = s.log_x + GAIN * (accept - target) * count ** (-GAIN_EXPONENT)
    eta = count ** (-0.75)
    log_x_avg = eta * log_x + (1.0 - eta) * s.log_x_avg
    return DualAveraging(log_x, log_x_avg, count)


class AdaptState(NamedTuple):
    """One chain's state: the inner kernel's, the adaptation's, and the iteration count.

    ``position`` is the inner state's (the driver reads it); ``scale`` multiplies the base
    value of the adapted step parameter, ``diagonal`` is the adapted vector parameter.
    """

    inner: Any
    da: DualAveraging
    scale: Array
    diagonal: Array
    mean: Array
    m2: Array
    seen: Array
    iteration: Array

    @property
    def position(self):
        return self.inner.position


def adaptive_kernel(build: Callable[[dict], Kernel], adaptation: Adaptation, base: dict,
                    warmup: int) -> Kernel:
    """A kernel that adapts ``build``'s step and diagonal parameters during ``warmup`` iterations.

    Parameters
    ----------
    build : callable
        ``build(overrides) -> Kernel``: the algorithm's kernel with the parameters in
        ``overrides`` (``{adaptation.step: value, adaptation.diagonal: vector}``) replacing the
        prepared ones. Called inside the step on traced values: the builder must not convert
        them to Python numbers.
    adaptation : Adaptation
    base : dict
        The prepared parameters' values of ``adaptation.step`` and ``adaptation.diagonal``
        (the starting point of the adaptation).
    warmup : int
        Iterations to adapt (≥ 1). The inner kernel runs with the frozen values afterwards.

    Returns
    -------
    Kernel
        ``init(theta, data)`` and ``step(key, state, data) -> (state, info)`` with the inner
        kernel's ``info``; the data are passed through to the inner kernel. The adapted values
        are in the state (``scale``, ``diagonal``).
    """
    warmup = int(warmup)
    if warmup < 1:
        raise ValueError(f"warmup must be ≥ 1, got {warmup}")
    step0 = jnp.asarray(base[adaptation.step], jnp.float64)
    step_is_vector = step0.ndim == 1
    diag0 = jnp.asarray(1.0 if base.get(adaptation.diagonal) is None else base[adaptation.diagonal],
                        jnp.float64)
    diagonal = warmup >= MIN_DIAGONAL_WARMUP
    start, stop = (warmup // 2, (17 * warmup) // 20) if diagonal else (warmup, warmup)

    def overrides(scale, diag):
        # For the random-walk samplers the step and the diagonal are the same parameter
        # (proposal_std = scale × per-dimension sd); HMC has a step size and a mass.
        if adaptation.step == adaptation.diagonal:
            return {adaptation.step: scale * diag}
        step = scale * step0
        return {adaptation.step: step, adaptation.diagonal: diag}

    def init(theta, data):
        theta = jnp.asarray(theta)
        dim = theta.shape[-1]
        d0 = jnp.broadcast_to(diag0 if adaptation.step == adaptation.diagonal or diag0.ndim
                              else diag0 * jnp.ones(dim), (dim,)).astype(jnp.float64)
        if adaptation.step == adaptation.diagonal and step_is_vector:
            d0 = step0
        inner = build(overrides(jnp.ones((), jnp.float64), d0)).init(theta, data)
        zeros = jnp.zeros(dim, jnp.float64)
        return AdaptState(inner, da_init(1.0), jnp.ones((), jnp.float64), d0, zeros, zeros,
                          jnp.zeros((), jnp.float64), jnp.zeros((), jnp.int32))

    def step(key, s: AdaptState, data):
        new_inner, info = build(overrides(s.scale, s.diagonal)).step(key, s.inner, data)
        return adapt(s, new_inner, info), info

    def adapt(s: AdaptState, new_inner, info) -> AdaptState:
        t = s.iteration
        adapting = t < warmup
        # The only inputs of the adaptation: the accept flag and the new draw (both released).
        accept = jnp.asarray(info.accepted, jnp.float64)
        da = s.da if adaptation.target is None else da_update(s.da, accept, adaptation.target)
        # Welford over the slow window [start, stop).
        x = jnp.asarray(new_inner.position, jnp.float64)
        in_window = (t >= start) & (t < stop)
        seen = s.seen + in_window
        delta = x - s.mean
        mean = jnp.where(in_window, s.mean + delta / jnp.maximum(seen, 1.0), s.mean)
        m2 = jnp.where(in_window, s.m2 + delta * (x - mean), s.m2)
        # At the end of the window: the diagonal from the draws' variance (regularised toward
        # the starting value as Stan does, so a chain that barely moved keeps a sane scale).
        end_window = diagonal & (t == stop - 1)
        var = m2 / jnp.maximum(seen - 1.0, 1.0)
        w = seen / (seen + 5.0)
        if adaptation.diagonal_from == "sd":
            ref = s.diagonal * s.scale
            new_diag = jnp.sqrt(w * var + (1.0 - w) * ref * ref) * 2.38 / math.sqrt(x.shape[-1])
        elif adaptation.diagonal_from == "relative-sd":
            sd = jnp.sqrt(var)
            rel = sd / jnp.max(sd)
            new_diag = w * rel + (1.0 - w) * s.diagonal
        else:
            ref = 1.0 / s.diagonal
            new_diag = 1.0 / (w * var + (1.0 - w) * ref)
        new_diag = jnp.where(jnp.all(jnp.isfinite(new_diag) & (new_diag > 0)), new_diag, s.diagonal)
        diag = jnp.where(end_window, new_diag, s.diagonal)
        # After the window, dual averaging restarts around the new diagonal (scale 1 for the
        # random walk, whose diagonal now holds the scale; the current step for HMC).
        restart_at = jnp.where(adaptation.diagonal_from == "precision", jnp.exp(da.log_x), 1.0)
        da = jax.tree.map(lambda a, b: jnp.where(end_window, a, b), da_init(restart_at), da)
        frozen = jnp.exp(da.log_x_avg)
        scale = jnp.where(t + 1 >= warmup, frozen, jnp.exp(da.log_x))
        keep = lambda new, old: jnp.where(adapting, new, old)  # noqa: E731
        return AdaptState(new_inner, jax.tree.map(keep, da, s.da), keep(scale, s.scale),
                          keep(diag, s.diagonal), keep(mean, s.mean), keep(m2, s.m2),
                          keep(seen, s.seen), t + 1)

    # The inner kernel's chunk-local cache (if it has one) depends on its position only, never on
    # the adapted step or diagonal, so it passes through the adaptation unchanged; an inner
    # kernel without one gets an empty cache (None) and its plain step.
    def cache_init(s: AdaptState, data):
        inner = build(overrides(s.scale, s.diagonal))
        return None if inner.cached is None else inner.cached.init(s.inner, data)

    def cached_step(key, s: AdaptState, cache, data):
        if cache is None:
            new, info = step(key, s, data)
            return new, None, info
        new_inner, cache, info = build(overrides(s.scale, s.diagonal)).cached.step(
            key, s.inner, cache, data)
        return adapt(s, new_inner, info), cache, info

    return Kernel(init, step, ChunkCache(cache_init, cached_step))
