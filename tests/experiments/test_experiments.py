"""dpmcmc.experiments: every quick run writes its table, figures and report; the sweep goes
through Snakemake and skips finished cells; the MMD detects a 0.5-sd shift."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpmcmc import experiments as E
from dpmcmc.diagnostics import mmd_test

SRC = str(Path(__file__).resolve().parents[2] / "src")


# The experiment the fixture runs through the CLI and Snakemake (the cheapest: no sampling).
SNAKEMAKE_RUN = "accounting"


def _snakemake_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("snakemake") is not None


# The in-process quick runs of the default suite. The dphmc-paper quick run (the costliest:
# four samplers x two starts, ~10 CPU-s) is a `slow` case: its sweep runner, table columns and
# start labels are those of thesis-comparison's (the same ``_sweep`` grid, private and paper
# starts), which the default run checks; its own cells are read by
# test_a_cell_runs_each_repeat_with_the_key_and_start_of_that_repeat through the same runner.
# The cheapest quick run (accounting: no sampling) stays in the default suite: the pipeline
# (cell ids, cell runner, cell files, aggregate, figures, report) is one for all. barker's quick
# run (five sampling cells) is slow too: the cell runner's sampling path is test_a_cell_runs_...'s
# (slow) and, in the default run, the samplers' own tests through the same ``dpmcmc.sample``.
SLOW_RUNS = ("dphmc-paper", "thesis-comparison", "clipping", "barker")


class _QuickRuns(dict):
    """``name -> (folder, result)`` of each quick experiment, run the first time a test asks for
    it (a slow experiment is run only where its slow tests are selected): SNAKEMAKE_RUN through
    ``dpmcmc reproduce`` (Snakemake, one CLI job per cell; its result is ``None``), the others
    in-process (the same cell runner Snakemake calls). Without Snakemake every experiment runs
    in-process."""

    def __init__(self, tmp_path_factory, snakemake: bool):
        super().__init__()
        self._tmp = tmp_path_factory
        self._snakemake = snakemake

    def __missing__(self, name):
        d = self._tmp.mktemp(name)
        if name == SNAKEMAKE_RUN and self._snakemake and _snakemake_installed():
            r = _cli("reproduce", name, "--quick", "--out", str(d), "--cores", "2")
            assert r.returncode == 0, r.stderr[-2000:]
            self[name] = (d, None)
        else:
            self[name] = (d, E.reproduce(name, quick=True, out=d, engine="inprocess"))
        return self[name]


@pytest.fixture(scope="session")
def quick_runs(tmp_path_factory, request):
    """Each quick experiment run once per session, on demand (see :class:`_QuickRuns`). Sharing
    the Snakemake run with test_cli_reproduce_through_snakemake_and_skip_on_rerun saves running
    that experiment twice; where that (slow) test is not selected, SNAKEMAKE_RUN runs in-process
    like the others (its Snakemake jobs are one Python + JAX start per cell)."""
    snakemake = any(item.originalname == "test_cli_reproduce_through_snakemake_and_skip_on_rerun"
                    for item in request.session.items)
    return _QuickRuns(tmp_path_factory, snakemake)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_RUNS else n
                                  for n in E.EXPERIMENTS])
def test_quick_run_writes_table_figures_report(quick_runs, name):
    d, res = quick_runs[name]
    mod = E.get(name)
    df = pd.read_csv(d / "results.csv")
    # One result file per cell of the quick grid, and every cell contributes its rows.
    ids = E.cell_ids(name, quick=True)
    assert sorted(p.stem for p in (d / "cells").glob("*.json")) == sorted(ids)
    assert set(df["cell"]) == set(ids)
    figs = sorted((d / "figures").iterdir())
    assert figs and {p.suffix for p in figs} == {".png", ".pdf"}
    assert all(p.stat().st_size > 1000 for p in figs)
    report = (d / "report.md").read_text()
    for fig in mod.FIGURES:  # the report names the paper's figures
        assert fig in report
    assert "QUICK" in report and "## Findings" in report and "machine:" in report


def _check_sampling_table(d, name):
    df = pd.read_csv(d / "results.csv")
    cfg = E.get(name).config(True)
    # A cell runs every repeat of one (model, alg, ε, start): one row per run.
    assert len(df) == len(E.cell_ids(name, True)) * cfg["repeats"]
    assert df.run.is_unique
    assert set(df.start) == {"paper", "private"}
    assert df[df.start == "paper"].start_label.str.startswith("NON-PRIVATE").all()
    private = df[(df.start == "private") & df.epsilon.notna()]
    # Every private run states the ε it spent, within its budget.
    assert (private.epsilon_spent <= private.epsilon * (1 + 1e-9)).all()
    # auto plans its own run (quick mode does not cut it; its approximation's "iterations" are
    # draws per chain): its line is checked by tests/samplers/test_auto.py.
    assert (df[df.algorithm != "auto"].iterations <= cfg["max_iterations"]).all()
    assert np.isfinite(df.mmd).all()


@pytest.mark.slow  # two more quick runs (thesis-comparison, clipping); the pipeline: accounting's
def test_sampling_tables_have_one_row_per_run_and_label_starts(quick_runs):
    _check_sampling_table(quick_runs["thesis-comparison"][0], "thesis-comparison")
    d, _ = quick_runs["clipping"]
    df = pd.read_csv(d / "results.csv")
    cfg = E.get("clipping").config(True)
    assert len(df) == len(E.cell_ids("clipping", True)) * cfg["repeats"]  # a row per repeat
    # The tight bound clips more than the loose one, for each algorithm and start.
    frac = df.groupby(["algorithm", "start", "clip"]).nonprivate_clip_fraction.mean().unstack()
    assert (frac[0.5] > frac[1000.0]).all()


@pytest.mark.slow  # the same checks on thesis-comparison's table are the default run's
def test_dphmc_paper_table_has_one_row_per_run_and_labels_starts(quick_runs):
    _check_sampling_table(quick_runs["dphmc-paper"][0], "dphmc-paper")


@pytest.mark.slow  # thesis-comparison's quick run and two more cells
def test_a_cell_runs_each_repeat_with_the_key_and_start_of_that_repeat(quick_runs):
    # Grouping the repeats into one cell (one process) must not change any run: a run's key and
    # starting points depend on the run, not on the cell it is run in. (thesis-comparison: the
    # sweep runner of dphmc-paper's cells too, on the program its quick run compiled.)
    quick_runs["thesis-comparison"]
    mod = E.get("thesis-comparison")
    two = mod.config(True)
    two["repeats"] = 2
    one = mod.config(True)
    pick = [c for c in mod.cells(two) if c["label"] == "dp-penalty-gw" and c["start"] == "paper"]
    rows2 = mod.run_cell(two, pick[0])["rows"]
    assert [r["repeat"] for r in rows2] == [0, 1]
    assert rows2[0]["run"] != rows2[1]["run"] and rows2[0]["mmd"] != rows2[1]["mmd"]
    (cell1,) = [c for c in mod.cells(one) if c["id"] == pick[0]["id"]]
    (row1,) = mod.run_cell(one, cell1)["rows"]
    for col in ("run", "iterations", "epsilon_spent", "mmd", "mean_error", "acceptance"):
        assert row1[col] == rows2[0][col], col


def test_accounting_experiment_matches_the_accountant_and_orders_bounds(quick_runs):
    import dpmcmc

    d, _ = quick_runs["accounting"]
    df = pd.read_csv(d / "results.csv")
    cfg = E.get("accounting").config(True)
    assert len(df) == sum(len(a["accountants"]) for a in cfg["algorithms"].values()) * len(cfg["epsilons"])
    row = df[(df.algorithm == "dp-penalty") & (df.accountant == "pld") & (df.epsilon == 6.0)].iloc[0]
    assert row.iterations == dpmcmc.accounting.max_iterations("dp-penalty", 6.0, 1e-6, 100000, chains=1, tau=0.1)
    for alg, loose in (("dp-penalty", "zcdp"), ("dp-hmc", "zcdp"), ("minibatch-penalty", "rdp")):
        g = df[df.algorithm == alg]
        tight = g[(g.accountant == "pld") & (g.relation == "substitute")].iterations.values
        assert (tight >= g[g.accountant == loose].iterations.values).all()  # 001 Fig. 6.1
    mb = df[(df.algorithm == "minibatch-penalty") & (df.accountant == "pld")]
    valid = mb[mb.relation == "substitute"].iterations.values
    legacy = mb[mb.relation == "substitute-legacy"].iterations.values
    assert (valid < legacy).all()  # the valid pair allows fewer iterations than the papers' pair


def test_inprocess_rerun_skips_finished_cells_and_refuses_a_stale_one(quick_runs, tmp_path,
                                                                      monkeypatch):
    # The fixture's in-process run of an experiment ran every cell; a second run into a folder
    # holding its cell files finds them all finished (and aggregates them). Run on a copy of the
    # cell files, which the stale-file check below then edits: one aggregate step for both
    # checks, without its figures (~1 CPU-s of rendering; the figures the aggregate step writes
    # are test_quick_run_writes_table_figures_report's).
    import shutil

    d, first = quick_runs["accounting"]  # (run before the patch: its figures are checked)
    monkeypatch.setattr(E.get("accounting"), "figures", lambda df, cfg, extras, save: None)
    if first is not None:  # None where the slow Snakemake test had it run through Snakemake
        assert sorted(first["cells_run"]) == sorted(E.cell_ids("accounting", True))
    shutil.copytree(d / "cells", tmp_path / "cells")
    again = E.reproduce("accounting", quick=True, out=tmp_path, engine="inprocess")
    assert again["cells_run"] == []
    assert (tmp_path / "results.csv").is_file()  # the untouched copy aggregates
    # Snakemake skips any cell whose file exists: one written for another version of the cell
    # (here: other settings) must stop the aggregate step instead of being mixed in.
    path = sorted((tmp_path / "cells").glob("*.json"))[0]
    payload = json.loads(path.read_text())
    payload["spec"]["stale"] = True
    path.write_text(json.dumps(payload))
    with pytest.raises(ValueError, match="delete it and rerun"):
        E.aggregate("accounting", True, tmp_path)


def test_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="experiment"):
        E.cell_ids("nope")
    with pytest.raises(ValueError, match="engine"):
        E.reproduce("accounting", quick=False, out=tmp_path, engine="inprocess")
    with pytest.raises(ValueError, match="cores"):
        E.reproduce("accounting", quick=True, out=tmp_path, cores=0)
    with pytest.raises(ValueError, match="cell"):
        E.run_cell("accounting", "no_such_cell", True, tmp_path / "x.json")
    with pytest.raises(FileNotFoundError, match="missing"):
        E.aggregate("accounting", True, tmp_path / "empty")


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "dpmcmc.cli", *args], capture_output=True, text=True,
                          env=env, **kw)


# slow: Snakemake starts one Python + JAX per cell (~20 CPU-s); the default run checks the same
# pipeline in-process (test_quick_run_writes_table_figures_report[accounting],
# test_inprocess_rerun_skips_finished_cells) and the CLI's reproduce command
# (test_cli_reproduce_rejects_unknown_experiment).
@pytest.mark.slow
def test_cli_reproduce_through_snakemake_and_skip_on_rerun(quick_runs):
    pytest.importorskip("snakemake")
    # The fixture ran SNAKEMAKE_RUN through `dpmcmc reproduce` (Snakemake): one cell file per
    # cell, written by the CLI's cell jobs (not by an in-process run: that returns a result).
    out, result = quick_runs[SNAKEMAKE_RUN]
    assert result is None
    assert (out / ".snakemake").is_dir()
    assert {p.stem for p in (out / "logs").glob("*.log")} >= set(E.cell_ids(SNAKEMAKE_RUN, True))
    cells = {p: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")}
    assert len(cells) == len(E.cell_ids(SNAKEMAKE_RUN, True))
    payload = json.loads(next(iter(cells)).read_text())
    assert payload["rows"] and payload["cpu_s"] >= 0
    r = _cli("reproduce", SNAKEMAKE_RUN, "--quick", "--out", str(out), "--cores", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert {p: p.stat().st_mtime_ns for p in cells} == cells  # Snakemake found them up to date
    assert (out / "report.md").is_file()


def test_cli_reproduce_rejects_unknown_experiment():
    # In-process (typer's runner): the command's exit status and message; a child process
    # (~1 CPU-s of Python start-up) runs the same command in the slow Snakemake test.
    from typer.testing import CliRunner

    from dpmcmc.cli import app

    r = CliRunner().invoke(app, ["reproduce", "nope", "--quick", "--engine", "inprocess"])
    assert r.exit_code == 2 and "experiment must be one of" in r.output


def test_mmd_detects_half_sd_mean_shift():  # slow: tests/suite_budget.py
    # 1000 points per side, a 0.5-sd shift in one coordinate: population MMD^2 ≈ 0.02 with the
    # median bandwidth, ~10 null standard deviations. Detected at alpha = 0.01 for all 5 seeds;
    # the same-distribution control is flagged at most once (P(>= 2 of 5 at 0.01) < 1e-3).
    hits, false = 0, 0
    for s in range(5):
        rng = np.random.default_rng(500 + s)
        x, y = rng.normal(size=(1000, 2)), rng.normal(size=(1000, 2))
        hits += mmd_test(x, y + [0.5, 0.0], seed=s, num_permutations=99).p_value <= 0.01
        false += mmd_test(x, rng.normal(size=(1000, 2)), seed=s, num_permutations=99).p_value <= 0.01
    assert hits == 5
    assert false <= 1
