"""The chain driver: every sampler runs through :func:`run_chains`.

Iterations are a ``lax.scan`` inside ``jit``, chains a ``vmap``; the Python loop runs over
chunks of iterations only, so a progress bar can be updated between compiled chunks. The key of
iteration ``t`` of chain ``c`` is ``fold_in(split(key, chains)[c], t)``: the draws do not depend
on the chunk size.
"""
from __future__ import annotations

import numbers
from typing import Any, Optional

import jax
import jax.numpy as jnp

from dpmcmc.samplers._types import Kernel

Array = Any

__all__ = ["run_chains", "DEFAULT_PROGRESS_CHUNKS"]

# With a progress bar the run is cut into about this many chunks.
DEFAULT_PROGRESS_CHUNKS = 20


def _make_chunk_runner(kernel: Kernel, length: int, state, chain_keys):
    """One compiled function for every chunk of a run: ``length`` static, the bounds dynamic.

    Iterations ``t >= end`` (the tail of the last chunk) are skipped by a ``lax.cond`` whose
    predicate is shared by all chains, so XLA executes no step for them; their outputs are
    sliced away by the caller. A run therefore compiles exactly once, whatever its length.
    """
    step_all = jax.vmap(kernel.step)

    def iteration_keys(keys, t):
        return jax.vmap(lambda k: jax.random.fold_in(k, t))(keys)

    _, info_shape = jax.eval_shape(step_all, iteration_keys(chain_keys, 0), state)

    def run(st, keys, start, end):
        def body(s, t):
            def do(s):
                s, info = step_all(iteration_keys(keys, t), s)
                return s, (s.position, info)

            def skip(s):
                zeros = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), info_shape)
                return s, (s.position, zeros)

            return jax.lax.cond(t < end, do, skip, s)

        ts = start + jnp.arange(length, dtype=jnp.uint32)
        st, (pos, info) = jax.lax.scan(body, st, ts)
        # (length, chains, ...) -> (chains, length, ...)
        return st, (jnp.swapaxes(pos, 0, 1), jax.tree.map(lambda a: jnp.swapaxes(a, 0, 1), info))

    return jax.jit(run)


def run_chains(kernel: Kernel, theta0: Array, key: Array, num_iterations: int, *,
               progress: bool = True, chunk_size: Optional[int] = None):
    """Run independent chains of ``kernel``.

    Parameters
    ----------
    kernel : Kernel
        ``Kernel(init, step)`` of one chain.
    theta0 : array (chains, dim)
        Starting points, one row per chain.
    key : PRNG key
        Split into one key per chain; iteration ``t`` of chain ``c`` uses
        ``fold_in(chain_key[c], t)``.
    num_iterations : int
        Iterations per chain (≥ 1).
    progress : bool, default True
        Show a progress bar (iteration count only) updated between compiled chunks.
    chunk_size : int, optional
        Iterations per compiled chunk. Default: the whole run in one chunk without a progress bar,
        about ``num_iterations / 20`` with one. The draws do not depend on it.

    Returns
    -------
    positions : jax array (chains, num_iterations, dim)
        The state after each iteration (``theta0`` itself is not included).
    infos : Info pytree
        Each field with leading axes ``(chains, num_iterations)``. Not differentially private.
    """
    if (isinstance(num_iterations, bool) or not isinstance(num_iterations, numbers.Integral)
            or num_iterations < 1):
        raise ValueError(f"num_iterations must be a positive integer, got {num_iterations!r}")
    # The canonical float dtype: float64 under x64, so acceptance tests run in double precision.
    theta0 = jnp.asarray(theta0, dtype=jnp.result_type(float))
    num_iterations = int(num_iterations)
    if theta0.ndim != 2:
        raise ValueError(f"theta0 must have shape (chains, dim), got shape {theta0.shape}")
    chains = theta0.shape[0]
    if chains < 1:
        raise ValueError("theta0 must hold at least one chain")
    if chunk_size is None:
        chunk_size = max(1, -(-num_iterations // DEFAULT_PROGRESS_CHUNKS)) if progress else num_iterations
    elif (isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral)
          or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    chunk_size = min(int(chunk_size), num_iterations)

    chain_keys = jax.random.split(key, chains)
    state = jax.jit(jax.vmap(kernel.init))(theta0)
    runner = _make_chunk_runner(kernel, chunk_size, state, chain_keys)
    positions, infos = [], []

    bar = None
    if progress:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        bar = Progress(TextColumn("sampling"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("iterations"), TimeElapsedColumn(), TimeRemainingColumn(),
                       transient=False)
        bar.start()
        task = bar.add_task("sampling", total=num_iterations)
    try:
        done = 0
        while done < num_iterations:
            length = min(chunk_size, num_iterations - done)
            state, (pos, info) = runner(state, chain_keys, jnp.uint32(done),
                                        jnp.uint32(done + length))
            if length < chunk_size:
                pos = pos[:, :length]
                info = jax.tree.map(lambda a: a[:, :length], info)
            positions.append(pos)
            infos.append(info)
            done += length
            if bar is not None:
                jax.block_until_ready(pos)
                bar.update(task, completed=done)
    finally:
        if bar is not None:
            bar.stop()

    if len(positions) == 1:
        return positions[0], infos[0]
    pos = jnp.concatenate(positions, axis=1)
    info = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1), *infos)
    return pos, info
