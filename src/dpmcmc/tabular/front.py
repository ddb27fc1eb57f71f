"""``dpmcmc.glm``: a table in, named coefficients out.

:func:`glm` turns a pandas DataFrame (a polars one, or a CSV/Parquet path) plus a *declared*
schema — public ranges of the numeric columns, declared categories of the categorical ones —
into a design matrix, runs :func:`dpmcmc.sample` and returns a :class:`~dpmcmc.Result` whose
draws are the coefficients on the original scale of the (clipped) covariates, one named
parameter per term (``intercept``, each numeric column, ``col[level]`` for each non-reference
level of a categorical column).

Privacy (see docs/tabular.md):

* Every transformation of the data uses declared, public quantities only: numeric columns are
  clipped into their declared ``[lo, hi]`` and mapped to ``[-1, 1]`` by ``x_s = (x − mid)/half``
  with ``mid, half`` from the declared bounds; no mean, sd, min or max of the data is computed;
  no row is dropped (n is public under the substitute relation).
* No value is ever refused: whether a table is accepted depends on its column names, its
  number of rows and the declarations only. A numeric cell is clipped into its declared range
  (±inf included); a missing or unreadable cell, or a category outside the declared ones,
  takes the declared public ``"impute"`` value, else the centre of the declared domain (the
  midpoint of ``[lo, hi]``; every indicator ½ for a categorical column). An error triggered
  by one record's value would itself release that value outside any mechanism.
* Only the target and the covariates are read, as their declarations say (a CSV as text:
  ``"NA"`` or ``"None"`` is a declared category if declared, never a missing-value marker).
* The default clip bounds follow from the declared bounds alone (``default_clips``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .schema import (DEFAULT_PARAM_RADIUS, MODELS, default_clips, design_layout,
                     read_table, table_columns, to_original_scale)

__all__ = ["glm", "sampler_defaults", "DEFAULT_PRIOR_SD"]

DEFAULT_PRIOR_SD = 10.0


def sampler_defaults(algorithm: str, model: str, n: int, d: int, noise_sd: float = 0.5,
                     param_radius: float = DEFAULT_PARAM_RADIUS, *, epsilon: Optional[float] = None,
                     delta: Optional[float] = None, chains: int = 4,
                     count_cap: Optional[int] = None) -> dict:
    """Parameters of a sampler on the scaled design, from public inputs only (docs/tabular.md).

    Nothing here reads the data: the algorithm's own rule (``SPEC.defaults``, in its module;
    shared pieces in :mod:`dpmcmc.samplers.defaults`) reads ``n``, the ``D = d + 1``
    coefficients, the per-record bounds of :func:`default_clips`, the budget and the chains, and
    ``s₀``, the smallest posterior sd of a coefficient the declared box allows (logistic: a
    record carries at most ¼ unit of information per coordinate, so ``s₀ = 2/√n``; linear:
    ``s₀ = s/√n``, s the scaled noise sd; Poisson with the declared cap C: at most ``C + 1``
    units where every log rate in the box is ≤ log(C + 1), ``s₀ = 1/√(n (C + 1))``). The run's (ε, δ) decides the number of iterations,
    and the warm-up (on by default for the table path, ``warmup="auto"``) adapts step sizes and
    proposal scales from released values. ``minibatch-penalty`` and ``dp-barker`` have no rule:
    the first's test noise grows with (n/batch)² and leaves no useful default on tables of this
    size, the second targets a *tempered* posterior whose temperature (``n0``) is a modelling
    choice (docs/dp_barker.md).

    Returns
    -------
    dict
        Keyword arguments for :func:`dpmcmc.sample` (the caller's own values take precedence).
    """
    from ..accounting._checks import check_choice
    from ..samplers import ALGORITHMS
    from ..samplers.defaults import PublicScale

    spec = ALGORITHMS[check_choice("algorithm", algorithm, ALGORITHMS)]
    if spec.defaults is None:
        return {}
    clip, grad_clip = default_clips(model, d, noise_sd, param_radius, count_cap=count_cap)
    if model == "poisson":
        s0 = 1.0 / math.sqrt(n * (count_cap + 1.0))
    else:
        s0 = (2.0 if model == "logistic" else noise_sd) / math.sqrt(n)
    return spec.defaults(PublicScale(n=n, dim=d + 1, clip=clip, grad_clip=grad_clip, scale=s0,
                                     epsilon=epsilon, delta=delta, chains=chains))


# ------------------------------------------------------------------------------ the model

def _build_model(model: str, dim: int, names: tuple, prior_sd: float, noise_sd_scaled: float,
                 count_cap: Optional[int] = None):
    import jax
    import jax.numpy as jnp

    from ..models.base import Model

    prior_var = prior_sd ** 2
    if model == "logistic":
        from ..models.logistic import logistic_regression

        base = logistic_regression(dim, prior_var=prior_var, name="glm-logistic")
        return replace(base, param_names=names)

    if model == "poisson":
        # Counts clipped to the declared cap; log link on the scaled design.
        def log_likelihood(theta, x):
            eta = jnp.dot(x[:-1], theta)
            return x[-1] * eta - jnp.exp(eta) - jax.scipy.special.gammaln(x[-1] + 1.0)

        from ..samplers.noise_aware_glm import check_count_cap

        meta = {"family": "poisson_regression", "count_cap": check_count_cap("poisson", count_cap)}
    else:
        s = float(noise_sd_scaled)
        const = -math.log(s) - 0.5 * math.log(2 * math.pi)

        def log_likelihood(theta, x):
            r = (x[-1] - jnp.dot(x[:-1], theta)) / s
            return const - 0.5 * r * r

        meta = {"family": "linear_regression", "noise_sd_scaled": s}

    def log_prior(theta):
        return -0.5 * jnp.sum(theta ** 2) / prior_var

    def sample_prior(key, shape):
        return prior_sd * jax.random.normal(key, (*shape, dim))

    return Model(log_likelihood=log_likelihood, log_prior=log_prior, dim=dim, name=f"glm-{model}",
                 sample_prior=sample_prior, record_shape=(dim + 1,), param_names=names,
                 metadata=dict(meta, prior_var=prior_var))


_RUN_KEYS = {"iterations", "accountant", "relation", "progress", "secure", "checkpoint",
             "checkpoint_every", "mesh", "theta0", "warmup", "init_share", "init_steps", "force"}


def _check_run_arguments(model, n: int, algorithm: str, epsilon, delta, chains, params: dict) -> None:
    """``dpmcmc.sample``'s checks of the arguments that need no data value, run before the
    table's values are read (sample repeats them)."""
    from ..accounting._checks import check_int, check_positive, check_probability
    from ..samplers import ALGORITHMS

    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
    check_int("chains", chains, minimum=1)
    if epsilon is not None:
        check_positive("epsilon", epsilon)
    if delta is not None:
        check_probability("delta", delta)
    ALGORITHMS[algorithm].prepare({k: v for k, v in params.items() if k not in _RUN_KEYS}, model, n)


NOISE_AWARE = "noise-aware-glm"


def glm(
    table: Any,
    model: str = "logistic",
    *,
    target: str,
    features: Optional[Sequence[str]] = None,
    bounds: Mapping[str, Any],
    epsilon: Optional[float] = None,
    delta: Optional[float] = None,
    algorithm: str = "auto",
    chains: int = 4,
    key: Any = None,
    noise_sd: Optional[float] = None,
    prior_sd: float = DEFAULT_PRIOR_SD,
    param_radius: float = DEFAULT_PARAM_RADIUS,
    ledger: Any = None,
    **sampler_params: Any,
):
    """Bayesian logistic, linear or Poisson regression of ``target`` on ``features`` from a table.

    Parameters
    ----------
    table : pandas.DataFrame, polars.DataFrame or path
        The sensitive records, one row per person; a path may be CSV or Parquet.
    model : {"logistic", "linear", "poisson"}
        Logistic: ``P(y = second class) = σ(intercept + Σ β_j x_j)``. Linear:
        ``y ~ N(intercept + Σ β_j x_j, noise_sd²)`` with ``y`` clipped into its declared range.
        Poisson: ``y ~ Poisson(exp(intercept + Σ β_j x_j))``, the counts clipped to the
        declared cap (the coefficients are on the log-rate scale).
    target : str
        The response column. Logistic: declared ``{"categories": [c0, c1]}`` (``c1`` → 1).
        Linear: declared ``[lo, hi]``. Poisson: declared ``[0, C]``, C a positive integer, the
        public cap of the counts (docs/tabular.md: how the cap bounds each record's influence
        and what it does to the model).
    features : sequence of str or "a,b,c", optional
        Covariate columns; default every column but ``target``. Each needs a declaration.
    bounds : mapping
        The declared, public schema (:func:`parse_schema`): ``[lo, hi]`` per numeric column,
        ``{"categories": [...]}`` per categorical one, optional ``"impute"``.
    epsilon, delta : float
        Budget of the whole run (all chains); see :func:`dpmcmc.sample`.
    algorithm : str, default "auto"
        ``"auto"`` (= ``"noise-aware-glm"``): the noise-aware posterior from privately released
        Newton statistics (:mod:`dpmcmc.samplers.noise_aware_glm`; docs/tabular.md says why it
        is the default). Or any of ``dpmcmc.samplers.ALGORITHMS``; the non-private
        "hmc"/"rwmh" for checks only.
    chains : int, default 4
    key : JAX key or int, optional
        Default: fresh OS entropy. An int is a seed (``jax.random.key(seed)``). A key or seed
        you choose fixes the privacy noise: reusing it on the same or overlapping data repeats
        the noise and voids the guarantee; without a ``ledger`` (which refuses a repeated key)
        such a run warns (``KeyReuseWarning``). A published key voids it too.
    noise_sd : float, optional
        Linear model: the declared (public) residual sd on the target's scale. Default: the
        noise-aware GLM infers it from a private release of Σ y² (10 % of the budget); a
        sampler (``algorithm=...``) takes a quarter of the target's declared range.
    prior_sd : float, default 10
        Sd of the independent normal prior on the coefficients of the SCALED design (covariates
        in [-1, 1]; linear: target in [-1, 1] too).
    param_radius : float, default 10
        Linear model with dp-hmc: the radius R of the parameter ball on which the default clips
        are exact (:func:`default_clips`).
    ledger : dpmcmc.Ledger or path-like, optional
        The table's budget ledger: the run is charged before any data value is read, or refused
        if it would exceed the declared total (see :class:`dpmcmc.Ledger`).
    **sampler_params
        ``"noise-aware-glm"``: ``draws`` (per chain, default 1000), ``steps``, ``final_share``,
        ``hessian_share``, ``sum_of_squares_share``, ``mechanism`` (:func:`dpmcmc.samplers.noise_aware_glm.release_plan`). Samplers:
        passed to :func:`dpmcmc.sample` (``iterations``, ``step_size``, ``tau_l``, ``progress``,
        ...). For dp-hmc the defaults are ``clip``/``grad_clip`` from :func:`default_clips`,
        ``tau_l`` 0.1, ``tau_g`` 0.4, ``step_size`` 0.01, and the start is
        :func:`dpmcmc.sample`'s default (a private start with ``epsilon`` given, outside secure
        mode); for hmc ``step_size`` 0.01.

    Returns
    -------
    Result
        Draws of the coefficients on the original scale, named by ``Result.param_names``
        (``intercept``, each numeric column, ``col[level]`` per non-reference level). The
        scaling is post-processing of the private draws with public constants.
    """
    from ..api import sample
    from ..ledger import open_ledger

    ledger = open_ledger(ledger)
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        import jax

        if key < 0:
            raise ValueError(f"key: a seed must be a non-negative integer, got {key}")
        key = jax.random.key(int(key))
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    for name, value in (("prior_sd", prior_sd), ("param_radius", param_radius)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if noise_sd is not None and model != "linear":
        raise ValueError("noise_sd applies to model='linear' only")
    if noise_sd is not None and (isinstance(noise_sd, bool) or not isinstance(noise_sd, (int, float))
                                 or not (0 < noise_sd < math.inf)):
        raise ValueError(f"noise_sd must be a positive finite number, got {noise_sd!r}")
    plan = design_layout(table_columns(table), model, target, features, bounds)
    df = read_table(table, plan.columns)
    n = len(df)
    if n < 1:
        raise ValueError("table has no rows")
    d = len(plan.names) - 1
    declared_sd = None  # linear: the declared residual sd, scaled; None: not declared
    if model == "linear" and noise_sd is not None:
        declared_sd = noise_sd / plan.target_half
    if algorithm == "auto":
        algorithm = NOISE_AWARE
    # The samplers need a declared residual sd (default a quarter of the target's range); the
    # noise-aware GLM infers an undeclared one from a private release of Σ y².
    noise_sd_scaled = 0.5 if declared_sd is None else declared_sd
    if algorithm == NOISE_AWARE and model == "linear":
        sampler_params = dict(sampler_params, noise_sd=declared_sd)
    m = _build_model(model, d + 1, plan.names, float(prior_sd), noise_sd_scaled, plan.count_cap)
    params = dict(sampler_params)
    for name, value in sampler_defaults(algorithm, model, n, d, noise_sd_scaled,
                                        float(param_radius), epsilon=epsilon, delta=delta,
                                        chains=chains, count_cap=plan.count_cap).items():
        params.setdefault(name, value)
    from ..samplers import ALGORITHMS

    if ALGORITHMS[algorithm].adaptation and epsilon is not None and "iterations" not in params:
        # The budget sets the run length: spend its first half adapting the step sizes and
        # proposal scales from released values (no extra privacy cost; docs/post_processing.md).
        params.setdefault("warmup", "auto")
    _check_run_arguments(m, n, algorithm, epsilon, delta, chains, params)
    des = plan.design(df)
    res = sample(m, des.data, algorithm, epsilon=epsilon, delta=delta, chains=chains, key=key,
                 ledger=ledger, **params)
    # Public constants applied to private draws: post-processing.
    beta = to_original_scale(res.samples, des.mid, des.half, des.target_mid, des.target_half)
    return replace(res, samples=beta, param_names=des.names)
