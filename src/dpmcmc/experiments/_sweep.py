"""The grid shared by the sampling experiments: model × algorithm × ε × repeat × start mode.

A config for :func:`grid_cells` / :func:`run_grid_cell` holds ``models`` (preset name ->
``{"n": n or None, "algorithms": {label: {"algorithm", "params", "source"}}}``), ``epsilons``
(``None`` entries for non-private algorithms), ``delta_over_n`` (δ = delta_over_n / n),
``chains``, ``repeats``, ``starts``, ``max_iterations`` (quick-mode cap or None),
``reference_draws``, ``mmd_points``, ``bandwidth_points``, ``seed`` and optionally ``cell``:
what one cell (one Snakemake job, one process) runs, ``"epsilon"`` (default: every repeat of
one model, algorithm, ε and start) or ``"algorithm"`` (every ε and repeat of one model,
algorithm and start).

A run is one ``dpmcmc.sample`` call; its key and starting points are derived from the run (its
:func:`run_id` and repeat), never from the cell it is run in, so how runs are grouped into cells
changes only the cost: the runs of a cell share the process start-up, the preset, the reference
sample and the compiled programs.
"""
from __future__ import annotations

import numpy as np

from ._common import START_LABELS, acceptance_columns, cell_seed, evaluate, load_preset, reference_draws, run_one, start_points, thin

__all__ = ["grid_cells", "run_grid_cell", "run_id", "plot_vs_epsilon", "summary_table"]


def _eps_tag(eps) -> str:
    return "np" if eps is None else f"{eps:g}".replace(".", "p")


def run_id(model: str, label: str, eps, rep: int, start: str) -> str:
    """The id of one run (one ``dpmcmc.sample`` call); its key is derived from it."""
    return f"{model}__{label}__e{_eps_tag(eps)}__r{rep}__{start}"


def grid_cells(cfg: dict) -> list[dict]:
    """The cells of the grid (see the module docstring for ``cfg["cell"]``)."""
    from ._common import is_private

    per = cfg.get("cell", "epsilon")
    if per not in ("epsilon", "algorithm"):  # a config bug, not user input
        raise AssertionError(f"cell must be 'epsilon' or 'algorithm', got {per!r}")
    cells = []
    for model, mcfg in cfg["models"].items():
        for label, acfg in mcfg["algorithms"].items():
            eps_grid = cfg["epsilons"] if is_private(acfg["algorithm"]) else [None]
            groups = [[e] for e in eps_grid] if per == "epsilon" else [list(eps_grid)]
            for epsilons in groups:
                for start in acfg.get("starts", cfg["starts"]):
                    tag = f"__e{_eps_tag(epsilons[0])}" if per == "epsilon" else ""
                    cells.append({"id": f"{model}__{label}{tag}__{start}", "model": model,
                                  "label": label, "epsilons": epsilons, "start": start,
                                  "repeats": list(range(cfg["repeats"]))})
    return cells


def _grad_clip_fraction(pre, draws: np.ndarray, grad_clip: float, per_chain: int = 5) -> float:
    """Fraction of per-example gradients with norm above ``grad_clip`` at a few kept draws.

    Computed from the raw data: NOT private (001 Fig. 6.8 reports it for evaluation).
    """
    import jax.numpy as jnp

    kept = draws[:, draws.shape[1] // 2:, :]
    idx = np.linspace(0, kept.shape[1] - 1, min(per_chain, kept.shape[1])).round().astype(int)
    fr = []
    for theta in kept[:, idx, :].reshape(-1, kept.shape[-1]):
        if not np.all(np.isfinite(theta)):
            continue
        g = np.asarray(pre.model.grad_per_example(jnp.asarray(theta, pre.data.dtype), pre.data))
        fr.append(float(np.mean(np.linalg.norm(g, axis=1) > grad_clip)))
    return float(np.mean(fr)) if fr else float("nan")


def run_grid_cell(cfg: dict, cell: dict, keep_draws=False, grad_clip_fraction: bool = False) -> dict:
    """Run every (ε, repeat) of a cell: one row per run. ``keep_draws`` (a bool, or a function of
    ε): keep those runs' thinned draws in the extras (``draws``: run id -> array) with the
    reference sample (``reference``)."""
    rows, extras = [], {}
    for eps in cell["epsilons"]:
        keep = keep_draws(eps) if callable(keep_draws) else bool(keep_draws)
        for rep in cell["repeats"]:
            row, draws, ref = _run_grid_run(cfg, cell, eps, rep, keep, grad_clip_fraction)
            rows.append(row)
            if draws is not None:
                extras.setdefault("draws", {})[row["run"]] = draws
                if ref is not None:
                    extras["reference"] = ref
    return {"rows": rows, "extras": extras}


def _run_grid_run(cfg: dict, cell: dict, eps, rep: int, keep_draws: bool, grad_clip_fraction: bool):
    mcfg = cfg["models"][cell["model"]]
    acfg = mcfg["algorithms"][cell["label"]]
    pre = load_preset(cell["model"], mcfg.get("n"))
    n = int(pre.data.shape[0])
    delta = cfg["delta_over_n"] / n
    ref = None
    if pre.posterior_sampler is not None:
        ref = reference_draws(cell["model"], mcfg.get("n"), cfg["reference_draws"], cfg["seed"])
    # Starts depend on the repeat only: every algorithm and ε of a repeat shares them.
    start_seed = cell_seed(cfg["seed"], cell["model"], "start", rep)
    theta0 = start_points(cell["start"], pre, cfg["chains"], start_seed, ref, mcfg.get("start"),
                          algorithm=acfg["algorithm"], params=acfg["params"])
    rid = run_id(cell["model"], cell["label"], eps, rep, cell["start"])
    run_seed = cell_seed(cfg["seed"], rid)  # the run's own key, whatever cell it is run in
    alg = acfg["algorithm"]
    res, info = run_one(pre, alg, acfg["params"], epsilon=eps,
                        delta=None if eps is None else delta, chains=cfg["chains"],
                        theta0=theta0, seed=run_seed,
                        iterations=acfg.get("iterations"), max_iterations=cfg.get("max_iterations"))
    row = {"run": rid, "model": cell["model"], "algorithm": cell["label"], "sampler": alg,
           "epsilon": eps, "delta": None if eps is None else delta, "n": n,
           "repeat": rep, "chains": cfg["chains"], "start": cell["start"],
           "start_label": START_LABELS[cell["start"]], "params": acfg["params"],
           "params_source": acfg.get("source", ""), **info}
    if res is None:
        row.update(mmd=np.nan, mean_error=np.nan, rhat_max=np.nan, mmd_exact_baseline=np.nan,
                   acceptance=np.nan, nonprivate_acceptance=np.nan, nonprivate_clip_fraction=np.nan)
        return row, None, ref
    baseline = None
    if ref is not None:
        import jax

        kept = res.samples.shape[0] * (res.samples.shape[1] - res.samples.shape[1] // 2)
        baseline = np.asarray(pre.posterior_sampler(jax.random.key(cell_seed(run_seed, "baseline")),
                                                    min(kept, cfg["mmd_points"])))
    true_mean = pre.posterior_mean if pre.posterior_mean is not None else ref
    row.update(evaluate(res.samples, ref, true_mean, mmd_points=cfg["mmd_points"],
                        bandwidth_points=cfg["bandwidth_points"], seed=run_seed, baseline=baseline))
    row.update(acceptance_columns(res))
    if res.diagnostics is not None:  # None: auto's approximation (no chain)
        row["nonprivate_clip_fraction"] = float(np.mean(res.diagnostics.clip_fraction))
    if grad_clip_fraction and "grad_clip" in acfg["params"]:
        row["nonprivate_grad_clip_fraction"] = _grad_clip_fraction(pre, np.asarray(res.samples),
                                                                   acfg["params"]["grad_clip"])
    draws = None
    if keep_draws:
        kept = np.asarray(res.samples)[:, res.samples.shape[1] // 2:, :].reshape(-1, pre.model.dim)
        draws = thin(kept, 1000)
    return row, draws, ref


def plot_vs_epsilon(df, models, metric: str, ylabel: str, title: str, save, stem: str,
                    logy: bool = True) -> None:
    """One panel per model: ``metric`` (mean ± s.e. over repeats) vs ε, a line per algorithm,
    solid for the paper start, dashed for the private start; non-private runs as horizontal lines."""
    import matplotlib.pyplot as plt

    models = list(models)
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.6), squeeze=False)
    for ax, model in zip(axes[0], models):
        sub = df[(df.model == model) & df[metric].notna()]
        for i, (alg, g) in enumerate(sub.groupby("algorithm", sort=False)):
            color = f"C{i}"
            for start, gs in g.groupby("start"):
                ls = "-" if start == "paper" else "--"
                if gs.epsilon.isna().all():
                    ax.axhline(gs[metric].mean(), color=color, ls=ls, lw=1,
                               label=f"{alg} ({start} start)")
                    continue
                s = gs.groupby("epsilon")[metric].agg(["mean", "sem", "count"])
                ax.errorbar(s.index, s["mean"], yerr=s["sem"].fillna(0), color=color, ls=ls,
                            marker="o", ms=3, capsize=2, label=f"{alg} ({start} start)")
        if "mmd_exact_baseline" in sub and metric == "mmd" and sub.mmd_exact_baseline.notna().any():
            ax.axhline(sub.mmd_exact_baseline.median(), color="k", lw=1, label="exact posterior sample")
        ax.set_title(model)
        ax.set_xlabel("ε")
        ax.set_ylabel(ylabel)
        if logy:
            ax.set_yscale("log")
        ax.legend(fontsize=6)
    fig.suptitle(title + " — dashed: private start; solid: paper start (NON-PRIVATE)", fontsize=9)
    fig.tight_layout()
    save(fig, stem)


def summary_table(df, metric: str) -> str:
    """Markdown table: median ``metric`` per model × algorithm × start at the largest ε."""
    import pandas as pd

    lines = [f"| model | algorithm | start | ε | median {metric} | runs |", "|---|---|---|---|---|---|"]
    for (model, alg, start), g in df.groupby(["model", "algorithm", "start"], sort=False):
        eps = g.epsilon.max() if g.epsilon.notna().any() else None
        gg = g if eps is None else g[g.epsilon == eps]
        val = gg[metric].median()
        lines.append(f"| {model} | {alg} | {start} | {'—' if eps is None or pd.isna(eps) else f'{eps:g}'} | "
                     f"{'—' if pd.isna(val) else f'{val:.3g}'} | {len(gg)} |")
    return "\n".join(lines)
