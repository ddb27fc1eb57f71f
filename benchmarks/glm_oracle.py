"""How close the default private GLM comes to the privacy limit (issue 32 §3).

THE ORACLE (a yardstick no private method attains). With the whole budget ε, one ℓ∞ K-norm
release of the log-likelihood gradient at the exact non-private MAP θ̂ (scaled design), with the
Hessian Q of the negative log posterior at θ̂ known: the released gradient is ``z`` (the gradient
of the log posterior is 0 at θ̂), so one Newton step lands at ``θ̂ + Q⁻¹z``, per-coefficient
error ``Q⁻¹z``. ``z`` is the library's K-norm noise (``knorm_mechanism``) with the replace-one
sensitivity box of the scaled design: each gradient coordinate of one record lies in [−1, 1]
(logistic), so the box half-width is 2. Pure ε-DP, so valid at any δ. Measured:

* per-coefficient error sd, ``sd_j(Q⁻¹z mapped to the original scale) / s_j`` (s_j the
  non-private posterior sd): the noise alone;
* err of the oracle point against the non-private posterior MEAN (the same yardstick as the
  method's: the mode–mean gap of the non-private posterior is included), its worst coefficient
  per draw, the median of that over draws, and the pass rate of "every coefficient within 1
  non-private sd". The oracle's posterior is taken to be ``N(θ̂ + Q⁻¹z, Q⁻¹)``: its sd ratio is
  the Laplace sd over the reference sd, 1 up to the posterior's non-Gaussianity (reported), so
  its bar is the error part only. Also reported: the sd ratio a noise-aware oracle would need,
  ``√(Laplace var + var(Q⁻¹z)) / s_j``.

THE DEFAULT METHOD: ``dpmcmc.glm`` with only (ε, δ, key) given — whatever the checkout's
defaults are (nothing of the method's internals is imported). Per run: err_j, sd ratio_j, the
bar "every err ≤ 1 and every sd ratio in [0.5, 2]"; median over runs of the worst err.

THE RATIO: default median worst err / oracle median worst err. Issue 32's target: ≤ 1.5 at
ε = 2 and 4.

OBJECTIVE PERTURBATION (benchmarks/objpert.py, replace-one calibrated): as a baseline point
estimate with the whole budget, and as a mode finder (a share of ε on an ObjPert point, one
K-norm gradient release there with the rest, a Newton step with the Hessian known, as the oracle,
or released too).

Tables: the development tables (ISLR Default, Ecdat HI, as scripts/real_data_eval.py declares
them), the held-out logistic table of real_tables.py (AER DoctorVisits), and simulated logistic
tables, n ∈ {1000, 10000} × d ∈ {2, 5, 10} covariates. δ = 1e-6.

Usage (from the repository root; results in benchmarks/results/glm_oracle.{json,md})::

    PYTHONPATH=src python benchmarks/glm_oracle.py [--runs 20] [--op-runs 100]
        [--oracle-draws 4000] [--eps 1,2,4] [--tables dev,held,sim] [--tag NAME]

``--tag`` writes glm_oracle_NAME.{json,md} instead (to keep another branch's numbers apart).
Non-private references are cached in benchmarks/results/reference/.
"""
from __future__ import annotations

import os

# One CPU for the whole process, set before JAX starts: XLA's CPU thread pool then has one
# thread. With two, the default path's batched linear algebra under vmap (4000 triangular solves
# of 10 x 10 factors on AER DoctorVisits) deadlocks in jaxlib's LAPACK batch splitting — both
# pool threads wait for sub-tasks queued to the same pool (seen twice in this script, reproduced
# in isolation; see the report). It also keeps the benchmark's CPU use modest. A hang that still
# happens aborts with a traceback after WATCHDOG_S (results are written table by table).
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import faulthandler
import sys
import time
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _glm_tables as G  # noqa: E402
from objpert import (REG_SHARE, ObjPertPlan, objpert, objpert_debiased, objpert_newton,  # noqa: E402
                     objpert_two_stage)  # noqa: E402

SIM_GRID = [(n, d) for d in (2, 5, 10) for n in (1000, 10000)]
#: ObjPert's share of ε for the Jacobian term: the grid reported (the fixed default REG_SHARE
#: is one of them).
REG_GRID = (0.1, 0.2, 0.35, 0.5)
#: Mode finders: (share of ε on the ObjPert point, its reg_share, Hessian known or released).
MODE_FINDER = [(0.2, 0.2, "oracle"), (0.3, 0.5, "oracle"), (0.2, 0.2, "private"),
               (0.3, 0.5, "private"), (0.2, 0.2, "gauss"), (0.3, 0.5, "gauss")]
#: Debiased ObjPert (objpert.objpert_debiased): (Jacobian share ρ, Hessian known or released).
DEBIASED = [(0.1, "oracle"), (0.2, "oracle"), (0.1, "private"), (0.2, "private")]


def tables(which: set) -> list:
    out = []
    if "dev" in which:
        out += [(t, "development") for t in G.development_tables()]
    if "held" in which:
        out += [(t, "held-out") for t in G.held_out_tables() if t.model == "logistic"]
    if "sim" in which:
        out += [(G.simulated_table(n, d, seed=32_000 + 10 * d + (n > 1000)), "simulated")
                for n, d in SIM_GRID]
    return out


def orig(theta, des) -> np.ndarray:
    return G.to_original_scale(theta, des.mid, des.half, des.target_mid, des.target_half)


def oracle(ref: dict, des, eps: float, draws: int, key) -> dict:
    theta_hat = np.asarray(ref["map_scaled"])
    Q = np.asarray(ref["hessian_scaled"])
    p = theta_hat.size
    keys = jax.random.split(key, draws)
    with jax.enable_x64(True):
        z = np.asarray(jax.vmap(lambda k: knorm_noise_jit(k, p, eps))(keys))
    e = np.linalg.solve(Q, z.T).T
    pts = orig(theta_hat + e, des)
    err = G.point_errors(ref, pts)
    worst = err.max(1)
    sd = np.asarray(ref["sd"])
    noise = (pts - orig(theta_hat, des)) / sd
    # Laplace sds on the original scale: the linear part of to_original_scale applied to Q⁻¹.
    Qi = np.linalg.inv(Q)
    B = orig(np.eye(p), des) - orig(np.zeros(p), des)  # row i: image of unit vector i
    lap_var = np.einsum("ij,ik,kj->j", B, Qi, B)
    noise_var = noise.var(0) * sd ** 2
    return {"err_sd": noise.std(0), "median_worst": float(np.median(worst)),
            "pass_rate": float(np.mean(worst <= 1.0)), "laplace_sd_ratio": np.sqrt(lap_var) / sd,
            "noise_aware_sd_ratio": np.sqrt(lap_var + noise_var) / sd,
            "median_err": np.median(err, 0), "draws": draws}


def knorm_noise_jit(key, p, eps):
    from dpmcmc.kernels.mechanisms import knorm_mechanism

    return knorm_mechanism(key, jax.numpy.zeros(p), jax.numpy.full(p, 2.0), eps)


def default_method(table, ref: dict, eps: float, runs: int) -> dict:
    per = [G.measures(ref, G.default_run(table, eps, seed)) for seed in range(runs)]
    err = np.array([m["err"] for m in per])
    ratio = np.array([m["ratio"] for m in per])
    cov = np.array([m["covered"] for m in per])
    worst = err.max(1)
    return {"names": per[0]["names"], "median_worst": float(np.median(worst)),
            "bar_runs": int(sum(m["bar"] for m in per)), "within_1sd_runs": int(np.sum(worst <= 1)),
            "runs": runs, "median_err": np.median(err, 0), "median_sd_ratio": np.median(ratio, 0),
            "min_sd_ratio": ratio.min(0), "max_sd_ratio": ratio.max(0),
            "coverage90": float(cov.mean()),
            "median_err_own_sd": float(np.median([m["err_own_sd"].max() for m in per]))}


def point_method(fn, ref: dict, des, runs: int, key) -> dict:
    keys = jax.random.split(key, runs)
    pts = np.array([orig(fn(k), des) for k in keys])
    err = G.point_errors(ref, pts)
    worst = err.max(1)
    return {"median_worst": float(np.median(worst)), "pass_rate": float(np.mean(worst <= 1.0)),
            "median_err": np.median(err, 0), "runs": runs}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="default-method runs per (table, ε)")
    ap.add_argument("--op-runs", type=int, default=100, help="ObjPert runs per configuration")
    ap.add_argument("--oracle-draws", type=int, default=4000)
    ap.add_argument("--eps", default="1,2,4")
    ap.add_argument("--tables", default="dev,held,sim")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    epsilons = [float(e) for e in args.eps.split(",")]
    rows = []
    t_start = time.time()
    for table, kind in tables(set(args.tables.split(","))):
        t0 = time.time()
        faulthandler.dump_traceback_later(G.WATCHDOG_S, exit=True)
        ref = G.reference(table)
        X, y, des = G.scaled(table)
        n, p = X.shape
        prec = 1.0 / G.PRIOR_SD ** 2
        print(f"{table.label}: reference ({ref['method']}) max R-hat {ref['max_rhat']:.4f}, "
              f"min ESS {ref['min_ess']:.0f} [{time.time() - t0:.0f} s]", flush=True)
        for ie, eps in enumerate(epsilons):
            base = jax.random.key(int(1e6 * eps) + 17 * p + n)
            o = oracle(ref, des, eps, args.oracle_draws, jax.random.fold_in(base, 0))
            dm = default_method(table, ref, eps, args.runs)
            grid = {}
            for i, rs in enumerate(REG_GRID):
                grid[rs] = point_method(lambda k: objpert(k, X, y, ObjPertPlan(p, eps, G.DELTA, rs)),
                                        ref, des, args.op_runs, jax.random.fold_in(base, 10 + i))
                grid[rs]["ratio"] = grid[rs]["median_worst"] / o["median_worst"]
            op = grid[REG_SHARE]
            two = point_method(lambda k: objpert_two_stage(k, X, y, eps, G.DELTA), ref, des,
                               args.op_runs, jax.random.fold_in(base, 1))
            two["ratio"] = two["median_worst"] / o["median_worst"]
            finders = []
            for i, (share, rs, hess) in enumerate(MODE_FINDER):
                r = point_method(lambda k: objpert_newton(k, X, y, eps, G.DELTA, share, prec, hess,
                                                          reg_share=rs),
                                 ref, des, args.op_runs, jax.random.fold_in(base, 2 + i))
                r.update(share=share, reg_share=rs, hessian=hess,
                         ratio=r["median_worst"] / o["median_worst"])
                finders.append(r)
            debiased = []
            for i, (rs, hess) in enumerate(DEBIASED):
                r = point_method(lambda k: objpert_debiased(k, X, y, eps, G.DELTA, prec, hess,
                                                            reg_share=rs),
                                 ref, des, args.op_runs, jax.random.fold_in(base, 20 + i))
                r.update(reg_share=rs, hessian=hess, ratio=r["median_worst"] / o["median_worst"])
                debiased.append(r)
            row = {"table": table.label, "kind": kind, "n": n, "p": p, "epsilon": eps,
                   "names": list(ref["names"]), "oracle": o, "default": dm, "objpert": op,
                   "objpert_ratio": op["median_worst"] / o["median_worst"],
                   "objpert_grid": {str(k): v for k, v in grid.items()}, "objpert_two_stage": two,
                   "ratio": dm["median_worst"] / o["median_worst"], "mode_finder": finders,
                   "objpert_debiased": debiased}
            rows.append(row)
            best = min(finders, key=lambda r: r["median_worst"])
            print(f"  eps={eps:g}: oracle {o['median_worst']:.3f} (pass {o['pass_rate']:.2f}); "
                  f"default {dm['median_worst']:.3f} ratio {row['ratio']:.2f} "
                  f"(bar {dm['bar_runs']}/{dm['runs']}, cov {dm['coverage90']:.2f}); "
                  f"objpert {op['median_worst']:.3f} ({row['objpert_ratio']:.2f}); best finder "
                  f"{best['share']}/{best['reg_share']}/{best['hessian']} {best['ratio']:.2f}; "
                  f"two-stage {two['ratio']:.2f}; debiased "
                  f"{', '.join(f'{r:.2f}' for r in (d['ratio'] for d in debiased))} "
                  f"[{time.time() - t0:.0f} s]", flush=True)
        G.write_json(G.RESULTS / f"glm_oracle{'_' + args.tag if args.tag else ''}.json",
                     {"environment": G.environment(), "args": vars(args), "rows": rows})
    faulthandler.cancel_dump_traceback_later()
    write_md(rows, args, time.time() - t_start)


def write_md(rows, args, seconds) -> None:
    env = G.environment()
    L = [f"# Default private GLM vs the oracle (issue 32 §3)", "",
         f"Checkout: branch `{env['branch']}`, commit `{(env['commit'] or '')[:10]}`"
         f"{' (src modified)' if env['dirty'] else ''}. Command: "
         f"`PYTHONPATH=src python benchmarks/glm_oracle.py --runs {args.runs} --op-runs "
         f"{args.op_runs} --oracle-draws {args.oracle_draws} --eps {args.eps} --tables "
         f"{args.tables}` ({seconds / 60:.0f} min). δ = {G.DELTA:g}. Definitions: "
         "benchmarks/glm_oracle.py (docstring).", "",
         "err = |point or private mean − non-private mean| / non-private sd; *worst* = max over "
         "coefficients; medians over runs (default: "
         f"{args.runs} runs; ObjPert: {args.op_runs}; oracle: {args.oracle_draws} draws). "
         "*bar* = every err ≤ 1 and every sd ratio in [0.5, 2] (oracle: err part only, its sd "
         "ratio is the Laplace one, column *oracle Laplace sd ratio*). *ratio* = median worst err "
         "/ the oracle's (target ≤ 1.5 at ε = 2, 4).", "",
         "## The default method against the oracle", "",
         "| table | n | p | ε | oracle median worst err | oracle pass rate | default median worst err "
         "| **ratio** | default runs meeting the bar | default runs with every err ≤ 1 | default "
         "90 % coverage of the non-private mean | ObjPert (whole ε) median worst err | ObjPert "
         "ratio |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o, d = r["oracle"], r["default"]
        L.append(f"| {r['table']} | {r['n']} | {r['p']} | {r['epsilon']:g} | {o['median_worst']:.3f} "
                 f"| {o['pass_rate']:.2f} | {d['median_worst']:.3f} | **{r['ratio']:.2f}** | "
                 f"{d['bar_runs']}/{d['runs']} | {d['within_1sd_runs']}/{d['runs']} | "
                 f"{d['coverage90']:.2f} | {r['objpert']['median_worst']:.3f} | "
                 f"{r['objpert_ratio']:.2f} |")
    L += ["", "## Issue 32's \"Done when\" items measured here", "",
          "| table | ε | default bar rate | oracle pass rate − 0.15 | bar item met | ratio | ratio ≤ 1.5 |",
          "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["kind"] != "development" or r["epsilon"] not in (2.0, 4.0):
            continue
        d, o = r["default"], r["oracle"]
        rate = d["bar_runs"] / d["runs"]
        bar = ("yes" if rate >= o["pass_rate"] - 0.15 else "no") if r["epsilon"] == 4.0 else "–"
        L.append(f"| {r['table']} | {r['epsilon']:g} | {rate:.2f} | {o['pass_rate'] - 0.15:.2f} | "
                 f"{bar} | {r['ratio']:.2f} | {'yes' if r['ratio'] <= 1.5 else 'no'} |")
    L += ["", "## The oracle per coefficient", "",
          "Error sd of the oracle's noise `Q⁻¹z` alone, in non-private sds; its Laplace sd ratio "
          "(its stated posterior); the sd ratio a noise-aware oracle (Laplace + noise) would "
          "have. The default's median err and median sd ratio per coefficient for comparison.",
          "", "| table | ε | coefficient | oracle err sd | oracle Laplace sd ratio | noise-aware "
          "oracle sd ratio | default median err | default median sd ratio |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o, d = r["oracle"], r["default"]
        for j, nm in enumerate(r["names"]):
            k = d["names"].index(nm) if nm in d["names"] else None
            de = "–" if k is None else f"{d['median_err'][k]:.2f}"
            dr = "–" if k is None else f"{d['median_sd_ratio'][k]:.2f}"
            L.append(f"| {r['table']} | {r['epsilon']:g} | {nm} | {o['err_sd'][j]:.3f} | "
                     f"{o['laplace_sd_ratio'][j]:.3f} | {o['noise_aware_sd_ratio'][j]:.2f} | "
                     f"{de} | {dr} |")
    L += ["", "## Objective perturbation: baseline and mode finder", "",
          "Median worst err (its ratio to the oracle's). *ObjPert ρ*: one ObjPert point with the "
          "whole ε, a share ρ of ε paying for the Jacobian term (benchmarks/objpert.py; "
          f"ρ = {REG_SHARE} is the fixed default of the first table; picking the best ρ per row "
          "would tune it on the data). *two-stage*: ObjPert with 0.2 ε, then ObjPert with the "
          "rest regularised towards the first point (fully private). *finder s/ρ/H*: ObjPert "
          "point with s·ε (Jacobian share ρ of it), one K-norm gradient release there with the "
          "rest, one Newton step of the log posterior with the Hessian at the point known "
          "(*oracle*, as the oracle) or released with 20 % of the rest (*private*: K-norm on the upper "
          "triangle; *gauss*: Gaussian mechanism, Frobenius bound p/4, at δ/2).", "",
          "| table | ε | " + " | ".join(f"ObjPert ρ={rs:g}" for rs in REG_GRID)
          + " | two-stage | " + " | ".join(f"finder {s:g}/{rs:g}/{h}" for s, rs, h in MODE_FINDER)
          + " |",
          "|---|---|" + "---|" * (len(REG_GRID) + 1 + len(MODE_FINDER))]
    for r in rows:
        cells = [r["objpert_grid"][str(rs)] for rs in REG_GRID] + [r["objpert_two_stage"]] \
            + r["mode_finder"]
        L.append(f"| {r['table']} | {r['epsilon']:g} | " + " | ".join(
            f"{c['median_worst']:.3f} ({c['ratio']:.2f}×)" for c in cells) + " |")
    L += ["", "## Debiased objective perturbation (no second gradient release)", "",
          "One ObjPert release with the whole ε (Jacobian share ρ), then the Newton step its own "
          "stationarity condition licenses: at the ObjPert point the log-likelihood gradient is "
          "Λθ_op + b, b the release's K-norm noise, so a step with Λθ_op as the released gradient "
          "undoes the ridge's shrinkage and leaves the oracle's error at ε_b "
          "(benchmarks/objpert.py, `objpert_debiased`). Hessian at the point known (*oracle*) "
          "or released by K-norm with 0.2 ε (*private*; the ObjPert point then has 0.8 ε). "
          "Median worst err (ratio to the oracle's); the default's ratio for comparison.", "",
          "| table | ε | default ratio | " + " | ".join(f"debiased ρ={rs:g}, H {h}" for rs, h in DEBIASED)
          + " |", "|---|---|---|" + "---|" * len(DEBIASED)]
    for r in rows:
        L.append(f"| {r['table']} | {r['epsilon']:g} | {r['ratio']:.2f} | " + " | ".join(
            f"{c['median_worst']:.3f} ({c['ratio']:.2f}×)" for c in r["objpert_debiased"]) + " |")
    path = G.RESULTS / f"glm_oracle{'_' + args.tag if args.tag else ''}.md"
    path.write_text("\n".join(L) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
