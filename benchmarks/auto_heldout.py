"""A held-out check of ``algorithm="auto"``: the thesis-comparison models, which its rules were
not developed on.

``auto``'s constants (docs/auto.md) were set on simulated whitened posteriors and checked on the
banana 2-d and the 10-d Gaussian of ``dphmc-paper`` (``benchmarks/auto_samplers.py``). This
script runs it, unchanged, on the eight models of ``thesis-comparison`` (001 Table 5.1: flat and
tempered bananas in 2-d and 10-d, a 30-d Gaussian, a narrow banana, a correlated Gaussian, the
circle) through that experiment's own runner (``_run_grid_run``: its data, seeds, MMD against
1000 exact draws with its 50-point median bandwidth, the first half of each chain dropped),
declaring only the tuned DP-HMC's ``clip``/``grad_clip`` of each preset — the experiment's
``auto`` line (``dpmcmc.experiments._common.auto_entry``), which runs with ``auto``'s defaults
(4 chains; the thesis' samplers run 20).

The thesis reproduction's stored figures (docs/figures/thesis-comparison/fig6_3_mmd_banana.png,
fig6_4_mmd_hard.png; one run per ε) are the comparison; its per-run table is not stored.

Writes ``benchmarks/results/auto_heldout.jsonl`` (one row per run, appended: resumable) and
``auto_heldout.md``.

Usage::

    python benchmarks/auto_heldout.py                    # ε = 2, 4, 6 on every model
    python benchmarks/auto_heldout.py --epsilons 6 --models thesis-circle
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import time
import warnings
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ROWS = RESULTS / "auto_heldout.jsonl"
KEEP = ("mmd", "mmd_exact_baseline", "mean_error", "rhat_max", "auto_mode", "chains",
        "iterations", "epsilon_spent", "status")


def run(models, epsilons) -> None:
    from dpmcmc.experiments import thesis
    from dpmcmc.experiments._sweep import _run_grid_run

    cfg = thesis.config(False)
    done = set()
    if ROWS.exists():
        done = {(r["model"], r["epsilon"]) for r in map(json.loads, ROWS.read_text().splitlines())}
    RESULTS.mkdir(exist_ok=True)
    for model in models:
        cell = {"model": model, "label": "auto", "start": "private"}
        for eps in epsilons:
            if (model, eps) in done:
                continue
            t = time.process_time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    row, _, _ = _run_grid_run(cfg, cell, eps, 0, False, False)
                except ValueError as err:  # a refusal after the start (recorded, not hidden)
                    row = {"status": f"ValueError: {err}"}
            out = {"model": model, "epsilon": eps, **{k: row.get(k) for k in KEEP},
                   "cpu_s": time.process_time() - t}
            with ROWS.open("a") as fh:
                fh.write(json.dumps(out, default=float) + "\n")
            print(json.dumps(out, default=float), flush=True)


def markdown() -> str:
    rows = [json.loads(x) for x in ROWS.read_text().splitlines()]
    date = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    lines = ["# Held-out check of `algorithm=\"auto\"`: the thesis-comparison models", "",
             f"{date}, {platform.machine()}, Python {platform.python_version()}. "
             "`thesis-comparison`'s runner, data, seeds and evaluation (MMD against 1000 exact "
             "draws, 50-point median bandwidth, one run per ε); `auto` with its defaults (4 "
             "chains), only the tuned DP-HMC's `clip`/`grad_clip` declared. Compare with the "
             "stored figures (the thesis' samplers: 20 chains from the truth) "
             "(docs/figures/thesis-comparison/fig6_3_mmd_banana.png, fig6_4_mmd_hard.png).", "",
             "| model | ε | mode | chains × iterations | MMD | exact-sample MMD | mean error | "
             "max R-hat | CPU s |", "|---|---|---|---|---|---|---|---|---|"]

    def f(v, p=3):
        return "—" if v is None else f"{v:.{p}f}"

    for r in sorted(rows, key=lambda r: (r["model"], r["epsilon"])):
        # a run that did not finish has its status in the mode column and no figures
        done = r.get("mmd") is not None
        cells = [r["model"], f"{r['epsilon']:g}", r.get("auto_mode") if done else r.get("status"),
                 f"{r.get('chains')} × {r.get('iterations')}" if done else "",
                 *((f(r.get(k)) if done else "")
                   for k in ("mmd", "mmd_exact_baseline", "mean_error", "rhat_max")),
                 f"{r['cpu_s']:.0f}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    from dpmcmc.experiments import thesis

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[2.0, 4.0, 6.0])
    ap.add_argument("--models", nargs="+", default=list(thesis.config(False)["models"]))
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args()
    if not args.summary_only:
        run(args.models, args.epsilons)
    (RESULTS / "auto_heldout.md").write_text(markdown())
    print(markdown())


if __name__ == "__main__":
    main()
