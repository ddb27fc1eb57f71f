"""DP-HMC and DP penalty against the best hand-written fused passes, by wall clock, interleaved.

The honest limit of a full-data DP sampler is the work its data passes must do. For each preset
(banana-2d, gaussian-10d; n = 10⁵, 4 chains, the presets' settings) this script writes that work
by hand as straightforward ``jax.jit`` code, the fastest we could write:

- **DP-HMC**, one iteration = L + 1 clipped per-example gradient sums (``grad_clip`` bound) and one
  clipped log-likelihood-ratio sum, for 4 chains (``vmap``). The gradients are written out as
  elementwise column operations (banana) or one matrix product (Gaussian); the clipping and the
  sum are fused. Each gradient pass feeds the next position (a leapfrog-like update), so XLA
  cannot merge or drop passes. Gradient passes are float32 like DP-HMC's default
  ``grad_dtype="float32"`` (data copied to float32 once), sums accumulated in float64.
- **DP penalty**, one iteration = one clipped log-likelihood-ratio sum in float64.

Each pass exists in two layouts, all rows at once and scanned blocks of 4096 rows; the limit of a
round is the faster of the two (so the baseline is the best of what we wrote, never a slow one).

Ours is the library's kernel (``dpmcmc.samplers.ALGORITHMS[...]``) run like the chain driver runs
it: a ``lax.scan`` of iterations, ``vmap`` over 4 chains, every position and ``Info`` returned. Two
model paths: ``autodiff`` (the per-record log-likelihood only, as a user writes it) and
``preset`` (the preset model as shipped, with whatever ``grad_method="auto"`` picks).

Clock: wall time (``time.perf_counter``), XLA's default threads for both sides. The machine is
shared, so no absolute time here is a claim; each round times ours and the limit back to back
(batches of calls of at least ``--min-batch`` seconds each, compile excluded) and gives one ratio;
we report the median ratio over ``--rounds`` rounds and its range.

Usage::

    python benchmarks/bench_limit.py            # 5 rounds, writes results/limit.json and limit.md
    python benchmarks/bench_limit.py --rounds 3 --presets banana-2d
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _common import autodiff_model, init_all, make_runner, record_functions  # noqa: E402
from dpmcmc.models import preset  # noqa: E402
from dpmcmc.models.base import Model  # noqa: E402
from dpmcmc.samplers import ALGORITHMS  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CHAINS = 4
BLOCK = 4096


def wall_time(fn, *args, min_batch_s: float = 0.5) -> float:
    """Wall seconds per call of ``fn(*args)``: one batch of calls lasting ≥ ``min_batch_s``.

    The first call (compilation) is excluded.
    """
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    trial = time.perf_counter() - t0
    calls = max(1, int(np.ceil(min_batch_s / max(trial, 1e-6))))
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / calls


def limit_programs(name: str, model: Model, data: np.ndarray, params: dict, algorithm: str):
    """``{layout: jitted f(theta (chains, d)) -> outputs}``: one hand-written iteration's passes."""
    n, d = data.shape
    grads, loglik = record_functions(name, model)
    b_g = float(params.get("grad_clip", 1.0))
    steps = int(params.get("leapfrog_steps", 10))
    eps = float(params.get("step_size", 1e-3))

    def layouts(dtype):
        out = {"one pass": (jnp.asarray(np.ascontiguousarray(data.T).astype(dtype))[None],
                            jnp.ones((1, n), bool))}
        nb = -(-n // BLOCK)
        pad = nb * BLOCK - n
        xs = np.concatenate([data, np.repeat(data[:1], pad, 0)]).reshape(nb, BLOCK, d)
        out[f"blocks of {BLOCK}"] = (jnp.asarray(np.ascontiguousarray(xs.transpose(0, 2, 1)).astype(dtype)),
                                     jnp.asarray((np.arange(nb * BLOCK) < n).reshape(nb, BLOCK)))
        return out

    def scanned(fn, xs, mask, args):
        def body(acc, xm):
            return jax.tree.map(jnp.add, acc, fn(args, *xm)), None
        zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(fn, args, xs[0], mask[0]))
        return jax.lax.scan(body, zero, (xs, mask))[0]

    def grad_pass(theta, x, mask):          # float32 clipped gradient sum, float64 block sums
        g = grads(theta.astype(jnp.float32), x)
        sq = sum(gk * gk for gk in g)
        s = jnp.where(mask, jnp.minimum(jnp.float32(1.0), jnp.float32(b_g) / jnp.sqrt(sq)), jnp.float32(0.0))
        return (jnp.stack([jnp.sum(gk * s) for gk in g]).astype(jnp.float64),
                jnp.sum((sq > jnp.float32(b_g * b_g)) & mask))

    def llr_pass(args, x, mask):            # float64 clipped ratio sum
        theta, theta_new, c = args
        r = jnp.clip(loglik(theta_new, x) - loglik(theta, x), -c, c)
        return jnp.sum(jnp.where(mask, r, 0.0)), jnp.sum((jnp.abs(r) >= c) & mask)

    programs = {}
    l32, l64 = layouts(np.float32), layouts(np.float64)
    for layout in l64:
        x32, m32 = l32[layout]
        x64, m64 = l64[layout]

        def one_chain(theta, x32=x32, m32=m32, x64=x64, m64=m64):
            c = 0.05 * jnp.sqrt(jnp.sum(theta ** 2) + 1.0)
            if algorithm == "dp-penalty":
                return scanned(llr_pass, x64, m64, (theta, theta + 1e-3, c))

            def lf(th, _):
                g, clipped = scanned(lambda t, x, m: grad_pass(t, x, m), x32, m32, th)
                return th + eps * 1e-3 * g, (g, clipped)

            theta_end, gs = jax.lax.scan(lf, theta, None, length=steps + 1)
            return gs, scanned(llr_pass, x64, m64, (theta, theta_end, c))

        programs[layout] = jax.jit(jax.vmap(one_chain))
    return programs


def ours_program(model: Model, data, algorithm: str, params: dict, iters: int):
    """The library kernel: ``iters`` iterations of 4 chains in one compiled scan, and its data
    laid out by the algorithm (an argument of the program, as in a run)."""
    spec = ALGORITHMS[algorithm]
    prepared = spec.prepare(dict(params), model, int(data.shape[0]))
    kernel = spec.build(model, prepared)
    return make_runner(kernel, iters), kernel, spec.layout(data, prepared, model)


def bench(names, rounds: int, min_batch_s: float, log=print):
    rows = []
    for name in names:
        p = preset(name)
        data = np.asarray(p.data, dtype=np.float64)
        theta = jnp.asarray(np.broadcast_to(np.asarray(p.theta_true), (CHAINS, p.model.dim))
                            + 0.01 * np.arange(CHAINS)[:, None])
        for algorithm in ("dp-hmc", "dp-penalty"):
            params = {k: v for k, v in p.settings["algorithms"][algorithm].items() if k != "source"}
            iters = 3 if algorithm == "dp-hmc" else 30
            limits = limit_programs(name, p.model, data, params, algorithm)
            ours = {}
            for path, model in (("autodiff", autodiff_model(p.model)), ("preset", p.model)):
                run, kernel, laid_out = ours_program(model, data, algorithm, params, iters)
                ours[path] = (run, init_all(kernel, theta, laid_out), laid_out)
            series = {f"ours {k}": [] for k in ours} | {f"limit {k}": [] for k in limits}
            for r in range(rounds):
                for path, (run, state, laid_out) in ours.items():
                    series[f"ours {path}"].append(
                        1e3 * wall_time(run, state, jax.random.key(r), laid_out,
                                        min_batch_s=min_batch_s) / iters)
                for layout, prog in limits.items():
                    series[f"limit {layout}"].append(1e3 * wall_time(prog, theta, min_batch_s=min_batch_s))
            limit = np.min([series[f"limit {k}"] for k in limits], axis=0)  # best layout per round
            row = {"preset": name, "algorithm": algorithm, "n": int(data.shape[0]), "chains": CHAINS,
                   "ms_per_iteration": series, "limit_ms": limit.tolist()}
            for path in ours:
                ratios = np.asarray(series[f"ours {path}"]) / limit
                row[f"ratio_{path}"] = ratios.tolist()
                row[f"ratio_{path}_median"] = float(np.median(ratios))
                log(f"{name:12s} {algorithm:10s} {path:8s} ours {np.median(series[f'ours {path}']):8.2f} ms/it"
                    f"  limit {np.median(limit):8.2f} ms/it  ratio median {np.median(ratios):5.2f}"
                    f"  (range {ratios.min():.2f}–{ratios.max():.2f})")
            rows.append(row)
    return rows


def write(rows, args, seconds):
    RESULTS.mkdir(exist_ok=True)
    machine = {"nproc": os.cpu_count(), "python": platform.python_version(), "jax": jax.__version__,
               "backend": jax.default_backend(), "loadavg_end": os.getloadavg()}
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": machine, "rounds": args.rounds,
            "min_batch_s": args.min_batch, "wall_s": seconds}
    (RESULTS / "limit.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = ["# DP-HMC and DP penalty against the hand-written limit (wall clock, interleaved)", "",
             f"{meta['date']}, {machine['nproc']} cores, jax {machine['jax']}, {args.rounds} rounds; "
             "ratio = ours / fastest hand-written layout, per round; median (range).", "",
             "| preset | sampler | path | ours ms/it (median) | limit ms/it (median) | ratio median | range |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        lim = np.median(row["limit_ms"])
        for path in ("autodiff", "preset"):
            r = np.asarray(row[f"ratio_{path}"])
            lines.append(f"| {row['preset']} | {row['algorithm']} | {path} | "
                         f"{np.median(row['ms_per_iteration'][f'ours {path}']):.2f} | {lim:.2f} | "
                         f"**{np.median(r):.2f}** | {r.min():.2f}–{r.max():.2f} |")
    (RESULTS / "limit.md").write_text("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-batch", type=float, default=0.5)
    ap.add_argument("--presets", default="banana-2d,gaussian-10d")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = bench(args.presets.split(","), args.rounds, args.min_batch)
    if not args.no_write:
        write(rows, args, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
