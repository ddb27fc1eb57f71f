"""Performance benchmarks of the full-data samplers (``make bench``).

Writes ``benchmarks/results/bench.json``, ``benchmarks/results/bench.md`` (tables) and
``benchmarks/results/scaling.png``. See benchmarks/README.md for what each number means.

Clock. The machine this runs on is shared: wall time measures the other tenants as much as us.
Every timing here is the CPU time of this process (``time.process_time``) with XLA restricted to
one thread, the minimum over repeats; ratios are taken between timings made in the same process.
Wall times are recorded beside them. No absolute time is a claim about the library: the
reference figures (329 ms, 4354 ms per iteration) were measured by the issue's author on "this
kind of machine" (2 cores), ours now, on a shared one.

Usage::

    python benchmarks/run.py            # full sweep (about 10 minutes on 2 idle cores)
    python benchmarks/run.py --quick    # smaller sweep (about 3 minutes)
    python benchmarks/run.py --blackjax # also time BlackJAX HMC if blackjax is importable
"""
from __future__ import annotations

import os

# One XLA thread, before JAX initialises: CPU time then measures our work, not contention.
ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ.setdefault("XLA_FLAGS", ONE_THREAD)

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from _timing import cpu_time  # noqa: E402  (benchmarks/ is on sys.path when run as a script)
from _common import autodiff_model, init_all, make_runner, record_functions, rowsum  # noqa: E402,F401

jax.config.update("jax_enable_x64", True)

from dpmcmc.models import banana, preset  # noqa: E402
from dpmcmc.models.base import Model  # noqa: E402
from dpmcmc.models.gaussian import gaussian  # noqa: E402
from dpmcmc.samplers import ALGORITHMS, Kernel  # noqa: E402
from dpmcmc.records.layout import prepare_data  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

#: Per-iteration times of the reference Python-loop implementation quoted in the issue
#: (DP-HMC, n = 10⁵, 4 chains; banana L = 25, 10-d Gaussian L = 12), on a 2-core machine.
REFERENCE_MS = {"banana-2d": 329.0, "gaussian-10d": 4354.0}


# ---------------------------------------------------------------- timing helpers

def supplied_model(model: Model) -> Model:
    """The model with its factory's vectorised functions (the banana presets leave them out)."""
    if model.log_likelihood_batch is not None or model.metadata.get("family") != "banana":
        return model
    md = model.metadata
    return banana(model.dim, a=md["a"], b=md["b"], m=md["m"], sigma_sq=md["sigma_sq"],
                  sigma0_sq=md["sigma0_sq"], temperature=model.temperature, name=model.name)


def time_sampler(model, data, algorithm, params, theta0, iters, reps=3, chunk_cache=True):
    """CPU and wall ms per iteration, and XLA's temporary buffer bytes, of ``iters`` iterations.

    ``chunk_cache=False`` runs the kernel without its chunk-local cache (``Kernel.cached``; the
    same draws), to measure what the cache gives."""
    spec = ALGORITHMS[algorithm]
    prepared = spec.prepare(dict(params), model, int(data.shape[0]))
    # Laid out once, as a run does (data already laid out are kept, with their pass switches).
    data = spec.layout(data, prepared, model)
    kernel = spec.build(model, prepared)
    if not chunk_cache:
        kernel = Kernel(kernel.init, kernel.step)
    state = init_all(kernel, theta0, data)
    run = make_runner(kernel, iters)
    key = jax.random.key(0)
    temp = None
    try:
        temp = run.lower(state, key, data).compile().memory_analysis().temp_size_in_bytes
    except Exception:  # memory_analysis is best-effort on some backends
        pass
    cpu, wall = cpu_time(run, state, key, data, reps=reps)
    return 1e3 * cpu / iters, 1e3 * wall / iters, temp


# ---------------------------------------------------------------- fused float64 data passes

def fused_passes(name, model, data, settings):
    """Hand-written float64 data passes for the preset (elementwise / matrix products).

    Each is one jitted pass over all rows for 4 chains (vmap), clipping and reduction fused,
    in blocks of 4096 rows of column-major data (the fastest layout we found for this code);
    the faster of blocked and unblocked is kept. Returns CPU ms per pass:
    ``grad`` (clipped per-example gradient sum), ``llr`` (clipped ratio sum),
    ``valgrad`` (Σℓ and Σ∇ℓ, for HMC), ``loglik`` (Σℓ, for RWMH).
    """
    n, d = data.shape
    hmc = settings["algorithms"]["dp-hmc"]
    b_g = float(hmc["grad_clip"])

    grads, loglik = record_functions(name, model)

    def grad_pass(theta, x, mask):
        g = grads(theta, x)
        sq = rowsum([gk * gk for gk in g])
        s = jnp.where(mask, jnp.minimum(1.0, b_g / jnp.sqrt(sq)), 0.0)
        return jnp.stack([jnp.sum(gk * s) for gk in g]), jnp.sum((sq > b_g * b_g) & mask)

    def grad32_pass(theta, x, mask):
        # The float32 limit of DP-HMC's default gradient passes: data (a float32 copy made
        # once), θ, gradients, clipping and each block's sums in float32; block sums are added
        # in float64.
        g = grads(theta.astype(jnp.float32), x)
        b32 = jnp.float32(b_g)
        sq = rowsum([gk * gk for gk in g])
        s = jnp.where(mask, jnp.minimum(jnp.float32(1.0), b32 / jnp.sqrt(sq)), jnp.float32(0.0))
        return (jnp.stack([jnp.sum(gk * s) for gk in g]).astype(jnp.float64),
                jnp.sum((sq > b32 * b32) & mask))

    def llr_pass(args, x, mask):
        theta, theta_new, c = args
        r = jnp.clip(loglik(theta_new, x) - loglik(theta, x), -c, c)
        return jnp.sum(jnp.where(mask, r, 0.0)), jnp.sum((jnp.abs(r) >= c) & mask)

    def valgrad_pass(theta, x, mask):
        ll = jnp.where(mask, loglik(theta, x), 0.0)
        return jnp.sum(ll), jnp.stack([jnp.sum(jnp.where(mask, gk, 0.0)) for gk in grads(theta, x)])

    def loglik_pass(theta, x, mask):
        return jnp.sum(jnp.where(mask, loglik(theta, x), 0.0))

    def blocked(fn, bs, dtype=np.float64):
        nb = -(-n // bs)
        xs = np.asarray(data)
        pad = nb * bs - n
        xs = np.concatenate([xs, np.repeat(xs[:1], pad, 0)]).reshape(nb, bs, d).transpose(0, 2, 1)
        xs = jnp.asarray(np.ascontiguousarray(xs).astype(dtype))
        mask = jnp.asarray((np.arange(nb * bs) < n).reshape(nb, bs))

        def f(args, xs, mask):
            def body(acc, xm):
                out = fn(args, *xm)
                return jax.tree.map(jnp.add, acc, out), None

            zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                                jax.eval_shape(fn, args, xs[0], mask[0]))
            return jax.lax.scan(body, zero, (xs, mask))[0]

        # The data are an argument of the compiled pass, as they are of the library's kernels
        # (never constants XLA could fold or specialise on).
        run = jax.jit(jax.vmap(f, in_axes=(0, None, None)))
        return lambda args: run(args, xs, mask)

    theta = jnp.asarray(np.broadcast_to(np.asarray(settings.get("theta_true", np.zeros(d))), (4, d)))
    theta = theta + 0.01 * jnp.arange(4)[:, None]
    theta_new = theta + 1e-3
    c = jnp.full((4,), 0.05)
    out = {}
    for key, fn, args, dtype in [("grad", grad_pass, theta, np.float64),
                                 ("grad32", grad32_pass, theta, np.float32),
                                 ("llr", llr_pass, (theta, theta_new, c), np.float64),
                                 ("valgrad", valgrad_pass, theta, np.float64),
                                 ("loglik", loglik_pass, theta, np.float64)]:
        best = math.inf
        for bs in (4096, n):
            best = min(best, cpu_time(blocked(fn, bs, dtype), args, reps=5)[0])
        out[key] = 1e3 * best
    return out


def passes_needed(algorithm, params, float32_grads=False):
    """The fused passes one iteration needs: a dict pass -> count.

    ``float32_grads``: DP-HMC's gradient passes as the hand-written float32 pass (the fair limit
    of its default ``grad_dtype="float32"``); the issue's ratio uses float64 passes.
    """
    L = params.get("leapfrog_steps", 10)
    grad = "grad32" if float32_grads else "grad"
    return {"dp-hmc": {grad: L + 1, "llr": 1}, "dp-penalty": {"llr": 1},
            "hmc": {"valgrad": L}, "rwmh": {"loglik": 1}}[algorithm]


# ---------------------------------------------------------------- sections

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


def sampler_params(p, algorithm):
    s = p.settings["algorithms"]
    if algorithm in ("dp-hmc", "dp-penalty"):
        return {k: v for k, v in s[algorithm].items() if k != "source"}
    h = s["dp-hmc"]
    if algorithm == "hmc":
        return {"step_size": h["step_size"], "leapfrog_steps": h["leapfrog_steps"], "mass": h["mass"]}
    return {"proposal_std": s["dp-penalty"]["proposal_std"]}


def pass_ratios(quick, log):
    rows = []
    for name in ("banana-2d", "gaussian-10d"):
        p = preset(name)
        p.settings["theta_true"] = np.asarray(p.theta_true)
        fused = fused_passes(name, p.model, p.data, p.settings)
        log(f"{name}: fused float64 passes (ms CPU, 4 chains): "
            + ", ".join(f"{k} {v:.2f}" for k, v in fused.items()))
        theta0 = jnp.broadcast_to(p.theta_true, (4, p.model.dim))
        for algorithm in ("dp-hmc", "dp-penalty", "hmc", "rwmh"):
            params = sampler_params(p, algorithm)
            need = passes_needed(algorithm, params)
            denom = sum(fused[k] * c for k, c in need.items())
            denom32 = sum(fused[k] * c for k, c in passes_needed(algorithm, params, True).items())
            iters = {"dp-hmc": 3, "hmc": 3}.get(algorithm, 30)
            if quick:
                iters = max(2, iters // 2)
            for path, model in (("autodiff", autodiff_model(p.model)), ("model-supplied", supplied_model(p.model))):
                cpu, wall, temp = time_sampler(model, p.data, algorithm, params, theta0, iters)
                row = {"preset": name, "algorithm": algorithm, "path": path, "ms_cpu": cpu,
                       "ms_wall": wall, "fused_ms": denom, "pass_ratio": cpu / denom,
                       "temp_bytes": temp}
                extra = ""
                if algorithm == "dp-hmc":
                    row["speedup_vs_quoted_reference"] = REFERENCE_MS[name] / cpu
                    row["fused32_ms"] = denom32
                    row["pass_ratio_f32"] = cpu / denom32
                    extra = f"  vs float32 passes {denom32:8.2f}  ratio {cpu / denom32:5.2f}"
                rows.append(row)
                log(f"  {algorithm:10s} {path:14s} {cpu:9.2f} ms/iter  fused {denom:8.2f}  "
                    f"ratio {cpu / denom:5.2f}{extra}")
    return rows


def _per_round(values, unit: str = "") -> str:
    """One value per round, comma-separated (``unit`` after each)."""
    return ", ".join(f"{x:.1f}{unit}" for x in values)


#: Iterations per compiled call of ours in the reference comparison. DP penalty's chunk-local
#: cache of ℓ_j(θ) is rebuilt at every call (one extra model evaluation per record), as the
#: chain driver rebuilds it per chunk; 20 iterations is shorter than the chunks of a run with a
#: progress bar (1/20 of the run: 70+ iterations for the presets' budgets), so the cache's
#: start-up cost is counted at least as heavily as a run pays it.
OURS_ITERS = {"dp-hmc": 3, "dp-penalty": 20}


def reference_compare(quick, log):
    """Speed-up over the reference-style Python loops (DP-HMC, DP penalty), measured in this process.

    ``reference_loop.ReferenceLoopDPHMC`` / ``ReferenceLoopDPPenalty`` re-create the execution
    structure of the papers' code (see its docstring). Ours: the preset's model as the preset
    ships it (what ``dpmcmc.sample`` and the demo run) and, beside it, the same model through
    autodiff (the user's per-record function only); the presets' settings. The reference and the
    two of ours are timed in turn, ``rounds`` times; each round gives one ratio; the median ratio
    is reported with its range. Where the papers' code wrote the per-record function differently
    (the 10-d Gaussian's triangular solve, ``reference_loop.papers_record_model``), the loop is
    also timed with that function, in the same rounds, and that speed-up is reported beside.
    """
    from reference_loop import papers_record_model, time_reference

    rows = []
    rounds = 2 if quick else 3
    for algorithm, iters in (("dp-hmc", {"banana-2d": 3, "gaussian-10d": 1}),
                             ("dp-penalty", {"banana-2d": 30, "gaussian-10d": 5})):
        for name in ("banana-2d", "gaussian-10d"):
            p = preset(name)
            params = sampler_params(p, algorithm)
            theta0 = np.broadcast_to(np.asarray(p.theta_true), (4, p.model.dim))
            papers_model = papers_record_model(p.model)
            refs, ours, auto, refs_papers, nocache = [], [], [], [], []
            for _ in range(rounds):
                refs.append(time_reference(autodiff_model(p.model), p.data, params, theta0.T, iters[name],
                                           reps=1, algorithm=algorithm)[0])
                if papers_model is not None:
                    refs_papers.append(time_reference(papers_model, p.data, params, theta0.T,
                                                      iters[name], reps=1, algorithm=algorithm)[0])
                ours.append(time_sampler(p.model, p.data, algorithm, params, jnp.asarray(theta0),
                                         OURS_ITERS[algorithm])[0])
                auto.append(time_sampler(autodiff_model(p.model), p.data, algorithm, params,
                                         jnp.asarray(theta0), OURS_ITERS[algorithm])[0])
                if algorithm == "dp-penalty":
                    nocache.append(time_sampler(p.model, p.data, algorithm, params,
                                                jnp.asarray(theta0), OURS_ITERS[algorithm],
                                                chunk_cache=False)[0])
            ratios = [r / o for r, o in zip(refs, ours)]
            row = {"algorithm": algorithm, "preset": name, "reference_ms_cpu": refs, "ours_ms_cpu": ours,
                   "autodiff_ms_cpu": auto, "speedups": ratios, "speedup_median": float(np.median(ratios)),
                   "speedup_autodiff_median": float(np.median([r / a for r, a in zip(refs, auto)]))}
            if algorithm == "dp-hmc":
                row["quoted_reference_ms"] = REFERENCE_MS[name]
            extra = ""
            if nocache:
                cache_gain = [n / o for n, o in zip(nocache, ours)]
                row.update(preset_without_chunk_cache_ms_cpu=nocache, chunk_cache_gain=cache_gain,
                           speedup_without_chunk_cache_median=float(np.median(
                               [r / n for r, n in zip(refs, nocache)])))
                extra += (f"; without the chunk-local cache {np.median(nocache):7.2f} ms/iter "
                          f"(cache gain per round {_per_round(cache_gain)})")
            if refs_papers:
                papers_ratios = [r / o for r, o in zip(refs_papers, ours)]
                row.update(reference_papers_record_ms_cpu=refs_papers,
                           speedups_papers_record=papers_ratios,
                           speedup_papers_record_median=float(np.median(papers_ratios)))
                extra += (f"; with the papers' per-record function {np.median(refs_papers):9.2f} "
                         f"ms/iter, speed-up {np.median(papers_ratios):5.1f}× (rounds "
                         f"{_per_round(papers_ratios)})")
            rows.append(row)
            log(f"  {algorithm} {name}: reference-style loop {np.median(refs):9.2f} ms/iter, preset "
                f"{np.median(ours):7.2f} ms/iter, autodiff {np.median(auto):7.2f}, speed-up "
                f"{np.median(ratios):5.1f}× (rounds {_per_round(ratios)}){extra}")
    return rows


def ideas(quick, log):
    """What each design choice gives, on DP-HMC and DP penalty with the autodiff path."""
    rows = []
    variants = [
        ("vmap(grad), float64, one pass (straightforward JAX)", {"grad_method": "vmap", "grad_dtype": "float64", "block_size": 10**9}),
        ("vmap(grad), float64, blocks of 4096", {"grad_method": "vmap", "grad_dtype": "float64"}),
        ("forward (JVP per dim), float64, blocks", {"grad_method": "forward", "grad_dtype": "float64"}),
        ("broadcast-θ reverse, float64, blocks", {"grad_method": "reverse", "grad_dtype": "float64"}),
        ("broadcast-θ reverse, float32, blocks (default)", {"grad_method": "reverse", "grad_dtype": "float32"}),
        ("broadcast-θ reverse, float32, one pass", {"grad_method": "reverse", "grad_dtype": "float32", "block_size": 10**9}),
        ("default, blocks of 1024", {"grad_method": "reverse", "grad_dtype": "float32", "block_size": 1024}),
        ("default, blocks of 16384", {"grad_method": "reverse", "grad_dtype": "float32", "block_size": 16384}),
        ("default without vectorize_columns (jax.vmap of the record function)",
         {"grad_method": "reverse", "grad_dtype": "float32", "options": {"columnar": False}}),
        ("default without the fused clip-and-sum (separate clip_gradients)",
         {"grad_method": "reverse", "grad_dtype": "float32", "options": {"fused_clip": False}}),
        ("default without both (the previous default)",
         {"grad_method": "reverse", "grad_dtype": "float32",
          "options": {"columnar": False, "fused_clip": False}}),
    ]
    if quick:
        variants = [variants[0], variants[3], variants[4], variants[10]]
    for name in ("banana-2d", "gaussian-10d"):
        p = preset(name)
        model = autodiff_model(p.model)
        theta0 = jnp.broadcast_to(p.theta_true, (4, p.model.dim))
        base = sampler_params(p, "dp-hmc")
        for label, extra in variants:
            params = dict(base, **extra)
            options = params.pop("options", {})
            if params.get("block_size") == 10**9:
                params["block_size"] = int(p.data.shape[0])
            # The blocks the algorithm's layout would make, with the variant's pass switches:
            # they travel with the data (static pytree fields), so no global state is flipped
            # and no compiled pass of another variant can be reused.
            data = prepare_data(p.data, model=model, block_size=params.get("block_size"),
                                   grad_dtype=params.get("grad_dtype"), **options)
            cpu, wall, temp = time_sampler(model, data, "dp-hmc", params, theta0, 2)
            rows.append({"preset": name, "algorithm": "dp-hmc", "variant": label, "ms_cpu": cpu,
                         "temp_bytes": temp})
            log(f"  {name} dp-hmc {label:70s} {cpu:9.2f} ms/iter")
        # The log-likelihood-ratio pass with and without small-reduction unrolling.
        pen = sampler_params(p, "dp-penalty")
        for unroll in (False, True):
            data = prepare_data(p.data, model=model, block_size=pen.get("block_size"),
                                   unroll_reductions=unroll)
            cpu, wall, temp = time_sampler(model, data, "dp-penalty", pen, theta0, 20)
            label = "LLR pass, small reductions " + ("unrolled (default)" if unroll else "as XLA reduce")
            rows.append({"preset": name, "algorithm": "dp-penalty", "variant": label, "ms_cpu": cpu})
            log(f"  {name} dp-penalty {label:51s} {cpu:9.2f} ms/iter")
    return rows


def fit_exponent(xs, ys):
    slope, _ = np.polyfit(np.log(xs), np.log(ys), 1)
    return float(slope)


def scaling(quick, log):
    out = {"n": [], "chains": [], "d": []}
    p = preset("banana-2d")
    model = autodiff_model(p.model)
    pen = sampler_params(p, "dp-penalty")
    hmc = dict(sampler_params(p, "dp-hmc"), leapfrog_steps=5)
    ns = [10**4, 10**5, 10**6] + ([] if quick else [10**7])
    for n in ns:
        pn = preset("banana-2d", n=n)
        theta0 = jnp.broadcast_to(pn.theta_true, (4, 2))
        for algorithm, params, iters in (("dp-penalty", pen, 10 if n < 10**7 else 3),
                                         ("dp-hmc", hmc, 2 if n < 10**7 else 1)):
            cpu, wall, temp = time_sampler(model, pn.data, algorithm, params, theta0, iters,
                                           reps=2 if n >= 10**6 else 3)
            out["n"].append({"n": n, "algorithm": algorithm, "ms_cpu": cpu, "temp_bytes": temp,
                             "data_bytes": int(pn.data.nbytes)})
            log(f"  n={n:>9d} {algorithm:10s} {cpu:10.2f} ms/iter  XLA temp {temp} B")
        del pn
    chains_list = [1, 4, 16] + ([] if quick else [64])
    for chains in chains_list:
        theta0 = jnp.broadcast_to(p.theta_true, (chains, 2))
        for algorithm, params, iters in (("dp-penalty", pen, 10), ("dp-hmc", hmc, 2)):
            cpu, wall, temp = time_sampler(model, p.data, algorithm, params, theta0, iters)
            out["chains"].append({"chains": chains, "algorithm": algorithm, "ms_cpu": cpu,
                                  "temp_bytes": temp})
            log(f"  chains={chains:3d} {algorithm:10s} {cpu:10.2f} ms/iter")
    ds = [2, 10, 30] + ([] if quick else [100])
    for d in ds:
        rng = np.random.default_rng(d)
        cov = np.diag(rng.uniform(0.5, 2.0, d))
        gm = gaussian(cov, prior_cov=100.0 ** 2, name=f"gauss-{d}d")
        data = gm.metadata["generate_data"](jax.random.key(d), 10**5)
        theta0 = jnp.broadcast_to(jnp.asarray(gm.metadata["theta_true"]), (4, d))
        gm = autodiff_model(gm)
        for algorithm, params, iters in (
                ("dp-penalty", {"tau": 0.05, "clip": 10.0, "proposal_std": 0.0007}, 10),
                ("dp-hmc", {"tau_l": 0.1, "tau_g": 0.25, "step_size": 1.5e-4, "leapfrog_steps": 5,
                            "clip": 6.0, "grad_clip": 10.0}, 2)):
            cpu, wall, temp = time_sampler(gm, data, algorithm, params, theta0, iters)
            out["d"].append({"d": d, "algorithm": algorithm, "ms_cpu": cpu, "temp_bytes": temp})
            log(f"  d={d:3d} {algorithm:10s} {cpu:10.2f} ms/iter")
    fits = {}
    for algorithm in ("dp-penalty", "dp-hmc"):
        rows = [r for r in out["n"] if r["algorithm"] == algorithm]
        big = [r for r in rows if r["n"] >= 10**5]
        fits[f"n_{algorithm}"] = fit_exponent([r["n"] for r in big], [r["ms_cpu"] for r in big])
        rows = [r for r in out["chains"] if r["algorithm"] == algorithm and r["chains"] >= 4]
        fits[f"chains_{algorithm}"] = fit_exponent([r["chains"] for r in rows],
                                                   [r["ms_cpu"] for r in rows])
        rows = [r for r in out["d"] if r["algorithm"] == algorithm and r["d"] >= 10]
        fits[f"d_{algorithm}"] = fit_exponent([r["d"] for r in rows], [r["ms_cpu"] for r in rows])
    out["exponents"] = fits
    log("  fitted exponents: " + ", ".join(f"{k} {v:.2f}" for k, v in fits.items()))
    return out


_DEVICE_CHILD = r"""
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
sys.path.insert(0, {bench_dir!r})
from run import autodiff_model, init_all, make_runner, cpu_time, sampler_params
from dpmcmc.models import preset
from dpmcmc.samplers import ALGORITHMS
from dpmcmc.records.sharding import data_mesh
p = preset("banana-2d", n={n})
model = autodiff_model(p.model)
res = {{}}
for algorithm, iters in (("dp-penalty", 10), ("dp-hmc", 2)):
    params = sampler_params(p, algorithm)
    if algorithm == "dp-hmc":
        params["leapfrog_steps"] = 5
    spec = ALGORITHMS[algorithm]
    pr = spec.prepare(params, model, p.data.shape[0])
    data = spec.layout(p.data, pr, model, mesh=data_mesh())
    k = spec.build(model, pr)
    st = init_all(k, jnp.broadcast_to(p.theta_true, (4, 2)), data)
    run = make_runner(k, iters)
    cpu, wall = cpu_time(run, st, jax.random.key(0), data)
    res[algorithm] = {{"ms_cpu": 1e3 * cpu / iters, "ms_wall": 1e3 * wall / iters}}
print("RESULT" + json.dumps({{"devices": len(jax.devices()), **res}}))
"""


def device_scaling(quick, log):
    rows = []
    n = 10**5 if quick else 10**6
    for k in (1, 2, 4):
        env = dict(os.environ)
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={k} {ONE_THREAD}"
        code = _DEVICE_CHILD.format(bench_dir=str(Path(__file__).resolve().parent), n=n)
        proc = subprocess.run([sys.executable, "-c", code], env=env,
                              capture_output=True, text=True, timeout=900)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
        if proc.returncode != 0 or not line:
            log(f"  devices={k}: failed: {proc.stderr[-500:]}")
            continue
        r = json.loads(line[-1][len("RESULT"):])
        r["n"] = n
        rows.append(r)
        log(f"  devices={k} n={n}: dp-penalty {r['dp-penalty']['ms_cpu']:.2f} ms CPU "
            f"({r['dp-penalty']['ms_wall']:.2f} wall), dp-hmc(L=5) {r['dp-hmc']['ms_cpu']:.2f} ms CPU "
            f"({r['dp-hmc']['ms_wall']:.2f} wall)")
    return rows


def blackjax_compare(log):
    """BlackJAX HMC vs our HMC (and DP-HMC overhead) on the banana, same step size and L."""
    try:
        import blackjax
    except ImportError:
        log("  blackjax not importable: skipped")
        return None
    p = preset("banana-2d")
    model = p.model
    data = p.data
    params = sampler_params(p, "hmc")
    L, eps = params["leapfrog_steps"], params["step_size"]
    theta0 = jnp.broadcast_to(p.theta_true, (4, 2))
    rows = {}
    for path, m in (("autodiff", autodiff_model(model)), ("model-supplied", model)):
        rows[f"ours_hmc_{path}"] = time_sampler(m, data, "hmc", params, theta0, 3)[0]
        rows[f"ours_dphmc_{path}"] = time_sampler(m, data, "dp-hmc", sampler_params(p, "dp-hmc"),
                                                  theta0, 3)[0]

    def logdensity(theta):  # the natural user code: vmap of the per-record function
        return model.log_prior(theta) + jnp.sum(jax.vmap(model.log_likelihood, (None, 0))(theta, data))

    hmc = blackjax.hmc(logdensity, step_size=eps, inverse_mass_matrix=jnp.ones(2),
                       num_integration_steps=L)
    states = jax.vmap(hmc.init)(theta0)

    @jax.jit
    def run(states, key):
        def body(s, t):
            keys = jax.random.split(jax.random.fold_in(key, t), 4)
            s, info = jax.vmap(hmc.step)(keys, s)
            return s, info.is_accepted
        return jax.lax.scan(body, states, jnp.arange(3))

    cpu, _ = cpu_time(run, states, jax.random.key(0))
    rows["blackjax_hmc"] = 1e3 * cpu / 3
    rows["blackjax_version"] = blackjax.__version__
    for k, v in rows.items():
        log(f"  {k}: {v if isinstance(v, str) else f'{v:.2f} ms/iter'}")
    return rows


# ---------------------------------------------------------------- output

def write_tables(res, path):
    carried = res.get("carried_over_from_previous_run")
    lines = [f"# Benchmark results\n", f"Machine: {res['machine']}\n",
             *([f"Sections {carried} are carried over from an earlier run (skipped in this one).\n"]
               if carried else []),
             f"Load average at start {res['machine']['loadavg_start']}, at end {res['loadavg_end']}.\n",
             "All times: CPU ms per iteration of this process, one XLA thread, 4 chains unless "
             "stated; pass ratio = our time / fused float64 data passes the iteration needs.\n",
             "\n## Pass ratios\n", "| preset | sampler | path | ms/iter (CPU) | fused passes ms | pass ratio | "
             "fused passes ms, float32 grads | pass ratio vs float32 | vs the quoted reference time |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in res["pass_ratios"]:
        sp = (f"{r['speedup_vs_quoted_reference']:.1f}×" if "speedup_vs_quoted_reference" in r
              else "")
        f32 = (f"{r['fused32_ms']:.2f} | {r['pass_ratio_f32']:.2f}" if "pass_ratio_f32" in r
               else " | ")
        lines.append(f"| {r['preset']} | {r['algorithm']} | {r['path']} | {r['ms_cpu']:.2f} | "
                     f"{r['fused_ms']:.2f} | {r['pass_ratio']:.2f} | {f32} | {sp} |")
    if res.get("reference"):
        lines += ["\n## Speed-up over the reference-style Python loops (presets as shipped; "
                  "all timed in turn in this process)\n",
                  "| sampler | preset | reference-style ms/iter (CPU) | preset ms/iter (CPU) | "
                  "speed-up per round | median speed-up | autodiff ms/iter | median speed-up (autodiff) | "
                  "reference-style ms/iter, papers' per-record function | speed-up per round | "
                  "median speed-up | preset without the chunk-local cache ms/iter | cache gain per "
                  "round |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in res["reference"]:
            auto = r.get("autodiff_ms_cpu")
            papers = r.get("reference_papers_record_ms_cpu")
            lines.append(f"| {r.get('algorithm', 'dp-hmc')} | {r['preset']} | "
                         f"{np.median(r['reference_ms_cpu']):.2f} | {np.median(r['ours_ms_cpu']):.2f} | "
                         f"{_per_round(r['speedups'], '×')} | {r['speedup_median']:.1f}× | "
                         + (f"{np.median(auto):.2f} | {r['speedup_autodiff_median']:.1f}× |" if auto else "– | – |")
                         + (f" {np.median(papers):.2f} | "
                            f"{_per_round(r['speedups_papers_record'], '×')} | "
                            f"{r['speedup_papers_record_median']:.1f}× |" if papers
                            else " same function | | |")
                         + (f" {np.median(r['preset_without_chunk_cache_ms_cpu']):.2f} | "
                            f"{_per_round(r['chunk_cache_gain'], '×')} |"
                            if r.get("chunk_cache_gain") else " – | – |"))
    if res.get("ideas"):
        lines += ["\n## Ideas (autodiff path)\n", "| preset | sampler | variant | ms/iter (CPU) |",
                  "|---|---|---|---|"]
        for r in res["ideas"]:
            lines.append(f"| {r['preset']} | {r['algorithm']} | {r['variant']} | {r['ms_cpu']:.2f} |")
    sc = res.get("scaling")
    if sc:
        lines += ["\n## Scaling (banana autodiff; dp-hmc with L = 5)\n",
                  "| n | sampler | ms/iter (CPU) | XLA temp bytes | data bytes |", "|---|---|---|---|---|"]
        for r in sc["n"]:
            lines.append(f"| {r['n']} | {r['algorithm']} | {r['ms_cpu']:.2f} | {r['temp_bytes']} | {r['data_bytes']} |")
        lines += ["\n| chains | sampler | ms/iter (CPU) | XLA temp bytes |", "|---|---|---|---|"]
        for r in sc["chains"]:
            lines.append(f"| {r['chains']} | {r['algorithm']} | {r['ms_cpu']:.2f} | {r['temp_bytes']} |")
        lines += ["\n| d (Gaussian, n = 10⁵) | sampler | ms/iter (CPU) | XLA temp bytes |", "|---|---|---|---|"]
        for r in sc["d"]:
            lines.append(f"| {r['d']} | {r['algorithm']} | {r['ms_cpu']:.2f} | {r['temp_bytes']} |")
        lines.append("\nFitted exponents (log-log least squares; n ≥ 10⁵, chains ≥ 4, d ≥ 10): "
                     + ", ".join(f"{k} = {v:.2f}" for k, v in sc["exponents"].items()))
    if res.get("devices"):
        lines += ["\n## Forced host devices (one CPU split into k XLA devices; see README)\n",
                  "| devices | n | dp-penalty ms CPU | wall | dp-hmc (L=5) ms CPU | wall |", "|---|---|---|---|---|---|"]
        for r in res["devices"]:
            lines.append(f"| {r['devices']} | {r['n']} | {r['dp-penalty']['ms_cpu']:.2f} | "
                         f"{r['dp-penalty']['ms_wall']:.2f} | {r['dp-hmc']['ms_cpu']:.2f} | {r['dp-hmc']['ms_wall']:.2f} |")
    if res.get("blackjax"):
        lines += ["\n## BlackJAX\n"] + [f"- {k}: {v}" for k, v in res["blackjax"].items()]
    path.write_text("\n".join(lines) + "\n")


def plot(res, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sc = res["scaling"]
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for ax, key in zip(axes[:3], ("n", "chains", "d")):
        for algorithm in ("dp-penalty", "dp-hmc"):
            rows = [r for r in sc[key] if r["algorithm"] == algorithm]
            ax.loglog([r[key] for r in rows], [r["ms_cpu"] for r in rows], "o-", label=algorithm)
        ax.set_xlabel(key)
        ax.set_ylabel("CPU ms / iteration")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
    rows = [r for r in sc["n"] if r["algorithm"] == "dp-hmc"]
    axes[3].loglog([r["n"] for r in rows], [r["data_bytes"] for r in rows], "o-", label="data")
    axes[3].loglog([r["n"] for r in rows], [max(r["temp_bytes"] or 1, 1) for r in rows], "s-",
                   label="XLA temporaries (dp-hmc)")
    axes[3].set_xlabel("n")
    axes[3].set_ylabel("bytes")
    axes[3].legend()
    axes[3].grid(True, which="both", alpha=0.3)
    fig.suptitle("dpmcmc scaling (banana / Gaussian, autodiff path, CPU time, one XLA thread)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sweep (about 3 minutes)")
    ap.add_argument("--blackjax", action="store_true", help="compare with BlackJAX HMC if importable")
    ap.add_argument("--skip", default="", help="comma-separated sections to skip: "
                    "ratios,reference,ideas,scaling,devices")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    RESULTS.mkdir(parents=True, exist_ok=True)
    log_lines = []

    def log(msg):
        print(msg, flush=True)
        log_lines.append(msg)

    t0 = time.perf_counter()
    res = {"machine": machine(), "quick": args.quick}
    log(f"machine: {res['machine']}")
    if "ratios" not in skip:
        log("pass ratios:")
        res["pass_ratios"] = pass_ratios(args.quick, log)
    if "reference" not in skip:
        log("reference-style Python loops (DP-HMC, DP penalty):")
        res["reference"] = reference_compare(args.quick, log)
    if "ideas" not in skip:
        log("ideas:")
        res["ideas"] = ideas(args.quick, log)
    if "scaling" not in skip:
        log("scaling:")
        res["scaling"] = scaling(args.quick, log)
    if "devices" not in skip:
        log("forced host devices:")
        res["devices"] = device_scaling(args.quick, log)
    if args.blackjax:
        log("blackjax:")
        res["blackjax"] = blackjax_compare(log)
    # Skipped sections keep the previous run's results (marked as such), so a partial rerun
    # does not drop them from bench.json / bench.md.
    previous = RESULTS / "bench.json"
    if previous.exists():
        old = json.loads(previous.read_text())
        for section, key in (("ratios", "pass_ratios"), ("reference", "reference"), ("ideas", "ideas"), ("scaling", "scaling"),
                             ("devices", "devices")):
            if section in skip and old.get(key):
                res[key] = old[key]
                res.setdefault("carried_over_from_previous_run", []).append(key)
    res["loadavg_end"] = os.getloadavg()
    res["total_seconds"] = time.perf_counter() - t0
    (RESULTS / "bench.json").write_text(json.dumps(res, indent=1, default=str))
    write_tables(res, RESULTS / "bench.md")
    if res.get("scaling"):
        plot(res, RESULTS / "scaling.png")
    log(f"done in {res['total_seconds']:.0f} s; results in {RESULTS}")


if __name__ == "__main__":
    main()
