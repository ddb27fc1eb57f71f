"""DP-HMC and DP penalty against the best hand-written fused passes, by wall clock, interleaved.

The honest limit of a full-data DP sampler is the work its data passes must do. For each preset
(banana-2d, gaussian-10d; n = 10⁵, 4 chains, the presets' settings) this script writes that work
by hand as straightforward ``jax.jit`` code, the fastest we could write:

- **DP-HMC**, one iteration = L + 1 clipped per-example gradient sums (``grad_clip`` bound) and one
  clipped log-likelihood-ratio sum, for 4 chains (``vmap``). The gradients are written out as
  elementwise column operations (banana) or one matrix product (Gaussian); the clipping and the
  sum are fused. Each gradient pass feeds the next position (a leapfrog-like update), so XLA
  cannot merge or drop passes. Gradient passes are float32 like DP-HMC's default
  ``grad_dtype="float32"`` (data copied to float32 once).
- **DP penalty**, one iteration = one clipped log-likelihood-ratio sum in float64.

The data are laid out once, outside the compiled programs, and passed to them as an argument,
exactly as the library's kernels get theirs (``step(key, state, data)``): neither side may fold
the data into its program as constants.

Limit variants (each a hand-written program; ``limit`` alone means the first):

- ``f32 sums`` — each block's clipped gradients summed in float32, block sums added in float64;
  no rule for non-finite values. The cheapest program; NOT the released value the library
  computes (float32 block sums round at ~1e-7 of the block's Σ|terms|, which a sensitivity bound
  of one clipped term does not cover).
- ``f64 acc`` — every clipped float32 term converted to float64 and accumulated there, as the
  library does (the sensitivity argument of the clipped sum rests on it).
- ``f64 acc + non-finite`` — and the library's rule for non-finite per-example values (a
  non-finite gradient contributes zero and counts as clipped; a NaN ratio becomes ``-c``),
  which the privacy guarantee needs (a NaN in a released sum would reveal a record).

DP penalty's ratio pass is float64 either way: its variants are ``plain``, ``+ non-finite`` and
``cached + non-finite``, the last reading ℓ_j(θ) from a per-chain array of every record's value
and storing ℓ_j(θ') (the hand-written form of the library's chunk-local cache, which DP penalty
uses where the model is expensive: the 10-d Gaussian, not the banana). ``best`` is, per round,
the fastest variant: the limit the library is held to.

Each program exists in two layouts, all rows at once and scanned blocks of 4096 rows; the limit
of a round is the faster of the two (so the baseline is the best of what we wrote, never a slow
one). ``ours passes`` is the library's own pass functions (``clipped_grad_sum``,
``clipped_llr_sum``) chained exactly like the limit: ours ÷ ours passes is what an iteration
costs beyond its data passes (momentum, noise, leapfrog, Halton step, accept test, the scan).

Ours is the library's kernel (``dpmcmc.samplers.ALGORITHMS[...]``) run like the chain driver runs
it: a ``lax.scan`` of iterations, ``vmap`` over 4 chains, every position and ``Info`` returned. Two
model paths: ``autodiff`` (the per-record log-likelihood only, as a user writes it) and
``preset`` (the preset model as shipped, with whatever ``grad_method="auto"`` picks).

Clock: wall time (``time.perf_counter``), XLA's default threads for both sides; the process's CPU
time of the same batches is recorded beside it. The machine is shared, so no absolute time here
is a claim. In each round every program runs one batch of calls (about ``--min-batch`` seconds;
the number of calls is fixed once, compile excluded), in an order rotated from round to round;
the ratio of a round compares batches run seconds apart. We report the median ratio over
``--rounds`` rounds and its range.

Usage::

    python benchmarks/bench_limit.py            # 7 rounds, writes results/limit.json and limit.md
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
from dpmcmc.records.passes import clipped_grad_sum, clipped_llr_sum  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
CHAINS = 4
BLOCK = 4096

#: Limit variants per algorithm: name -> (float64 accumulation, non-finite rule, ℓ_j(θ) cached).
VARIANTS = {
    "dp-hmc": {"f32 sums": (False, False, False), "f64 acc": (True, False, False),
               "f64 acc + non-finite": (True, True, False)},
    "dp-penalty": {"plain": (True, False, False), "+ non-finite": (True, True, False),
                   "cached + non-finite": (True, True, True)},
}


def calls_for(fn, args, min_batch_s: float) -> int:
    """The number of calls of ``fn(*args)`` that lasts about ``min_batch_s`` (compile excluded)."""
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return max(1, int(np.ceil(min_batch_s / max(time.perf_counter() - t0, 1e-6))))


def batch_time(fn, args, calls: int) -> tuple[float, float]:
    """(wall, CPU) seconds per call over one batch of ``calls`` calls."""
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / calls, (time.process_time() - c0) / calls


def _layouts(data: np.ndarray, dtype) -> dict:
    """``{layout: (x (blocks, d, rows), mask (blocks, rows))}``, column-major, in ``dtype``."""
    n, d = data.shape
    out = {"one pass": (jnp.asarray(np.ascontiguousarray(data.T).astype(dtype))[None],
                        jnp.ones((1, n), bool))}
    nb = -(-n // BLOCK)
    xs = np.concatenate([data, np.repeat(data[:1], nb * BLOCK - n, 0)]).reshape(nb, BLOCK, d)
    out[f"blocks of {BLOCK}"] = (
        jnp.asarray(np.ascontiguousarray(xs.transpose(0, 2, 1)).astype(dtype)),
        jnp.asarray((np.arange(nb * BLOCK) < n).reshape(nb, BLOCK)))
    return out


def _scanned(fn, args, xs, mask):
    """Σ over blocks of ``fn(args, block, mask)``."""
    if xs.shape[0] == 1:
        return fn(args, xs[0], mask[0])

    def body(acc, xm):
        return jax.tree.map(jnp.add, acc, fn(args, *xm)), None
    zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(fn, args, xs[0], mask[0]))
    return jax.lax.scan(body, zero, (xs, mask))[0]


def _scanned_rows(fn, args, xs, mask, rows):
    """``(Σ over blocks of fn's sums, stacked rows)`` of ``fn(args, block, mask, rows_block) ->
    (sums, new_rows_block)``."""
    if xs.shape[0] == 1:
        out, new = fn(args, xs[0], mask[0], rows[0])
        return out, new[None]

    def body(acc, xmr):
        out, new = fn(args, *xmr)
        return jax.tree.map(jnp.add, acc, out), new
    zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                        jax.eval_shape(fn, args, xs[0], mask[0], rows[0])[0])
    return jax.lax.scan(body, zero, (xs, mask, rows))


def limit_programs(name: str, model: Model, data: np.ndarray, params: dict, algorithm: str,
                   acc64: bool = False, nonfinite: bool = False, cached: bool = False,
                   theta=None):
    """``{layout: (jitted f(theta (chains, d), data) -> outputs, data)}``: one hand-written
    iteration's passes and the data laid out for them (float32 and float64 copies, masks).

    ``acc64``: clipped float32 gradient terms accumulated in float64 (else each block is summed
    in float32); ``nonfinite``: the library's rule for non-finite per-example values;
    ``cached`` (DP penalty): ℓ_j(θ) read from a per-chain array of every record's value, as the
    library's chunk-local cache does, the proposal's values stored and the cache replaced where
    a (data-dependent stand-in for the) test accepts; ``theta`` (chains, d) then fills the
    cache, which travels with the data.
    """
    grads, loglik = record_functions(name, model)
    b_g = float(params.get("grad_clip", 1.0))
    steps = int(params.get("leapfrog_steps", 10))
    eps = float(params.get("step_size", 1e-3))
    b32 = np.float32(b_g)

    def grad_pass(theta, x, mask):          # float32 clipped gradient sum
        g = grads(theta.astype(jnp.float32), x)
        sq = sum(gk * gk for gk in g)
        s = jnp.minimum(jnp.float32(1.0), b32 / jnp.sqrt(sq))
        clipped = sq > b32 * b32
        if nonfinite:                       # non-finite rows: zero, counted as clipped
            keep = jnp.isfinite(sq) & mask
            s = jnp.where(keep, s, jnp.float32(0.0))
            terms = [jnp.where(keep, gk * s, jnp.float32(0.0)) for gk in g]
            clipped = ~(sq <= b32 * b32)
        else:
            s = jnp.where(mask, s, jnp.float32(0.0))
            terms = [gk * s for gk in g]
        if acc64:
            total = jnp.stack([jnp.sum(t.astype(jnp.float64)) for t in terms])
        else:
            total = jnp.stack([jnp.sum(t) for t in terms]).astype(jnp.float64)
        return total, jnp.sum(clipped & mask)

    def llr_pass(args, x, mask):            # float64 clipped ratio sum
        theta, theta_new, c = args
        r = loglik(theta_new, x) - loglik(theta, x)
        rc = jnp.clip(r, -c, c)
        if nonfinite:                       # NaN ratio: -c, counted as clipped
            rc = jnp.where(jnp.isnan(r), -c, rc)
            flag = ~(jnp.abs(r) <= c)
        else:
            flag = jnp.abs(r) > c
        return jnp.sum(jnp.where(mask, rc, 0.0)), jnp.sum(flag & mask)

    def llr_pass_cached(args, x, mask, old):
        theta_new, c = args
        new = loglik(theta_new, x)
        r = new - old
        rc = jnp.where(jnp.isnan(r), -c, jnp.clip(r, -c, c))
        flag = ~(jnp.abs(r) <= c)
        return (jnp.sum(jnp.where(mask, rc, 0.0)), jnp.sum(flag & mask)), new

    programs = {}
    l32, l64 = _layouts(data, np.float32), _layouts(data, np.float64)
    for layout in l64:
        def one_chain(theta, laid):
            x32, m32, x64, m64 = laid[:4]
            c = 0.05 * jnp.sqrt(jnp.sum(theta ** 2) + 1.0)
            if algorithm == "dp-penalty" and cached:
                cache = laid[4]
                (total, count), rows = _scanned_rows(llr_pass_cached, (theta + 1e-3, c), x64, m64,
                                                     cache)
                return total, count, jnp.where(total > 0, rows, cache)
            if algorithm == "dp-penalty":
                return _scanned(llr_pass, (theta, theta + 1e-3, c), x64, m64)

            def lf(th, _):
                g, clipped = _scanned(grad_pass, th, x32, m32)
                return th + eps * 1e-3 * g, (g, clipped)

            theta_end, gs = jax.lax.scan(lf, theta, None, length=steps + 1)
            return gs, _scanned(llr_pass, (theta, theta_end, c), x64, m64)

        # The data are an argument of the compiled program, as they are of ours, laid out once
        # outside it, as ours are.
        laid = l32[layout] + l64[layout]
        axes = None
        if cached:
            x64 = laid[2]
            cache = jax.jit(jax.vmap(lambda th: jax.vmap(lambda xb: loglik(th, xb))(x64)))(theta)
            laid, axes = laid + (cache,), (None,) * 4 + (0,)
        programs[layout] = (jax.jit(jax.vmap(one_chain, in_axes=(0, axes))), laid)
    return programs


def ours_passes(model: Model, laid_out, params: dict, algorithm: str):
    """The library's pass functions chained like the limit's: ``f(theta (chains, d), data)``."""
    b_g = jnp.float64(params.get("grad_clip", 1.0))
    steps = int(params.get("leapfrog_steps", 10))
    eps = float(params.get("step_size", 1e-3))
    grad_dtype = params.get("grad_dtype")

    def one_chain(theta, data):
        c = 0.05 * jnp.sqrt(jnp.sum(theta ** 2) + 1.0)
        if algorithm == "dp-penalty":
            return clipped_llr_sum(model, data, theta, theta + 1e-3, c)

        def lf(th, _):
            g, clipped = clipped_grad_sum(model, data, th, b_g, grad_dtype=grad_dtype)
            return th + eps * 1e-3 * g, (g, clipped)

        theta_end, gs = jax.lax.scan(lf, theta, None, length=steps + 1)
        return gs, clipped_llr_sum(model, data, theta, theta_end, c)

    return jax.jit(jax.vmap(one_chain, in_axes=(0, None))), laid_out


def ours_program(model: Model, data, algorithm: str, params: dict, iters: int):
    """The library kernel: ``iters`` iterations of 4 chains in one compiled scan, its data laid
    out by the algorithm (an argument of the program, as in a run), and the prepared params."""
    spec = ALGORITHMS[algorithm]
    prepared = spec.prepare(dict(params), model, int(data.shape[0]))
    kernel = spec.build(model, prepared)
    return make_runner(kernel, iters), kernel, spec.layout(data, prepared, model), prepared


def _interleaved(programs: dict, rounds: int, min_batch_s: float) -> dict:
    """``{name: (wall ms list, CPU ms list)}`` per call; one batch per program per round."""
    calls = {k: calls_for(f, a, min_batch_s) for k, (f, a, _) in programs.items()}
    names = list(programs)
    out = {k: ([], []) for k in names}
    for r in range(rounds):
        for k in names[r % len(names):] + names[:r % len(names)]:
            f, a, per = programs[k]
            w, c = batch_time(f, a, calls[k])
            out[k][0].append(1e3 * w / per)
            out[k][1].append(1e3 * c / per)
    return out


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
            programs = {}
            for variant, (acc64, nonfinite, cached) in VARIANTS[algorithm].items():
                for layout, (prog, laid) in limit_programs(name, p.model, data, params, algorithm,
                                                           acc64, nonfinite, cached,
                                                           theta).items():
                    programs[f"limit {variant} | {layout}"] = (prog, (theta, laid), 1)
            for path, model in (("autodiff", autodiff_model(p.model)), ("preset", p.model)):
                run, kernel, laid_out, prepared = ours_program(model, data, algorithm, params, iters)
                programs[f"ours {path}"] = (run, (init_all(kernel, theta, laid_out),
                                                  jax.random.key(0), laid_out), iters)
                prog, laid = ours_passes(model, laid_out, prepared, algorithm)
                programs[f"ours passes {path}"] = (prog, (theta, laid), 1)
            series = _interleaved(programs, rounds, min_batch_s)
            row = {"preset": name, "algorithm": algorithm, "n": int(data.shape[0]), "chains": CHAINS,
                   "ms_per_iteration": {k: v[0] for k, v in series.items()},
                   "cpu_ms_per_iteration": {k: v[1] for k, v in series.items()}}
            for clock, col in (("wall", 0), ("cpu", 1)):
                # The best layout of each round, per variant; "best": the fastest variant of each
                # round (for DP penalty, the cached pass or the plain one, whichever is faster).
                lims = {variant: np.min([series[k][col] for k in series
                                         if k.startswith(f"limit {variant} |")], axis=0)
                        for variant in VARIANTS[algorithm]}
                lims["best"] = np.min(list(lims.values()), axis=0)
                for variant, lim in lims.items():
                    tag = "" if clock == "wall" else "_cpu"
                    row[f"limit_ms{tag}_{variant}"] = lim.tolist()
                    for path in ("autodiff", "preset"):
                        for who in (f"ours {path}", f"ours passes {path}"):
                            ratios = np.asarray(series[who][col]) / lim
                            key = f"ratio{tag}_{who.replace(' ', '_')}_vs_{variant}"
                            row[key] = ratios.tolist()
                            row[key + "_median"] = float(np.median(ratios))
            first = next(iter(VARIANTS[algorithm]))
            for path in ("autodiff", "preset"):
                # The headline: against the first (cheapest) limit, wall clock.
                row[f"ratio_{path}"] = row[f"ratio_ours_{path}_vs_{first}"]
                row[f"ratio_{path}_median"] = row[f"ratio_ours_{path}_vs_{first}_median"]
                extra = "  ".join(f"vs {v}: {row[f'ratio_ours_{path}_vs_{v}_median']:.2f}"
                                  for v in VARIANTS[algorithm])
                log(f"{name:12s} {algorithm:10s} {path:8s} wall ratio {extra}  |  cpu vs {first}: "
                    f"{row[f'ratio_cpu_ours_{path}_vs_{first}_median']:.2f}  |  ours/ours passes (wall) "
                    f"{np.median(np.asarray(series[f'ours {path}'][0]) / np.asarray(series[f'ours passes {path}'][0])):.2f}")
            rows.append(row)
    return rows


def _fmt(values) -> str:
    v = np.asarray(values)
    return f"**{np.median(v):.2f}** ({v.min():.2f}–{v.max():.2f})"


def write(rows, args, seconds):
    RESULTS.mkdir(exist_ok=True)
    machine = {"nproc": os.cpu_count(), "python": platform.python_version(), "jax": jax.__version__,
               "backend": jax.default_backend(), "loadavg_start": args.loadavg_start,
               "loadavg_end": os.getloadavg()}
    meta = {"date": time.strftime("%Y-%m-%d"), "machine": machine, "rounds": args.rounds,
            "min_batch_s": args.min_batch, "wall_s": seconds}
    (RESULTS / "limit.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    la0, la1 = machine["loadavg_start"], machine["loadavg_end"]
    lines = ["# DP-HMC and DP penalty against the hand-written limit (wall clock, interleaved)", "",
             f"{meta['date']}, {machine['nproc']} cores, jax {machine['jax']}, {args.rounds} rounds, "
             f"load average {la0[0]:.1f} at the start and {la1[0]:.1f} at the end. Ratio = ours ÷ the "
             "fastest layout of a hand-written limit, per round; median (range). Limits: see "
             "`bench_limit.py` (the first of each sampler is the cheapest program; the others add what "
             "the library's released value needs; `best` is the fastest of them in each round). "
             "`ours passes` = the library's pass functions chained like the limit (no noise, "
             "momentum or accept test; DP penalty's uncached ratio pass).", ""]
    for algorithm in ("dp-hmc", "dp-penalty"):
        variants = list(VARIANTS[algorithm]) + ["best"]
        lines += [f"## {algorithm}", "",
                  "| preset | path | " + " | ".join(f"vs limit {v} (wall)" for v in variants)
                  + f" | vs limit {variants[0]} (CPU) | ours passes vs {variants[0]} (wall) "
                  "| ours ÷ ours passes (wall) |",
                  "|---|---|" + "---|" * (len(variants) + 3)]
        for row in rows:
            if row["algorithm"] != algorithm:
                continue
            ms = row["ms_per_iteration"]
            for path in ("autodiff", "preset"):
                cells = [_fmt(row[f"ratio_ours_{path}_vs_{v}"]) for v in variants]
                cells.append(_fmt(row[f"ratio_cpu_ours_{path}_vs_{variants[0]}"]))
                cells.append(_fmt(row[f"ratio_ours_passes_{path}_vs_{variants[0]}"]))
                cells.append(_fmt(np.asarray(ms[f"ours {path}"]) / np.asarray(ms[f"ours passes {path}"])))
                lines.append(f"| {row['preset']} | {path} | " + " | ".join(cells) + " |")
        lines.append("")
    (RESULTS / "limit.md").write_text("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-batch", type=float, default=0.4)
    ap.add_argument("--presets", default="banana-2d,gaussian-10d")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    args.loadavg_start = os.getloadavg()
    t0 = time.perf_counter()
    rows = bench(args.presets.split(","), args.rounds, args.min_batch)
    if not args.no_write:
        write(rows, args, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
