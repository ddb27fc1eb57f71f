"""Leapfrog integration with a diagonal mass matrix, for HMC and DP-HMC.

The integrator follows 000 Algorithm 1: with ``g`` the (possibly noisy, clipped) gradient of
the log target,

    p ← p + η/2 g(θ);  L−1 times { θ ← θ + η M⁻¹ p;  p ← p + η g(θ) };  θ ← θ + η M⁻¹ p;  p ← p + η/2 g(θ)

so that L+1 gradients are evaluated, each (for DP-HMC) with its own fresh noise: the initial one
is passed in as ``grad0`` by the caller.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

Array = Any

__all__ = ["LeapfrogResult", "leapfrog", "kinetic_energy", "sample_momentum"]


class LeapfrogResult(NamedTuple):
    position: Array
    momentum: Array
    grad: Array
    aux: Any
    aux_sum: Any


def sample_momentum(key: Array, mass: Array, like: Array) -> Array:
    """``p ~ N(0, diag(mass))`` with the shape and dtype of ``like``."""
    z = jax.random.normal(key, like.shape, dtype=like.dtype)
    return jnp.sqrt(mass).astype(like.dtype) * z


def kinetic_energy(p: Array, mass: Array) -> Array:
    """``½ pᵀ M⁻¹ p`` for diagonal ``M``."""
    return 0.5 * jnp.sum(p * p / mass)


def leapfrog(grad_fn: Callable[[Array, Array], tuple], key: Array, theta: Array, p: Array,
             grad0: Array, aux0: Any, step_size: Array, num_steps: int, mass: Array
             ) -> LeapfrogResult:
    """Integrate ``num_steps`` leapfrog steps.

    Parameters
    ----------
    grad_fn : callable
        ``grad_fn(key, theta) -> (g, aux)``: gradient of the log target at ``theta`` and a pytree
        of auxiliary values (e.g. a clip count or the log density).
    key : PRNG key
        Split into ``num_steps`` keys, one per gradient evaluation inside the trajectory.
    theta, p : array (dim,)
        Start position and momentum.
    grad0, aux0
        ``grad_fn`` at ``theta`` (evaluated by the caller).
    step_size : scalar
        η for this trajectory.
    num_steps : int
        L ≥ 1 (static).
    mass : array (dim,)
        Diagonal of M.

    Returns
    -------
    LeapfrogResult
        End position and momentum, the gradient and aux at the end position, and the sum of
        ``aux`` over all L+1 evaluations (``aux0`` included).
    """
    inv_mass = 1.0 / mass
    keys = jax.random.split(key, num_steps)
    p = p + 0.5 * step_size * grad0

    def full_step(carry, k):
        th, pp, _, _, acc = carry
        th = th + step_size * inv_mass * pp
        g, aux = grad_fn(k, th)
        pp = pp + step_size * g
        return (th, pp, g, aux, jax.tree.map(jnp.add, acc, aux)), None

    carry = (theta, p, grad0, aux0, aux0)
    if num_steps > 1:
        carry, _ = jax.lax.scan(full_step, carry, keys[:-1])
    th, pp, _, _, acc = carry
    th = th + step_size * inv_mass * pp
    g, aux = grad_fn(keys[-1], th)
    pp = pp + 0.5 * step_size * g
    return LeapfrogResult(th, pp, g, aux, jax.tree.map(jnp.add, acc, aux))
