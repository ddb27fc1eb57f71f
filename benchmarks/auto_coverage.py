"""Coverage of ``algorithm="auto"`` on user-written models that are not built in.

Issue 35: a user writes a Poisson or probit regression (here: three coefficients, an intercept
and two covariates drawn uniformly on [−1, 1]), declares a per-record gradient bound, and calls
``dpmcmc.sample(model, data, "auto", epsilon=4, delta=1e-6, grad_clip=...)``. Over repeated
tables simulated from the model at a fixed truth, the posterior's central 90 % intervals should
cover the truth 90 % of the time (each table: a fresh data set and a fresh run).

For each model and table this records, per coefficient, whether the 90 % interval of the pooled
draws covers the truth, the interval's width and the private posterior mean's error in units of
the non-private posterior sd (a Laplace fit of the same table: NOT private, evaluation only).
The coverage's binomial standard error over T tables × 3 coefficients is printed with it.

Writes ``benchmarks/results/auto_coverage.jsonl`` (one row per table, appended: resumable) and
``auto_coverage.{json,md}``.

Usage::

    python benchmarks/auto_coverage.py              # 200 tables per model, n = 10⁴, ε = 4
    python benchmarks/auto_coverage.py --tables 20 --n 20000
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
ROWS = RESULTS / "auto_coverage.jsonl"
TRUTH = {"poisson": (0.5, 0.3, -0.2), "probit": (0.2, 0.8, -0.5)}
#: What the user declares: a bound on the per-record gradient they believe holds for most rows
#: (Poisson: |y − λ|·‖x‖ with λ ≈ e^{0.5±0.5}, ‖x‖ ≤ √3; probit: the inverse Mills ratio ≲ 2).
GRAD_CLIP = {"poisson": 5.0, "probit": 3.0}
PRIOR_SD = 10.0


def user_model(kind: str):
    """The model as a user writes it: a per-record log-likelihood and a log-prior."""
    import jax.numpy as jnp
    from jax.scipy.stats import norm

    import dpmcmc

    def log_prior(theta):
        return -0.5 * jnp.sum(theta ** 2) / PRIOR_SD ** 2

    if kind == "poisson":
        def log_likelihood(theta, row):
            eta = theta[0] + theta[1] * row[0] + theta[2] * row[1]
            return row[2] * eta - jnp.exp(eta)
    else:
        def log_likelihood(theta, row):
            eta = theta[0] + theta[1] * row[0] + theta[2] * row[1]
            return jnp.where(row[2] > 0.5, norm.logcdf(eta), norm.logcdf(-eta))
    return dpmcmc.Model(log_likelihood, log_prior, dim=3, name=f"user-{kind}",
                        record_shape=(3,))


def simulate(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    from scipy.stats import norm

    x = rng.uniform(-1.0, 1.0, size=(n, 2))
    eta = TRUTH[kind][0] + x @ np.asarray(TRUTH[kind][1:])
    y = rng.poisson(np.exp(eta)) if kind == "poisson" else (rng.uniform(size=n) < norm.cdf(eta))
    return np.column_stack([x, y.astype(np.float64)])


def laplace_sd(model, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mode and sd of the non-private posterior's Laplace fit (evaluation only: NOT private)."""
    import jax
    import jax.numpy as jnp
    from scipy.optimize import minimize

    with jax.enable_x64(True):
        d = jnp.asarray(data)
        f = jax.jit(lambda t: -model.log_posterior(t, d))
        g = jax.jit(jax.grad(lambda t: -model.log_posterior(t, d)))
        res = minimize(lambda t: float(f(jnp.asarray(t))), np.zeros(3),
                       jac=lambda t: np.asarray(g(jnp.asarray(t))), method="BFGS")
        h = np.asarray(jax.hessian(lambda t: -model.log_posterior(t, d))(jnp.asarray(res.x)))
    return res.x, np.sqrt(np.diag(np.linalg.inv(h)))


def one_table(kind: str, n: int, epsilon: float, delta: float, seed: int) -> dict:
    import jax

    import dpmcmc

    model = user_model(kind)
    data = simulate(kind, n, np.random.default_rng(seed))
    t = time.process_time()
    res = dpmcmc.sample(model, data, "auto", epsilon=epsilon, delta=delta,
                        grad_clip=GRAD_CLIP[kind], key=jax.random.key(seed), progress=False)
    cpu = time.process_time() - t
    draws = res.samples.reshape(-1, 3)
    lo, hi = np.percentile(draws, [5.0, 95.0], axis=0)
    truth = np.asarray(TRUTH[kind])
    mode, sd = laplace_sd(model, data)
    return {"model": kind, "seed": seed, "n": n, "epsilon": epsilon,
            "covered": ((lo <= truth) & (truth <= hi)).tolist(),
            "width_over_nonprivate": ((hi - lo) / (2 * 1.6449 * sd)).tolist(),
            "mean_error_sds": ((draws.mean(0) - mode) / sd).tolist(),
            "mode": res.params["mode"], "epsilon_spent": float(res.privacy.epsilon), "cpu_s": cpu}


def summarise() -> dict:
    rows = [json.loads(x) for x in ROWS.read_text().splitlines()]
    out = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "cells": []}
    for kind in TRUTH:
        for (n, eps) in sorted({(r["n"], r["epsilon"]) for r in rows if r["model"] == kind}):
            sub = [r for r in rows if r["model"] == kind and r["n"] == n and r["epsilon"] == eps]
            cov = np.asarray([r["covered"] for r in sub], dtype=float)
            k = cov.size
            p = float(cov.mean())
            out["cells"].append({
                "model": kind, "n": n, "epsilon": eps, "tables": len(sub),
                "coverage": p, "coverage_se": math.sqrt(0.9 * 0.1 / k),
                "coverage_by_coefficient": cov.mean(0).tolist(),
                "median_width_over_nonprivate": np.median([r["width_over_nonprivate"]
                                                           for r in sub], axis=0).tolist(),
                "rms_mean_error_sds": np.sqrt(np.mean(np.square([r["mean_error_sds"]
                                                                 for r in sub]), axis=0)).tolist(),
                "modes": sorted({r["mode"] for r in sub}),
                "median_cpu_s": float(np.median([r["cpu_s"] for r in sub]))})
    return out


def markdown(s: dict) -> str:
    lines = ["# Coverage of `algorithm=\"auto\"` on user-written models", "",
             f"{s['date']}. Central 90 % intervals of the pooled draws against the truth the "
             "tables were simulated from (3 coefficients per table; nominal 0.90, its binomial "
             "standard error given). Width: interval width ÷ that of the NON-private posterior's "
             "Laplace fit on the same table; mean error: (private mean − non-private mode) in "
             "non-private sds, root mean square over tables.", "",
             "| model | n | ε | tables | mode | coverage (± s.e.) | by coefficient | median width ratio | rms mean error (sds) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in s["cells"]:
        fmt = lambda v: ", ".join(f"{x:.2f}" for x in v)  # noqa: E731
        lines.append(f"| {c['model']} | {c['n']} | {c['epsilon']:g} | {c['tables']} | "
                     f"{', '.join(c['modes'])} | **{c['coverage']:.3f}** (± {c['coverage_se']:.3f}) | "
                     f"{fmt(c['coverage_by_coefficient'])} | {fmt(c['median_width_over_nonprivate'])} | "
                     f"{fmt(c['rms_mean_error_sds'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--models", nargs="+", default=list(TRUTH))
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args()
    RESULTS.mkdir(exist_ok=True)
    if not args.summary_only:
        done = set()
        if ROWS.exists():
            done = {(r["model"], r["n"], r["epsilon"], r["seed"])
                    for r in map(json.loads, ROWS.read_text().splitlines())}
        for seed in range(args.tables):
            for kind in args.models:
                if (kind, args.n, args.epsilon, seed) in done:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    row = one_table(kind, args.n, args.epsilon, args.delta, seed)
                with ROWS.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(json.dumps({k: row[k] for k in ("model", "seed", "covered", "mode", "cpu_s")}),
                      flush=True)
    s = summarise()
    (RESULTS / "auto_coverage.json").write_text(json.dumps(s, indent=1))
    (RESULTS / "auto_coverage.md").write_text(markdown(s))
    print(markdown(s))


if __name__ == "__main__":
    main()
