"""``clipping``: 000 Fig. 3 and 001 Fig. 6.2 — MMD vs the log-likelihood-ratio clip bound and vs
the fraction of ratios clipped, for RWMH and HMC without noise on the 2-d and 10-d flat banana
(001 §6.2: n = 10⁵, 3000 RWMH / 500 HMC iterations, latter half compared with 1000 exact draws;
20 runs per bound; bounds 0.5, 1, 2, 4, 6, 8, 10, 1000 as in the thesis' clipping.smk).

Parameters from the thesis code (oraisa/masters-thesis code/rwmh_clipping.py, hmc_clipping.py):
RWMH proposal sd 0.01 (2-d) or (0.015, 0.015, 0.002, ...) (10-d); HMC step 0.001, 15 leapfrog
steps, unit mass. The samplers are the library's non-private ``rwmh``/``hmc`` with ``clip``.
One cell runs all repeats of one (model, algorithm, bound, start) as independent chains of one
non-private run (no budget to compose), then splits them into one row per repeat.
"""
from __future__ import annotations

import numpy as np

from ._common import START_LABELS, cell_seed, evaluate, load_preset, reference_draws, run_one, start_points
from ._sweep import summary_table

NAME = "clipping"
TITLE = "Effect of log-likelihood-ratio clipping without noise"
PAPER = "000 Fig. 3 and 001 (thesis) Fig. 6.2"
FIGURES = ("000 Fig. 3", "001 Fig. 6.2")

_SRC = "oraisa/masters-thesis code/{}_clipping.py"


def config(quick: bool) -> dict:
    cfg = {
        "experiment": NAME, "quick": quick,
        "models": {
            "thesis-flat-banana-2d": {"n": 100000, "dim": 2},
            "thesis-flat-banana-10d": {"n": 100000, "dim": 10},
        },
        "algorithms": {
            "rwmh": {"iterations": 3000, "source": _SRC.format("rwmh"),
                     "params": {2: {"proposal_std": 0.01},
                                10: {"proposal_std": [0.015, 0.015] + [0.002] * 8}}},
            "hmc": {"iterations": 500, "source": _SRC.format("hmc"),
                    "params": {2: {"step_size": 0.001, "leapfrog_steps": 15},
                               10: {"step_size": 0.001, "leapfrog_steps": 15}}},
        },
        "clip_bounds": [0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 1000.0],
        "repeats": 20, "chains": 1, "starts": ["paper", "private"],
        "reference_draws": 1000, "mmd_points": 2000, "bandwidth_points": 50, "seed": 2020,
        "source": "001 §6.2; 000 §4.2",
    }
    if quick:
        cfg["models"] = {"thesis-flat-banana-2d": {"n": 2000, "dim": 2}}
        cfg["algorithms"]["rwmh"]["iterations"] = 200
        cfg["algorithms"]["hmc"]["iterations"] = 40
        cfg.update(clip_bounds=[0.5, 1000.0], repeats=2, reference_draws=300, mmd_points=300,
                   bandwidth_points=50)
    return cfg


def cells(cfg: dict) -> list[dict]:
    out = []
    for model in cfg["models"]:
        for alg in cfg["algorithms"]:
            for b in cfg["clip_bounds"]:
                for start in cfg["starts"]:
                    out.append({"id": f"{model}__{alg}__b{b:g}__{start}".replace(".", "p"),
                                "model": model, "algorithm": alg, "clip": b, "start": start})
    return out


def run_cell(cfg: dict, cell: dict) -> dict:
    m = cfg["models"][cell["model"]]
    a = cfg["algorithms"][cell["algorithm"]]
    pre = load_preset(cell["model"], m["n"])
    ref = reference_draws(cell["model"], m["n"], cfg["reference_draws"], cfg["seed"])
    reps, chains = cfg["repeats"], cfg["chains"]
    # Starts depend on the repeat only (shared by every algorithm and bound).
    theta0 = None
    if cell["start"] == "paper":
        theta0 = np.concatenate([start_points("paper", pre, chains, cell_seed(cfg["seed"], cell["model"], r), ref)
                                 for r in range(reps)])
    params = dict(a["params"][m["dim"]], clip=cell["clip"])
    seed = cell_seed(cfg["seed"], cell["id"])
    res, info = run_one(pre, cell["algorithm"], params, epsilon=None, delta=None, chains=reps * chains,
                        theta0=theta0, seed=seed, iterations=a["iterations"])
    samples = np.asarray(res.samples)
    rows = []
    for r in range(reps):
        sl = slice(r * chains, (r + 1) * chains)
        row = {"model": cell["model"], "algorithm": cell["algorithm"], "clip": cell["clip"],
               "repeat": r, "chains": chains, "n": int(pre.data.shape[0]), "start": cell["start"],
               "start_label": START_LABELS[cell["start"]], "params": params,
               "params_source": a["source"], "iterations": info["iterations"],
               "nonprivate_clip_fraction": float(np.mean(res.diagnostics.clip_fraction[sl])),
               "nonprivate_acceptance": float(np.mean(res.diagnostics.acceptance_rate[sl]))}
        row.update(evaluate(samples[sl], ref, pre.posterior_mean, mmd_points=cfg["mmd_points"],
                            bandwidth_points=cfg["bandwidth_points"], seed=seed + r))
        rows.append(row)
    return {"rows": rows}


def figures(df, cfg: dict, extras: dict, save) -> None:
    import matplotlib.pyplot as plt

    models = list(cfg["models"])
    fig, axes = plt.subplots(2, len(models), figsize=(4.5 * len(models), 7), squeeze=False)
    for j, model in enumerate(models):
        sub = df[df.model == model]
        for i, (alg, g) in enumerate(sub.groupby("algorithm", sort=False)):
            for start, gs in g.groupby("start"):
                mk = "o" if start == "paper" else "x"
                axes[0, j].scatter(gs["clip"], gs.mmd, s=10, color=f"C{i}", marker=mk, label=f"{alg} ({start} start)")
                axes[1, j].scatter(gs.nonprivate_clip_fraction, gs.mmd, s=10, color=f"C{i}", marker=mk,
                                   label=f"{alg} ({start} start)")
        # 001 Fig. 6.2's black lines: MMDs of 10 exact posterior samples, each as large as a
        # run's kept draws, against the same reference sample.
        for k, (alg, a) in enumerate(cfg["algorithms"].items()):
            size = cfg["chains"] * (a["iterations"] - a["iterations"] // 2)
            for i, value in enumerate(_exact_mmds(cfg, model, size)):
                label = f"exact sample of {size} draws ({alg} length)" if i == 0 else None
                for ax in axes[:, j]:
                    ax.axhline(value, color="k", lw=0.5, ls=("-", ":")[k % 2], label=label)
        axes[0, j].set_xscale("log")
        axes[0, j].set_xlabel("clip bound")
        axes[1, j].set_xlabel("fraction of ratios clipped (NON-PRIVATE diagnostic)")
        for ax in axes[:, j]:
            ax.set_ylabel("MMD")
            ax.set_yscale("log")
            ax.set_title(model, fontsize=9)
            ax.legend(fontsize=6)
    fig.suptitle("000 Fig. 3 / 001 Fig. 6.2: clipping without noise\n(o: paper start, NON-PRIVATE; x: private start, "
                 "prior draws)", fontsize=9)
    fig.tight_layout()
    save(fig, "clipping")


def _exact_mmds(cfg: dict, model: str, size: int, samples: int = 10) -> list[float]:
    """MMD against the reference sample of ``samples`` exact posterior samples of ``size``
    draws (evaluation only: what MMD a perfect sampler of that length gets)."""
    import jax

    from ..diagnostics import median_bandwidth, mmd

    m = cfg["models"][model]
    pre = load_preset(model, m["n"])
    ref = reference_draws(model, m["n"], cfg["reference_draws"], cfg["seed"])
    out = []
    for i in range(samples):
        seed = cell_seed(cfg["seed"], model, "exact", size, i)
        b = np.asarray(pre.posterior_sampler(jax.random.key(seed), min(size, cfg["mmd_points"])))
        out.append(mmd(b, ref, bandwidth=median_bandwidth(b, ref, cfg["bandwidth_points"], seed=seed)))
    return out


def findings(df, cfg: dict) -> str:
    split = []
    for (model, alg, start), g in df.groupby(["model", "algorithm", "start"], sort=False):
        lo, hi = g[g.nonprivate_clip_fraction < 0.2], g[g.nonprivate_clip_fraction >= 0.2]
        split.append(f"| {model} | {alg} | {start} | {_med(lo)} ({len(lo)}) | {_med(hi)} ({len(hi)}) |")
    return "\n".join([
        "**Papers (000 §4.2, 001 §6.2):** with a large enough clip bound clipping has no visible "
        "effect on MMD; below about 20 % clipped ratios the effect is undetectable, which set the "
        "tuning rule of the main experiments (20 % in 000, 10 % in 001). In 10-d some chains did "
        "not converge at the smaller bounds.", "",
        "**This run:** median MMD (runs) with < 20 % and with ≥ 20 % of the ratios clipped:", "",
        "| model | sampler | start | < 20 % clipped | ≥ 20 % clipped |", "|---|---|---|---|---|",
        *split, "",
        summary_table(df.assign(epsilon=df["clip"]), "mmd").replace("| ε |", "| largest clip bound |"), "",
        "**Why numbers may differ:** the `private` start draws from the prior (σ₀² = 1000) instead "
        "of near the truth, so its short non-private chains may not reach the posterior; our data "
        "are generated by this library.",
    ])


def _med(g) -> str:
    return "—" if g.mmd.notna().sum() == 0 else f"{g.mmd.median():.3g}"
