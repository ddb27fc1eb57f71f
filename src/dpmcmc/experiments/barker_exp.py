"""``barker``: 002 Fig. 4 (error of the Barker correction distribution vs its noise variance C)
and Figs 5–6 (the 2-d Gaussian mixture, N = 10⁶ tempered to N₀ = 100, b = 1000: private DP
Barker vs the non-private tempered chain; running mean error and ε spent vs iteration, 20 runs).

Fig. 4: for each C the correction mixture of :mod:`dpmcmc.samplers.barker` (the shipped fit for
C = 2, else fitted on demand) is measured exactly (``correction_error``: sup-CDF and log-odds
error) and empirically as in 002 (sup |empirical CDF of N(0, C) + X_corr − logistic CDF| over
``runs`` samples of ``samples`` draws, mean ± s.e.).

Figs 5–6: the non-private baseline ("barker-full-data") is the Barker test on all n records each
step, same tempered model and proposal: the exact tempered Barker chain, which differs from DP
Barker only in the subsampled, noisy test (an MH baseline such as ``rwmh`` would also change the
acceptance rule). 002 does not state its proposal;
we use proposal sd 0.05 (about a third of the tempered posterior's sd, our choice, not tuned)
and a fixed run length; ε(t) is ``accounting.spent("dp-barker", t, ...)``. 002 started from a
DPVI estimate (ε = 0.21); the ``paper`` start here is θ_true + N(0, 0.1²) (NON-PRIVATE).
"""
from __future__ import annotations

import warnings

import numpy as np

from ._common import START_LABELS, acceptance_columns, cell_seed, load_preset, start_points, thin

NAME = "barker"
TITLE = "DP Barker: correction distribution and the Gaussian-mixture experiment"
PAPER = "002 (Heikkilä et al., NeurIPS 2019) Fig. 4 and Figs 5–6"
FIGURES = ("002 Fig. 4", "002 Fig. 5", "002 Fig. 6")


def config(quick: bool) -> dict:
    cfg = {
        "experiment": NAME, "quick": quick,
        "fig4": {"C": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0], "runs": 20, "samples": 100000},
        "gmm": {"model": "gmm-2d", "n": None, "batch_size": 1000, "proposal_std": 0.05,
                "iterations": 20000, "delta": 1e-6, "runs": 20, "chains": 1,
                # The non-private baseline tests all n = 10⁶ records every step: ~560 CPU-s a run
                # here (DP Barker: ~7 s), so it runs 3 times per start, not 20 (our choice, for
                # cost; its run-to-run spread is shown by the error bars of Fig. 6).
                "baseline_runs": 3,
                "paper_start_std": 0.1, "checkpoints": 20,
                "algorithms": ["dp-barker", "barker-full-data"]},
        "starts": ["paper", "private"], "seed": 2019, "source": "002 §3.3, §4",
    }
    if quick:
        cfg["fig4"] = {"C": [2.0], "runs": 3, "samples": 5000}
        cfg["gmm"].update(n=5000, batch_size=500, iterations=200, runs=1, checkpoints=5)
    return cfg


def cells(cfg: dict) -> list[dict]:
    out = [{"id": f"fig4_C{c:g}".replace(".", "p"), "kind": "fig4", "C": c} for c in cfg["fig4"]["C"]]
    for alg in cfg["gmm"]["algorithms"]:
        runs = cfg["gmm"]["runs"] if alg == "dp-barker" else min(cfg["gmm"]["runs"], cfg["gmm"]["baseline_runs"])
        for r in range(runs):
            for start in cfg["starts"]:
                out.append({"id": f"gmm__{alg}__r{r}__{start}", "kind": "gmm", "algorithm": alg,
                            "run": r, "start": start})
    return out


def _fig4(cfg, cell) -> dict:
    import jax
    import jax.numpy as jnp
    from scipy.special import expit

    from ..kernels.barker_correction import correction_error, sample_correction

    C, f = cell["C"], cfg["fig4"]
    exact = correction_error(C)
    errs = []
    for r in range(f["runs"]):
        k1, k2 = jax.random.split(jax.random.key(cell_seed(cfg["seed"], cell["id"], r)))
        # The correction is privacy noise, drawn in float64 only: 64-bit types for this draw.
        with jax.enable_x64(True):
            corr = np.asarray(sample_correction(k1, (f["samples"],), C), dtype=np.float64)
        x = np.sort(corr + np.sqrt(C) * np.asarray(jax.random.normal(k2, (f["samples"],), jnp.float32),
                                                   dtype=np.float64))
        m = len(x)
        s = expit(x)
        errs.append(float(max(np.max(np.arange(1, m + 1) / m - s), np.max(s - np.arange(m) / m))))
    return {"rows": [{"part": "fig4", "C": C, "sup_cdf_exact": exact["sup_cdf"],
                      "log_odds_exact": exact["log_odds"], "sup_cdf_empirical_mean": float(np.mean(errs)),
                      "sup_cdf_empirical_sem": float(np.std(errs, ddof=1) / np.sqrt(len(errs))) if len(errs) > 1 else float("nan"),
                      "runs": f["runs"], "samples": f["samples"]}]}


def _gmm(cfg, cell) -> dict:
    import jax

    import dpmcmc

    g = cfg["gmm"]
    pre = load_preset(g["model"], g["n"])
    n = int(pre.data.shape[0])
    theta0 = None
    if cell["start"] == "paper":
        theta0 = start_points("paper", pre, g["chains"], cell_seed(cfg["seed"], "start", cell["run"]), None,
                              {"std": g["paper_start_std"]})
    seed = cell_seed(cfg["seed"], cell["id"])
    # Simulated data, a fixed seed per cell (repeatable; no person's record at stake), the
    # papers' settings as they were (force).
    kw = dict(chains=g["chains"], key=jax.random.key(seed), theta0=theta0, iterations=g["iterations"],
              progress=False, proposal_std=g["proposal_std"], force=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpmcmc.KeyReuseWarning)
        if cell["algorithm"] == "dp-barker":
            res = dpmcmc.sample(pre.model, pre.data, "dp-barker", delta=g["delta"],
                                batch_size=g["batch_size"], **kw)
        else:
            # The non-private tempered Barker chain: the same test on all n records each step
            # (its N(0, C) + X_corr noise is the Barker test's own logistic noise, not privacy
            # noise).
            res = dpmcmc.sample(pre.model, pre.data, "dp-barker", delta=g["delta"], batch_size=n,
                                **kw)
    draws = np.asarray(res.samples, dtype=np.float64)  # (chains, T, 2)
    ts = np.unique(np.linspace(max(2, g["iterations"] // g["checkpoints"]), g["iterations"], g["checkpoints"]).astype(int))
    truth = np.asarray(pre.theta_true, dtype=np.float64)
    curve = []
    for t in ts:
        d = draws[:, :t].reshape(-1, 2)
        eps = None
        if cell["algorithm"] == "dp-barker":
            eps = float(dpmcmc.accounting.spent("dp-barker", int(t), g["delta"], n, chains=g["chains"], accountant="rdp-direct",
                                                batch_size=g["batch_size"], n0=pre.settings["n0"]).epsilon)
        curve.append({"t": int(t), "epsilon": eps, "mean_error": float(np.linalg.norm(d.mean(0) - truth)),
                      "var": d.var(0).tolist()})
    last = curve[-1]
    row = {"part": "gmm", "model": g["model"], "algorithm": cell["algorithm"], "run": cell["run"],
           "start": cell["start"], "start_label": START_LABELS[cell["start"]], "n": n,
           "batch_size": g["batch_size"] if cell["algorithm"] == "dp-barker" else n,
           "proposal_std": g["proposal_std"], "iterations": g["iterations"], "delta": g["delta"] if last["epsilon"] is not None else None,
           "epsilon_spent": last["epsilon"], "mean_error": last["mean_error"],
           **acceptance_columns(res),
           "nonprivate_clip_fraction": float(np.mean(res.diagnostics.clip_fraction))}
    return {"rows": [row], "extras": {"curve": curve, "draws": thin(draws[:, draws.shape[1] // 2:].reshape(-1, 2), 2000)}}


def run_cell(cfg: dict, cell: dict) -> dict:
    return _fig4(cfg, cell) if cell["kind"] == "fig4" else _gmm(cfg, cell)


def figures(df, cfg: dict, extras: dict, save) -> None:
    import matplotlib.pyplot as plt

    f4 = df[df.part == "fig4"].sort_values("C")
    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    ax.errorbar(f4.C, f4.sup_cdf_empirical_mean, yerr=f4.sup_cdf_empirical_sem.fillna(0), marker="o",
                capsize=2, label="empirical (mean ± s.e.)")
    ax.plot(f4.C, f4.sup_cdf_exact, marker="x", label="exact convolution")
    ax.set_xlabel("C")
    ax.set_ylabel("max |S'(y) − S(y)|")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    ax.set_title("002 Fig. 4: correction error (GMM fit)", fontsize=9)
    fig.tight_layout()
    save(fig, "fig4_correction_error")

    gm = df[df.part == "gmm"]
    fig, axes = plt.subplots(len(cfg["starts"]), 2, figsize=(8, 3.8 * len(cfg["starts"])), squeeze=False)
    for i, start in enumerate(cfg["starts"]):
        for j, alg in enumerate(cfg["gmm"]["algorithms"]):
            ax = axes[i, j]
            for c in gm[(gm.start == start) & (gm.algorithm == alg)].cell:
                d = np.asarray(extras[c]["draws"])
                ax.scatter(d[:, 0], d[:, 1], s=2, alpha=0.3)
            ax.set_title(f"{alg} ({'private' if alg == 'dp-barker' else 'non-private baseline'}), {start} start",
                         fontsize=8)
            ax.set_xlabel("θ1")
            ax.set_ylabel("θ2")
    fig.suptitle("002 Fig. 5: GMM draws (second half)", fontsize=9)
    fig.tight_layout()
    save(fig, "fig5_gmm_samples")

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for i, start in enumerate(cfg["starts"]):
        for alg in cfg["gmm"]["algorithms"]:
            curves = [extras[c]["curve"] for c in gm[(gm.start == start) & (gm.algorithm == alg)].cell]
            if not curves:
                continue
            t = np.array([p["t"] for p in curves[0]])
            err = np.array([[p["mean_error"] for p in cv] for cv in curves])
            sem = err.std(0, ddof=1) / np.sqrt(len(err)) if len(err) > 1 else np.zeros(len(t))
            axes[0].errorbar(t, err.mean(0), yerr=sem, ls="-" if start == "paper" else "--",
                             label=f"{alg}, {start} start")
            if alg == "dp-barker":
                axes[1].plot(t, [p["epsilon"] for p in curves[0]], ls="-" if start == "paper" else "--",
                             label=f"{alg}, {start} start")
    axes[0].set_xlabel("iteration t")
    axes[0].set_ylabel("‖mean of first t draws − θ_true‖")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=6)
    axes[1].set_xlabel("iteration t")
    axes[1].set_ylabel("ε spent (rdp-direct)")
    axes[1].legend(fontsize=6)
    fig.suptitle("002 Fig. 6: accuracy and privacy vs iteration (mean ± s.e. over runs)", fontsize=9)
    fig.tight_layout()
    save(fig, "fig6_gmm_error_vs_epsilon")


def findings(df, cfg: dict) -> str:
    f4 = df[df.part == "fig4"].sort_values("C")
    gm = df[df.part == "gmm"]
    lines = ["**Paper (002):** the GMM correction keeps the approximation error small up to "
             "C = 2 (Fig. 4, where the ridge-regression fit of Seita et al. fails beyond C = 1); "
             "private tempered DP Barker draws are nearly indistinguishable from the non-private "
             "tempered chain (Fig. 5), and its error tracks the non-private baseline as ε grows "
             "(Fig. 6).", "", "**This run:**", ""]
    for _, r in f4.iterrows():
        lines.append(f"- C = {r.C:g}: exact sup-CDF error {r.sup_cdf_exact:.2e}, empirical "
                     f"{r.sup_cdf_empirical_mean:.2e} ({int(r.runs)} × {int(r.samples)} draws)")
    for (alg, start), g in gm.groupby(["algorithm", "start"]):
        eps = g.epsilon_spent.dropna()
        lines.append(f"- GMM {alg}, {start} start: final mean error {g.mean_error.median():.3g} (median of "
                     f"{len(g)} runs)" + (f", ε spent {eps.iloc[0]:.3g} at δ = {cfg['gmm']['delta']:g}" if len(eps) else ""))
    lines += ["", f"The non-private baseline runs {min(cfg['gmm']['runs'], cfg['gmm']['baseline_runs'])} "
              "times per start (all records every step; for cost), DP Barker "
              f"{cfg['gmm']['runs']} times.",
              "", "**Why numbers may differ:** ε is accounted with `rdp-direct` (the released "
              "Gaussian's Rényi divergence bounded directly), far below 002 Thm 2 for the same "
              "run; the empirical CDF error includes the sampling error of its finite sample "
              "(≈ 0.87/√samples); the private start draws from the prior, not a DPVI estimate."]
    return "\n".join(lines)
