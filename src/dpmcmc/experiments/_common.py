"""Shared pieces of the experiment runners: presets, start points, one private or non-private
run, and the metrics of one run.

Everything here runs on the presets' synthetic data. The keys are fixed per cell (derived from
the experiment's ``seed`` and the cell's settings) so that a rerun of a cell gives the same
numbers: these are benchmark runs, not releases, and a published key would void a real run's
guarantee (docs/secure_randomness.md).
"""
from __future__ import annotations

import contextlib

import functools
import hashlib
import json
import math
import warnings
from typing import Any, Optional

import numpy as np

__all__ = [
    "START_MODES",
    "START_LABELS",
    "AUTO",
    "is_private",
    "auto_entry",
    "start_points",
    "cell_seed",
    "load_preset",
    "reference_draws",
    "run_one",
    "evaluate",
    "thin",
]

#: The two start modes every sampling experiment runs in.
START_MODES = ("paper", "private")

#: How each start mode is labelled in every output (table column ``start_label``).
START_LABELS = {
    "paper": "NON-PRIVATE start: near the true parameters, read from the data's truth (as the papers do)",
    "private": ("private start: the library's private initialisation (theta0='private': a share of "
                "the budget on noisy clipped gradient steps, in the privacy report) where the sampler "
                "has a per-record bound; else its data-independent default (prior draws); "
                "algorithm 'auto': its own private Newton start (docs/auto.md)"),
}

#: The experiments' label of ``dpmcmc.sample(model, data, "auto", ...)`` with only the
#: per-record bounds declared (issue 35): run in the private start mode only (its start is
#: its own), beside the papers' tuned samplers.
AUTO = "auto"


def is_private(algorithm: str) -> bool:
    """Whether ``algorithm`` (a registered sampler or ``"auto"``) spends a budget."""
    from ..samplers import ALGORITHMS

    return algorithm == AUTO or ALGORITHMS[algorithm].private


def auto_entry(bounds: dict) -> dict:
    """An experiment's ``auto`` line: ``dpmcmc.sample(..., "auto")`` with the per-record bounds
    ``bounds`` (``clip`` and ``grad_clip`` of the tuned DP-HMC) and nothing else."""
    return {"algorithm": AUTO, "params": {k: bounds[k] for k in ("clip", "grad_clip") if k in bounds},
            "source": "dpmcmc.auto (issue 35): only the per-record bounds declared; the start and "
                      "every setting from public inputs", "starts": ["private"]}


def cell_seed(*parts: Any) -> int:
    """A 32-bit seed from the given settings (stable across processes, unlike ``hash``)."""
    text = "|".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")


@functools.lru_cache(maxsize=16)
def load_preset(name: str, n: Optional[int] = None):
    """``dpmcmc.models.preset(name, n)``, cached per process (cells of one process share it)."""
    from ..models import preset

    return preset(name, n=n)


@functools.lru_cache(maxsize=16)
def reference_draws(name: str, n: Optional[int], num: int, seed: int) -> np.ndarray:
    """``num`` exact posterior draws of the preset (the papers' 1000-draw reference sample)."""
    import jax

    pre = load_preset(name, n)
    if pre.posterior_sampler is None:
        raise ValueError(f"preset {name!r} has no exact posterior sampler")
    return np.asarray(pre.posterior_sampler(jax.random.key(seed), num), dtype=np.float64)


def _paper_start(pre, chains: int, seed: int, ref: Optional[np.ndarray], start: dict) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dim = pre.model.dim
    if start.get("kind") == "normal":
        # 001 §5.4, circle: N(mean, variance I), independent of the data.
        mean = np.asarray(start["mean"], dtype=np.float64)
        return mean + math.sqrt(start["variance"]) * rng.standard_normal((chains, dim))
    # 000 §4.1 / 001 §5.4: normal around theta_true with sd = mean componentwise sd of the
    # reference posterior sample. This reads the truth behind the data: NOT a private start.
    sd = float(start["std"]) if "std" in start else float(np.mean(np.std(ref, axis=0)))
    return np.asarray(pre.theta_true, dtype=np.float64) + sd * rng.standard_normal((chains, dim))


def private_start(pre, chains: int, seed: int, algorithm: Optional[str] = None,
                  params: Optional[dict] = None) -> Optional[str]:
    """The private start of ``algorithm``: ``"private"`` or ``None`` (prior draws).

    ``"private"`` is :func:`dpmcmc.sample`'s private initialisation (``theta0="private"``: 10 % of
    the budget on noisy clipped gradient steps, accounted in the run's report), for every private
    sampler with a per-record gradient bound: the full-data ones compose it μ-additively, the
    subsampled ones (DP-SGLD, DP-SGNHT, minibatch penalty) through the Gaussian's PLD
    (:func:`dpmcmc.accounting.pld.gaussian_pld`). DP Barker refuses a private start (no gradient
    bound), and the non-private samplers of the clipping experiment need none: these start from
    the library's data-independent default, prior draws (``None``).
    """
    from ..samplers import ALGORITHMS

    if algorithm is None or algorithm == AUTO:
        return None  # auto draws its own start (the private Newton start)
    spec = ALGORITHMS[algorithm]
    if not spec.private or algorithm == "dp-barker":
        return None
    n = int(pre.data.shape[0])
    prepared = spec.prepare(dict(params or {}), pre.model, n)
    return "private" if prepared.get("grad_clip", prepared.get("clip")) is not None else None


def start_points(mode: str, pre, chains: int, seed: int, ref: Optional[np.ndarray],
                 start: Optional[dict] = None, algorithm: Optional[str] = None,
                 params: Optional[dict] = None):
    """Starting points ``(chains, dim)`` for a start mode, ``"private"`` or ``None`` (prior draws).

    Parameters
    ----------
    mode : {"paper", "private"}
    pre : Preset
    chains : int
    seed : int
        Depends only on the repeat, so every algorithm and ε of a repeat starts from the same
        points (000 §4.1; 001 §5.4).
    ref : array (k, dim) or None
        Reference posterior sample (for the paper start's spread).
    start : dict, optional
        The paper's start description: ``{"kind": "normal", "mean", "variance"}`` or
        ``{"std": value}``; default the 000 §4.1 rule.
    algorithm : str, optional
        The sampler, and ``params`` its parameters (the private mode's start depends on them,
        see :func:`private_start`).
    """
    if mode == "paper":
        return _paper_start(pre, chains, seed, ref, start or {})
    if mode == "private":
        return private_start(pre, chains, seed, algorithm, params)
    raise ValueError(f"start must be one of {START_MODES}, got {mode!r}")


def thin(draws: np.ndarray, max_points: int) -> np.ndarray:
    """Evenly thin a pooled ``(k, dim)`` sample to at most ``max_points`` rows."""
    if draws.shape[0] <= max_points:
        return draws
    idx = np.linspace(0, draws.shape[0] - 1, max_points).round().astype(int)
    return draws[idx]


_BUDGETS: dict = {}


def _budget(pre, algorithm: str, params: dict, epsilon: float, delta: float, chains: int,
            accountant: str, relation: str, start: str) -> int:
    """Iterations per chain the budget buys (0 if it buys none), as ``dpmcmc.sample`` plans them,
    the private start's share included. Memoised per process: the repeats of a cell share one
    plan (the key holds the preset itself, so its identity cannot be reused)."""
    import dpmcmc

    key = (id(pre), algorithm, json.dumps(params, sort_keys=True, default=repr), epsilon, delta, chains,
           accountant, relation, start)
    if key not in _BUDGETS:
        # A start the run is given: any points of the model's shape stand for it (the plan
        # reads their shape only).
        theta0 = start if start == "private" else np.zeros(pre.model.dim)
        try:
            iterations = dpmcmc.plan(pre.model, int(pre.data.shape[0]), algorithm, epsilon=epsilon,
                                     delta=delta, chains=chains, accountant=accountant,
                                     relation=relation, theta0=theta0, force=True,
                                     **params).iterations
        except dpmcmc.accounting.BudgetTooSmall:
            iterations = 0
        _BUDGETS[key] = (pre, iterations)
    return _BUDGETS[key][1]


@contextlib.contextmanager
def _reproduction_warnings(info: dict):
    """Run a reproduction's private run with its plan's warnings kept in ``info["plan_warnings"]``
    (a column of the results table) instead of raised: a reproduction runs the papers' settings
    as they were (ε = 15 in 000's grid, chains that cannot move), and the reader of its table
    sees what the plan said about each run. Its fixed seeds are the experiment's (simulated data,
    no person's record at stake), so the key-reuse warning is not for it."""
    import dpmcmc

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore", dpmcmc.KeyReuseWarning)
        warnings.simplefilter("always", dpmcmc.PlanWarning)
        yield
    for w in caught:
        if issubclass(w.category, dpmcmc.PlanWarning):
            info["plan_warnings"] = " ".join(filter(None, (info["plan_warnings"], str(w.message))))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def run_one(pre, algorithm: str, params: dict, *, epsilon: Optional[float], delta: Optional[float],
            chains: int, theta0: Optional[np.ndarray], seed: int, iterations: Optional[int] = None,
            max_iterations: Optional[int] = None, accountant: Optional[str] = None,
            relation: str = "substitute"):
    """One ``dpmcmc.sample`` run; returns ``(result or None, info dict)``.

    A private run gets the iterations its (ε, δ) buys (``accounting.max_iterations``); with
    ``max_iterations`` (quick mode) it is cut to that many and the report states the ε the
    shorter run spends. ``info`` holds ``iterations_budget`` (what the budget buys),
    ``iterations`` (run), ``epsilon_spent``, ``status`` ("ok" or "budget too small") and
    ``plan_warnings`` (what the plan warned about the run, e.g. ε above 10; empty if nothing).
    """
    import jax

    import dpmcmc
    from ..samplers import ALGORITHMS

    info: dict = {"iterations_budget": None, "iterations": None, "epsilon_spent": None, "status": "ok",
                  "plan_warnings": ""}
    if algorithm == AUTO:
        # Plans its own run from public inputs, with its defaults (issue 35: "private start,
        # defaults"): the library's default number of chains, not the experiment's (with the
        # thesis' 20 the budget buys no chain and the rule returns the start's approximation),
        # no iterations to cut in quick mode.
        with _reproduction_warnings(info):
            res = dpmcmc.sample(pre.model, pre.data, AUTO, epsilon=epsilon, delta=delta,
                                key=jax.random.key(seed), progress=False, force=True, **params)
        info.update(epsilon_spent=float(res.privacy.epsilon), iterations=int(res.samples.shape[1]),
                    iterations_budget=int(res.plan.iterations), auto_mode=res.params["mode"],
                    chains=int(res.samples.shape[0]))
        return res, info
    spec = ALGORITHMS[algorithm]
    if spec.private:
        acc = accountant or dpmcmc.accounting.supported_accountants(algorithm)[0]
        start = "private" if isinstance(theta0, str) else "given"
        # The plan accounts as dpmcmc.sample does, the private start's share included. The run
        # below fixes `iterations`, where theta0=None means prior draws (no private start).
        budget = _budget(pre, algorithm, params, epsilon, delta, chains, acc, relation, start)
        info["iterations_budget"] = budget
        if budget < 1:
            info["status"] = "budget too small"
            return None, info
        iterations = budget if max_iterations is None else min(budget, max_iterations)
        # A reproduction runs the papers' settings as they were, also where they cannot move
        # (force), on simulated data with fixed seeds (repeatable; no person's record at stake).
        with _reproduction_warnings(info):
            res = dpmcmc.sample(pre.model, pre.data, algorithm, epsilon=epsilon, delta=delta,
                                chains=chains, key=jax.random.key(seed), theta0=theta0,
                                iterations=iterations, accountant=acc, relation=relation,
                                progress=False, force=True, **params)
        info["epsilon_spent"] = float(res.privacy.epsilon)
    else:
        res = dpmcmc.sample(pre.model, pre.data, algorithm, chains=chains, key=jax.random.key(seed),
                            theta0=theta0, iterations=iterations, progress=False, **params)
    info["iterations"] = int(res.samples.shape[1])
    return res, info


def evaluate(samples: np.ndarray, ref: Optional[np.ndarray], true_mean: Any, *, mmd_points: int,
             bandwidth_points: int, seed: int, baseline: Optional[np.ndarray] = None) -> dict:
    """Metrics of one run: first half discarded, chains pooled (000 §4.1, 001 §5.4).

    ``mmd`` against the reference sample (Gaussian kernel, paired-median bandwidth from
    ``bandwidth_points`` subsample points: 500 in 000, 50 in 001), on the pooled draws evenly
    thinned to ``mmd_points``; ``mean_error`` (distance of the pooled mean from ``true_mean``);
    ``rhat_max`` (rank-normalised split R-hat, worst dimension); ``mmd_exact_baseline``: the same
    MMD for an independent exact sample of the same size (the papers' black reference lines).
    """
    from ..diagnostics import mean_error, median_bandwidth, mmd, rhat

    samples = np.asarray(samples, dtype=np.float64)
    kept = samples[:, samples.shape[1] // 2:, :]
    pooled = kept.reshape(-1, kept.shape[-1])
    out = {"mmd": float("nan"), "mean_error": float("nan"), "rhat_max": float("nan"),
           "mmd_exact_baseline": float("nan"), "diverged_draws": int((~np.isfinite(pooled)).any(1).sum())}
    if out["diverged_draws"]:
        return out
    if true_mean is not None:
        out["mean_error"] = mean_error(pooled, true_mean)
    if kept.shape[0] >= 2 and kept.shape[1] >= 4:  # split R-hat needs 2 chains
        with np.errstate(all="ignore"):
            out["rhat_max"] = float(np.nanmax(rhat(kept)))
    if ref is not None:
        x = thin(pooled, mmd_points)
        h = median_bandwidth(x, ref, bandwidth_points, seed=seed)
        out["mmd"] = mmd(x, ref, bandwidth=h)
        if baseline is not None:
            b = thin(baseline, x.shape[0])
            out["mmd_exact_baseline"] = mmd(b, ref, bandwidth=median_bandwidth(b, ref, bandwidth_points,
                                                                                   seed=seed))
    return out


def acceptance_columns(res) -> dict:
    """Mean acceptance of a run, labelled by whether the privacy guarantee covers it.

    For the private samplers the accept flags are post-processing of the noisy releases
    (``Result.released``, docs/post_processing.md); for rwmh/hmc they are computed from the raw
    data and stay labelled non-private.
    """
    import numpy as np

    if getattr(res, "released", None) is not None:
        return {"acceptance": float(np.mean(res.released.acceptance_rate))}
    if res.diagnostics is None:  # independent draws (auto's approximation): no accept step
        return {}
    return {"nonprivate_acceptance": float(np.mean(res.diagnostics.acceptance_rate))}
