"""test_sharding_subsampled.py's child functions, run in the shared 4-device child: the
subsampled samplers with their rows split over the mesh."""
from __future__ import annotations

import re
import time

import jax
import jax.numpy as jnp
import numpy as np

import dpmcmc
from dpmcmc.kernels.minibatch import batch_rows
from dpmcmc.models import preset
from dpmcmc.records.sharding import data_mesh, shard_rows
from dpmcmc.samplers import ALGORITHMS
from dpmcmc.secure import secure_key

N = 10003                          # 4 x 2501 - 1: the last device holds one padding row
RUNS = {
    "dp-barker": dict(batch_size=200, proposal_std=0.02),
    "minibatch-penalty": dict(tau=0.5, batch_size=200, clip=0.5, proposal_std=0.02),
    "dp-sgld": dict(step_size=1e-5, batch_size=200, noise_multiplier=1.0, grad_clip=3.0),
    "dp-sgnht": dict(step_size=3e-4, batch_size=200, noise_multiplier=1.0, grad_clip=3.0),
}


def same_draws(p, out: dict, cases, plain_only=()) -> None:
    """Same key, same draws, with and without the mesh, for each ``(algorithm, secure)`` of
    ``cases``, written to ``out``: whether the draws are identical, how far the chains moved, the
    seconds each took. ``plain_only``: algorithms run without the mesh only, as the reference a
    secure run of the same key must differ from (``out["secure_differs"]``)."""
    mesh = data_mesh()
    out["identical"], out["moved"], out["seconds"], plain = {}, {}, {}, {}
    t0 = time.time()
    for alg in plain_only:
        plain[alg] = dpmcmc.sample(p.model, p.data, alg, chains=2, iterations=12,
                                   key=jax.random.key(3), theta0=np.asarray(p.theta_true),
                                   delta=1e-5, progress=False, **RUNS[alg]).samples
    for alg, secure in cases:
        kw = dict(chains=2, iterations=12, key=jax.random.key(3),
                  theta0=np.asarray(p.theta_true), delta=1e-5, progress=False, **RUNS[alg])
        if secure:
            kw["secure"] = secure_key(5)
        name = alg + ("/secure" if secure else "")
        a = dpmcmc.sample(p.model, p.data, alg, **kw).samples
        b = dpmcmc.sample(p.model, p.data, alg, mesh=mesh, **kw).samples
        out["identical"][name] = bool(np.array_equal(a, b))
        out["moved"][name] = float(np.max(np.abs(a[:, -1] - a[:, 0])))
        if secure:  # secure mode was on: its batches and noise differ from the plain run's
            out["secure_differs"] = not np.array_equal(a, plain[alg])
        else:
            plain[alg] = a
        out["seconds"][name] = time.time() - t0
        t0 = time.time()


def _big_shapes(txt: str) -> list[str]:
    """The lines of an HLO text with an array of N - 1 or more elements along one axis."""
    found = []
    for ln in txt.splitlines():
        for dims in re.findall(r"[a-z0-9]+\[([0-9,]+)\]", ln):
            d = [int(v) for v in dims.split(",") if v]
            if d and max(d) >= N - 1:
                found.append(ln.strip()[:160])
    return found


def gather_draws_program() -> dict:
    """The gather alone, bit for bit; dp-sgld's and secure minibatch-penalty's draws with and
    without the mesh; dp-sgld's compiled step, sharded and with the rows closed over."""
    out = {"devices": len(jax.devices())}
    mesh = data_mesh()
    p = preset("banana-2d", n=N)
    # 1. The gather alone, on values a float sum could alter: -0.0, NaN payloads, subnormals.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3))
    x[5, 0] = -0.0
    x[2501, 1] = np.frombuffer(np.uint64(0x7FF8000000000123).tobytes(), np.float64)[0]
    x[7000, 2] = 5e-324
    x[N - 1] = [np.inf, -np.inf, -0.0]
    sx = shard_rows(x, mesh)
    out["shard_shapes"] = sorted({tuple(s.data.shape) for s in sx.blocks.addressable_shards})
    idx = jnp.asarray([0, 5, 2500, 2501, 5002, 7000, 7502, N - 1, N - 2, 3, 5], jnp.int32)
    got = np.asarray(jax.jit(lambda i: batch_rows(sx, i))(idx))
    want = x[np.asarray(idx)]
    out["gather_bits_equal"] = bool(np.array_equal(got.view(np.uint64), want.view(np.uint64)))

    # 2. Same key, same draws, through dpmcmc.sample.
    same_draws(p, out, [("dp-sgld", False), ("minibatch-penalty", True)],
               plain_only=["minibatch-penalty"])

    # 3. The compiled program: no all-gather, and no buffer holding all N rows.
    spec = ALGORITHMS["dp-sgld"]
    prm = spec.prepare(dict(RUNS["dp-sgld"]), p.model, N)
    kernel = spec.build(p.model, prm)
    keys = jax.random.split(jax.random.key(0), 2)
    step_all = jax.vmap(kernel.step, in_axes=(0, 0, None))
    # Sharded: the rows are the step's data argument, a parameter of the compiled program.
    data = spec.layout(np.asarray(p.data, np.float64), prm, p.model, mesh=mesh)
    state = jax.vmap(kernel.init, in_axes=(0, None))(jnp.tile(p.theta_true, (2, 1)), data)
    sh = jax.jit(step_all).lower(keys, state, data).compile().as_text()
    # Plain rows closed over (the detector's power): a constant with all N rows.
    plain = jnp.asarray(p.data, jnp.float64)
    plain_text = jax.jit(lambda k, s: step_all(k, s, plain)).lower(keys, state).compile().as_text()
    out["all_gather"] = "all-gather" in sh
    out["big_sharded"] = _big_shapes(sh)
    out["big_plain"] = _big_shapes(plain_text)   # the detector's power: a closed-over array
    out["param_sharded"] = bool(
        re.search(r"f64\[1,2501,2\]\S* parameter\(\d+\), sharding=\{devices=\[4", sh))
    out["batch_allreduce"] = bool(re.search(r"u64\[2,200,2\]\S* all-reduce\(", sh))
    return out


def every_sampler() -> dict:
    """The slow tests' cases: dp-barker's, dp-sgnht's and minibatch-penalty's (outside secure
    mode) draws with and without the mesh."""
    out = {"devices": len(jax.devices())}
    same_draws(preset("banana-2d", n=N), out,
               [("dp-barker", False), ("dp-sgnht", False), ("minibatch-penalty", False)])
    return out
