"""The calibration grid of the default table path (issue 32 §1): coverage of the true coefficients.

For each grid point (family, n, covariates d, ε; δ = 1e-6) ``--reps`` tables are simulated from
the model and fitted by the default path (:mod:`dpmcmc.tabular.calibration`: the plan
``dpmcmc.glm`` makes, the fit's own releases and posterior draws), and the central 50 % and
90 % intervals are checked against the true coefficients per coefficient, pooled and jointly
(:func:`dpmcmc.tabular.calibration.coverage`). A grid point fails when any of its tests rejects
"coverage ≥ nominal" at ``ALPHA`` (0.001 per test: with 2 levels × (d + 3) tests per point and
~160 points, a perfectly calibrated method fails somewhere with probability ≲ 0.3 if the
tests were independent; they are positively correlated, so less).

Results are appended point by point to benchmarks/results/calibration.json (a rerun skips the
points already there), then docs/calibration.md and docs/figures/calibration.png are written.
With ``--tag NAME`` the points go to benchmarks/results/calibration_NAME.json and a table of
them, with every coefficient's coverage and the pass threshold, to calibration_NAME.md (the
Poisson section of docs/calibration.md: ``--tag poisson --families poisson,poisson-capped``).

Usage (from the repository root)::

    PYTHONPATH=src nice -n 10 python benchmarks/calibration.py [--reps 100] [--draws 200] \\
        [--families logistic,logistic-rare,linear] [--n 30,100,300,1000,10000,100000] \\
        [--d 2,5,10] [--eps 0.3,1,4] [--report-only] [--tag NAME]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "calibration.json"
REPORT = ROOT / "docs" / "calibration.md"
FIGURE = ROOT / "docs" / "figures" / "calibration.png"
ALPHA = 1e-3


def _key(case) -> int:
    # A fixed, distinct seed per grid point (stable across processes, unlike hash()).
    fams = {"logistic": 1, "logistic-rare": 2, "linear": 3, "poisson": 4, "poisson-capped": 5}
    return fams[case.family] * 10**8 + case.n * 100 + case.covariates * 10 + int(case.epsilon * 3)


def run_point(case, reps: int, draws: int) -> dict:
    import jax

    from dpmcmc.tabular import calibration as cal

    t0 = time.time()
    res = cal.run_case(jax.random.key(_key(case)), case, reps, draws=draws)
    cv = cal.coverage(res["theta"], res["draws"], alpha=ALPHA)
    plan = case.plan()
    return {"family": case.family, "n": case.n, "d": case.covariates, "epsilon": case.epsilon,
            "reps": reps, "draws": draws, "seconds": time.time() - t0, "passed": cv["passed"],
            "levels": {str(c): {"pooled": v["pooled"], "joint": v["joint"],
                                "per_coef_min": float(np.min(v["per_coef"])),
                                "p_min": float(min(np.min(v["p_coef"]), v["p_pooled"],
                                                   v["p_joint"])),
                                "per_coef": [float(x) for x in v["per_coef"]],
                                "threshold": _threshold(reps, c),
                                "passed": v["passed"]} for c, v in cv["levels"].items()},
            "median_width90": float(np.median(cv["width"])),
            "final_mechanism": plan.gradients[-1].kind,
            "grad_noise_sd": plan.gradients[-1].noise_sd,
            "hess_noise_sd": plan.hessians[-1].noise_sd}


def _threshold(reps: int, level: float) -> float:
    """The smallest coverage of ``reps`` replicates that a one-sided binomial test of "coverage ≥
    level" at ALPHA does not reject: the nominal level minus its Monte Carlo error."""
    from scipy import stats

    k = int(stats.binom.ppf(ALPHA, reps, level))
    while stats.binom.cdf(k, reps, level) < ALPHA:
        k += 1
    return k / reps


def tag_table(rows: list) -> list:
    """Markdown lines: each point's 50 % and 90 % coverage, per coefficient (intercept first),
    pooled and joint, next to the pass threshold (nominal minus Monte Carlo error)."""
    lines = ["| family | n | d | ε | reps | 50 %: per coefficient / joint (threshold) | "
             "90 %: per coefficient / joint (threshold) | median 90 % width (scaled) | passed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["family"], r["d"], r["epsilon"], r["n"])):
        cells = []
        for level in ("0.5", "0.9"):
            v = r["levels"][level]
            per = " ".join(f"{x:.2f}" for x in v["per_coef"])
            cells.append(f"{per} / {v['joint']:.2f} ({v['threshold']:.2f})")
        lines.append(f"| {r['family']} | {r['n']} | {r['d']} | {r['epsilon']:g} | {r['reps']} | "
                     f"{cells[0]} | {cells[1]} | {r['median_width90']:.3g} | "
                     f"{'yes' if r['passed'] else '**no**'} |")
    return lines


def load(path: Path = RESULTS) -> list:
    return json.loads(path.read_text()) if path.exists() else []


def figure(rows: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fams = [f for f in ("logistic", "logistic-rare", "linear", "poisson", "poisson-capped")
            if any(r["family"] == f for r in rows)]
    fig, axes = plt.subplots(2, len(fams), figsize=(4.2 * len(fams), 6.5), squeeze=False,
                             sharey="row")
    marks = {0.3: "v", 1.0: "o", 4.0: "^"}
    colours = {2: "tab:blue", 5: "tab:orange", 10: "tab:green"}
    for j, fam in enumerate(fams):
        for i, level in enumerate(("0.5", "0.9")):
            ax = axes[i, j]
            for r in rows:
                if r["family"] != fam:
                    continue
                ax.scatter(r["n"] * (1 + 0.06 * (r["d"] - 5)), r["levels"][level]["pooled"],
                           marker=marks.get(r["epsilon"], "s"), color=colours.get(r["d"], "k"),
                           facecolors="none" if not r["levels"][level]["passed"] else None,
                           s=30)
            ax.axhline(float(level), color="k", lw=0.8)
            ax.set_xscale("log")
            ax.set_title(f"{fam}: {int(float(level) * 100)} % intervals")
            ax.set_xlabel("n")
            if j == 0:
                ax.set_ylabel("coverage of the true coefficients")
    handles = [plt.Line2D([], [], marker=m, ls="", color="k", label=f"ε = {e:g}")
               for e, m in marks.items()]
    handles += [plt.Line2D([], [], marker="o", ls="", color=c, label=f"d = {d}")
                for d, c in colours.items()]
    fig.legend(handles=handles, loc="lower center", ncol=6)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)


FULL_GRID = {"family": ("logistic", "logistic-rare", "linear"),
             "n": (30, 100, 300, 1000, 10000, 100000), "d": (2, 5, 10), "epsilon": (0.3, 1.0, 4.0)}
FULL_GRID_POINTS = 3 * 6 * 3 * 3


def _missing(rows: list) -> str:
    """The grid points not run, grouped by (family, d, ε): their n values."""
    done = {(r["family"], r["n"], r["d"], r["epsilon"]) for r in rows}
    out = []
    for fam in FULL_GRID["family"]:
        for d in FULL_GRID["d"]:
            for eps in FULL_GRID["epsilon"]:
                ns = [n for n in FULL_GRID["n"] if (fam, n, d, eps) not in done]
                if ns:
                    out.append(f"{fam} d={d} ε={eps:g} n∈{{{','.join(map(str, ns))}}}")
    return "; ".join(out)


#: Measured elsewhere (benchmarks/results/*_calib2.md and the JSON files named), reported here.
EXTRA = [
    "* Real tables (`benchmarks/real_tables.py --runs 10 --eps 4,1 --tag calib2`, "
    "benchmarks/results/real_tables_calib2.md): 90 % coverage of the non-private mean 1.00 on "
    "ISLR Default, Ecdat HI and AER DoctorVisits at ε = 4 and 1; carData SLID (linear, "
    "residual sd inferred) 0.87 at ε = 4 and 1.00 at ε = 1 (target ≥ 0.85). Median worst "
    "error in non-private sds at ε = 4: HI 0.42 (10/10 runs meet issue 32's bar), DoctorVisits "
    "2.28, ISLR Default 3.65, SLID 4.25; at ε = 1 the posteriors are mostly the prior's width.",
    "* Close to the privacy limit: `benchmarks/glm_oracle.py --runs 10 --op-runs 20 --eps 2,4 "
    "--tables dev --tag calib2` (benchmarks/results/glm_oracle_calib2.md): median worst "
    "error / the oracle's = 4.92 and 6.64 on ISLR Default (ε = 2, 4), 3.16 and 2.42 on Ecdat "
    "HI (main before this change, 20 runs: 4.71, 6.21, 4.91, 2.69, with coverage of the "
    "non-private mean 0.60, 0.80, 0.92, 1.00; now 1.00 in all four). The 1.5 target is not met.",
    "* Poisson regression (counts under a declared cap): `benchmarks/calibration.py --tag "
    "poisson --families poisson,poisson-capped ...`, benchmarks/results/calibration_poisson.md; "
    "its section in this page is written by hand from that table.",
    "* Two variants measured and rejected: the draws centred on the shrunk curvature (the grid "
    "passed at 45 points, benchmarks/results/calibration_shrunk_centre.json, but the centre "
    "moved by t²/λ of the step: SLID coverage 0.80–0.86, ISLR Default median worst error 18 "
    "sds at ε = 4); a logistic Hessian share of 0.5 instead of 0.2 (with that centre), which "
    "broke calibration for rare outcomes (3 % base rate, n = 1000, ε = 4: joint 90 % coverage "
    "0.69; benchmarks/results/calibration_logistic_hessian_share_0.5.json).",
]


#: The ``## `` sections :func:`report` writes; every other section of the page is written by
#: hand (a follow-up's measurements, the Poisson family) and kept where it stands.
GENERATED_SECTIONS = ("The method in one paragraph", "Beyond the grid")


def _hand_sections(text: str) -> tuple[list, list]:
    """The hand-written ``## `` sections of a page :func:`report` wrote: those above its first
    generated section, and those below it, each as its text."""
    before, after, seen = [], [], False
    for part in text.split("\n## ")[1:]:
        title = part.split("\n", 1)[0].strip()
        if title in GENERATED_SECTIONS:
            seen = True
            continue
        (after if seen else before).append("## " + part.rstrip("\n") + "\n")
    return before, after


def report(rows: list, command: str, path: Path = REPORT) -> None:
    """Write the calibration page at ``path`` (the grid's table, the method, the results beyond
    the grid), keeping every hand-written ``## `` section of the page already there in place."""
    hand_before, hand_after = _hand_sections(path.read_text()) if path.exists() else ([], [])
    rows = sorted(rows, key=lambda r: (r["family"], r["n"], r["d"], r["epsilon"]))
    failed = [r for r in rows if not r["passed"]]
    lines = [
        "# Calibration of the default table path",
        "",
        "Written by `benchmarks/calibration.py` (issue 32 §1). Each grid point simulates `reps` "
        "tables from the model (true coefficients from a public prior, covariates in the declared "
        "box from a mixed design: continuous, skewed, binary, categorical; logistic with base "
        "rate 50 % or 3 %, linear with the residual sd inferred from a released Σy²), fits each "
        "with the default path of `dpmcmc.glm` (module `dpmcmc.tabular.calibration`) and checks "
        "the central 50 % and 90 % intervals against the true coefficients: per coefficient "
        "(binomial), pooled over coefficients (z-test) and jointly (the draws' central ellipsoid). "
        f"A point fails when a one-sided test of \"coverage ≥ nominal\" rejects at {ALPHA:g}.",
        "",
        *hand_before,
        "## The method in one paragraph",
        "",
        "The noise-aware GLM (`dpmcmc.samplers.noise_aware_glm`) releases Newton statistics "
        "(Poisson: early rounds, a final round whose gradient is K-norm and whose Hessian is "
        "K-norm or Gaussian, decided from public inputs; linear: Σyx̃, Σx̃x̃ᵀ and Σy² in one "
        "round; logistic, wherever its gradient would be a K-norm release: one "
        "objective-perturbation point θ_K, whose log-likelihood gradient is the public Λθ_K up "
        "to the release's K-norm noise, its solver's residual, and the Hessian at θ_K; "
        "`finder=\"objpert\"`, docs/tabular.md). Each posterior draw takes a curvature from the released Hessian minus a fresh "
        "noise draw, moves each eigenvalue λ to (λ² − t²)/λ above t and to 0 below it "
        "(t = 2√2 s √(i − 1) for the i-th smallest, s the entries' noise sd; before the `width` "
        "branch t = 2 s √d, the noise's spectral scale, for all), for the logistic family "
        "scales it by a factor within e^{±min(‖θ̄ − θ_K‖₁, 1)} for the mean Hessian between the "
        "last point and θ (a direction the noise cannot resolve falls back to the prior), "
        "takes the residual variance from RSS/χ² (linear, RSS from the releases), then draws θ "
        "from the Gaussian posterior of the score model ĝ = H(θ − θ_K) + e + z under the "
        "N(0, 10²) prior (its width from the shrunk curvature, its centre from the unshrunk "
        "draw). Every noise source of the last round is carried; the early rounds "
        "only choose the point θ_K (post-processing).",
        "",
        "Reading the table. The intervals are the sample quantiles of the `draws` posterior "
        "draws of each replicate (150 in the run below): even for an exact posterior such an "
        "interval covers with expectation (S + 1 − 2·S·(1 − c)/2 − 1)/(S + 1) ≈ 0.888 (c = 0.9) "
        "and 0.493 (c = 0.5) at S = 150, and the joint region, measured in the draws' own "
        "estimated covariance, loses a little more at d = 10; the tests compare with the "
        "nominal level all the same (strict against the method). A fit returns 4000 draws by "
        "default, where the effect is negligible. Coverage 1.00 with a median 90 % width near "
        "the prior's (≈ 33 on the scaled design) means the releases could not resolve the "
        "curvature and the posterior fell back to the prior: honest, but uninformative.",
        "",
        f"Commands: {command}",
        "",
        f"Points run: {len(rows)} of the {FULL_GRID_POINTS} of issue 32's grid "
        f"(3 families × 6 n × 3 d × 3 ε); failed: {len(failed)}. "
        + (f"Not run: {_missing(rows)}." if len(rows) < FULL_GRID_POINTS else ""),
        "",
        "![coverage](figures/calibration.png)",
        "",
        "| family | n | d | ε | reps | 50 %: pooled / joint / worst coef | "
        "90 %: pooled / joint / worst coef | median 90 % width (scaled) | passed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        a, b = r["levels"]["0.5"], r["levels"]["0.9"]
        lines.append(
            f"| {r['family']} | {r['n']} | {r['d']} | {r['epsilon']:g} | {r['reps']} | "
            f"{a['pooled']:.2f} / {a['joint']:.2f} / {a['per_coef_min']:.2f} | "
            f"{b['pooled']:.2f} / {b['joint']:.2f} / {b['per_coef_min']:.2f} | "
            f"{r['median_width90']:.3g} | {'yes' if r['passed'] else '**no**'} |")
    lines += ["", "## Beyond the grid", "", *EXTRA]
    lines += [x for sec in hand_after for x in ("", sec.rstrip("\n"))]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    import sys

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--families", default="logistic,logistic-rare,linear")
    ap.add_argument("--n", default="30,100,300,1000,10000,100000")
    ap.add_argument("--d", default="2,5,10")
    ap.add_argument("--eps", default="0.3,1,4")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--tag", default="", help="write the points to results/calibration_TAG.json "
                    "(e.g. a subset measured after a change of the method) and no report")
    args = ap.parse_args()
    path = RESULTS.with_name(f"calibration_{args.tag}.json") if args.tag else RESULTS
    rows = load(path)
    if not args.report_only:
        from dpmcmc.tabular.calibration import Case

        done = {(r["family"], r["n"], r["d"], r["epsilon"]) for r in rows}
        for fam in args.families.split(","):
            for n in map(int, args.n.split(",")):
                for d in map(int, args.d.split(",")):
                    for eps in map(float, args.eps.split(",")):
                        if (fam, n, d, eps) in done:
                            continue
                        row = run_point(Case(fam, n, d, eps), args.reps, args.draws)
                        rows.append(row)
                        path.parent.mkdir(parents=True, exist_ok=True)
                        path.write_text(json.dumps(rows, indent=1))
                        lv = row["levels"]
                        print(f"{fam} n={n} d={d} ε={eps:g}: 50% {lv['0.5']['pooled']:.2f}/"
                              f"{lv['0.5']['joint']:.2f}  90% {lv['0.9']['pooled']:.2f}/"
                              f"{lv['0.9']['joint']:.2f}  passed={row['passed']}  "
                              f"{row['seconds']:.0f}s", flush=True)
    if args.tag:
        path.with_suffix(".md").write_text("\n".join(tag_table(rows)) + "\n")
        return
    command = "PYTHONPATH=src python benchmarks/calibration.py " + " ".join(sys.argv[1:])
    if args.report_only:
        # Say how the stored points were measured, from what they record.
        sizes = " ".join(f"--{k} {','.join(map(str, sorted({r[k] for r in rows})))}"
                         for k in ("reps", "draws"))
        command = ("the points in benchmarks/results/calibration.json were measured by "
                   f"`PYTHONPATH=src nice -n 10 python benchmarks/calibration.py {sizes}` "
                   "(the grid's own --n, --d and --eps; one --n at a time, a rerun skipping the "
                   "points already there); report: `" + command + "`")
    report(rows, command)
    figure(rows)


if __name__ == "__main__":
    main()
