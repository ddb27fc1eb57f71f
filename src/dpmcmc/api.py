"""``dpmcmc.sample``: validate, account, run, package.

The order matters for privacy: every check on the inputs and the budget happens before the
first noise draw, and the run length is fixed by the accountant from (ε, δ) alone — never from
anything computed on the data.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import accounting
from ._keys import resolve_key
from .accounting._checks import check_int, check_positive, check_probability
from .models.base import Model
from .result import NonPrivateDiagnostics, Result

__all__ = ["sample", "validate_data"]


def validate_data(data: Any) -> np.ndarray:
    """Return ``data`` as a float array with rows as records, or raise naming ``data``.

    Raises
    ------
    TypeError
        If ``data`` is not numeric (strings, objects, complex numbers).
    ValueError
        If ``data`` is empty, a scalar, or contains NaN or inf.
    """
    if data is None:
        raise TypeError("data must be an array of shape (n, ...), got None")
    try:
        arr = np.asarray(data)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"data must be convertible to a numeric array: {exc}") from None
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating)
        or np.issubdtype(arr.dtype, np.integer)
        or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise TypeError(f"data must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim == 0:
        raise ValueError("data must have at least one dimension (rows are records), got a scalar")
    if arr.shape[0] == 0 or arr.size == 0:
        raise ValueError(f"data must contain at least one record, got shape {arr.shape}")
    arr = arr.astype(np.float64 if jax.config.jax_enable_x64 else np.float32)
    if not np.all(np.isfinite(arr)):
        raise ValueError("data contains NaN or inf; clean or drop those records before sampling")
    return arr


def _validate_theta0(theta0: Any, chains: int, dim: int) -> np.ndarray:
    arr = np.asarray(theta0, dtype=np.float64)
    if arr.shape == (dim,):
        arr = np.broadcast_to(arr, (chains, dim)).copy()
    elif arr.shape != (chains, dim):
        raise ValueError(
            f"theta0 must have shape ({dim},) or ({chains}, {dim}) for dim={dim} and chains={chains}, "
            f"got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("theta0 contains NaN or inf")
    return arr


def _default_theta0(model: Model, key: jax.Array, chains: int) -> np.ndarray:
    """Data-independent start: prior draws when the model can draw them, else zeros."""
    if model.sample_prior is not None:
        return np.asarray(model.sample_prior(key, (chains,)), dtype=np.float64).reshape(chains, model.dim)
    return np.zeros((chains, model.dim))


def sample(
    model: Model,
    data: Any,
    algorithm: str = "dp-hmc",
    *,
    epsilon: Optional[float] = None,
    delta: Optional[float] = None,
    chains: int = 4,
    key: Any = None,
    theta0: Any = None,
    iterations: Optional[int] = None,
    accountant: Optional[str] = None,
    relation: str = "substitute",
    progress: bool = True,
    **params: Any,
) -> Result:
    """Draw posterior samples of ``model`` given ``data`` under an (ε, δ) budget.

    Parameters
    ----------
    model : Model
        The model: per-example log-likelihood, log-prior, dimension, tempering.
    data : array_like, shape (n, ...)
        The sensitive records, one per row. Every access goes through an accounted mechanism.
    algorithm : str, default "dp-hmc"
        One of ``dpmcmc.samplers.ALGORITHMS``: "dp-hmc", "dp-penalty" (private) or "hmc",
        "rwmh" (non-private baselines).
    epsilon, delta : float
        The total budget for all chains together. With ``iterations=None`` the accountant sets
        the run length to the largest number of iterations per chain the budget buys. With
        ``iterations`` given, ``epsilon`` may be omitted and ``Result.privacy`` states the ε
        spent at ``delta``; if both are given, the run must fit the budget.
    chains : int, default 4
        Number of chains; each touches the data, so they compose.
    key : JAX PRNG key, optional
        ``None`` (default) draws a key from OS entropy. Passing a key makes the run
        reproducible; a published key voids the privacy guarantee, since anyone holding it can
        regenerate and subtract the noise.
    theta0 : array_like, shape (dim,) or (chains, dim), optional
        Starting points. Default: independent draws from the prior (``model.sample_prior``), or
        zeros when the model cannot draw from its prior — both data-independent.
    iterations : int, optional
        Iterations per chain (see ``epsilon``).
    accountant : {"pld", "zcdp", "rdp"}, optional
        Which accountant turns the releases into (ε, δ). Default: the tightest one that
        applies to ``algorithm`` ("pld" where it applies; "rdp" for DP Barker).
    relation : str, default "substitute"
        Neighbouring relation of the guarantee: replace one record. ``"substitute-legacy"``
        reproduces the papers' accounting of subsampled samplers, whose pair is NOT a valid
        bound for fixed-size batches (see ``dpmcmc.accounting.pld``); never use it for a real
        release.
    progress : bool, default True
        Show a progress bar with the iteration count only.
    **params
        Sampler parameters; see ``dpmcmc.samplers.ALGORITHMS[algorithm]``. "dp-penalty": ``tau``,
        ``clip``, ``proposal_std``, ``mode``; "dp-hmc": ``tau_l``, ``tau_g``, ``clip``,
        ``grad_clip``, ``step_size``, ``leapfrog_steps``, ``mass``; "rwmh"/"hmc": the same
        without the privacy parameters.

    Returns
    -------
    Result
        ``samples`` (chains, iterations, dim), ``privacy`` (PrivacyReport), and the NON-private
        ``diagnostics`` kept apart.

    Raises
    ------
    ValueError, TypeError
        For any invalid argument, naming it, before any noise is drawn.
    """
    from .samplers import ALGORITHMS
    from .samplers._driver import run_chains

    # --- validation: nothing random happens before this block completes -------------------
    if not isinstance(model, Model):
        raise TypeError(f"model must be a dpmcmc.Model, got {type(model).__name__}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
    spec = ALGORITHMS[algorithm]
    chains = check_int("chains", chains, minimum=1)
    data_arr = validate_data(data)
    n = int(data_arr.shape[0])
    if iterations is not None:
        iterations = check_int("iterations", iterations, minimum=1)
    prepared = spec.prepare(dict(params), model, n)

    report = None
    if spec.private:
        if delta is None:
            raise ValueError(f"delta is required for the private algorithm {algorithm!r}")
        delta = check_probability("delta", delta)
        acct_params = spec.accounting_params(prepared)
        if accountant is None:
            accountant = accounting.supported_accountants(algorithm)[0]
        if iterations is None:
            if epsilon is None:
                raise ValueError("give epsilon (the budget sets the run length) or iterations")
            epsilon = check_positive("epsilon", epsilon)
            iterations = accounting.max_iterations(
                algorithm, epsilon, delta, n, chains=chains, accountant=accountant,
                relation=relation, **acct_params
            )
        report = accounting.spent(
            algorithm, iterations, delta, n, chains=chains, accountant=accountant,
            relation=relation, **acct_params
        )
        if epsilon is not None:
            epsilon = check_positive("epsilon", epsilon)
            if report.epsilon > epsilon * (1 + 1e-12):
                raise ValueError(
                    f"iterations={iterations} per chain with chains={chains} spends ε={report.epsilon:.6g} "
                    f"at δ={delta:g}, more than epsilon={epsilon:g}; lower iterations or omit it"
                )
    else:
        if epsilon is not None or delta is not None:
            raise ValueError(
                f"algorithm {algorithm!r} is not private: it takes no epsilon/delta (use a dp-* algorithm)"
            )
        if iterations is None:
            raise ValueError(f"iterations is required for the non-private algorithm {algorithm!r}")

    key = resolve_key(key)
    init_key, run_key = jax.random.split(key)
    theta0_arr = (
        _default_theta0(model, init_key, chains) if theta0 is None else _validate_theta0(theta0, chains, model.dim)
    )
    _check_start(model, data_arr, theta0_arr)

    # --- the run ----------------------------------------------------------------------------
    kernel = spec.build(model, jnp.asarray(data_arr), prepared)
    positions, infos = run_chains(kernel, jnp.asarray(theta0_arr), run_key, iterations, progress=progress)

    diagnostics = NonPrivateDiagnostics(
        acceptance_rate=np.asarray(jnp.mean(infos.accepted.astype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32), axis=1)),
        clip_fraction=np.asarray(jnp.mean(infos.clip_fraction, axis=1)),
        divergences=np.asarray(jnp.sum(infos.diverged.astype(jnp.int32), axis=1)),
    )
    return Result(
        samples=np.asarray(positions),
        privacy=report,
        diagnostics=diagnostics,
        algorithm=algorithm,
        params=prepared,
        model_name=model.name,
    )


def _check_start(model: Model, data: np.ndarray, theta0: np.ndarray) -> None:
    """A start where the model is not finite cannot run; say so before drawing any noise.

    This evaluates the log-likelihood on the data once per chain and reveals only whether it is
    finite everywhere at a user-chosen θ0: a property of the user's model, which the user must
    fix before a run can happen, not a statistic that is released with the draws.
    """
    theta = jnp.asarray(theta0)
    lp = jax.vmap(model.log_prior)(theta)
    if not bool(jnp.all(jnp.isfinite(lp))):
        raise ValueError("theta0: the log-prior is not finite at the starting point of some chain")
    ll_ok = jax.vmap(lambda t: jnp.all(jnp.isfinite(model.loglik_per_example(t, jnp.asarray(data)))))(theta)
    if not bool(jnp.all(ll_ok)):
        raise ValueError(
            "theta0: the model's log-likelihood is not finite at the starting point of some chain "
            "for some record; choose another theta0 or fix the model"
        )
