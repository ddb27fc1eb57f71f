"""DP-HMC's per-record gradient pass against the broadcast-θ reverse pass, per model.

For models with at most 4 parameters that give only ``log_likelihood(theta, x)``,
``grad_method="auto"`` takes per-record gradients (``_passes``: one record's gradient replayed
over the rows, θ's static slices resolved to its elements) in DP-HMC's default CPU layout of
blocks of up to 131072 rows (``_layout.auto_block_size``). This script times, per model, that
default (``new``) against the previous default (``old``: ``grad_method="reverse"``, blocks of
4096 rows), and the model as shipped with its vectorised batch functions (``supplied``) where it
has them: one DP-HMC kernel each (``ALGORITHMS["dp-hmc"]``, L = 10 leapfrog steps), n = 10⁵, 4
chains, 3 iterations per compiled call, wall clock and the process's CPU time, the programs
interleaved for ``--rounds`` rounds (``bench_limit._interleaved``); writes
``results/record_grads.{json,md}``.

A second table times the 2-parameter thesis presets (``thesis-circle``,
``thesis-correlated-gauss``) with their settings, DP-HMC and DP penalty, as shipped (``preset``:
no batch functions since this change) against the same model with its factory's row-major
batch functions put back (``factory batch fns``).

Usage::

    python benchmarks/bench_record_grads.py [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _common import autodiff_model, init_all  # noqa: E402
from bench_limit import _interleaved, ours_program  # noqa: E402
from dpmcmc.models import (circle, correlated_covariance, gaussian, logistic_regression,  # noqa: E402
                           preset)

RESULTS = Path(__file__).resolve().parent / "results"
N, CHAINS, ITERS = 100_000, 4, 3
PARAMS = dict(tau_l=0.1, tau_g=0.5, clip=0.1, grad_clip=1.0, step_size=1e-3, leapfrog_steps=10)


def models():
    """``{name: (model as shipped, data (N, d))}``."""
    out = {}
    ban = preset("banana-2d")
    out["banana-2d preset"] = (ban.model, np.asarray(ban.data, dtype=np.float64))
    for name, m in (("circle", circle()), ("logistic d=3", logistic_regression(3))):
        out[name] = (m, np.asarray(m.metadata["generate_data"](jax.random.key(2), N),
                                   dtype=np.float64))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    programs, rows = {}, []
    for name, (shipped, data) in models().items():
        theta = jnp.asarray(0.1 * rng.normal(size=(CHAINS, shipped.dim)) + 0.5)
        variants = {"new": (autodiff_model(shipped), {}),
                    "old": (autodiff_model(shipped), dict(block_size=4096, grad_method="reverse"))}
        if shipped.grad_log_likelihood_batch is not None:
            variants["supplied"] = (shipped, {})
        for label, (model, extra) in variants.items():
            run, kernel, laid, _ = ours_program(model, data, "dp-hmc", dict(PARAMS, **extra), ITERS)
            call = (init_all(kernel, theta, laid), jax.random.key(0), laid)
            programs[f"{name} | {label}"] = (run.lower(*call).compile(), call, ITERS)
    for name in ("thesis-circle", "thesis-correlated-gauss"):
        p = preset(name)
        data = np.asarray(p.data, dtype=np.float64)
        factory = (circle(p.model.metadata["a"], temperature=p.model.temperature)
                   if name == "thesis-circle" else
                   gaussian(correlated_covariance(0.999), prior_cov=p.settings["sigma0_sq"],
                            temperature=p.model.temperature))
        start = np.asarray(p.posterior_mean if p.posterior_mean is not None else np.ones(2))
        theta = jnp.asarray(start + 0.01 * np.arange(CHAINS)[:, None])
        for alg, setting in p.settings["algorithms"].items():
            params = {k: v for k, v in setting.items() if k != "source"}
            iters = ITERS if alg == "dp-hmc" else 30
            for label, model in (("preset", p.model), ("factory batch fns", factory)):
                run, kernel, laid, _ = ours_program(model, data, alg, params, iters)
                call = (init_all(kernel, theta, laid), jax.random.key(0), laid)
                programs[f"{name} {alg} | {label}"] = (run.lower(*call).compile(), call, iters)
    t0 = time.perf_counter()
    series = _interleaved(programs, args.rounds, 0.4)
    for key, (wall, cpu) in series.items():
        name, label = key.split(" | ")
        rows.append({"model": name, "variant": label, "wall_ms": wall, "cpu_ms": cpu})
        print(f"{key:30s} wall {np.median(wall):8.2f} ms  cpu {np.median(cpu):8.2f} ms")
    RESULTS.mkdir(exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d"), "rounds": args.rounds, "n": N, "chains": CHAINS,
            "loadavg_end": os.getloadavg(), "wall_s": time.perf_counter() - t0,
            "jax": jax.__version__}
    (RESULTS / "record_grads.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = ["# DP-HMC: per-record gradients (new default) vs the broadcast-θ reverse pass in "
             "blocks of 4096 (old default)", "",
             f"{meta['date']}, jax {meta['jax']}, n = {N}, {CHAINS} chains, L = 10, {args.rounds} "
             "rounds interleaved; ms per iteration, median (range); `supplied`: the model as "
             "shipped, with its vectorised batch functions.", "",
             "| model | variant | wall ms | CPU ms | new ÷ this (wall) |", "|---|---|---|---|---|"]
    by = {(r["model"], r["variant"]): r for r in rows}
    for r in rows:
        if r["variant"] in ("preset", "factory batch fns"):
            continue
        new = np.asarray(by[(r["model"], "new")]["wall_ms"])
        w, c = np.asarray(r["wall_ms"]), np.asarray(r["cpu_ms"])
        lines.append(f"| {r['model']} | {r['variant']} | {np.median(w):.2f} ({w.min():.2f}–"
                     f"{w.max():.2f}) | {np.median(c):.2f} | {np.median(new / w):.2f} |")
    lines += ["", "2-parameter thesis presets, their settings: as shipped (`preset`) and with the "
              "factory's batch functions (`factory batch fns`).", "",
              "| preset, algorithm | variant | wall ms | CPU ms | preset ÷ this (wall) |",
              "|---|---|---|---|---|"]
    for r in rows:
        if r["variant"] not in ("preset", "factory batch fns"):
            continue
        ref = np.asarray(by[(r["model"], "preset")]["wall_ms"])
        w, c = np.asarray(r["wall_ms"]), np.asarray(r["cpu_ms"])
        lines.append(f"| {r['model']} | {r['variant']} | {np.median(w):.3f} ({w.min():.3f}–"
                     f"{w.max():.3f}) | {np.median(c):.3f} | {np.median(ref / w):.2f} |")
    (RESULTS / "record_grads.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
