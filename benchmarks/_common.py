"""Pieces shared by the benchmark scripts (benchmarks/ is on sys.path when they run).

Importing this module sets no XLA flag: each script decides its own threading before JAX starts.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpmcmc.models.base import Model


def autodiff_model(model: Model) -> Model:
    """The same model as a user would write it: the per-record log-likelihood only."""
    return Model(model.log_likelihood, model.log_prior, model.dim, model.temperature,
                 model.name + "-autodiff", model.sample_prior)


def make_runner(kernel, iters):
    """``run(state, key, data)``: ``iters`` iterations of ``kernel`` over all chains in one
    compiled scan.

    Like the library's chain driver, it passes the data as an argument of the compiled program
    (never a constant in it) and returns every iteration's position and whole ``Info``
    (acceptance, clip fraction, divergence): returning less would let XLA drop work a real run
    does (the clip counts were dead code in an earlier version of the benchmarks). A kernel with
    a chunk-local cache (``kernel.cached``, DP penalty's ℓ_j(θ)) is run as the driver runs it:
    the cache is built from the state when the call starts (one model evaluation per record,
    paid by every call as the driver pays it per chunk) and dropped when it ends.
    """
    if kernel.cached is None:
        step_all = jax.vmap(kernel.step, in_axes=(0, 0, None))
        start = lambda s, data: s  # noqa: E731
        position = lambda c: c.position  # noqa: E731
    else:
        def one(k, carry, data):
            s, cache, info = kernel.cached.step(k, carry[0], carry[1], data)
            return (s, cache), info

        step_all = jax.vmap(one, in_axes=(0, 0, None))
        start = lambda s, data: (s, jax.vmap(kernel.cached.init, in_axes=(0, None))(s, data))  # noqa: E731
        position = lambda c: c[0].position  # noqa: E731

    @jax.jit
    def run(state, key, data):
        def body(c, t):
            keys = jax.random.split(jax.random.fold_in(key, t), state.position.shape[0])
            c, info = step_all(keys, c, data)
            return c, (position(c), info)

        carry, out = jax.lax.scan(body, start(state, data), jnp.arange(iters))
        return (carry[0] if kernel.cached is not None else carry), out

    return run


def init_all(kernel, theta, data):
    """The initial states of every chain (rows of ``theta``) on ``data``, compiled."""
    return jax.jit(jax.vmap(kernel.init, in_axes=(0, None)))(theta, data)


def rowsum(rows):
    """Σ over a short list of (m,) vectors: elementwise adds, no XLA reduce (faster on CPU)."""
    acc = rows[0]
    for r in rows[1:]:
        acc = acc + r
    return acc


def record_functions(name: str, model: Model):
    """Hand-written per-record ``grads(θ, x) -> [d vectors (m,)]`` and ``loglik(θ, x) -> (m,)``
    of a preset, on column-major data ``x (d, m)``: elementwise code for the banana, one matrix
    product for the 10-d Gaussian."""
    if name == "banana-2d":
        a = float(model.metadata["a"])
        sigma_sq = np.asarray(model.metadata["sigma_sq"], dtype=float)
        # Python floats (weakly typed): a float32 pass stays float32.
        tau = [float(v) for v in 1.0 / sigma_sq]
        const = float(-0.5 * np.sum(np.log(2 * np.pi * sigma_sq)))

        def grads(theta, x):
            g1 = (x[1] - theta[1] - a * theta[0] ** 2) * tau[1]
            g0 = (x[0] - theta[0]) * tau[0] + g1 * (2 * a * theta[0])
            return [g0, g1]

        def loglik(theta, x):
            r0 = x[0] - theta[0]
            r1 = x[1] - theta[1] - a * theta[0] ** 2
            return const - 0.5 * (tau[0] * r0 * r0 + tau[1] * r1 * r1)
        return grads, loglik
    cov = np.asarray(model.metadata["cov"], dtype=float)
    d = cov.shape[0]
    prec = np.linalg.inv(cov)
    const = float(-0.5 * (d * np.log(2 * np.pi) + np.linalg.slogdet(cov)[1]))

    def grads(theta, x):
        g = jnp.asarray(prec, x.dtype) @ (x - theta[:, None])
        return [g[k] for k in range(d)]

    def loglik(theta, x):
        r = x - theta[:, None]
        pr = jnp.asarray(prec, x.dtype) @ r
        return const - 0.5 * rowsum([r[k] * pr[k] for k in range(d)])
    return grads, loglik
