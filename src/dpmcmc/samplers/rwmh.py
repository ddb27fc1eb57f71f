"""Random-walk Metropolis–Hastings (non-private), with optional log-likelihood-ratio clipping.

The clipping option reproduces the clipping experiment of 000 §4.2 / 001 §6.2: each
per-example log-likelihood ratio is clipped to ``[-b‖θ−θ'‖, b‖θ−θ'‖]`` and no noise is added.
Tempering: the log-likelihood (ratio sum, after clipping) is multiplied by ``model.temperature``.

Not private: the accept test reads the data without noise, so every ``Info`` field (acceptance,
divergences, clip fraction) is NOT private and is reported in ``Result.diagnostics``.
Non-finite per-record value (non-private): a NaN ratio makes the sum NaN and the proposal is
rejected with ``diverged=True``; ``dpmcmc.sample`` refuses a start θ0 where a record's log-
likelihood is not finite (docs/nonfinite.md).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from dpmcmc.records.layout import num_rows
from dpmcmc.kernels.penalty import mh_accept
from dpmcmc.records.passes import clipped_llr_sum, loglik_sum
from dpmcmc.accounting._checks import check_per_dim, check_positive
from dpmcmc.samplers.defaults import PublicScale
from dpmcmc.samplers.spec import FULL, AlgorithmSpec, check_common, optional_block
from dpmcmc.kernels.warmup import RANDOM_WALK
from dpmcmc.kernels.types import Info, Kernel

Array = Any

__all__ = ["RWMHState", "build_rwmh", "SPEC"]


class RWMHState(NamedTuple):
    """``position`` (dim,) and the tempered log posterior there (used without clipping)."""

    position: Array
    log_density: Array


def build_rwmh(model, proposal_std: Array, clip: Optional[float] = None) -> Kernel:
    """Gaussian random-walk Metropolis–Hastings.

    Parameters
    ----------
    model : Model
    proposal_std : float or array (dim,)
        Standard deviation of the Gaussian proposal ``θ' = θ + proposal_std ⊙ z``.
    clip : float, optional
        Clip each per-example log-likelihood ratio to ``[-clip‖θ−θ'‖, clip‖θ−θ'‖]``.

    Returns
    -------
    Kernel
        ``init(theta, data)``, ``step(key, state, data)``; ``data`` a ``PreparedData``
        (``SPEC.layout``; raw rows are laid out by each pass on the fly).
        ``Info.clip_fraction`` is the fraction of ratios clipped (0 without ``clip``).
        A NaN log density or ratio at the proposal is a rejection with ``diverged=True``.
    """
    temp = model.temperature
    s = jnp.asarray(proposal_std)

    def log_density(theta, data):
        return model.log_prior(theta) + temp * loglik_sum(model, data, theta)

    def init(theta, data):
        theta = jnp.asarray(theta)
        return RWMHState(theta, log_density(theta, data))

    def step(key, state, data):
        n = num_rows(data)
        k_prop, k_acc = jax.random.split(key)
        theta = state.position
        z = jax.random.normal(k_prop, theta.shape, dtype=theta.dtype)
        theta_new = theta + s.astype(theta.dtype) * z
        if clip is None:
            lp_new = log_density(theta_new, data)
            log_ratio = lp_new - state.log_density
            count = jnp.zeros((), jnp.int32)
        else:
            bound = clip * jnp.linalg.norm(theta_new - theta)
            total, count = clipped_llr_sum(model, data, theta, theta_new, bound,
                                           nan_to_bound=False)
            log_ratio = temp * total + model.log_prior(theta_new) - model.log_prior(theta)
            lp_new = state.log_density  # not tracked with clipping
        accepted, nan = mh_accept(k_acc, log_ratio)
        diverged = nan | ~jnp.all(jnp.isfinite(theta_new))
        accepted = accepted & ~diverged
        new_state = RWMHState(jnp.where(accepted, theta_new, theta),
                              jnp.where(accepted, lp_new, state.log_density))
        return new_state, Info(accepted, count.astype(theta.dtype) / n, diverged)

    return Kernel(init, step)


# ---------------------------------------------------------------- the spec

_KEYS = {"proposal_std", "clip", "block_size"}


def _prepare(params: dict, model, n: int) -> dict:
    check_common("rwmh", params, _KEYS, ("proposal_std",), model, n)
    clip = params.get("clip")
    return {
        "proposal_std": check_per_dim("proposal_std", params["proposal_std"], model.dim),
        "clip": None if clip is None else check_positive("clip", clip, strict=True),
        "block_size": optional_block(params.get("block_size")),
    }


def _build(model, p: dict, noise=None) -> Kernel:
    # block_size is the layout's (SPEC.layout), not the kernel's.
    return build_rwmh(model, p["proposal_std"], p["clip"])


def random_walk_scale(s: PublicScale) -> list:
    """Proposal sds ``2.38 s₀/√D`` per coordinate (Roberts, Gelman & Gilks' scaling: the proposal
    has length ≈ 2.38 s₀, s₀ the smallest posterior sd the declared bounds allow)."""
    return [2.38 * s.scale / math.sqrt(s.dim)] * s.dim


def _defaults(s: PublicScale) -> dict:
    # The non-private baseline gets DP penalty's proposal, for checks side by side.
    return {"proposal_std": random_walk_scale(s)}


#: Random-walk Metropolis–Hastings: NON-private baseline, full-data passes.
SPEC = AlgorithmSpec("rwmh", False, _prepare, _build, FULL, adaptation=RANDOM_WALK,
                     defaults=_defaults)
