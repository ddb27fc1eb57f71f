"""The ``dpmcmc`` command line.

``dpmcmc budget`` answers "how many iterations does my (ε, δ) budget allow?" (or, with
``--iterations``, "what does this run spend?") from :mod:`dpmcmc.accounting`. Importing this
module never imports JAX (``dpmcmc --help`` stays fast); running ``budget`` does, once, when
the accountant reads the algorithm's release declaration from its spec in ``dpmcmc.samplers``.
Further commands register themselves on :data:`app`.
"""
from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from . import accounting

__all__ = ["app", "main"]

app = typer.Typer(
    name="dpmcmc",
    help="Differentially private Bayesian inference with MCMC.",
    no_args_is_help=True,
    add_completion=False,
)

_LEGACY_NOTE = (
    "WARNING: substitute-legacy is the papers' pair, not an upper bound for fixed-size batches; "
    "δ may be understated."
)


@app.callback()
def _root() -> None:
    """Differentially private Bayesian inference with MCMC."""


def _fail(message: str) -> None:
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(code=2)


def _algorithm_params(algorithm: str, given: dict) -> dict:
    """The options the algorithm takes; reject options given for another algorithm."""
    required, optional = accounting.algorithm_params(algorithm)
    takes = set(required) | set(optional)
    stray = sorted(k for k, v in given.items() if v is not None and k not in takes)
    if stray:
        flags = ", ".join("--" + k.replace("_", "-") for k in stray)
        _fail(f"{flags} do(es) not apply to --algorithm {algorithm} (it takes "
              f"{', '.join('--' + k.replace('_', '-') for k in required + optional)})")
    missing = [k for k in required if given.get(k) is None]
    if missing:
        _fail(f"--algorithm {algorithm} needs {', '.join('--' + k.replace('_', '-') for k in missing)}")
    return {k: v for k, v in given.items() if k in takes and v is not None}


def _compare(algorithm, epsilon, delta, n, chains, iterations, relation, params, as_json: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    supported = accounting.supported_accountants(algorithm)
    rows: dict[str, Optional[float]] = {}
    notes: dict[str, str] = {}
    for acc in accounting.ACCOUNTANTS:
        if acc not in supported:
            rows[acc], notes[acc] = None, "not applicable"
            continue
        if relation not in accounting.supported_relations(algorithm, acc):
            rows[acc], notes[acc] = None, f"relation {relation} not applicable"
            continue
        try:
            if iterations is None:
                rows[acc] = accounting.max_iterations(
                    algorithm, epsilon, delta, n, chains=chains, accountant=acc, relation=relation, **params
                )
            else:
                rows[acc] = accounting.spent(
                    algorithm, iterations, delta, n, chains=chains, accountant=acc, relation=relation, **params
                ).epsilon
            notes[acc] = ""
        except accounting.BudgetTooSmall:
            rows[acc], notes[acc] = 0, "budget too small for one iteration"
    key = "iterations_per_chain" if iterations is None else "epsilon"
    if as_json:
        out = {"algorithm": algorithm, "delta": delta, "n": n, "chains": chains, "relation": relation,
               "params": params, key: rows}
        out["epsilon" if iterations is None else "iterations"] = epsilon if iterations is None else iterations
        typer.echo(json.dumps(out))
        return
    title = (
        f"{algorithm}: iterations per chain within ε = {epsilon:g}, δ = {delta:g} ({chains} chain(s), n = {n})"
        if iterations is None
        else f"{algorithm}: ε spent at δ = {delta:g} by {chains} chain(s) × {iterations} iterations (n = {n})"
    )
    typer.echo(title)
    typer.echo(f"neighbouring relation: {relation}")
    if relation == "substitute-legacy":
        typer.echo(_LEGACY_NOTE)
    table = Table()
    table.add_column("accountant")
    table.add_column("iterations per chain" if iterations is None else "ε", justify="right")
    table.add_column("note")
    for acc, value in rows.items():
        shown = "—" if value is None else (str(value) if iterations is None else f"{value:.6g}")
        table.add_row(acc, shown, notes[acc])
    Console(file=sys.stdout, width=120).print(table)


@app.command()
def budget(
    algorithm: str = typer.Option(..., "--algorithm", "-a", help="A private algorithm, e.g. dp-penalty or dp-hmc (an unknown name lists them)."),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="ε of the whole run (all chains)."),
    delta: float = typer.Option(..., "--delta", help="δ of the guarantee, e.g. 0.1/n."),
    n: int = typer.Option(..., "--n", help="Number of records in the data set."),
    chains: int = typer.Option(4, "--chains", help="Number of chains (their costs compose); default 4, as dpmcmc sample."),
    accountant: Optional[str] = typer.Option(
        None, "--accountant",
        help="pld, rdp, zcdp or rdp-direct (dp-barker). Default: the tightest that applies "
        "(pld; rdp-direct for dp-barker, whose rdp is 002 Thm 2 as published).",
    ),
    relation: str = typer.Option(
        accounting.RELATION,
        "--relation",
        help="Neighbouring relation: substitute (valid bound) or substitute-legacy (the papers' "
        "subsampled-Gaussian pair, pld only; may understate δ, for reproducing published numbers).",
    ),
    iterations: Optional[int] = typer.Option(
        None, "--iterations", help="Report the ε that this many iterations per chain spend instead."
    ),
    tau: Optional[float] = typer.Option(None, "--tau", help="dp-penalty, minibatch-penalty: noise parameter τ."),
    tau_l: Optional[float] = typer.Option(None, "--tau-l", help="dp-hmc: τ of the log-likelihood ratio."),
    tau_g: Optional[float] = typer.Option(None, "--tau-g", help="dp-hmc: τ of the gradients."),
    leapfrog_steps: Optional[int] = typer.Option(None, "--leapfrog-steps", help="dp-hmc: leapfrog steps L."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Minibatch size (subsampled algorithms)."),
    noise_multiplier: Optional[float] = typer.Option(
        None, "--noise-multiplier", help="dp-sgld, dp-sgnht: noise std / per-example clip bound."
    ),
    n0: Optional[float] = typer.Option(None, "--n0", help="dp-barker: tempering n₀ (clip bound √b/n₀)."),
    family: Optional[str] = typer.Option(None, "--family", help="noise-aware-glm: logistic, linear or poisson."),
    dim: Optional[int] = typer.Option(None, "--dim", help="noise-aware-glm: coefficients, intercept included."),
    count_cap: Optional[int] = typer.Option(
        None, "--count-cap", help="noise-aware-glm, --family poisson: the declared cap C of the counts."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    compare: bool = typer.Option(False, "--compare", help="Compare all accountants in a table."),
) -> None:
    """Iterations per chain an (ε, δ) budget allows, and the privacy report (noise-aware-glm:
    how its releases split the budget)."""
    if algorithm not in accounting.ALGORITHMS:
        _fail(f"--algorithm must be one of {', '.join(accounting.ALGORITHMS)}, got {algorithm!r}")
    from .samplers import ALGORITHMS

    if ALGORITHMS[algorithm].one_shot:
        _one_shot_budget(algorithm, epsilon, delta, n, chains, accountant, family, dim, as_json,
                         count_cap)
        return
    if (epsilon is None) == (iterations is None):
        _fail("give exactly one of --epsilon (iterations the budget allows) and --iterations (ε spent)")
    given = dict(tau=tau, tau_l=tau_l, tau_g=tau_g, leapfrog_steps=leapfrog_steps, batch_size=batch_size,
                 noise_multiplier=noise_multiplier, n0=n0)
    params = _algorithm_params(algorithm, given)
    if accountant is None:
        accountant = accounting.supported_accountants(algorithm)[0]
    if relation not in accounting.RELATIONS:
        _fail(f"--relation must be one of {', '.join(accounting.RELATIONS)}, got {relation!r}")
    if compare and not any(
        relation in accounting.supported_relations(algorithm, acc) for acc in accounting.supported_accountants(algorithm)
    ):
        _fail(f"--relation {relation} does not apply to --algorithm {algorithm} with any accountant")
    try:
        if compare:
            _compare(algorithm, epsilon, delta, n, chains, iterations, relation, params, as_json)
            return
        k = iterations
        if k is None:
            k = accounting.max_iterations(
                algorithm, epsilon, delta, n, chains=chains, accountant=accountant, relation=relation, **params
            )
        report = accounting.spent(
            algorithm, k, delta, n, chains=chains, accountant=accountant, relation=relation, **params
        )
    except (ValueError, TypeError) as err:
        _fail(str(err))
    if as_json:
        out = {"iterations_per_chain": k, "report": report.to_dict()}
        if iterations is None:
            out["epsilon_budget"] = epsilon
        typer.echo(json.dumps(out))
        return
    if iterations is None:
        typer.echo(f"Iterations per chain: {k}  (budget ε = {epsilon:g}, δ = {delta:g}, {chains} chain(s))")
    typer.echo(str(report))


def _one_shot_budget(algorithm, epsilon, delta, n, chains, accountant, family, dim, as_json,
                     count_cap=None) -> None:
    """``dpmcmc budget`` for a one-shot algorithm: its releases split the whole budget."""
    from ._plan import plan

    if epsilon is None:
        _fail(f"--epsilon: {algorithm} splits a budget over its releases; give --epsilon")
    if family is None or dim is None:
        _fail(f"--family and --dim: {algorithm} needs the GLM family and its number of coefficients")
    extra = {} if count_cap is None else {"count_cap": count_cap}
    try:
        p = plan(dim, n, algorithm, epsilon=epsilon, delta=delta, chains=chains,
                 accountant=accountant, family=family, **extra)
    except (ValueError, TypeError) as err:
        _fail(str(err))
    if as_json:
        typer.echo(json.dumps({"iterations_per_chain": p.iterations, "epsilon_budget": epsilon,
                               "report": p.report.to_dict()}))
        return
    typer.echo(f"One set of releases splits the budget (ε = {epsilon:g}, δ = {delta:g}); "
               f"{chains} chain(s) of {p.iterations} independent draws cost nothing more")
    typer.echo(str(p.report))


@app.command("plan")
def plan_command(
    algorithm: str = typer.Option(..., "--algorithm", "-a", help="An algorithm, e.g. dp-hmc, dp-penalty, noise-aware-glm (-p family=logistic)."),
    n: int = typer.Option(..., "--n", help="Number of records in the data set."),
    dim: int = typer.Option(..., "--dim", help="Number of model parameters."),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="ε of the whole run (all chains)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ of the guarantee, e.g. 0.1/n."),
    chains: int = typer.Option(4, "--chains", help="Number of chains (their costs compose)."),
    iterations: Optional[int] = typer.Option(
        None, "--iterations", help="Iterations per chain (default: as many as the budget buys)."),
    accountant: Optional[str] = typer.Option(None, "--accountant", help="Default: the tightest that applies."),
    secure: bool = typer.Option(False, "--secure", help="Plan a secure-mode run (as dpmcmc sample --secure)."),
    force: bool = typer.Option(False, "--force", help="Plan as a forced run (delta >= 1/n accepted)."),
    param: list[str] = typer.Option(
        [], "--param", "-p",
        help="A sampler parameter as name=value (repeat), e.g. -p tau=0.1 -p clip=1 -p proposal_std=0.01; "
        "values are JSON (numbers, lists, strings)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """What a run would do, from public inputs only: iterations, noise next to the moves, warnings."""
    params = {}
    for item in param:
        name, sep, value = item.partition("=")
        if not sep or not name:
            _fail(f"--param must be name=value, got {item!r}")
        try:
            params[name.strip()] = json.loads(value)
        except ValueError:
            params[name.strip()] = value  # a bare string such as mode=one-component
    from ._plan import plan

    try:
        p = plan(dim, n, algorithm, epsilon=epsilon, delta=delta, chains=chains, iterations=iterations,
                 accountant=accountant, secure=secure, force=force, **params)
    except (ValueError, TypeError) as err:
        _fail(str(err))
    typer.echo(json.dumps(p.to_dict()) if as_json else str(p))


ledger_app = typer.Typer(help="A per-data-set privacy budget ledger (basic composition across runs).",
                         no_args_is_help=True)
app.add_typer(ledger_app, name="ledger")


@ledger_app.command("init")
def ledger_init(
    path: str = typer.Argument(..., help="The ledger file to create, e.g. hi.ledger.json."),
    epsilon: float = typer.Option(..., "--epsilon", help="Total ε the data set may spend over all runs."),
    delta: float = typer.Option(..., "--delta", help="Total δ the data set may spend over all runs."),
) -> None:
    """Create a ledger with a declared total budget."""
    import os

    from .ledger import Ledger, LedgerError

    if os.path.exists(path):
        _fail(f"{path!r} exists; a ledger's totals cannot be changed")
    try:
        led = Ledger(path, total_epsilon=epsilon, total_delta=delta)
    except (LedgerError, ValueError, TypeError) as err:
        _fail(str(err))
    typer.echo(repr(led))


@ledger_app.command("show")
def ledger_show(
    path: str = typer.Argument(..., help="The ledger file."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """What a ledger has spent and what remains."""
    from .ledger import LedgerError, open_ledger

    try:
        led = open_ledger(path)
    except (LedgerError, ValueError, TypeError) as err:
        _fail(str(err))
    if as_json:
        typer.echo(json.dumps({"total": led.total, "spent": led.spent, "remaining": led.remaining,
                               "runs": led.runs}))
        return
    typer.echo(repr(led))
    (re_, rd) = led.remaining
    typer.echo(f"remaining: ε = {re_:.6g}, δ = {rd:.3g} (basic composition: ε and δ add up)")
    for run in led.runs:
        typer.echo(f"  {run.get('time', '')}  ε = {run['epsilon']:.6g}  δ = {run['delta']:.3g}  {run.get('label', '')}")


@app.command("audit")
def audit_command(
    algorithm: str = typer.Argument(..., help="Private sampler to audit: dp-penalty, dp-hmc, dp-sgld, dp-sgnht, minibatch-penalty, dp-barker, or noise-aware-glm."),
    epsilon: Optional[float] = typer.Option(
        None, "--epsilon", help="ε the sampler is configured to claim for one audited run (default 3)."
    ),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ of the claim (default 1e-5)."),
    trials: Optional[int] = typer.Option(
        None, "--trials", help="Runs per neighbouring data set, half of them for calibration (default 1000000)."
    ),
    iterations: Optional[int] = typer.Option(
        None, "--iterations", help="Iterations per run (default 5 for dp-penalty and minibatch-penalty, 2 for dp-hmc, 3 for dp-sgld and dp-sgnht, 8 for dp-barker)."
    ),
    confidence: Optional[float] = typer.Option(None, "--confidence", help="Confidence of the bound (default 0.95)."),
    statistic: str = typer.Option(
        "releases", "--statistic", help="Test reported at top level: releases (accounted noisy statistics) or draws."
    ),
    seed: Optional[int] = typer.Option(
        None, "--seed", help="Seed for a reproducible audit (default: fresh OS entropy)."
    ),
    family: Optional[str] = typer.Option(
        None, "--family", help="noise-aware-glm only: the GLM family audited, linear (default), logistic or poisson."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Empirical privacy audit: a lower bound on ε from worst-case neighbouring data sets.

    Exit status 0 whether or not the sampler is flagged; read "flagged" in the output.
    """
    import jax

    # The audit runs its kernels and statistics in double precision for its own call
    # (jax.enable_x64 inside dpmcmc.audit.audit): no process-global setting here.
    from . import audit as _audit

    given = dict(epsilon=epsilon, delta=delta, trials=trials, iterations=iterations, confidence=confidence,
                 family=family)
    kwargs = {k: v for k, v in given.items() if v is not None}
    key = None
    if seed is not None:
        if seed < 0:
            _fail(f"--seed must be a non-negative integer, got {seed}")
        key = jax.random.key(seed)
    try:
        result = _audit.audit(algorithm, statistic=statistic, key=key, **kwargs)
    except (ValueError, TypeError) as err:
        _fail(str(err))
    if as_json:
        typer.echo(result.to_json())
        return
    typer.echo(str(result))


_EXPERIMENT_HELP = "accounting, clipping, dphmc-paper, thesis-comparison or barker."


@app.command("reproduce")
def reproduce_command(
    name: str = typer.Argument(..., help="Experiment: " + _EXPERIMENT_HELP),
    quick: bool = typer.Option(False, "--quick", help="Small CI version (tiny n, few iterations, ε values, repeats)."),
    out: Optional[str] = typer.Option(None, "--out", help="Output directory (default results/NAME[-quick])."),
    cores: int = typer.Option(1, "--cores", help="Cells run in parallel (Snakemake --cores)."),
    engine: str = typer.Option(
        "snakemake", "--engine",
        help="snakemake (one CLI job per cell; always for full runs) or inprocess (--quick only: "
        "the same cells, sequentially in this process, no per-job start-up).",
    ),
    snakemake_args: Optional[list[str]] = typer.Option(
        None, "--snakemake-arg", help="Extra Snakemake argument, repeatable (e.g. --snakemake-arg=--executor --snakemake-arg=slurm)."
    ),
) -> None:
    """Reproduce a paper's experiment: results table, figures (PNG, PDF) and report.md."""
    from . import experiments

    try:
        res = experiments.reproduce(name, quick=quick, out=out, cores=cores, engine=engine,
                                    snakemake_args=tuple(snakemake_args or ()))
    except experiments.SnakemakeMissing as err:
        _fail(f"{err}. Or, for a quick run only: --engine inprocess")
    except (ValueError, TypeError, RuntimeError) as err:
        _fail(str(err))
    typer.echo(f"table: {res['table']}\nreport: {res['report']}")


@app.command("experiment-cell")
def experiment_cell_command(
    name: str = typer.Argument(..., help="Experiment: " + _EXPERIMENT_HELP),
    cell: str = typer.Argument(..., help="Cell id (see dpmcmc.experiments.cell_ids)."),
    quick: bool = typer.Option(False, "--quick/--no-quick", help="Quick configuration."),
    out: str = typer.Option(..., "--out", help="Result file (JSON) to write."),
) -> None:
    """Run one cell of an experiment's sweep (called by the Snakefile)."""
    from . import experiments

    try:
        experiments.get(name)
        experiments.run_cell(name, cell, quick, out)
    except (ValueError, TypeError) as err:
        _fail(str(err))


@app.command("experiment-aggregate")
def experiment_aggregate_command(
    name: str = typer.Argument(..., help="Experiment: " + _EXPERIMENT_HELP),
    quick: bool = typer.Option(False, "--quick/--no-quick", help="Quick configuration."),
    out: str = typer.Option(..., "--out", help="Output directory holding cells/."),
) -> None:
    """Build an experiment's table, figures and report from its cell results (called by the Snakefile)."""
    from . import experiments

    try:
        experiments.aggregate(name, quick, out)
    except (ValueError, TypeError, FileNotFoundError) as err:
        _fail(str(err))


@app.command("sample")
def sample_command(
    data: str = typer.Argument(..., help="The table: a CSV (.csv) or Parquet (.parquet, .pq) file."),
    model: str = typer.Option(
        ..., "--model", help="logistic, linear or poisson (a count target declared [0, C], C the cap)."),
    target: str = typer.Option(..., "--target", help="Response column."),
    features: Optional[str] = typer.Option(
        None, "--features", help="Covariate columns, comma-separated (default: all but the target)."
    ),
    bounds: str = typer.Option(
        ..., "--bounds",
        help='JSON file of the declared, public schema: {"col": \\[lo, hi], "cat": {"categories": \\[...]}, ...} '
        '(optional "impute" per column; see docs/tabular.md).',
    ),
    epsilon: Optional[float] = typer.Option(None, "--epsilon", help="ε of the whole run (all chains)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ of the guarantee, e.g. 0.1/n."),
    algorithm: str = typer.Option(
        "auto", "--algorithm", "-a",
        help="auto (default: the noise-aware GLM, docs/tabular.md) or a sampler, e.g. dp-hmc."),
    chains: int = typer.Option(
        4, "--chains", help="Number of chains (samplers: their costs compose; auto: free draws)."),
    seed: Optional[int] = typer.Option(
        None, "--seed",
        help="Default: fresh OS entropy, which is what a private run should use. A seed fixes the "
        "privacy noise: running twice with one seed on the same or overlapping data repeats the "
        "noise, the two results can be combined to cancel it, and the guarantee is void (with "
        "--ledger a seed already charged is refused; without one the run warns). For tests and "
        "simulated data only; never publish it."),
    secure: bool = typer.Option(
        False, "--secure",
        help="Secure mode: the privacy noise comes from ChaCha20 under a secret drawn from OS "
        "entropy for this run alone, never from --seed (docs/secure_randomness.md)."),
    force: bool = typer.Option(
        False, "--force",
        help="Run even when the plan says the chains cannot move, or with delta >= 1/n (both are "
        "refused otherwise, before anything is spent)."),
    out: str = typer.Option(..., "--out", help="Result file to write (netCDF, e.g. run.nc)."),
    iterations: Optional[int] = typer.Option(
        None, "--iterations", help="Iterations per chain (default: as many as the budget buys)."
    ),
    warmup: Optional[int] = typer.Option(
        None, "--warmup", help="Samplers: warm-up iterations per chain (part of the run) that adapt the "
        "step size or proposal scale from released accept flags, at no extra privacy cost."),
    step_size: Optional[float] = typer.Option(
        None, "--step-size", help="Samplers: leapfrog step size (default: from n and the declared "
        "bounds, docs/tabular.md)."),
    leapfrog_steps: Optional[int] = typer.Option(None, "--leapfrog-steps", help="Samplers: leapfrog steps L (default 10)."),
    tau_l: Optional[float] = typer.Option(
        None, "--tau-l", help="dp-hmc: τ of the log-likelihood ratio (default: from n, the declared "
        "bounds and the budget)."),
    tau_g: Optional[float] = typer.Option(
        None, "--tau-g", help="dp-hmc: τ of the gradients (default: as --tau-l)."),
    clip: Optional[float] = typer.Option(None, "--clip", help="Samplers: b_l (default from the declared bounds)."),
    grad_clip: Optional[float] = typer.Option(
        None, "--grad-clip", help="Samplers: b_g (default from the declared bounds)."
    ),
    noise_sd: Optional[float] = typer.Option(
        None, "--noise-sd", help="linear: declared residual sd on the target's scale (default: inferred privately by the noise-aware GLM; range/4 for the samplers)."
    ),
    prior_sd: Optional[float] = typer.Option(
        None, "--prior-sd", help="Prior sd of the scaled-design coefficients (default 10)."
    ),
    ledger: Optional[str] = typer.Option(
        None, "--ledger",
        help="The table's budget ledger (dpmcmc ledger init): the run is charged before it starts, "
        "or refused if it would exceed the declared total."),
    show_nonprivate: bool = typer.Option(
        False, "--show-nonprivate",
        help="Also print the NON-private diagnostics (clip fractions; never publish them).",
    ),
) -> None:
    """Bayesian regression on a table: named coefficients, the privacy report, a summary."""
    import jax
    import numpy as np

    from . import tabular

    try:
        with open(bounds) as f:
            schema = json.load(f)
    except OSError as err:
        _fail(f"--bounds: cannot read {bounds!r}: {err}")
    except ValueError as err:
        _fail(f"--bounds: {bounds!r} is not valid JSON: {err}")
    key = None
    if seed is not None:
        if seed < 0:
            _fail(f"--seed must be a non-negative integer, got {seed}")
        key = jax.random.key(seed)
    given = dict(iterations=iterations, warmup=warmup, step_size=step_size, leapfrog_steps=leapfrog_steps, tau_l=tau_l,
                 tau_g=tau_g, clip=clip, grad_clip=grad_clip)
    kwargs = {k: v for k, v in given.items() if v is not None}
    if prior_sd is not None:
        kwargs["prior_sd"] = prior_sd
    if secure:
        kwargs["secure"] = True
    if force:
        kwargs["force"] = True
    import warnings

    from ._keys import KeyReuseWarning

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", KeyReuseWarning)
            res = tabular.glm(data, model, target=target, features=features, bounds=schema,
                              epsilon=epsilon, delta=delta, algorithm=algorithm, chains=chains,
                              key=key, noise_sd=noise_sd, progress=False, ledger=ledger, **kwargs)
        res.save(out)
    except (ValueError, TypeError) as err:
        _fail(str(err))
    for w in caught:
        if issubclass(w.category, KeyReuseWarning):  # in the command's words: --seed
            typer.echo("WARNING: " + str(w.message).replace("key fixes", "--seed fixes")
                       .replace("same key", "same --seed"), err=True)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    from .diagnostics import posterior_summary

    typer.echo(f"wrote {out}")
    if res.plan is not None:
        typer.echo(str(res.plan))
    if res.privacy is None:
        typer.echo(f"NOT PRIVATE: algorithm {algorithm!r} gives no privacy guarantee.")
    else:
        typer.echo(str(res.privacy))
    table, notes = posterior_summary(res.samples, res.param_names)
    typer.echo("Posterior (released draws; terms in declared order):")
    typer.echo(table)
    for text in notes:
        typer.echo(f"WARNING: {text}")
    if show_nonprivate and res.diagnostics is not None:
        typer.echo("NON-PRIVATE diagnostics (computed from the raw data; not covered by the guarantee):")
        for name, value in res.diagnostics.fields().items():
            typer.echo(f"  {name}: {np.asarray(value).tolist()}")


def main() -> None:
    """Entry point of the ``dpmcmc`` console script."""
    app()


if __name__ == "__main__":
    main()
