"""test_chunk_cache.py's child functions, run in the shared 4-device child: the cached pass under
a mesh, each device reading and writing its own blocks' share of the cache."""
from __future__ import annotations

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

from dpmcmc.models.base import Model
from dpmcmc.records.sharding import data_mesh
from dpmcmc.samplers import ALGORITHMS, Kernel, build_dp_penalty, run_chains


def _log_likelihood(theta, x):
    r = x - theta
    return -0.5 * jnp.sum(r * r)


def _sharded_run() -> SimpleNamespace:
    """The cached dp-penalty run over blocks split across the mesh, in chunks of 5 of 12
    iterations, and what it was made from."""
    model = Model(_log_likelihood, lambda t: -0.5 * jnp.sum(t * t) / 100.0, 2)
    data = np.random.default_rng(3).normal(0.2, 1.0, size=(4001, 2))  # 8 blocks of 512 rows
    spec = ALGORITHMS["dp-penalty"]
    params = spec.prepare(dict(tau=0.1, clip=2.0, proposal_std=0.012, block_size=512), model, 4001)
    kernel = build_dp_penalty(model, params["tau"], params["clip"], params["proposal_std"],
                              loglik_cache=True)
    theta0 = jnp.full((2, 2), 0.2)
    key = jax.random.key(4)
    sharded = spec.layout(data, params, model, mesh=data_mesh())
    return SimpleNamespace(
        model=model, data=data, spec=spec, params=params, kernel=kernel, theta0=theta0, key=key,
        sharded=sharded,
        cached=run_chains(kernel, theta0, key, 12, data=sharded, progress=False, chunk_size=5))


def cached_equals_uncached() -> dict:
    """The sharded cached run against the same run uncached (bit for bit), and its acceptance."""
    r = _sharded_run()
    b = run_chains(Kernel(r.kernel.init, r.kernel.step), r.theta0, r.key, 12,
                   data=r.sharded, progress=False)
    return {"devices": len(jax.devices()),
            "cached_equals_uncached": all(
                np.array_equal(np.asarray(x), np.asarray(y))
                for x, y in zip(jax.tree.leaves(r.cached), jax.tree.leaves(b))),
            "acceptance": float(np.mean(np.asarray(r.cached[1].accepted)))}


def sharded_vs_plain() -> dict:
    """The slow test's case: the sharded cached run against the unsharded cached run."""
    r = _sharded_run()
    plain = r.spec.layout(r.data, r.params, r.model)
    c = run_chains(r.kernel, r.theta0, r.key, 12, data=plain, progress=False)
    return {"devices": len(jax.devices()),
            "sharded_vs_plain": float(np.max(np.abs(np.asarray(r.cached[0]) - np.asarray(c[0])))),
            "acceptance": float(np.mean(np.asarray(r.cached[1].accepted)))}
