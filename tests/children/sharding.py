"""test_sharding.py's child functions, run in the shared 4-device child: the full-data samplers'
sharded passes, and their sharded runs, against the unsharded ones."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import dpmcmc
from dpmcmc.models import preset
from dpmcmc.models.base import Model
from dpmcmc.records import passes as pe
from dpmcmc.records.layout import prepare_data
from dpmcmc.records.sharding import data_mesh, shard_data

RUNS = {
    "dp-penalty": dict(tau=0.17, proposal_std=0.06, clip=0.15),
    "dp-hmc": dict(tau_l=0.1, tau_g=0.55, step_size=0.006, leapfrog_steps=3, clip=0.1,
                   grad_clip=0.05),
}


def _banana():
    """The banana preset on 10011 rows (not a multiple of 4 blocks: padding on the last device),
    and its model with autodiff gradients."""
    p = preset("banana-2d", n=10011)
    m = p.model
    return p, Model(m.log_likelihood, m.log_prior, m.dim, name="banana-autodiff")


def passes() -> dict:
    """Each sharded pass of the full-data samplers against the unsharded one: dp-penalty's
    clipped log-ratio sum, dp-hmc's clipped gradient sum (on the float32 gradient copy) and
    log-likelihood sum (relative errors), and the shapes of the shards."""
    p, auto = _banana()
    out = {"devices": len(jax.devices())}
    sharded = shard_data(p.data, data_mesh(), model=auto, block_size=512, grad_dtype="float32")
    out["shard_shapes"] = sorted({tuple(s.data.shape) for s in sharded.blocks.addressable_shards})
    th = p.theta_true + 0.01
    th2 = th + jnp.array([0.004, -0.003])
    plain = prepare_data(p.data, model=auto, block_size=512)
    # The three passes in one compiled program per layout (op by op, each layout compiled some
    # dozens of small programs).
    run_passes = jax.jit(lambda d: {"llr": pe.clipped_llr_sum(auto, d, th, th2, 0.002)[0],
                                    "grad": pe.clipped_grad_sum(auto, d, th, 0.05)[0],
                                    "loglik": pe.loglik_sum(auto, d, th)})
    got_plain, got_sharded = run_passes(plain), run_passes(sharded)
    out["rel_err"] = {k: float(jnp.max(jnp.abs(got_plain[k] - got_sharded[k]))
                               / jnp.max(jnp.abs(got_plain[k])))
                      for k in got_plain}
    return out


def draws() -> dict:
    """The slow test's cases: the draws of dp-penalty and dp-hmc run through ``dpmcmc.sample``
    with and without the mesh (their largest difference), and how far the chains moved."""
    p, auto = _banana()
    out = {"devices": len(jax.devices()), "draw_err": {}, "draws_moved": {}}
    mesh = data_mesh()
    for alg in ("dp-penalty", "dp-hmc"):
        kw = dict(chains=2, iterations=25, key=jax.random.key(7),
                  theta0=np.asarray(p.theta_true), progress=False, delta=1e-5, **RUNS[alg])
        a = dpmcmc.sample(auto, p.data, alg, **kw).samples
        b = dpmcmc.sample(auto, p.data, alg, mesh=mesh, **kw).samples
        out["draw_err"][alg] = float(np.max(np.abs(a - b)))
        out["draws_moved"][alg] = float(np.max(np.abs(a[:, -1] - a[:, 0])))
    return out
