"""Shared minibatch pieces of the subsampled samplers (DP Barker, minibatch DP penalty, DP-SGLD...).

Privacy amplification by subsampling (002 Prop. 2 / Cor. 3, 001 Thm 8, and the dominating pair
of :mod:`dpmcmc.accounting.pld`) assumes a batch that is a uniformly random subset of fixed size
``b`` drawn without replacement, fresh and independent in every iteration. That is what
:func:`sample_batch_indices` draws, in ``O(b log b)`` work per round rather than the ``O(n)`` (or
``O(n log n)``) of a full permutation, so that an iteration costs ``O(b)`` data work whatever
``n``.

Per-example work on a batch (:func:`batch_llr`, :func:`clipped_batch_llr`,
:func:`batch_llr_moments`) builds on :mod:`dpmcmc.samplers._passes` (model evaluation) and
:mod:`dpmcmc.samplers._clip` (clipping rules, including the audit's miscalibration hook), so that
a subsampled sampler reads the data only through :func:`batch_rows` and these functions. Rows
split over a device mesh (:func:`dpmcmc.samplers._sharding.shard_rows`) are gathered there.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp

from dpmcmc.accounting._checks import check_batch_size  # re-exported: the shared validator
from dpmcmc.samplers import _mechanisms
from dpmcmc.samplers._clip import clip_gradients, clip_ratios
from dpmcmc.samplers._passes import per_example_grads, per_example_loglik
from dpmcmc.samplers._sharding import ShardedRows, gather_rows

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


def sample_batch_indices(key: Array, n: int, batch_size: int,
                         noise: Optional[_mechanisms.NoiseSource] = None) -> Array:
    """Indices of a uniformly random subset of size ``batch_size`` of ``{0, …, n−1}``.

    Exactly uniform over the ``C(n, b)`` subsets (fixed-size sampling without replacement).
    For ``b ≤ n/4`` the subset is grown in rounds: ``S ← S ∪ {U_1, …, U_m}`` with
    ``m = b − |S|`` fresh i.i.d. uniform indices, until ``|S| = b`` (it never overshoots, since
    ``m`` draws add at most ``m`` values). The law of this process is invariant under every
    relabelling of ``{0, …, n−1}``, so the final set is uniform over subsets of size ``b``.
    Each round is one sort of ``b`` integers (equal neighbours are the repeats); about
    ``1 + log b / log(n/b)`` rounds are needed. For ``b > n/4`` a random permutation is cut
    instead.

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

    def one_round(carry):
        key, idx, filled = carry
        key, sub = jax.random.split(key)
        cand = jax.random.randint(sub, (b,), 0, n, dtype=jnp.int32)
        # Slots are interchangeable: the set and the number of free slots are all that matter.
        # After sorting, the first of each run of equal values is kept and the rest are freed.
        vals = jnp.sort(jnp.where(filled, idx, cand))
        first = jnp.concatenate([jnp.ones((1,), bool), vals[1:] != vals[:-1]])
        return key, vals, first

    def not_done(carry):
        return ~jnp.all(carry[2])

    init = (key, jnp.zeros((b,), jnp.int32), jnp.zeros((b,), bool))
    _, idx, _ = jax.lax.while_loop(not_done, one_round, init)
    return idx


def batch_rows(data: Array, idx: Array) -> Array:
    """The rows ``data[idx]`` of a batch (a gather of ``b`` rows).

    ``data`` is an array, or rows split over a device mesh by
    :func:`dpmcmc.samplers._sharding.shard_rows`; those are gathered without any device holding
    all ``n`` rows, and the result is bit for bit the same (:func:`dpmcmc.samplers._sharding.gather_rows`).
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
        True where the ratio was out of bounds or NaN (see :func:`dpmcmc.samplers._clip.clip_ratios`).
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
