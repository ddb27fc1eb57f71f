"""DP penalty (Yildirim & Ermis 2019; 001 §3.1; 000 §3): private MH with the penalty correction.

One iteration, for proposal θ' from a data-independent symmetric proposal:

1. ``c = b‖θ−θ'‖``; ``R = Σ_j clip_c(ℓ_j(θ') − ℓ_j(θ))`` (untempered; a NaN ratio counts as
   ``-c``).
2. Release ``R̃ = R + ξ``, ``ξ ~ N(0, σ²)``, ``σ = 2 τ √n c`` (one Gaussian mechanism with
   sensitivity ``2c``: μ = 1/(2 τ² n) per iteration).
3. ``λ̂ = T R̃ + ln p(θ') − ln p(θ)`` (T = ``model.temperature`` multiplies the clipped, noised
   sum; the proposal term ln q(θ|θ')/q(θ'|θ) is 0 for all three modes).
4. Accept with probability ``min(1, exp(λ̂ − (Tσ)²/2))``: the penalty correction for noise of
   standard deviation ``Tσ`` in λ̂.

Without clipping (every ratio within its bound) the chain targets the exact tempered posterior.

Proposal modes (001 §3.1):

- ``"random-walk"``: ``θ' = θ + s ⊙ z``, ``z ~ N(0, I)``.
- ``"one-component"``: pick ``i`` uniformly, ``θ'_i = θ_i + s_i z``: a smaller ‖θ−θ'‖, hence less
  noise.
- ``"guided-walk"``: as one-component, but ``θ'_i = θ_i + d_i s_i |z|`` with a direction
  ``d_i ∈ {−1, +1}`` per component kept in the state; ``d_i`` is kept after an acceptance and
  reversed after a rejection (Gustafson's guided walk: a reversible move on (θ, d) followed by a
  direction flip, so π(θ) × uniform(d) is invariant). Directions start at +1.

Run statistics (``docs/post_processing.md``): ``Info.accepted`` and ``Info.diverged`` are
functions of the release ``R̃``, of σ (a function of θ, θ′), the prior, θ′ and the accept uniform
only, i.e. post-processing, covered by the guarantee (``Result.released``); so are the
guided-walk directions. ``Info.clip_fraction`` counts clipped ratios on the raw data: NOT private.
Non-finite per-record value: a NaN ratio becomes ``-c`` and ±inf is clipped to ``±c`` inside the
released sum (counted as clipped); never a rejection, never an error (docs/nonfinite.md).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from dpmcmc.accounting._checks import check_choice, check_per_dim, check_positive
from dpmcmc.accounting.events import GAUSSIAN, Release as ReleaseEvent, ReleaseSpec, gaussian_release
from dpmcmc.samplers._mechanisms import NoiseSource
from dpmcmc.samplers._per_example import prepare_data
from dpmcmc.samplers._penalty import penalty_accept
from dpmcmc.samplers._releases import release_llr
from dpmcmc.samplers._spec import FULL, AlgorithmSpec, as_data, check_common, optional_block
from dpmcmc.samplers._types import Info, Kernel

Array = Any

__all__ = ["MODES", "DPPenaltyState", "build_dp_penalty", "propose", "update_direction",
           "init_state", "finish_move", "SPEC"]

MODES = ("random-walk", "one-component", "guided-walk")


class DPPenaltyState(NamedTuple):
    """``position`` (dim,) and the guided-walk ``direction`` (dim,) of ±1 (unused otherwise)."""

    position: Array
    direction: Array


def propose(key: Array, theta: Array, direction: Array, proposal_std: Array, mode: str
            ) -> tuple[Array, Array]:
    """Data-independent symmetric proposal of DP penalty.

    Returns
    -------
    theta_new : array (dim,)
    component : int
        The updated component (one-component / guided-walk); −1 for random-walk.
    """
    k_comp, k_z = jax.random.split(key)
    s = proposal_std.astype(theta.dtype)
    if mode == "random-walk":
        z = jax.random.normal(k_z, theta.shape, dtype=theta.dtype)
        return theta + s * z, jnp.asarray(-1, jnp.int32)
    i = jax.random.randint(k_comp, (), 0, theta.shape[0], dtype=jnp.int32)
    z = jax.random.normal(k_z, (), dtype=theta.dtype)
    if mode == "one-component":
        move = s[i] * z
    elif mode == "guided-walk":
        move = direction[i] * s[i] * jnp.abs(z)
    else:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return theta.at[i].add(move), i


def update_direction(direction: Array, component: Array, accepted: Array, mode: str) -> Array:
    """Guided walk: keep ``direction[component]`` after an acceptance, reverse it after a rejection.

    The identity for the other modes. Shared by every sampler that uses :func:`propose`.
    """
    if mode != "guided-walk":
        return direction
    flip = jnp.where(accepted, 1.0, -1.0).astype(direction.dtype)
    return direction.at[component].multiply(flip)


def init_state(theta: Array) -> DPPenaltyState:
    """Initial state of a proposal-then-test kernel: ``theta`` with every direction +1."""
    theta = jnp.asarray(theta)
    return DPPenaltyState(theta, jnp.ones_like(theta))


def finish_move(state: DPPenaltyState, theta_new: Array, component: Array, accepted: Array,
                nan: Array, clip_fraction: Array, mode: str) -> tuple[DPPenaltyState, Info]:
    """The end of every DP penalty-style step (DP penalty, minibatch DP penalty, DP Barker).

    A NaN test statistic or a non-finite proposal is a divergence: the move is rejected and
    counted. Returns the new state and the (non-private) :class:`Info`.
    """
    theta = state.position
    diverged = nan | ~jnp.all(jnp.isfinite(theta_new))
    accepted = accepted & ~diverged
    direction = update_direction(state.direction, component, accepted, mode)
    new_state = DPPenaltyState(jnp.where(accepted, theta_new, theta), direction)
    return new_state, Info(accepted, clip_fraction.astype(theta.dtype), diverged)


def build_dp_penalty(model, data: Array, tau: float, clip: float, proposal_std: Array,
                     mode: str = "random-walk", *, block_size: Optional[int] = None,
                     mesh=None, noise: Optional[NoiseSource] = None, _correction: bool = True,
                     _audit: bool = False) -> Kernel:
    """The DP penalty kernel.

    Parameters
    ----------
    model : Model
    data : array (n, ...) or PreparedData
    tau : float
        Noise parameter τ > 0 (σ = 2 τ √n b‖θ−θ'‖).
    clip : float
        b > 0: per-example ratio bound per unit of ‖θ−θ'‖.
    proposal_std : array (dim,)
        Proposal standard deviations (per component).
    mode : {"random-walk", "one-component", "guided-walk"}
    block_size : int, optional
        Data block size for the per-example pass (default: ``auto_block_size``).
    mesh : jax.sharding.Mesh, optional
        Split the data rows over the devices of the mesh's (one) axis (see
        :mod:`dpmcmc.samplers._sharding`).
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver passes a secure source in secure mode).
    _correction : bool
        Internal testing hook (drops the penalty term when False). Never set it in a real run.
    _audit : bool
        Internal hook of :mod:`dpmcmc.audit`: ``step`` returns ``(state, (info, taps))`` with
        ``taps = {"llr": released noisy sum, "llr_sigma": its σ, "theta": θ, "theta_new": θ'}``.
        Never set it in a real run.

    Returns
    -------
    Kernel
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    # Laid out once here; every iteration's pass reads these blocks.
    data = prepare_data(data, model=model, block_size=block_size, mesh=mesh)
    n = data.shape[0]
    temp = model.temperature
    s = jnp.asarray(proposal_std)

    def step(key, state):
        k_prop, k_noise, k_acc = jax.random.split(key, 3)
        theta = state.position
        theta_new, i = propose(k_prop, theta, state.direction, s, mode)
        rel = release_llr(k_noise, model, data, theta, theta_new, tau, clip, noise=noise)
        noisy_log_ratio = temp * rel.value + model.log_prior(theta_new) - model.log_prior(theta)
        accepted, nan = penalty_accept(k_acc, noisy_log_ratio, temp * rel.sigma,
                                       correction=_correction)
        new_state, info = finish_move(state, theta_new, i, accepted, nan, rel.clip_count / n, mode)
        if _audit:
            return new_state, (info, {"llr": rel.value, "llr_sigma": rel.sigma, "theta": theta,
                                      "theta_new": theta_new})
        return new_state, info

    return Kernel(init_state, step)


# ---------------------------------------------------------------- the spec

_KEYS = {"tau", "clip", "proposal_std", "mode", "block_size"}


def _prepare(params: dict, model, n: int) -> dict:
    check_common("dp-penalty", params, _KEYS, ("tau", "clip", "proposal_std"), model, n)
    return {
        "tau": check_positive("tau", params["tau"], strict=True),
        "clip": check_positive("clip", params["clip"], strict=True),
        "proposal_std": check_per_dim("proposal_std", params["proposal_std"], model.dim),
        "mode": check_choice("mode", params.get("mode", "random-walk"), MODES),
        "block_size": optional_block(params.get("block_size")),
    }


def _build(model, data, p: dict, noise: Optional[NoiseSource] = None) -> Kernel:
    return build_dp_penalty(model, as_data(data), p["tau"], p["clip"], p["proposal_std"], p["mode"],
                            block_size=p["block_size"], noise=noise)


def _releases(n: int, p: dict) -> tuple[ReleaseEvent, ...]:
    # 001 Thm 6: one clipped log-likelihood-ratio sum per iteration, σ = 2τ√n·b‖θ−θ'‖ for
    # sensitivity 2b‖θ−θ'‖, μ = 1/(2τ²n); release_llr draws from the same constructor.
    return (gaussian_release("log-likelihood ratio", 1, p["tau"], n, "tau"),)


#: DP penalty: private, full-data passes, one Gaussian release per iteration.
SPEC = AlgorithmSpec("dp-penalty", True, _prepare, _build, FULL,
                     releases=ReleaseSpec(GAUSSIAN, ("tau",), _releases), audit="dp-penalty")
