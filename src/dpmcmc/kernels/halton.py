"""Randomised Halton (base-2 van der Corput) step-size multipliers for HMC (000 §3).

The paper perturbs the leapfrog step size between iterations with a randomised Halton sequence
(Owen 2017, after Hoffman et al. 2021): ``η_i = η · h_i``. In base 2 Owen's random digit
permutation of each digit is either the identity or the swap ``0 ↔ 1``, i.e. an XOR of the
digit with a random bit, so the randomised sequence is

    h_i = (bitreverse32(i) XOR m + 1/2) / 2^32,     i = 0, 1, 2, ...

with one uniformly random 32-bit mask ``m`` per chain. ``h_i`` lies in the open interval
(0, 1) (the 1/2 centres each of the 2^32 cells, so a step size is never exactly 0). The mask is
drawn from the sampler's own PRNG key, never from the data, and ``i`` is the iteration count:
the step-size sequence is data-independent.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

Array = Any

__all__ = ["bit_reverse32", "halton_multiplier", "draw_mask"]

_TWO_M32 = 2.0 ** -32


def bit_reverse32(i: Array) -> Array:
    """Reverse the 32 bits of a uint32 array."""
    x = jnp.asarray(i, jnp.uint32)
    for shift, m in ((1, 0x55555555), (2, 0x33333333), (4, 0x0F0F0F0F), (8, 0x00FF00FF)):
        m = jnp.uint32(m)
        x = ((x >> shift) & m) | ((x & m) << shift)
    return (x >> 16) | (x << 16)


def draw_mask(key: Array) -> Array:
    """A uniformly random uint32 scrambling mask (one per chain)."""
    return jax.random.bits(key, (), jnp.uint32)


def halton_multiplier(index: Array, mask: Array, dtype=None) -> Array:
    """The randomised van der Corput number ``h_index ∈ (0, 1)`` for scrambling ``mask``."""
    dtype = dtype or jnp.result_type(float)
    v = bit_reverse32(index) ^ jnp.asarray(mask, jnp.uint32)
    # Split into two 16-bit halves: exact in float32 as well as float64.
    hi = (v >> 16).astype(dtype)
    lo = (v & jnp.uint32(0xFFFF)).astype(dtype)
    h = (hi * 65536.0 + lo + 0.5) * jnp.asarray(_TWO_M32, dtype)
    # In float32 the top cell rounds up to 1.0; keep the interval open.
    return jnp.minimum(h, jnp.asarray(1.0, dtype) - jnp.finfo(dtype).epsneg)
