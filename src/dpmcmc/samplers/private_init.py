"""Private initialisation: a start near the posterior mode for a small, accounted share of the budget.

The DP-HMC paper (000 §4.1) assumes the chains start after "finding the rough location of the
posterior … with a very small privacy budget", but its experiments started near the true
parameters. This module is that step.

How it steps
------------
K rounds of sign-based gradient ascent on the log posterior (iRprop−, Igel & Hüsken 2000):

1. Release the clipped gradient sum of the log-likelihood at θ_k,
   ``g̃_k = Σ_i clip_C(∇ℓ_i(θ_k)) + N(0, σ² I)``, through the shared mechanism
   (:func:`dpmcmc.kernels.releases.release_grad`), with σ = 2τ√n·C and τ chosen so that the K
   releases together cost ``mu_total`` (μ = Δ²/(2σ²) per release, Δ = 2C).
2. ``g_k = T·g̃_k + ∇ log p(θ_k)`` (the prior is public).
3. Per coordinate: where g_k has the sign of the previous step's gradient the step length grows
   ×1.2, where it flipped it shrinks ×0.5 and that coordinate does not move this round; then
   ``θ_{k+1} = θ_k + sign(g_k) · Δ_k``.

Only signs of released values and public constants enter the updates, so the scale of the
gradient (n, the clip) needs no tuning: the step lengths find the scale of the posterior by
themselves, and shrink where the privacy noise starts to flip signs — near the mode, at the
resolution the budget affords. The chains then start at ``θ̄ + Δ_K ⊙ z_c``, θ̄ the mean of the
second half of the path (Polyak averaging) and ``z_c`` public normal draws per chain:
over-dispersed at the final step lengths, as R-hat needs.

What it releases
----------------
The K noisy gradient sums. Every later quantity (θ_k, Δ_k, the starts) is post-processing of
those and of public randomness. ``dpmcmc.sample(theta0="private")`` charges ``mu_total`` to the
run's accountant (``init_mu`` of :func:`dpmcmc.accounting.max_iterations`), and the privacy
report lists the start as its own mechanism.

How it reads data
-----------------
Full data, every round: the per-example gradients of the same laid-out data the sampler uses,
clipped to C, summed. C is the sampler's own per-record bound: ``grad_clip`` where the sampler
has one, else ``clip`` (a log-likelihood ratio bound b‖θ′ − θ‖ is a gradient bound b).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpmcmc.records.layout import prepare_data
from dpmcmc.kernels.releases import release_grad

__all__ = ["InitPlan", "init_plan", "private_start", "public_point", "GROW", "SHRINK"]

GROW, SHRINK = 1.2, 0.5
DEFAULT_STEPS = 30
DEFAULT_FIRST_STEP = 0.1


def public_point(model, candidates=None):
    """Where the private initialisation starts: a public point of high prior density.

    The candidates are the origin and, when given, prior draws ``(k, dim)``; the one with the
    largest ``model.log_prior`` wins (public: the prior and public randomness only). The mean of
    prior draws, the earlier choice, can lie far out in the prior's tail: for the banana prior
    θ₂ = z₂ − a z₁² its mean is about −a σ₀², thousands of posterior sds away, beyond what the
    K sign steps can travel; the densest draw sits near the prior's mode, and the origin is the
    mode of the usual centred priors (the GLMs' N(0, s²)). Among candidates of equal prior
    density (a flat prior) the draw nearest the draws' coordinate-wise median wins.
    """
    import numpy as np

    points = np.zeros((1, model.dim))
    if candidates is not None:
        points = np.concatenate([points, np.asarray(candidates, dtype=np.float64).reshape(-1, model.dim)])
    with jax.enable_x64(True):
        logp = np.asarray(jax.vmap(model.log_prior)(jnp.asarray(points)), dtype=np.float64)
    logp = np.where(np.isfinite(logp), logp, -np.inf)
    best = np.flatnonzero(logp >= np.max(logp))
    if best.size == 1:  # also whenever no draws were given: the origin alone
        return points[int(best[0])]
    # A tie (a flat prior: every candidate equally dense) says nothing for the origin, which
    # may then be a stationary point of the likelihood where every record's gradient vanishes
    # (the circle model's centre), so that the first Newton move is made of noise alone. The
    # tied draw nearest the draws' coordinate-wise median is a central point of the model's
    # public starting distribution instead.
    centre = np.median(points[1:], axis=0)
    return points[int(best[np.argmin(np.sum((points[best] - centre) ** 2, axis=1))])]


class InitPlan(NamedTuple):
    """The releases of one private initialisation (public inputs only)."""

    steps: int
    mu_total: float
    grad_clip: float
    tau_g: float  # per release: μ = 1/(2 τ_g² n)
    first_step: float


def init_plan(n: int, mu_total: float, grad_clip: float, steps: int = DEFAULT_STEPS,
              first_step: float = DEFAULT_FIRST_STEP) -> InitPlan:
    """Split ``mu_total`` evenly over ``steps`` gradient releases of per-record bound ``grad_clip``."""
    mu = mu_total / steps
    return InitPlan(int(steps), float(mu_total), float(grad_clip), 1.0 / math.sqrt(2.0 * mu * n),
                    float(first_step))


def private_start(key: jax.Array, model, data, start: jax.Array, plan: InitPlan, chains: int,
                  noise=None) -> tuple[jax.Array, dict]:
    """Run the K rounds from the public point ``start`` and return the chains' starts.

    Parameters
    ----------
    key : PRNG key
        Drives the privacy noise of the releases (unless ``noise`` is a secure source) and the
        public jitter of the starts.
    model : Model
    data : array (n, ...)
    start : array (dim,)
        Public starting point (data-independent).
    plan : InitPlan
    chains : int
    noise : NoiseSource, optional
        The run's noise source.

    Returns
    -------
    starts : array (chains, dim)
    trace : dict
        ``theta`` (K+1, dim) and ``step`` (K+1, dim): the path, post-processing of the releases.
    """
    laid_out = prepare_data(data, model=model)
    return _start_program(model, plan, chains)(key, laid_out, jnp.asarray(start, jnp.float64),
                                                 noise)


def _start_program(model, plan: InitPlan, chains: int):
    """:func:`_rounds` jitted for ``model``, ``plan`` and ``chains``, kept with the chain
    programs (keyed like them by :func:`dpmcmc.runtime.compile_cache.model_key`): a start on
    other data of the same shape compiles nothing (each eager call compiled its scan again).
    The data (and a secure source's secret) are its arguments, never constants baked into it."""
    import functools

    from dpmcmc.runtime import compile_cache as _compile_cache

    try:
        cache_key = ("private-start", _compile_cache.model_key(model), plan, int(chains))
    except TypeError:  # no value key: a program for this call alone
        cache_key = None
    program = None if cache_key is None else _compile_cache.PROGRAMS.get(cache_key)
    if program is None:
        program = jax.jit(functools.partial(_rounds, model, plan, int(chains)))
        if cache_key is not None:
            _compile_cache.PROGRAMS.put(cache_key, program)
    return program


def _rounds(model, plan: InitPlan, chains: int, key, laid_out, start, noise):
    """The K rounds of :func:`private_start` on the laid-out data, and the chains' starts."""
    temp = model.temperature
    grad_prior = jax.grad(model.log_prior)
    k_rounds, k_jitter = jax.random.split(key)

    def body(carry, k):
        theta, step, g_prev = carry
        rel = release_grad(k, model, laid_out, theta, plan.tau_g, plan.grad_clip, noise=noise)
        g = temp * rel.value + grad_prior(theta)
        agree = jnp.sign(g) * jnp.sign(g_prev)
        step = jnp.where(agree > 0, step * GROW, jnp.where(agree < 0, step * SHRINK, step))
        g = jnp.where(agree < 0, 0.0, g)  # iRprop−: a flipped coordinate waits one round
        theta = theta + jnp.sign(g) * step
        return (theta, step, g), (theta, step)

    step0 = jnp.full_like(start, plan.first_step)
    carry0 = (start, step0, jnp.zeros_like(start))
    (theta, step, _), (path, steps) = jax.lax.scan(body, carry0, jax.random.split(k_rounds, plan.steps))
    # Polyak averaging of the second half of the path: near the mode the iterates oscillate at
    # the noise's resolution, and their mean is closer than any one of them (post-processing).
    centre = jnp.mean(path[plan.steps // 2:], axis=0)
    jitter = jax.random.normal(k_jitter, (chains, start.shape[0]), dtype=start.dtype)
    starts = centre[None, :] + step[None, :] * jitter
    trace = {"theta": jnp.concatenate([start[None], path]), "step": jnp.concatenate([step0[None], steps])}
    return starts, trace
