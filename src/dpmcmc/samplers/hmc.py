"""Hamiltonian Monte Carlo (non-private), with optional log-likelihood-ratio clipping.

Leapfrog with L steps and a diagonal mass matrix (004; 000 §2.2), the step size of iteration i
being ``η · h_i`` with ``h_i ∈ (0, 1)`` a randomised Halton number (see
:mod:`dpmcmc.kernels.halton`; ``jitter=False`` keeps η fixed). The gradient at the current
position is cached between iterations (exact gradients, so reuse is harmless here), so an
iteration evaluates L gradients.

With ``clip`` the acceptance test uses the clipped log-likelihood-ratio sum (each ratio clipped
to ``[-b‖θ−θ'‖, b‖θ−θ'‖]``, no noise, tempered after clipping) as in the clipping experiment of
000 §4.2 / 001 §6.2; the leapfrog still uses exact gradients.

Not private: trajectory and accept test read the data without noise, so every ``HMCInfo`` field
except the data-independent ``step_size`` is NOT private and is reported in
``Result.diagnostics``.
Non-finite per-record value (non-private): a NaN log-likelihood or gradient makes the proposal a
rejection with ``diverged=True``; ``dpmcmc.sample`` refuses a start θ0 where a record's log-
likelihood is not finite (docs/nonfinite.md).
"""
from __future__ import annotations

import math

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from dpmcmc.kernels.halton import draw_mask, halton_multiplier
from dpmcmc.records.layout import num_rows
from dpmcmc.kernels.leapfrog import kinetic_energy, leapfrog, sample_momentum
from dpmcmc.records.passes import clipped_llr_sum, loglik_sum_and_grad
from dpmcmc.kernels.penalty import mh_accept
from dpmcmc.accounting._checks import check_bool, check_int, check_per_dim, check_positive
from dpmcmc.samplers.defaults import PublicScale
from dpmcmc.samplers.spec import FULL, AlgorithmSpec, check_common, optional_block
from dpmcmc.kernels.warmup import HAMILTONIAN
from dpmcmc.kernels.types import HMCInfo, Kernel

Array = Any

__all__ = ["HMCState", "build_hmc", "jittered_step_size", "SPEC", "DEFAULT_LEAPFROG_STEPS",
           "prepare_leapfrog"]


class HMCState(NamedTuple):
    """Position, tempered log posterior and its gradient there, iteration count, Halton mask."""

    position: Array
    log_density: Array
    grad: Array
    iteration: Array
    halton_mask: Array


def jittered_step_size(key: Array, iteration: Array, mask: Array, step_size: float, jitter: bool,
                       dtype) -> tuple[Array, Array]:
    """Step size of this iteration and the chain's Halton mask (drawn at iteration 0 from ``key``).

    Data-independent: depends only on the PRNG key, the iteration count and ``step_size``.
    """
    mask = jnp.where(iteration == 0, draw_mask(key), mask)
    if not jitter:
        return jnp.asarray(step_size, dtype), mask
    return step_size * halton_multiplier(iteration, mask, dtype), mask


def build_hmc(model, step_size: float, leapfrog_steps: int, mass: Array,
              clip: Optional[float] = None, *, jitter: bool = True) -> Kernel:
    """The HMC kernel.

    Parameters
    ----------
    model : Model
    step_size : float
        Base leapfrog step size η > 0.
    leapfrog_steps : int
        L ≥ 1.
    mass : array (dim,)
        Diagonal of the mass matrix.
    clip : float, optional
        Log-likelihood-ratio clip bound b (acceptance test only).
    jitter : bool, default True
        Randomised-Halton step sizes ``η h_i``; False: fixed η.

    Returns
    -------
    Kernel
        ``init(theta, data)``, ``step(key, state, data)``; ``data`` a ``PreparedData``
        (``SPEC.layout``; raw rows are laid out by each pass on the fly). Info is
        :class:`HMCInfo`; a non-finite end point or NaN log ratio is a rejection with
        ``diverged=True``.
    """
    temp = model.temperature
    mass = jnp.asarray(mass)
    prior_vg = jax.value_and_grad(model.log_prior)

    def density_and_grad(theta, data):
        lp, gp = prior_vg(theta)
        ll, gl = loglik_sum_and_grad(model, data, theta)
        return lp + temp * ll, gp + temp * gl

    def init(theta, data):
        theta = jnp.asarray(theta)
        logp, g = density_and_grad(theta, data)
        return HMCState(theta, logp, g, jnp.zeros((), jnp.uint32), jnp.zeros((), jnp.uint32))

    def step(key, state, data):
        n = num_rows(data)

        def grad_fn(_key, theta):
            logp, g = density_and_grad(theta, data)
            return g, logp

        k_mask, k_mom, k_acc = jax.random.split(key, 3)
        theta = state.position
        m = mass.astype(theta.dtype)
        eta, mask = jittered_step_size(k_mask, state.iteration, state.halton_mask, step_size,
                                       jitter, theta.dtype)
        p0 = sample_momentum(k_mom, m, theta)
        lf = leapfrog(grad_fn, k_mom, theta, p0, state.grad, state.log_density, eta,
                      leapfrog_steps, m)
        finite = jnp.all(jnp.isfinite(lf.position)) & jnp.all(jnp.isfinite(lf.momentum))
        d_kin = kinetic_energy(p0, m) - kinetic_energy(lf.momentum, m)
        if clip is None:
            log_ratio = lf.aux - state.log_density + d_kin
            count = jnp.zeros((), jnp.int32)
        else:
            theta_new = jnp.where(finite, lf.position, theta)
            bound = clip * jnp.linalg.norm(theta_new - theta)
            total, count = clipped_llr_sum(model, data, theta, theta_new, bound,
                                           nan_to_bound=False)
            log_ratio = temp * total + model.log_prior(theta_new) - model.log_prior(theta) + d_kin
        accepted, nan = mh_accept(k_acc, log_ratio)
        diverged = nan | ~finite
        accepted = accepted & ~diverged
        new_state = HMCState(
            jnp.where(accepted, lf.position, theta),
            jnp.where(accepted, lf.aux, state.log_density),
            jnp.where(accepted, lf.grad, state.grad),
            state.iteration + jnp.uint32(1),
            mask,
        )
        info = HMCInfo(accepted, count.astype(theta.dtype) / n, diverged, jnp.zeros((), theta.dtype), eta)
        return new_state, info

    return Kernel(init, step)


# ---------------------------------------------------------------- the spec

#: Default L of HMC and DP-HMC.
DEFAULT_LEAPFROG_STEPS = 10

_KEYS = {"step_size", "leapfrog_steps", "mass", "clip", "jitter", "block_size"}


def prepare_leapfrog(params: dict, model) -> dict:
    """``step_size``, ``leapfrog_steps``, ``mass`` and ``jitter`` of HMC and DP-HMC, validated."""
    return {
        "step_size": check_positive("step_size", params["step_size"], strict=True),
        "leapfrog_steps": check_int("leapfrog_steps",
                                    params.get("leapfrog_steps", DEFAULT_LEAPFROG_STEPS),
                                    minimum=1, strict=True),
        "mass": check_per_dim("mass", params.get("mass", 1.0), model.dim),
        "jitter": check_bool("jitter", params.get("jitter", True)),
    }


def _prepare(params: dict, model, n: int) -> dict:
    check_common("hmc", params, _KEYS, ("step_size",), model, n)
    clip = params.get("clip")
    lf = prepare_leapfrog(params, model)
    return {
        "step_size": lf["step_size"],
        "leapfrog_steps": lf["leapfrog_steps"],
        "mass": lf["mass"],
        "clip": None if clip is None else check_positive("clip", clip, strict=True),
        "jitter": lf["jitter"],
        "block_size": optional_block(params.get("block_size")),
    }


def _build(model, p: dict, noise=None) -> Kernel:
    # block_size is the layout's (SPEC.layout), not the kernel's.
    return build_hmc(model, p["step_size"], p["leapfrog_steps"], p["mass"], p["clip"],
                     jitter=p["jitter"])


def leapfrog_defaults(s: PublicScale) -> dict:
    """``L = DEFAULT_LEAPFROG_STEPS`` steps of size ``(π/2) s₀ / L``: a quarter period of the
    stiffest direction the declared bounds allow (s₀ its posterior sd)."""
    steps = DEFAULT_LEAPFROG_STEPS
    return {"step_size": 0.5 * math.pi * s.scale / steps, "leapfrog_steps": steps}


#: Hamiltonian Monte Carlo: NON-private baseline, full-data passes.
SPEC = AlgorithmSpec("hmc", False, _prepare, _build, FULL, gradient=True, adaptation=HAMILTONIAN,
                     defaults=leapfrog_defaults)
