"""Dense linear algebra that never hands XLA's CPU thread pool a batched LAPACK call.

Why
---
On CPU, jaxlib (0.10.0 – 0.11.x) runs a LAPACK custom call on a batch of matrices by splitting
the batch into chunks, scheduling them on XLA's intra-op thread pool and blocking the calling
thread until they finish (``ParallelBatchMap`` → ``absl::BlockingCounter::Wait``), whenever the
batch holds at least ~2·10⁵ FLOP of work (``GetLapackBatchChunkSize``). The calling thread is
itself often a thread of that pool: XLA's thunk executor runs independent operations
concurrently on it. When as many such calls start at once as the pool has threads (two on a
2-core machine), every pool thread waits for chunks queued behind the waits, which no thread is
left to run: the process hangs at 0 % CPU. The noise-aware GLM's draws did exactly that (two
independent batched triangular solves of its vmapped draws; issue 33 §2,
benchmarks/stress_hang.py).

The rule
--------
Every LAPACK-backed operation the library traces goes through this module. Each function here
is the corresponding ``jnp.linalg`` / ``jax.scipy.linalg`` call on ONE matrix, wrapped so that
any batch — leading axes of the arguments, or a ``jax.vmap`` over it, however deep (chains,
draws, audit trials) — runs as a loop (``lax.map``, by a ``jax.custom_batching.custom_vmap``
rule) of unbatched calls. An unbatched LAPACK call runs inline on its thread and schedules nothing,
so no pool thread ever waits on work queued behind it. Each matrix goes through the same LAPACK
routine and the same surrounding operations as in the batched call, so the results are the same
to the last bit (tests/runtime/test_pool_deadlock.py).

The guard, tests/runtime/test_pool_deadlock.py, checks every program the library compiles (the
noise-aware GLM's two programs, each sampler's chunk program, the private start, the audit's
GLM runner, the Gaussian model's exact posterior): no LAPACK custom call with a batch, no other
custom call, no FFT (whose CPU thunk blocks on the same pool in the same way).

The loop costs a few microseconds per matrix: a default noise-aware GLM fit (4000 draws, 11
coefficients) takes 1.10× the time it took with batched calls (benchmarks/README.md, "Stress
test of the default command").

Forward-mode differentiable (``jax.jvp``, ``jax.jacfwd``); ``custom_vmap`` has no reverse mode,
and no caller differentiates these functions.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

__all__ = ["cholesky", "cho_solve", "solve_triangular", "solve", "inv", "eigh",
           "pool_blocking_operations", "LINALG_PRIMITIVES", "ALWAYS_BLOCKING"]


def _one_matrix_at_a_time(fn, signature: str):
    """``fn`` on one problem (core shapes ``signature``), looped over any batch.

    The ``custom_vmap`` rule turns a ``vmap`` of the function into ``lax.map`` of it over the
    batched arguments, the others closed over (and a ``vmap`` of that into a nested loop);
    ``jnp.vectorize`` turns leading batch axes of the arguments into such a ``vmap``. Without a
    batch, it is ``fn`` itself. (``jax.custom_batching.sequential_vmap`` is the same rule but
    fails when the rule is reached with no argument batched, as in ``jax.jacfwd``.)
    """
    looped = custom_vmap(fn)

    @looped.def_vmap
    def rule(axis_size, in_batched, *args):
        del axis_size
        if not any(in_batched):  # nothing to loop over (reached so under jax.jacfwd)
            out = fn(*args)
            return out, jax.tree.map(lambda _: False, out)

        def one(mapped):
            it = iter(mapped)
            return looped(*[next(it) if b else a for a, b in zip(args, in_batched)])

        out = jax.lax.map(one, [a for a, b in zip(args, in_batched) if b])
        return out, jax.tree.map(lambda _: True, out)

    return functools.wraps(fn)(jnp.vectorize(looped, signature=signature))


# One wrapped function per static option, made once (a stable object for JAX's caches).
@functools.lru_cache(maxsize=None)
def _triangular(lower: bool, trans: int, vector: bool):
    def solve_one(a, b):
        return jax.scipy.linalg.solve_triangular(a, b, lower=lower, trans=trans)

    return _one_matrix_at_a_time(solve_one, "(n,n),(n)->(n)" if vector else "(n,n),(n,k)->(n,k)")


@functools.lru_cache(maxsize=None)
def _cho_solve(vector: bool):
    def solve_one(c, b):
        return jax.scipy.linalg.cho_solve((c, True), b)

    return _one_matrix_at_a_time(solve_one, "(n,n),(n)->(n)" if vector else "(n,n),(n,k)->(n,k)")


@functools.lru_cache(maxsize=None)
def _solve(vector: bool):
    return _one_matrix_at_a_time(jnp.linalg.solve,
                                 "(n,n),(n)->(n)" if vector else "(n,n),(n,k)->(n,k)")


_cholesky = _one_matrix_at_a_time(jnp.linalg.cholesky, "(n,n)->(n,n)")
_inv = _one_matrix_at_a_time(jnp.linalg.inv, "(n,n)->(n,n)")
_eigh = _one_matrix_at_a_time(lambda a: tuple(jnp.linalg.eigh(a)), "(n,n)->(n),(n,n)")


def _is_vector(a, b) -> bool:
    # As jnp.linalg.solve: b is a vector (or a batch of vectors) when it has one axis fewer.
    return jnp.ndim(b) == jnp.ndim(a) - 1


def cholesky(a):
    """Lower Cholesky factor of the symmetric positive definite ``a`` (``jnp.linalg.cholesky``:
    ``a`` symmetrised first, NaN where it is not positive definite); ``(..., n, n)``."""
    return _cholesky(a)


def cho_solve(chol, b):
    """``A⁻¹ b`` from the lower Cholesky factor ``chol`` of ``A``
    (``jax.scipy.linalg.cho_solve((chol, True), b)``); ``b`` is ``(..., n)`` or ``(..., n, k)``."""
    return _cho_solve(_is_vector(chol, b))(chol, b)


def solve_triangular(a, b, *, lower: bool, trans: int = 0):
    """``op(a)⁻¹ b`` for triangular ``a`` (``jax.scipy.linalg.solve_triangular``, ``trans`` 0:
    ``a``, 1: ``aᵀ``); ``b`` is ``(..., n)`` or ``(..., n, k)``."""
    return _triangular(bool(lower), int(trans), _is_vector(a, b))(a, b)


def solve(a, b):
    """``a⁻¹ b`` for square ``a`` (``jnp.linalg.solve``, LU with partial pivoting); ``b`` is
    ``(..., n)`` or ``(..., n, k)``."""
    return _solve(_is_vector(a, b))(a, b)


def inv(a):
    """``a⁻¹`` (``jnp.linalg.inv``); ``(..., n, n)``."""
    return _inv(a)


def eigh(a):
    """``(eigenvalues ascending, eigenvectors as columns)`` of the symmetric ``a``
    (``jnp.linalg.eigh``, ``a`` symmetrised first); ``(..., n, n)``."""
    return _eigh(a)


# Linear-algebra primitives (each lowers to a LAPACK custom call on CPU, its batch the leading
# axes of its first operand) and the FFT; a foreign function call is a custom call of unknown
# behaviour.
LINALG_PRIMITIVES = frozenset({
    "cholesky", "eigh", "eig", "lu", "triangular_solve", "qr", "geqrf", "geqp3",
    "householder_product", "svd", "schur", "hessenberg", "tridiagonal", "tridiagonal_solve"})
ALWAYS_BLOCKING = frozenset({"fft", "ffi_call"})


def pool_blocking_operations(jaxpr) -> list:
    """The operations of a (closed) jaxpr, sub-jaxprs included, that can block a thread of XLA's
    CPU pool on that same pool: a linear-algebra primitive on more than one matrix, an FFT, a
    foreign call. Each is named with its operand shape. Empty for a program that cannot
    deadlock this way (the helpers of this module leave none: their batches are loops).
    """
    from jax.extend import core as jax_core

    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    found = []
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in ALWAYS_BLOCKING:
            found.append(name)
        elif name in LINALG_PRIMITIVES:
            shape = eqn.invars[0].aval.shape
            if math.prod(shape[:-2]) > 1:
                found.append(f"{name} on {shape}")
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(sub, (jax_core.ClosedJaxpr, jax_core.Jaxpr)):
                    found += pool_blocking_operations(sub)
    return found
