"""Benchmarks of the subsampled samplers: pass ratio, O(b) cost, batch sampling, sharding.

Samplers: "dp-barker", "minibatch-penalty", "dp-sgld", "dp-sgnht" on the banana-2d preset,
batch size b = 1000, 4 chains. Writes ``benchmarks/results/subsampled.json`` and
``benchmarks/results/subsampled.md``.

Measured (all in this process unless said otherwise):

- time per iteration at n = 10⁵ and 10⁶, for the preset's model (which supplies vectorised
  per-example functions) and for the same model written as a user would (the per-record
  ``log_likelihood`` only, autodiff gradients);
- the pass ratio: time per iteration ÷ time of the fused per-batch data work that iteration
  needs, a hand-written elementwise jitted function for 4 chains that gathers the b rows (given
  indices) and computes the clipped per-example quantities and their sums — the clipped
  log-likelihood-ratio sum and its sum of squares (dp-barker, minibatch-penalty) or the clipped
  gradient sum (dp-sgld, dp-sgnht);
- time per iteration vs n (10⁴ … 10⁷), to show the cost is O(b), not O(n), and the compile time;
- the cost of drawing the batch indices (``sample_batch_indices``, 4 chains) as a share of an
  iteration;
- in a subprocess with 4 forced host devices: one sampler sharded over a 4-device mesh vs
  unsharded (``shard_rows``), interleaved in that process.

Clock: CPU time of this process (``time.process_time``) with XLA restricted to one thread, the
minimum over repeats after a warm-up, compile time excluded; ratios are between timings taken in
the same process, interleaved. The machine is shared; no absolute time is a claim.

Usage::

    python benchmarks/bench_subsampled.py            # full (a few minutes on 2 idle cores)
    python benchmarks/bench_subsampled.py --quick    # n ≤ 10⁶, fewer repeats
"""
from __future__ import annotations

import os

# One XLA thread, before JAX initialises (as benchmarks/run.py): CPU time measures our work.
ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ.setdefault("XLA_FLAGS", ONE_THREAD)

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

from dpmcmc.models import preset  # noqa: E402
from _common import autodiff_model  # noqa: E402
from dpmcmc.samplers import ALGORITHMS  # noqa: E402
from dpmcmc.kernels.minibatch import sample_batch_indices  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SAMPLERS = ("dp-barker", "minibatch-penalty", "dp-sgld", "dp-sgnht")
CHAINS = 4
BATCH = 1000


# ---------------------------------------------------------------- timing helpers

def interleaved(fns, reps, min_batch_s=0.1):
    """Min CPU seconds per call of each ``(fn, args)`` in ``fns``, batches timed in turn ``reps`` times.

    Each turn is a batch of calls lasting about ``min_batch_s`` (see ``_timing``: a single short
    call under-counts its CPU time).
    """
    calls = {}
    for k, (fn, args) in fns.items():
        jax.block_until_ready(fn(*args))
        c0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        calls[k] = max(1, min(200, math.ceil(min_batch_s / max(time.perf_counter() - c0, 1e-6))))
    best = {k: math.inf for k in fns}
    for _ in range(reps):
        for k, (fn, args) in fns.items():
            c0 = time.process_time()
            for _ in range(calls[k]):
                jax.block_until_ready(fn(*args))
            best[k] = min(best[k], (time.process_time() - c0) / calls[k])
    return best


def sampler_params(p, algorithm, b=BATCH):
    """The banana settings of the seeds where they exist (proposal scale, clip), batch size b."""
    pen = p.settings["algorithms"]["dp-penalty"]
    hmc = p.settings["algorithms"]["dp-hmc"]
    if algorithm == "dp-barker":
        return {"batch_size": b, "proposal_std": pen["proposal_std"]}
    if algorithm == "minibatch-penalty":
        return {"batch_size": b, "tau": pen["tau"], "clip": pen["clip"],
                "proposal_std": pen["proposal_std"]}
    return {"batch_size": b, "step_size": 1e-5, "noise_multiplier": 1.0,
            "grad_clip": hmc["grad_clip"]}


def sampler_runner(model, data, algorithm, params, iters):
    """A jitted ``iters``-iteration run of 4 chains (scan of a vmapped step) and its arguments:
    the state, a key and the data (rows or ``ShardedRows``), an argument as in a real run."""
    spec = ALGORITHMS[algorithm]
    prepared = spec.prepare(dict(params), model, int(data.shape[0]))
    kernel = spec.build(model, prepared)
    state = jax.jit(jax.vmap(kernel.init, in_axes=(0, None)))(
        jnp.broadcast_to(jnp.asarray([0.0, 3.0]), (CHAINS, 2)), data)
    step_all = jax.vmap(kernel.step, in_axes=(0, 0, None))

    @jax.jit
    def run(state, key, data):
        def body(s, t):
            keys = jax.random.split(jax.random.fold_in(key, t), CHAINS)
            s, info = step_all(keys, s, data)
            return s, info.accepted

        return jax.lax.scan(body, state, jnp.arange(iters))

    return run, (state, jax.random.key(0), data)


# ---------------------------------------------------------------- the fused per-batch data work

def fused_batch_work(p, data_np, kind, iters):
    """The hand-written per-batch data work of ``iters`` iterations for 4 chains.

    ``kind="llr"``: gather b rows, clipped log-likelihood ratios, their sum and sum of squares
    (dp-barker, minibatch-penalty). ``kind="grad"``: gather b rows, per-example gradients
    clipped in L2 norm, their sum (dp-sgld, dp-sgnht). Elementwise float64 code on row-major
    data; indices are drawn beforehand (their cost is measured separately), θ moves every step
    so nothing is hoisted out of the loop.
    """
    model = p.model
    a = float(model.metadata["a"])
    tau = [float(v) for v in 1.0 / np.asarray(model.metadata["sigma_sq"])]
    const = float(-0.5 * np.sum(np.log(2 * np.pi * np.asarray(model.metadata["sigma_sq"]))))
    n = data_np.shape[0]
    x = jnp.asarray(data_np, jnp.float64)
    rng = np.random.default_rng(1)
    idx = jnp.asarray(rng.integers(0, n, size=(iters, CHAINS, BATCH)), jnp.int32)
    c = math.sqrt(BATCH) / n
    bg = 0.05

    def loglik(theta, r):
        r0 = r[:, 0] - theta[0]
        r1 = r[:, 1] - theta[1] - a * theta[0] ** 2
        return const - 0.5 * (tau[0] * r0 * r0 + tau[1] * r1 * r1)

    def llr_one(theta, theta_new, ids):
        rows = jnp.take(x, ids, axis=0)
        r = jnp.clip(loglik(theta_new, rows) - loglik(theta, rows), -c, c)
        return jnp.sum(r), jnp.sum(r * r)

    def grad_one(theta, ids):
        rows = jnp.take(x, ids, axis=0)
        g1 = (rows[:, 1] - theta[1] - a * theta[0] ** 2) * tau[1]
        g0 = (rows[:, 0] - theta[0]) * tau[0] + g1 * (2 * a * theta[0])
        s = jnp.minimum(1.0, bg / jnp.sqrt(g0 * g0 + g1 * g1))
        return jnp.stack([jnp.sum(g0 * s), jnp.sum(g1 * s)])

    theta0 = jnp.broadcast_to(jnp.asarray([0.0, 3.0]), (CHAINS, 2))

    @jax.jit
    def run(theta, idx):
        def body(th, ids):
            if kind == "llr":
                s, q = jax.vmap(llr_one)(th, th + 1e-3, ids)
                return th + 1e-9 * (s + q)[:, None], s
            g = jax.vmap(grad_one)(th, ids)
            return th + 1e-12 * g, g[:, 0]

        return jax.lax.scan(body, theta, idx)

    return run, (theta0, idx)


def index_sampling(n, iters):
    """``iters`` draws of 4 chains' batch indices (``sample_batch_indices``), jitted."""
    return _index_program(sample_batch_indices, n, iters)


def _previous_indices(key, n, b):
    """The batch draw before the refill (kept here as the baseline): ``jax.random.randint``
    (two 32-bit words a value), every round a sort of all b slots."""
    def one_round(carry):
        key, idx, filled = carry
        key, sub = jax.random.split(key)
        cand = jax.random.randint(sub, (b,), 0, n, dtype=jnp.int32)
        vals = jnp.sort(jnp.where(filled, idx, cand))
        first = jnp.concatenate([jnp.ones((1,), bool), vals[1:] != vals[:-1]])
        return key, vals, first

    init = (key, jnp.zeros((b,), jnp.int32), jnp.zeros((b,), bool))
    return jax.lax.while_loop(lambda c: ~jnp.all(c[2]), one_round, init)[1]


def _index_program(draw, n, iters):
    """``iters`` draws of 4 chains' batch indices by ``draw(key, n, b)``, jitted."""
    @jax.jit
    def run(key):
        def body(carry, t):
            keys = jax.random.split(jax.random.fold_in(key, t), CHAINS)
            ids = jax.vmap(lambda k: draw(k, n, BATCH))(keys)
            return carry + ids[:, 0].sum().astype(jnp.int32), None

        return jax.lax.scan(body, jnp.int32(0), jnp.arange(iters))

    return run, (jax.random.key(0),)


def index_variants(ns, reps, log):
    """The batch draw against two baselines, interleaved: the previous algorithm (randint and
    a sort of all b slots every round) and ours with the refill turned off (sorted rounds on
    exact one-word integers). The refill size is read at trace time, so it is patched only
    while the baseline is traced."""
    from dpmcmc.kernels import minibatch as _minibatch

    rows = []
    iters = 200
    for n in ns:
        fns = {"ours": _index_program(sample_batch_indices, n, iters),
               "previous": _index_program(_previous_indices, n, iters)}
        saved = _minibatch._refill_size
        _minibatch._refill_size = lambda n, b: 0
        try:
            run, args = _index_program(sample_batch_indices, n, iters)
            jax.block_until_ready(run(*args))  # traced under the patch; later calls reuse it
        finally:
            _minibatch._refill_size = saved
        fns["sorted_rounds"] = (run, args)
        best = interleaved(fns, reps)
        ms = {k: 1e3 * v / iters for k, v in best.items()}
        rows.append({"n": n, **{f"ms_{k}": v for k, v in ms.items()}})
        log(f"  n={n:>8}: ours {ms['ours']:.3f} ms, sorted rounds only {ms['sorted_rounds']:.3f} ms, "
            f"previous {ms['previous']:.3f} ms (×{ms['previous'] / ms['ours']:.2f})")
    return rows


# ---------------------------------------------------------------- sections

def pass_ratios(ns, reps, log):
    rows = []
    iters = 200
    for n in ns:
        p = preset("banana-2d", n=n)
        data = jnp.asarray(p.data, jnp.float64)
        data_np = np.asarray(p.data, np.float64)
        fns = {
            "fused_llr": fused_batch_work(p, data_np, "llr", iters),
            "fused_grad": fused_batch_work(p, data_np, "grad", iters),
            "indices": index_sampling(n, iters),
        }
        for alg in SAMPLERS:
            for path, m in (("preset", p.model), ("autodiff", autodiff_model(p.model))):
                fns[f"{alg}/{path}"] = sampler_runner(m, data, alg, sampler_params(p, alg), iters)
        best = interleaved(fns, reps)
        ms = {k: 1e3 * v / iters for k, v in best.items()}
        for alg in SAMPLERS:
            fused = ms["fused_llr"] if alg in ("dp-barker", "minibatch-penalty") else ms["fused_grad"]
            for path in ("preset", "autodiff"):
                it = ms[f"{alg}/{path}"]
                rows.append({"n": n, "algorithm": alg, "model": path, "ms_per_iter": it,
                             "ms_fused": fused, "pass_ratio": it / fused,
                             "ms_indices": ms["indices"], "index_share": ms["indices"] / it})
                log(f"  n={n:>8} {alg:>17} {path:>8}: {it:.3f} ms/iter, fused {fused:.3f} ms, "
                    f"ratio {it / fused:.2f}, indices {ms['indices']:.3f} ms "
                    f"({100 * ms['indices'] / it:.0f}%)")
    return rows


def n_scaling(ns, reps, log):
    rows = []
    iters = 100
    for n in ns:
        p = preset("banana-2d", n=n)
        data = jnp.asarray(p.data, jnp.float64)
        fns = {}
        compile_s = {}
        for alg in SAMPLERS:
            c0 = time.perf_counter()
            run, args = sampler_runner(p.model, data, alg, sampler_params(p, alg), iters)
            run.lower(*args).compile()
            compile_s[alg] = time.perf_counter() - c0
            fns[alg] = (run, args)
        fns["indices"] = index_sampling(n, iters)
        best = interleaved(fns, reps)
        for alg in SAMPLERS:
            rows.append({"n": n, "algorithm": alg, "ms_per_iter": 1e3 * best[alg] / iters,
                         "compile_s_wall": compile_s[alg]})
        rows.append({"n": n, "algorithm": "indices", "ms_per_iter": 1e3 * best["indices"] / iters})
        log(f"  n={n:>9}: " + ", ".join(f"{k} {1e3 * v / iters:.3f}" for k, v in best.items())
            + " ms/iter; compile " + ", ".join(f"{v:.1f}" for v in compile_s.values()) + " s")
        del p, data, fns
    return rows


_DEVICE_CHILD = r"""
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
sys.path.insert(0, {bench_dir!r})
from bench_subsampled import interleaved, sampler_params, sampler_runner
from dpmcmc.models import preset
from dpmcmc.records.sharding import data_mesh, shard_rows
p = preset("banana-2d", n={n})
alg, iters = {alg!r}, 100
params = sampler_params(p, alg)
data_np = np.asarray(p.data, np.float64)
fns = {{"unsharded": sampler_runner(p.model, jnp.asarray(data_np), alg, params, iters),
        "sharded": sampler_runner(p.model, shard_rows(data_np, data_mesh()), alg, params, iters)}}
a = fns["unsharded"][0](*fns["unsharded"][1])[0].position
b = fns["sharded"][0](*fns["sharded"][1])[0].position
best = interleaved(fns, {reps})
print("RESULT" + json.dumps({{"devices": len(jax.devices()), "n": {n}, "algorithm": alg,
      "identical": bool(np.array_equal(np.asarray(a), np.asarray(b))),
      **{{k: 1e3 * v / iters for k, v in best.items()}}}}))
"""


def device_sharding(n, alg, reps, log):
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count=4 {ONE_THREAD}"
    code = _DEVICE_CHILD.format(bench_dir=str(Path(__file__).resolve().parent), n=n, alg=alg,
                                reps=reps)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=1200)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    if proc.returncode != 0 or not line:
        log(f"  4 devices: failed: {proc.stderr[-800:]}")
        return None
    r = json.loads(line[-1][len("RESULT"):])
    log(f"  4 devices, n={n}, {alg}: unsharded {r['unsharded']:.3f} ms/iter, sharded "
        f"{r['sharded']:.3f} ms/iter (x{r['sharded'] / r['unsharded']:.2f}), identical draws: "
        f"{r['identical']}")
    return r


def machine():
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "loadavg_start": os.getloadavg(),
            "python": platform.python_version(), "jax": jax.__version__,
            "backend": jax.default_backend(), "xla_flags": os.environ.get("XLA_FLAGS", "")}


def write_markdown(out, path):
    L = ["# Subsampled samplers: pass ratio, O(b) cost, sharding", "",
         f"banana-2d, b = {BATCH}, {CHAINS} chains, float64. CPU time (`time.process_time`), one "
         "XLA thread, minimum over repeats of the mean over a batch of calls (benchmarks/_timing.py) "
         "after warm-up, compile excluded; every ratio is between "
         "timings interleaved in one process. Machine: "
         f"{out['machine']['nproc']} cores, {out['machine']['cpu']}, load average at start "
         f"{', '.join(f'{v:.1f}' for v in out['machine']['loadavg_start'])} (shared); "
         f"jax {out['machine']['jax']}. Written by `benchmarks/bench_subsampled.py`.", "",
         "## Batch indices against two baselines", "",
         "4 chains' batch indices (`sample_batch_indices`, exact uniform b-subsets), ms per "
         "draw of all 4, interleaved: `ours` (one sort of b, collisions refilled in a small "
         "array, Lemire integers from one 32-bit word); `sorted rounds` (ours with the refill "
         "off: a sort of all b every round); `previous` (the algorithm before the refill: "
         "`jax.random.randint`, a sort of all b every round).", "",
         "| n | ours ms | sorted rounds ms | previous ms | previous ÷ ours |", "|---|---|---|---|---|",
         *[f"| {r['n']:.0e} | {r['ms_ours']:.3f} | {r['ms_sorted_rounds']:.3f} | "
           f"{r['ms_previous']:.3f} | {r['ms_previous'] / r['ms_ours']:.2f} |"
           for r in out.get("index_variants", [])], "",
         "## Pass ratio", "",
         "Time per iteration ÷ the fused per-batch data work of that iteration (hand-written "
         "elementwise code for 4 chains: gather the b rows, clipped log-likelihood ratios with "
         "their sum and sum of squares for dp-barker / minibatch-penalty, clipped gradient sum "
         "for dp-sgld / dp-sgnht). `preset`: the model's vectorised per-example functions; "
         "`autodiff`: only the per-record `log_likelihood` (what a user writes). "
         "`indices`: drawing the 4 chains' batch indices (`sample_batch_indices`), and its share "
         "of the iteration. `excl. indices` = (ms/iter − indices ms) ÷ fused ms, derived by "
         "subtracting two separately timed programs: an estimate of how far the rest of the "
         "iteration is from the data-work limit.", "",
         "| n | sampler | model | ms / iter | fused ms | pass ratio | indices ms | indices share "
         "| excl. indices |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in out["pass_ratio"]:
        rest = (r["ms_per_iter"] - r["ms_indices"]) / r["ms_fused"]
        L.append(f"| {r['n']:.0e} | {r['algorithm']} | {r['model']} | {r['ms_per_iter']:.3f} | "
                 f"{r['ms_fused']:.3f} | {r['pass_ratio']:.2f} | {r['ms_indices']:.3f} | "
                 f"{100 * r['index_share']:.0f}% | {rest:.2f} |")
    L += ["", "## Time per iteration vs n (preset model)", "",
          "Constant in n: an iteration touches b rows, never n. `compile s` is wall time "
          "(with a plain data array the rows are a constant of the compiled program, so "
          "compilation, unlike an iteration, grows with n).", ""]
    ns = sorted({r["n"] for r in out["n_scaling"]})
    algs = list(SAMPLERS) + ["indices"]
    L.append("| sampler | " + " | ".join(f"n = {n:.0e}" for n in ns) + " | exponent |")
    L.append("|---|" + "---|" * (len(ns) + 1))
    for alg in algs:
        ms = [next(r["ms_per_iter"] for r in out["n_scaling"] if r["n"] == n and r["algorithm"] == alg)
              for n in ns]
        L.append(f"| {alg} (ms/iter) | " + " | ".join(f"{v:.3f}" for v in ms)
                 + f" | {out['n_exponents'][alg]:.3f} |")
    for alg in SAMPLERS:
        cs = [next(r["compile_s_wall"] for r in out["n_scaling"] if r["n"] == n and r["algorithm"] == alg)
              for n in ns]
        L.append(f"| {alg} (compile s) | " + " | ".join(f"{v:.1f}" for v in cs) + " | |")
    L += ["", "Exponent: least-squares slope of log(ms/iter) on log n (0 = independent of n).", ""]
    d = out.get("devices")
    L += ["## Sharded over 4 forced host devices", ""]
    if d:
        L += [f"{d['algorithm']}, n = {d['n']:.0e}, one process with "
              "`--xla_force_host_platform_device_count=4` (all 4 \"devices\" share this machine's "
              "cores, so this measures the overhead of the sharded gather, not a speed-up):", "",
              "| unsharded ms / iter | sharded ms / iter | ratio | identical draws |",
              "|---|---|---|---|",
              f"| {d['unsharded']:.3f} | {d['sharded']:.3f} | {d['sharded'] / d['unsharded']:.2f} "
              f"| {d['identical']} |", ""]
    else:
        L += ["(failed; see the log)", ""]
    path.write_text("\n".join(L))


def fit_exponent(ns, ts):
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    reps = 3 if args.quick else 5

    def log(msg):
        print(msg, flush=True)

    out = {"machine": machine(), "batch_size": BATCH, "chains": CHAINS}
    log("batch indices vs baselines")
    out["index_variants"] = index_variants((10**4, 10**5, 10**6), reps, log)
    log("pass ratios")
    out["pass_ratio"] = pass_ratios((10**5, 10**6), reps, log)
    log("time per iteration vs n")
    ns = (10**4, 10**5, 10**6) if args.quick else (10**4, 10**5, 10**6, 10**7)
    out["n_scaling"] = n_scaling(ns, reps, log)
    out["n_exponents"] = {
        alg: fit_exponent([r["n"] for r in out["n_scaling"] if r["algorithm"] == alg],
                          [r["ms_per_iter"] for r in out["n_scaling"] if r["algorithm"] == alg])
        for alg in list(SAMPLERS) + ["indices"]}
    log("  exponents: " + ", ".join(f"{k} {v:.3f}" for k, v in out["n_exponents"].items()))
    log("sharded vs unsharded (4 forced host devices)")
    out["devices"] = device_sharding(10**6, "minibatch-penalty", reps, log)
    out["machine"]["loadavg_end"] = os.getloadavg()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "subsampled.json").write_text(json.dumps(out, indent=1))
    write_markdown(out, RESULTS / "subsampled.md")
    log(f"wrote {RESULTS / 'subsampled.md'}")


if __name__ == "__main__":
    main()
