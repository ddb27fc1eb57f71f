"""Reproductions of the papers' experiments, as a Snakemake sweep over the ``dpmcmc`` CLI.

Each experiment is a module with a declarative ``config(quick)`` (models, algorithms, tuned
parameters with their sources, ε grid, δ, chains, repeats, start modes), a list of ``cells``
(one cell = one small job), ``run_cell`` (one cell → rows of the results table), and the
``figures`` and ``findings`` of the aggregate step.

==========================  =================================================================
name                        reproduces
==========================  =================================================================
``accounting``              001 Fig. 6.1 (iterations allowed vs ε per accountant)
``clipping``                000 Fig. 3, 001 Fig. 6.2 (MMD vs clip bound, no noise)
``dphmc-paper``             000 Figs 1–2 (DP-HMC, DP penalty, DP-SGLD, DP-SGNHT)
``thesis-comparison``       001 Figs 6.3–6.8 (all samplers on the Table 5.1 models)
``barker``                  002 Fig. 4 and Figs 5–6 (DP Barker correction, GMM experiment)
==========================  =================================================================

Layout of an output directory ``OUT``: ``OUT/cells/<cell>.json`` (one per cell, written by
``dpmcmc experiment-cell``), then ``OUT/results.csv`` (one row per run), ``OUT/figures/*.png``
and ``*.pdf`` and ``OUT/report.md`` (written by ``dpmcmc experiment-aggregate``). The sweep is
``dpmcmc reproduce NAME`` (Snakemake, see :func:`reproduce`).

Start modes. Every sampling experiment runs twice: ``paper`` (the papers' starts near the true
parameters — they read the truth behind the data and are labelled NON-PRIVATE in every output)
and ``private`` (the library's private initialisation, ``theta0="private"``, where the sampler
supports it, else its data-independent default; :func:`dpmcmc.experiments._common.private_start`
decides which).
"""
from __future__ import annotations

import datetime as _dt
import importlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional

__all__ = ["EXPERIMENTS", "get", "cell_ids", "run_cell", "aggregate", "reproduce", "snakefile_path",
           "SnakemakeMissing"]

#: Experiment name -> module (relative to this package).
EXPERIMENTS = {
    "accounting": "accounting_exp",
    "clipping": "clipping",
    "dphmc-paper": "dphmc_paper",
    "thesis-comparison": "thesis",
    "barker": "barker_exp",
}

_INSTALL_HINT = ("`dpmcmc reproduce` runs its sweep with Snakemake, an optional extra: "
                 "pip install 'dpmcmc[experiments]' (or: pip install 'snakemake>=9' pandas)")


class SnakemakeMissing(RuntimeError):
    """Snakemake (the optional ``experiments`` extra) is not installed."""


def get(name: str):
    """The module of experiment ``name``; ValueError naming the argument if unknown."""
    if not isinstance(name, str) or name not in EXPERIMENTS:
        raise ValueError(f"experiment must be one of {', '.join(EXPERIMENTS)}, got {name!r}")
    return importlib.import_module(f"{__name__}.{EXPERIMENTS[name]}")


def _config(name: str, quick: bool) -> dict:
    if not isinstance(quick, bool):
        raise TypeError(f"quick must be True or False, got {quick!r}")
    return get(name).config(quick)


def cell_ids(name: str, quick: bool = False) -> list[str]:
    """The ids of the experiment's cells (one Snakemake job each)."""
    mod = get(name)
    ids = [c["id"] for c in mod.cells(_config(name, quick))]
    if len(set(ids)) != len(ids):  # a config bug, not user input
        raise AssertionError(f"duplicate cell ids in experiment {name}")
    return ids


def _write_json(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, default=_jsonable))
    os.replace(tmp, path)  # atomic: Snakemake never sees a half-written output


def _jsonable(obj):
    import numpy as np

    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def run_cell(name: str, cell: str, quick: bool, out: str | os.PathLike) -> Path:
    """Run one cell and write its result file ``out`` (JSON: rows, extras, wall and CPU time).

    Parameters
    ----------
    name : str
        Experiment name (see :data:`EXPERIMENTS`).
    cell : str
        One of :func:`cell_ids` ``(name, quick)``.
    quick : bool
        The quick (CI) configuration.
    out : path
        Result file to write.
    """
    mod = get(name)
    cfg = _config(name, quick)
    cells = {c["id"]: c for c in mod.cells(cfg)}
    if cell not in cells:
        raise ValueError(f"cell must be one of the {len(cells)} cells of {name} "
                         f"({'quick' if quick else 'full'}), got {cell!r}")
    t0, c0 = time.perf_counter(), time.process_time()
    result = mod.run_cell(cfg, cells[cell])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rows = []
    for r in result["rows"]:
        row = {"experiment": name, "cell": cell, "quick": quick}
        row.update(r)
        rows.append(row)
    payload = {"experiment": name, "cell": cell, "quick": quick, "spec": cells[cell], "rows": rows,
               "extras": result.get("extras", {}), "wall_s": wall, "cpu_s": cpu,
               "finished": time.time()}
    out = Path(out)
    _write_json(out, payload)
    return out


def _machine() -> str:
    return f"{platform.node() or 'unknown host'} ({platform.machine()}, {os.cpu_count()} CPUs, " \
           f"{platform.system()} {platform.release()}, Python {platform.python_version()})"


def aggregate(name: str, quick: bool, out: str | os.PathLike) -> dict:
    """Build ``results.csv``, the figures and ``report.md`` from the cell files under ``out``.

    Returns a dict with the paths written and the summed cell CPU/wall time.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    mod = get(name)
    cfg = _config(name, quick)
    out = Path(out)
    ids = cell_ids(name, quick)
    missing = [c for c in ids if not (out / "cells" / f"{c}.json").is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} cell result(s) missing under {out / 'cells'}, "
                                f"e.g. {missing[0]}.json; run them first (dpmcmc reproduce {name})")
    t0 = time.perf_counter()
    rows, extras, wall, cpu = [], {}, 0.0, 0.0
    first_start, last_end = float("inf"), 0.0
    specs = {c["id"]: json.loads(json.dumps(c, default=_jsonable)) for c in mod.cells(cfg)}
    for c in ids:
        path = out / "cells" / f"{c}.json"
        payload = json.loads(path.read_text())
        # Snakemake reruns a cell only when its file is missing: a file written for another
        # version of the cell (e.g. fewer repeats) must not be mixed in silently.
        if "spec" in payload and payload["spec"] != specs[c]:
            raise ValueError(f"{path} was computed for cell {payload['spec']}, but the configuration "
                             f"now defines {specs[c]}; delete it and rerun")
        rows.extend(payload["rows"])
        extras[c] = payload.get("extras", {})
        wall += payload["wall_s"]
        cpu += payload["cpu_s"]
        # Older cell files carry no end time: their modification time is when they were written.
        end = payload.get("finished", path.stat().st_mtime)
        first_start, last_end = min(first_start, end - payload["wall_s"]), max(last_end, end)
    df = pd.DataFrame(rows)
    for col in df.columns:  # nested settings as JSON text, so the CSV round-trips
        if df[col].map(lambda v: isinstance(v, (dict, list))).any():
            df[col] = df[col].map(lambda v: json.dumps(v) if isinstance(v, (dict, list)) else v)
    table = out / "results.csv"
    df.to_csv(table, index=False)

    figdir = out / "figures"
    figdir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def save(fig, stem: str) -> None:
        for ext in ("png", "pdf"):
            path = figdir / f"{stem}.{ext}"
            fig.savefig(path, dpi=120)
            written.append(path)
        plt.close(fig)

    mod.figures(df, cfg, extras, save)
    findings = mod.findings(df, cfg)
    agg_wall = time.perf_counter() - t0
    report = out / "report.md"
    span = (first_start, last_end)
    report.write_text(_report(mod, cfg, df, findings, written, out, wall, cpu, agg_wall, span))
    return {"table": table, "figures": written, "report": report, "cells_wall_s": wall,
            "cells_cpu_s": cpu, "aggregate_wall_s": agg_wall}


def _stamp(t: float) -> str:
    return _dt.datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def _report(mod, cfg, df, findings, written, out, wall, cpu, agg_wall, span) -> str:
    mode = "QUICK (CI smoke run: tiny n, few iterations; its numbers do not reproduce the paper)" \
        if cfg["quick"] else "full"
    lines = [
        f"# `{mod.NAME}`: {mod.TITLE}",
        "",
        f"Reproduces **{mod.PAPER}** ({', '.join(mod.FIGURES)}).",
        "",
        f"- mode: {mode}",
        f"- date: {_dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {_machine()}",
        f"- wall time: {wall:.1f} s in {len(set(df['cell']))} cells (sum over cells; CPU {cpu:.1f} s)"
        f" + {agg_wall:.1f} s aggregate",
        f"- elapsed: first cell started {_stamp(span[0])}, last cell finished {_stamp(span[1])} "
        f"({_duration(span[1] - span[0])}, including time between resumed runs)",
        f"- results table: `{(out / 'results.csv').name}` ({len(df)} rows, one per run)",
        f"- figures: {', '.join(f'`figures/{p.name}`' for p in written)}",
        "",
    ]
    if "start" in df.columns:
        from ._common import START_LABELS

        lines += ["**Start modes** (column `start`; both are reported):", ""]
        lines += [f"- `{k}`: {v}" for k, v in START_LABELS.items()]
        lines += ["", "Columns named `nonprivate_*` are computed from the raw data (clip "
                  "fractions, acceptance): NOT covered by any guarantee, for evaluation only.", ""]
    lines += ["## Findings", "", findings, "", "## Configuration", "", "```json",
              json.dumps(cfg, indent=1, default=_jsonable), "```", ""]
    return "\n".join(lines)


def snakefile_path() -> Path:
    """The packaged Snakefile that ``dpmcmc reproduce`` runs."""
    return Path(__file__).with_name("Snakefile")


def _snakemake_available() -> bool:
    return importlib.util.find_spec("snakemake") is not None


def reproduce(name: str, quick: bool = False, out: Optional[str | os.PathLike] = None,
              cores: int = 1, engine: str = "snakemake", snakemake_args: tuple = ()) -> dict:
    """Run an experiment's sweep and aggregate step.

    Parameters
    ----------
    name : str
        One of :data:`EXPERIMENTS`.
    quick : bool
        The quick configuration (small n, few iterations, ε values and repeats).
    out : path, optional
        Output directory (default ``results/<name>[-quick]``).
    cores : int
        Snakemake ``--cores``: cells run in parallel locally.
    engine : {"snakemake", "inprocess"}
        ``snakemake`` (always for full runs): one CLI process per cell, reruns skip finished
        cells by Snakemake's up-to-date logic. ``inprocess`` (``--quick`` only): the same cell
        runner in this process, sequentially, skipping cells whose result file exists; it saves
        the per-job interpreter and JAX start-up of the CI smoke runs.
    snakemake_args : tuple of str
        Extra Snakemake arguments, e.g. ``("--executor", "slurm")``.
    """
    get(name)
    if engine not in ("snakemake", "inprocess"):
        raise ValueError(f"engine must be 'snakemake' or 'inprocess', got {engine!r}")
    if engine == "inprocess" and not quick:
        raise ValueError("engine='inprocess' is for quick runs only; full runs go through Snakemake")
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be a positive integer, got {cores!r}")
    out = Path(out if out is not None else Path("results") / (name + ("-quick" if quick else "")))
    out.mkdir(parents=True, exist_ok=True)
    if engine == "inprocess":
        ran = []
        for c in cell_ids(name, quick):
            path = out / "cells" / f"{c}.json"
            if not path.is_file():
                run_cell(name, c, quick, path)
                ran.append(c)
        res = aggregate(name, quick, out)
        res["cells_run"] = ran
        return res
    if not _snakemake_available():
        raise SnakemakeMissing(_INSTALL_HINT)
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(snakefile_path()),
           "--directory", str(out), "--cores", str(cores),
           "--config", f"experiment={name}", f"quick={int(quick)}", f"python={sys.executable}",
           *snakemake_args]
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake failed with exit status {proc.returncode}: {' '.join(cmd)}")
    return {"table": out / "results.csv", "report": out / "report.md", "figures": sorted((out / "figures").glob("*"))}
