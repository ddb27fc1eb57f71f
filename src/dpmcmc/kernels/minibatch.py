"""Shared minibatch pieces of the subsampled samplers (DP Barker, minibatch DP penalty, DP-SGLD...).

Privacy amplification by subsampling (002 Prop. 2 / Cor. 3, 001 Thm 8, and the dominating pair
of :mod:`dpmcmc.accounting.pld`) assumes a batch that is a uniformly random subset of fixed size
``b`` drawn without replacement, fresh and independent in every iteration. That is what
:func:`sample_batch_indices` draws, in ``O(b log b)`` work per round rather than the ``O(n)`` (or
``O(n log n)``) of a full permutation, so that an iteration costs ``O(b)`` data work whatever
``n``.

Per-example work on a batch (:func:`batch_llr`, :func:`clipped_batch_llr`,
:func:`batch_llr_moments`) builds on :mod:`dpmcmc.records.passes` (model evaluation) and
:mod:`dpmcmc.records.clip` (clipping rules, including the audit's miscalibration hook), so that
a subsampled sampler reads the data only through :func:`batch_rows` and these functions. Rows
split over a device mesh (:func:`dpmcmc.records.sharding.shard_rows`) are gathered there.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import jax
import jax.numpy as jnp

from dpmcmc.accounting._checks import check_batch_size  # re-exported: the shared validator
from dpmcmc.kernels import mechanisms as _mechanisms
from dpmcmc.records.clip import clip_gradients, clip_ratios
from dpmcmc.records.passes import per_example_grads, per_example_loglik
from dpmcmc.records.sharding import ShardedRows, gather_rows

Array = Any

__all__ = [
    "check_batch_size",
    "sample_batch_indices",
    "batch_rows",
    "batch_llr",
    "clipped_batch_llr",
    "batch_llr_moments",
    "clipped_batch_grads",
]

# Above this sampling ratio the rejection rounds of sample_batch_indices would need many
# rounds (each round re-draws the positions that collided, a fraction about b/n of them);
# a full permutation then costs O(n log n) = O(b log b) anyway.
_PERMUTATION_RATIO = 0.25

# The refill of the first round's collisions works on a small array compared pairwise; past
# this many slots the sorted rounds are cheaper (XLA:CPU sorts at ~40 ns an element, so a
# sort of b is the cost to beat, not the O(K²) comparisons).
_MAX_REFILL = 512


def _uniform_below(key: Array, shape: tuple, n: int) -> tuple[Array, Array]:
    """Exactly uniform integers in ``[0, n)`` from one 32-bit word each, and which are valid.

    Lemire's multiply-shift: ``v = ⌊u·n / 2³²⌋`` for a uniform 32-bit ``u`` is uniform once the
    ``2³² mod n`` values of ``u`` whose low product word falls below ``2³² mod n`` are rejected
    (probability < n/2³²). A rejected draw is returned as invalid; the caller draws it again, as
    it does a collision. (``jax.random.randint`` spends two words a value and is not exact.)
    The high word of the 32×32-bit product is formed from 16-bit halves, so no 64-bit type is
    needed whatever the JAX precision setting.
    """
    u = jax.random.bits(key, shape, jnp.uint32)
    m = jnp.uint32(n)
    u0, u1 = u & 0xFFFF, u >> 16
    m0, m1 = m & 0xFFFF, m >> 16
    lo, mid1, mid2 = u0 * m0, u1 * m0, u0 * m1
    carry = ((lo >> 16) + (mid1 & 0xFFFF) + (mid2 & 0xFFFF)) >> 16
    high = u1 * m1 + (mid1 >> 16) + (mid2 >> 16) + carry
    low = u * m  # wraps: the low word of the product
    return high.astype(jnp.int32), low >= jnp.uint32((2 ** 32 - n) % n)


def _refill_size(n: int, b: int) -> int:
    """Slots of the refill array: the first round's expected collisions b²/(2n) plus six
    standard deviations and a margin, at most b (a larger count takes the sorted rounds); 0 (no
    refill: sorted rounds throughout) when that exceeds ``_MAX_REFILL``."""
    expected = b * b / (2.0 * n) + b / 2.0 ** 32 * n
    size = min(b, int(math.ceil(expected + 6.0 * math.sqrt(expected) + 16)))
    return size if size <= _MAX_REFILL else 0


def _sorted_distinct(values: Array, n: int) -> tuple[Array, Array]:
    """``values`` sorted, and which to keep: the first of each run of equal values, below ``n``
    (``n`` marks a draw to make again)."""
    vals = jnp.sort(values)
    return vals, jnp.concatenate([jnp.ones((1,), bool), vals[1:] != vals[:-1]]) & (vals < n)


def _refill(key: Array, vals: Array, keep: Array, need: Array, n: int, size: int) -> Array:
    """``vals`` with its ``need`` positions not kept replaced by distinct values new to the
    kept ones, grown in ``size`` slots (the first ``need`` used) from i.i.d. uniform draws."""
    b = vals.shape[0]
    slot = jnp.arange(size)
    earlier = slot[None, :] < slot[:, None]  # earlier[i, j]: j < i

    def refill_round(carry):
        key, small, filled = carry
        key, sub = jax.random.split(key)
        cand, valid = _uniform_below(sub, (size,), n)
        fresh = (slot < need) & ~filled
        pos = jnp.clip(jnp.searchsorted(vals, cand), 0, b - 1)
        fresh &= valid & (vals[pos] != cand)  # new to the sorted first round (sentinels are n)
        cand = jnp.where(filled, small, cand)
        same = cand[:, None] == cand[None, :]
        # A fresh value equal to a slot already filled, or to an earlier fresh one, is dropped.
        taken = jnp.any(same & (filled[None, :] | (fresh[None, :] & earlier)), axis=1)
        return key, cand, filled | (fresh & ~taken)

    def refill_open(carry):
        return jnp.any((slot < need) & ~carry[2])

    init = (key, jnp.zeros((size,), vals.dtype), jnp.zeros((size,), bool))
    _, small, _ = jax.lax.while_loop(refill_open, refill_round, init)
    rank = jnp.clip(jnp.cumsum(~keep) - 1, 0, size - 1)
    return jnp.where(keep, vals, small[rank])


def sample_batch_indices(key: Array, n: int, batch_size: int,
                         noise: Optional[_mechanisms.NoiseSource] = None) -> Array:
    """Indices of a uniformly random subset of size ``batch_size`` of ``{0, …, n−1}``.

    Exactly uniform over the ``C(n, b)`` subsets (fixed-size sampling without replacement).
    For ``b ≤ n/4`` the subset is grown from i.i.d. uniform draws: ``S`` starts as the distinct
    values among ``b`` draws, and every later round adds the distinct values, new to ``S``, among
    fresh draws for the slots still free, until ``|S| = b`` (it never overshoots). The law of
    each round is invariant under every relabelling of ``{0, …, n−1}`` (acceptance looks only at
    which values are equal), so the final set is uniform over subsets of size ``b``.

    Cost: the first round is one sort of ``b`` integers (equal neighbours are the repeats).
    Its collisions, about ``b²/(2n)``, are refilled in a small array of ``K`` slots: a fresh
    value is kept if a binary search does not find it in the sorted first round and it equals
    no other kept slot (compared pairwise). Should more than ``K`` slots be free (improbable:
    ``K`` is six standard deviations above the expected count), the remaining slots are grown
    by sorted rounds over all ``b`` instead; where ``K`` would exceed 512 (many collisions,
    ``b`` near ``n/4``), the sorted rounds are used throughout. Which way is taken depends on the first round
    only, and either way the free slots are completed to a uniformly random superset of the
    first round's set (each is invariant under the relabellings that fix that set), so the
    choice leaves the law unchanged. For ``b > n/4`` a random permutation is cut.

    Parameters
    ----------
    key : PRNG key
    n : int
        Population size (static).
    batch_size : int
        ``b``, ``1 ≤ b ≤ n`` (static).
    noise : NoiseSource, optional
        The kernel's noise source: under a secure one the batch is a ChaCha20 permutation under
        the run's secret (default: ``jax.random``).

    Returns
    -------
    array (b,) of int32
        Distinct indices, in no particular order.
    """
    n = int(n)
    b = int(batch_size)
    if not 1 <= b <= n:
        raise ValueError(f"batch_size must satisfy 1 <= batch_size <= n = {n}, got {b}")
    if b == n:
        return jnp.arange(n, dtype=jnp.int32)
    secure = noise is not None and noise.secure
    if secure or b > _PERMUTATION_RATIO * n:
        # Secure mode: the batch must stay secret even if the JAX key is known, since the
        # amplification by subsampling the accountant relies on assumes nobody can tell which
        # records were used; the ChaCha20 permutation costs a sort of n per draw.
        return _mechanisms.noise_permutation(key, n, noise)[:b].astype(jnp.int32)

    k_first, k_refill, k_rounds = jax.random.split(key, 3)
    # Round 1: b draws; a rejected draw becomes n, above every index, so it is never kept.
    v, ok = _uniform_below(k_first, (b,), n)
    vals, keep = _sorted_distinct(jnp.where(ok, v, n), n)
    free = b - jnp.sum(keep)

    # Refill of the `free` missing values in K slots (only the first `free` are needed).
    size = _refill_size(n, b)
    use_refill = free <= size
    idx = vals if size == 0 else _refill(k_refill, vals, keep, jnp.where(use_refill, free, 0),
                                        n, size)

    # Sorted rounds over all b slots, run only when the refill was too small (under vmap the
    # loop runs while some chain needs it; for the others its condition is false throughout).
    def one_round(carry):
        key, idx, filled = carry
        key, sub = jax.random.split(key)
        cand, valid = _uniform_below(sub, (b,), n)
        # Slots are interchangeable: the set and the number of free slots are all that matter.
        # After sorting, the first of each run of equal values is kept and the rest are freed.
        return key, *_sorted_distinct(jnp.where(filled, idx, jnp.where(valid, cand, n)), n)

    def rounds_open(carry):
        return ~use_refill & ~jnp.all(carry[2])

    _, idx, _ = jax.lax.while_loop(rounds_open, one_round, (k_rounds, idx, keep | use_refill))
    return idx.astype(jnp.int32)


def batch_rows(data: Array, idx: Array) -> Array:
    """The rows ``data[idx]`` of a batch (a gather of ``b`` rows).

    ``data`` is an array, or rows split over a device mesh by
    :func:`dpmcmc.records.sharding.shard_rows`; those are gathered without any device holding
    all ``n`` rows, and the result is bit for bit the same (:func:`dpmcmc.records.sharding.gather_rows`).
    """
    if isinstance(data, ShardedRows):
        return gather_rows(data, idx)
    return jnp.take(data, idx, axis=0)


def batch_llr(model, batch: Array, theta: Array, theta_new: Array) -> Array:
    """Per-example untempered, unclipped log-likelihood ratios ``ℓ_j(θ') − ℓ_j(θ)``, shape ``(b,)``.

    Computed in the floating dtype of ``theta`` (at least float32).
    """
    dtype = jnp.result_type(theta, jnp.float32)
    return (per_example_loglik(model, theta_new, batch)
            - per_example_loglik(model, theta, batch)).astype(dtype)


def clipped_batch_llr(model, batch: Array, theta: Array, theta_new: Array, bound: Array
                      ) -> tuple[Array, Array]:
    """Per-example ratios clipped to ``[-bound, bound]`` (NaN becomes ``-bound``).

    Returns
    -------
    r : array (b,)
        Every entry in ``[-bound, bound]``.
    was_clipped : bool array (b,)
        True where the ratio was out of bounds or NaN (see :func:`dpmcmc.records.clip.clip_ratios`).
    """
    r = batch_llr(model, batch, theta, theta_new)
    return clip_ratios(r, jnp.asarray(bound, r.dtype))


def batch_llr_moments(r: Array) -> tuple[Array, Array]:
    """``(R, Q)``: the sum ``R = Σ_j r_j`` and ``Q = Σ_j (r_j − R/b)²`` of a batch.

    ``Q = Σ r_j² − R²/b`` is computed with the two-pass formula, so it is never negative and,
    for ``|r_j| ≤ c``, never exceeds ``b c²`` beyond float rounding.
    """
    total = jnp.sum(r)
    dev = r - total / r.shape[0]
    return total, jnp.sum(dev * dev)


def clipped_batch_grads(model, batch: Array, theta: Array, grad_clip: Array, *,
                        method: str = "auto") -> tuple[Array, Array]:
    """Per-example gradients of a batch, each clipped to L2 norm ``grad_clip``.

    Returns
    -------
    g : array (b, dim)
        Clipped untempered per-example gradients (non-finite rows become zero).
    was_clipped : bool array (b,)
    """
    dtype = jnp.result_type(theta, jnp.float32)
    g = per_example_grads(model, theta, batch, method).astype(dtype)
    return clip_gradients(g, jnp.asarray(grad_clip, dtype))
