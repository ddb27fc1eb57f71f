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

Proposal modes (001 §3.1): ``"random-walk"``, ``"one-component"`` and ``"guided-walk"``, defined
in :mod:`dpmcmc.kernels.proposals` (shared with minibatch DP penalty and DP Barker).

Run statistics (``docs/post_processing.md``): ``Info.accepted`` and ``Info.diverged`` are
functions of the release ``R̃``, of σ (a function of θ, θ′), the prior, θ′ and the accept uniform
only, i.e. post-processing, covered by the guarantee (``Result.released``); so are the
guided-walk directions. ``Info.clip_fraction`` counts clipped ratios on the raw data: NOT private.
Non-finite per-record value: a NaN ratio becomes ``-c`` and ±inf is clipped to ``±c`` inside the
released sum (counted as clipped); never a rejection, never an error (docs/nonfinite.md).

Chunk-local cache: the kernel's ``cached`` step (:class:`~dpmcmc.kernels.types.ChunkCache`)
reads ℓ_j(θ) of every record from a cache the chain driver builds when a compiled chunk starts
and carries through the chunk (ℓ_j(θ') replaces it after an accepted move), so an iteration
evaluates the model once per record, not twice: the same release bit for bit, used where the
model is expensive enough for that to pay (1.1–1.3× faster per iteration on the models measured,
benchmarks/results/chunk_cache.md; slower on cheap ones, where it stays off). The
cache holds n floats per chain computed from the raw data, NOT private: it never leaves the
chunk (no state, draw, ``Info`` or checkpoint holds it).
"""
from __future__ import annotations

import math

from typing import Any, Callable, Optional

import jax.numpy as jnp

from dpmcmc.accounting._checks import check_choice, check_per_dim, check_positive
from dpmcmc.accounting.events import GAUSSIAN, ReleaseEvent, ReleaseSpec, gaussian_release
from dpmcmc.kernels.mechanisms import NoiseSource
from dpmcmc.records.layout import num_rows
from dpmcmc.kernels.penalty import penalty_accept
from dpmcmc.records.passes import CACHE_MIN_COST, loglik_rows, record_cost
from dpmcmc.kernels.proposals import (MODES, check_mode, init_state, plain_transition,
                                         proposal_transition)
from dpmcmc.kernels.releases import release_llr, release_llr_cached
from dpmcmc.samplers.audit_design import AuditEntry, far_row_design, last_draw, llr_statistic
from dpmcmc.samplers.defaults import PublicScale, mu_per_iteration
from dpmcmc.samplers.spec import (FULL, AlgorithmSpec, acceptance_line, check_common, norm,
                                   optional_block)
from dpmcmc.kernels.warmup import RANDOM_WALK
from dpmcmc.samplers.rwmh import random_walk_scale
from dpmcmc.kernels.types import Kernel, TappedKernel

Array = Any

__all__ = ["MODES", "build_dp_penalty", "tapped_dp_penalty", "SPEC"]


def tapped_dp_penalty(model, tau: float, clip: float, proposal_std: Array,
                      mode: str = "random-walk", *, noise: Optional[NoiseSource] = None,
                      accept: Callable = penalty_accept,
                      loglik_cache: Optional[bool] = None) -> TappedKernel:
    """The DP penalty kernel with its taps (arguments as :func:`build_dp_penalty`).

    Parameters
    ----------
    accept : callable, default :func:`dpmcmc.kernels.penalty.penalty_accept`
        ``accept(key, noisy_log_ratio, noise_sd)``, the test of step 4. Only the audit's tests
        pass another one (a test without the penalty term, to show they have power).

    Returns
    -------
    TappedKernel
        ``taps = {"llr": released noisy sum R̃ (untempered), "llr_sigma": its σ, "theta": θ,
        "theta_new": θ'}``.
    """
    check_mode(mode)
    temp = model.temperature

    def release(keys, theta, theta_new, data, cache):
        (k_noise,) = keys
        if cache is None:
            rel = release_llr(k_noise, model, data, theta, theta_new, tau, clip, noise=noise)
            rows = None
        else:
            rel, rows = release_llr_cached(k_noise, model, data, cache, theta, theta_new, tau, clip,
                                           noise=noise)
        return (temp * rel.value, temp * rel.sigma, rel.clip_count / num_rows(data),
                {"llr": rel.value, "llr_sigma": rel.sigma}, rows)

    def cache_init(state, data):
        # ℓ_j(θ) of every record at the chain's position: raw-data-derived, NOT private; it lives
        # in one compiled chunk of the driver only (ChunkCache). No cache (None: the plain pass)
        # where it would cost more than it saves, decided from the model's structure and the
        # data's shape at trace time, never from values.
        use = loglik_cache
        if use is None:
            use = record_cost(model, state.position, data) >= CACHE_MIN_COST
        return loglik_rows(model, data, state.position) if use else None

    transition = proposal_transition(model, jnp.asarray(proposal_std), mode, 1, release, accept)
    return TappedKernel(init_state, plain_transition(transition), cache_init, transition)


def build_dp_penalty(model, tau: float, clip: float, proposal_std: Array,
                     mode: str = "random-walk", *, noise: Optional[NoiseSource] = None,
                     loglik_cache: Optional[bool] = None) -> Kernel:
    """The DP penalty kernel.

    Parameters
    ----------
    model : Model
    tau : float
        Noise parameter τ > 0 (σ = 2 τ √n b‖θ−θ'‖).
    clip : float
        b > 0: per-example ratio bound per unit of ‖θ−θ'‖.
    proposal_std : array (dim,)
        Proposal standard deviations (per component).
    mode : {"random-walk", "one-component", "guided-walk"}
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver builds the step with a secure source in secure
        mode).
    loglik_cache : bool, optional
        Whether the kernel's chunk-local cache (``Kernel.cached``) holds ℓ_j(θ) of every record,
        so that an iteration evaluates the model once per record instead of twice. ``None``
        (default): when the per-record log-likelihood is expensive enough for the saving to
        outweigh storing n values per chain per iteration
        (:func:`dpmcmc.records.passes.record_cost` ≥ ``CACHE_MIN_COST``). The draws are the
        same bit for bit either way.

    Returns
    -------
    Kernel
        ``init(theta, data)``, ``step(key, state, data)``; ``data`` a ``PreparedData``
        (``SPEC.layout``: blocks, split over a mesh if one is given; raw rows are laid out by the
        pass on the fly). State :class:`dpmcmc.kernels.proposals.ProposalState`; info
        :class:`Info`.
    """
    return tapped_dp_penalty(model, tau, clip, proposal_std, mode, noise=noise,
                             loglik_cache=loglik_cache).kernel()


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


def _build(model, p: dict, noise: Optional[NoiseSource] = None) -> Kernel:
    # block_size is the layout's (SPEC.layout), not the kernel's.
    return build_dp_penalty(model, p["tau"], p["clip"], p["proposal_std"], p["mode"], noise=noise)


def _releases(n: int, p: dict) -> tuple[ReleaseEvent, ...]:
    # 001 Thm 6: one clipped log-likelihood-ratio sum per iteration, σ = 2τ√n·b‖θ−θ'‖ for
    # sensitivity 2b‖θ−θ'‖, μ = 1/(2τ²n); release_llr draws from the same constructor.
    return (gaussian_release("log-likelihood ratio", 1, p["tau"], n, "tau"),)


#: DP penalty: private, full-data passes, one Gaussian release per iteration.
def _noise_lines(p: dict, n: int, dim: int, temperature: float = 1.0) -> tuple:
    # The typical move: the proposal's length (one coordinate's for one-component updates).
    step = norm(p["proposal_std"]) / (math.sqrt(dim) if p.get("mode") == "one-component" else 1.0)
    (llr,) = SPEC.events(n, p)
    return (acceptance_line(llr, p["clip"] * step, step, "proposal"),)


def _defaults(s: PublicScale) -> dict:
    # The random-walk scale, and τ such that the penalty noise of such a move caps acceptance
    # at TARGET_CEILING (σ = 2τ√n·b·2.38 s₀ = 1.349); where the budget would buy fewer than
    # MIN_DEFAULT_ITERATIONS, τ is raised by f and the move shortened by g (budget_split). σ
    # and μ come from the spec's own release event at τ = 1.
    proposal = random_walk_scale(s)
    (llr,) = SPEC.events(s.n, {"tau": 1.0})
    tau = s.sigma_target / llr.noise_std(s.clip * norm(proposal))
    f, g = s.budget_split(mu_per_iteration(((llr, tau),)))
    return {"proposal_std": [p / g for p in proposal], "clip": s.clip, "tau": f * tau}


def _audit_params(scale: float) -> dict:
    return {"tau": scale, "clip": 1.0, "proposal_std": 0.5, "mode": "random-walk"}


def _audit_tapped(model, p, noise=None):
    return tapped_dp_penalty(model, p["tau"], p["clip"], jnp.asarray(p["proposal_std"]),
                             p["mode"], noise=noise)


def _audit_statistic(taps, p, n):
    return llr_statistic(taps, p["clip"])


SPEC = AlgorithmSpec("dp-penalty", True, _prepare, _build, FULL,
                     releases=ReleaseSpec(GAUSSIAN, ("tau",), _releases),
                     audit=AuditEntry("dp-penalty", 5, _audit_params, far_row_design,
                                      _audit_tapped, _audit_statistic, last_draw),
                     adaptation=RANDOM_WALK, noise_lines=_noise_lines, defaults=_defaults)
