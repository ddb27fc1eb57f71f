"""DP penalty with and without its chunk-local cache of ℓ_j(θ), per model: where the cache pays.

The cache (``Kernel.cached``, see ``src/dpmcmc/kernels/types.py``) saves one model evaluation
per record and iteration and costs storing ℓ_j(θ') of every record and selecting the new cache.
Whether it pays depends on the model's per-record cost; DP penalty decides from
``_passes.record_cost`` (an estimate from the jaxpr) against ``_passes.CACHE_MIN_COST``. This
script times both kernels (``build_dp_penalty(..., loglik_cache=True/False)``, the same draws)
on models of increasing cost, n = 10⁵ rows, 4 chains, ``--iters`` iterations per compiled call
(the cache rebuilt per call, as the driver does per chunk), CPU time of the process (one XLA
thread), the two kernels alternating for ``--rounds`` rounds, and writes
``results/chunk_cache.{json,md}``.

Usage::

    python benchmarks/bench_chunk_cache.py [--rounds 2] [--iters 20]
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

from _common import init_all, make_runner  # noqa: E402
from _timing import cpu_time  # noqa: E402
from dpmcmc.models import circle, gaussian, gaussian_mixture, logistic_regression, preset  # noqa: E402
from dpmcmc.models.base import Model  # noqa: E402
from dpmcmc.samplers import ALGORITHMS, build_dp_penalty  # noqa: E402
from dpmcmc.records.passes import CACHE_MIN_COST, record_cost  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
N, CHAINS = 100_000, 4


def cases():
    rng = np.random.default_rng(0)
    out = [("sum of squares, d = 2", Model(lambda t, x: -0.5 * jnp.sum((x - t) ** 2),
                                           lambda t: 0.0, 2), rng.normal(size=(N, 2))),
           ("circle", circle(), rng.normal(size=(N, 1)) + 3.0)]
    for name in ("banana-2d", "gaussian-10d"):
        p = preset(name)
        out.append((name, p.model, np.asarray(p.data)))
    out.append(("Gaussian, d = 3", gaussian(np.eye(3) + 0.1), rng.normal(size=(N, 3))))
    out.append(("Gaussian mixture", gaussian_mixture(), rng.normal(size=(N, 1))))
    for d in (5, 10, 20):
        x = rng.normal(size=(N, d))
        y = (rng.uniform(size=N) < 0.5).astype(float)
        out.append((f"logistic regression, d = {d}", logistic_regression(d), np.column_stack([x, y])))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)
    spec = ALGORITHMS["dp-penalty"]
    rows = []
    for name, model, data in cases():
        params = spec.prepare(dict(tau=0.1, clip=1.0, proposal_std=0.003), model, N)
        laid = spec.layout(data, params, model)
        theta0 = jnp.zeros((CHAINS, model.dim)) + 0.1
        runs = {}
        for cache in (True, False):
            k = build_dp_penalty(model, params["tau"], params["clip"], params["proposal_std"],
                                 loglik_cache=cache)
            runs[cache] = (make_runner(k, args.iters), init_all(k, theta0, laid))
        ms = {True: [], False: []}
        for _ in range(args.rounds):
            for cache in (False, True):
                run, state = runs[cache]
                ms[cache].append(1e3 * cpu_time(run, state, jax.random.key(0), laid)[0] / args.iters)
        cost = record_cost(model, theta0[0], data)
        row = {"model": name, "record_cost": cost, "cached_by_default": cost >= CACHE_MIN_COST,
               "ms_without": ms[False], "ms_with": ms[True],
               "gain": float(np.median(ms[False]) / np.median(ms[True]))}
        print(f"{name:30s} cost {cost:6.0f}  without {np.median(ms[False]):7.2f}  with "
              f"{np.median(ms[True]):7.2f} ms/iter  gain {row['gain']:.2f}", flush=True)
        rows.append(row)
    rows.sort(key=lambda r: r["record_cost"])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "chunk_cache.json").write_text(json.dumps(
        {"n": N, "chains": CHAINS, "iters": args.iters, "rounds": args.rounds,
         "cache_min_cost": CACHE_MIN_COST, "rows": rows}, indent=1))
    lines = ["# DP penalty with and without the chunk-local cache (CPU ms per iteration)", "",
             f"n = {N}, {CHAINS} chains, {args.iters} iterations per call, {args.rounds} rounds "
             f"alternating; median. `CACHE_MIN_COST` = {CACHE_MIN_COST}.", "",
             "| model | record_cost | cached by default | without | with | gain |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['record_cost']:.0f} | {'yes' if r['cached_by_default'] else 'no'} | "
                     f"{np.median(r['ms_without']):.2f} | {np.median(r['ms_with']):.2f} | {r['gain']:.2f}× |")
    (RESULTS / "chunk_cache.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
