"""Minibatch DP penalty (001 §3.4, Thm 8): the penalty test on a subsampled log-likelihood ratio.

One iteration, for a data-independent symmetric proposal θ' (the modes of
:mod:`dpmcmc.kernels.proposals`: random walk, one-component, guided walk):

1. Draw a batch ``B`` of ``b`` distinct records uniformly without replacement.
2. ``r_j = clip_{c₀}(ℓ_j(θ') − ℓ_j(θ))`` for ``j ∈ B``, ``c₀ = L‖θ − θ'‖`` (``L`` = ``clip``;
   untempered ratios; a NaN ratio counts as ``−c₀``).
3. With ``k = nT/b`` (``T`` = ``model.temperature``), ``R = Σ_B r_j`` and
   ``Q = Σ_B (r_j − R/b)²``: the tempered estimate ``λ_B = kR`` of the log-likelihood ratio and
   the estimate ``σ_b² = k² Q`` of its variance (001 §3.4).
4. Release ``Λ̃ = λ_B − σ_b²/2 + N(0, σ²)``, ``σ² = τ c²``, ``c = c(θ, θ')`` the sensitivity of
   ``λ_B − σ_b²/2`` derived below; drawn by
   :func:`dpmcmc.kernels.mechanisms.gaussian_mechanism`.
5. Accept with probability ``min(1, exp(Λ̃ + ln p(θ') − ln p(θ) − σ²/2))``
   (:func:`dpmcmc.kernels.penalty.penalty_accept`), i.e. 001's
   ``min{1, exp(λ* − (σ² + σ_b²)/2)}`` with the noise inside ``λ*``.

If ``λ_B`` were exactly ``λ + N(0, σ_b²)`` (CLT) the total noise would be ``N(0, σ² + σ_b²)`` and
the penalty correction exact, so the chain targets the tempered posterior up to the CLT error
of the batch estimate and the error of estimating its variance; like 001, ``σ_b²`` uses no
finite-population correction (appropriate for ``b ≪ n``). Clipping changes the target where it
acts.

Privacy (001 Thm 8). One release is a Gaussian mechanism on the batch with sensitivity ``c`` and
noise variance ``τ c²``, i.e. ``ε'(α) = α/(2τ)`` in RDP (μ = 1/(2τ)), amplified by fixed-size
subsampling without replacement with ``q = b/n`` and composed over iterations and chains by
``dpmcmc.accounting`` (algorithm ``"minibatch-penalty"``; ``accountant="pld"`` numerically, or
``"rdp"`` as in Thm 8). ``c`` depends on ``(θ, θ')`` only, never on the data.

Run statistics (``docs/post_processing.md``). The accounted mechanism is the subsampled one: its
output is ``Λ̃`` alone, the batch being its internal (secret) randomness. The accept decision and
the divergence flag read the batch only through ``Λ̃`` (with σ, the prior, θ' and the accept
uniform), so ``Info.accepted`` and ``Info.diverged`` are post-processing of the amplified
release, covered by the guarantee (``Result.released``). ``Info.clip_fraction`` is counted on the
batch's raw ratios: NOT private.

Sensitivity of ``λ_B − σ_b²/2`` (001 Lemma 1, re-derived)
----------------------------------------------------------
Let two neighbouring batches share ``b − 1`` clipped ratios with sum ``S`` (so
``|S| ≤ (b − 1)c₀``) and differ in the last one, ``x`` against ``y``, ``x, y ∈ [−c₀, c₀]``. With
``f = kR − ½k²(Σ r_j² − R²/b)`` the common squares cancel and

    f(x) − f(y) = k(x − y) − ½k²[(1 − 1/b)(x² − y²) − (2S/b)(x − y)]
                = (x − y) · [k + k²S/b − ½k²(1 − 1/b)(x + y)].

Write ``u = x − y`` and ``v = x + y``; ``x, y ∈ [−c₀, c₀]`` is ``|u| + |v| ≤ 2c₀``. Then

    |f(x) − f(y)| ≤ |u| (A + β|v|),   A = k + k²c₀(b − 1)/b,   β = ½k²(b − 1)/b.

On ``|v| = w ∈ [0, 2c₀]`` with ``|u| ≤ 2c₀ − w`` the bound ``h(w) = (2c₀ − w)(A + βw)`` is
concave with ``h'(0) = −A + 2βc₀ = −k < 0``, so its maximum is ``h(0) = 2c₀A``:

    c(θ, θ') = 2kc₀ + 2k²c₀²(b − 1)/b,   k = nT/b,   c₀ = L‖θ − θ'‖.

The bound is attained (all shared ratios ``+c₀``, ``x = c₀``, ``y = −c₀``), so it is the exact
sensitivity. 001 states ``c = Δ_λ + Δ_σ`` with ``Δ_λ = 2kc₀`` and
``Δ_σ = 3k²c₀²(b − 1)/b`` as the bound on ``½Δσ_b²``. Its printed proof is garbled; bounding the
two parts separately (``|x² − y²| ≤ c₀²``, ``|x − y| ≤ 2c₀``, ``|S| ≤ (b − 1)c₀``) gives
``½Δσ_b² ≤ (5/2)k²c₀²(b − 1)/b``, so 001's ``c`` is a valid but looser bound (its worst cases for
the two parts do not occur together); this module uses the exact ``c`` above, which the tests
check by brute force over worst-case substitutions.

Non-finite per-record value: a NaN ratio of a batch record becomes ``−c₀`` and ±inf ``±c₀``
before ``R`` and ``Q`` are formed (counted as clipped); never a rejection (docs/nonfinite.md).
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

import jax.numpy as jnp
from scipy.special import ndtr

from dpmcmc.accounting._checks import check_batch_size, check_choice, check_per_dim, check_positive
from dpmcmc.accounting.events import (
    SUBSAMPLED_GAUSSIAN,
    ReleaseEvent,
    ReleaseSpec,
    subsampled_gaussian_release,
)
from dpmcmc.records.layout import num_rows
from dpmcmc.kernels.mechanisms import NoiseSource, gaussian_mechanism
from dpmcmc.kernels.minibatch import (
    batch_llr_moments,
    batch_rows,
    clipped_batch_llr,
    sample_batch_indices,
)
from dpmcmc.kernels.penalty import penalty_accept
from dpmcmc.kernels.proposals import (MODES, check_mode, init_state, plain_transition,
                                         proposal_transition)
from dpmcmc.samplers.audit_design import (FAR, SUBSAMPLED_N, AuditDesign, AuditEntry, last_draw,
                                           log_mixture_ratio, one_sided_design)
from dpmcmc.samplers.spec import SUBSAMPLED, AlgorithmSpec, NoiseLine, check_common, norm
from dpmcmc.kernels.warmup import RANDOM_WALK
from dpmcmc.kernels.types import Kernel, TappedKernel

Array = Any

__all__ = [
    "MinibatchRelease",
    "minibatch_sensitivity",
    "penalised_statistic",
    "release_penalised_llr",
    "build_minibatch_penalty",
    "tapped_minibatch_penalty",
    "SPEC",
]


class MinibatchRelease(NamedTuple):
    """One minibatch-penalty release and its NON-private side values.

    Attributes
    ----------
    value : scalar
        ``Λ̃ = kR − σ_b²/2 + N(0, σ²)``: the released statistic (prior term excluded).
    sigma : scalar
        ``σ = √τ · c``: the noise standard deviation (data-independent).
    sensitivity : scalar
        ``c(θ, θ')``.
    clip_count : scalar int
        Number of batch ratios clipped (NOT private).
    """

    value: Array
    sigma: Array
    sensitivity: Array
    clip_count: Array


def minibatch_sensitivity(c0: Array, k: Array, batch_size: int) -> Array:
    """Exact substitute sensitivity of ``kR − ½k²Q`` for ratios bounded by ``c0``.

    Parameters
    ----------
    c0 : float or array
        Per-example bound ``L‖θ − θ'‖``.
    k : float
        ``nT/b``.
    batch_size : int
        ``b``.

    Returns
    -------
    float or array
        ``2 k c0 + 2 k² c0² (b − 1)/b`` (derivation in the module docstring).
    """
    b = batch_size
    return 2.0 * k * c0 + 2.0 * k * k * c0 * c0 * (b - 1) / b


def penalised_statistic(r: Array, k: Array) -> Array:
    """``kR − ½k²Q`` of a batch of (clipped) ratios ``r``: ``λ_B − σ_b²/2`` before the noise."""
    total, sq_dev = batch_llr_moments(r)
    return k * total - 0.5 * k * k * sq_dev


def release_penalised_llr(key: Array, model, batch: Array, theta: Array, theta_new: Array,
                          n: int, tau: float, clip: float, *,
                          noise: Optional[NoiseSource] = None,
                          statistic: Callable[[Array, Array], Array] = penalised_statistic
                          ) -> MinibatchRelease:
    """Release ``λ_B − σ_b²/2 + N(0, τ c²)`` for one batch (steps 2–4 of the module doc).

    Parameters
    ----------
    key : PRNG key
    model : Model
        ``model.temperature`` is T.
    batch : array (b, ...)
        The rows of the batch.
    theta, theta_new : array (dim,)
    n : int
        Number of records in the whole data set.
    tau : float
        τ > 0: noise variance ``τ c²`` (one release has μ = 1/(2τ) before amplification).
    clip : float
        L > 0: per-example ratio bound per unit of ‖θ − θ'‖.
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver passes a secure source in secure mode).
    statistic : callable, default :func:`penalised_statistic`
        ``statistic(r, k)`` of the clipped batch ratios. Only the audit's tests pass another one
        (``k Σ r`` without ``−σ_b²/2``: an incorrect sampler, to show the tests have power);
        the noise stays calibrated to the sensitivity of :func:`penalised_statistic`.

    Returns
    -------
    MinibatchRelease
    """
    b = batch.shape[0]
    dtype = jnp.result_type(theta, jnp.float32)
    c0 = jnp.asarray(clip, dtype) * jnp.linalg.norm(theta_new - theta)
    k = jnp.asarray(n * model.temperature / b, dtype)
    clip_to = c0 if noise is None else noise.clip_bound(c0)
    r, clipped = clipped_batch_llr(model, batch, theta, theta_new, clip_to)
    stat = statistic(r, k)
    c = minibatch_sensitivity(c0, k, b)
    # σ = √τ·c from the event the accountant composes: its per-example bound is c/2.
    (event,) = _releases(n, {"tau": tau, "batch_size": b})
    sigma = event.noise_std(0.5 * c)
    return MinibatchRelease(gaussian_mechanism(key, stat, sigma, noise), sigma, c,
                            jnp.sum(clipped, dtype=jnp.int32))


def tapped_minibatch_penalty(model, tau: float, batch_size: int, clip: float,
                             proposal_std: Array, mode: str = "random-walk", *,
                             noise: Optional[NoiseSource] = None,
                             statistic: Callable[[Array, Array], Array] = penalised_statistic
                             ) -> TappedKernel:
    """The minibatch DP penalty kernel with its taps (arguments as :func:`build_minibatch_penalty`).

    Parameters
    ----------
    statistic : callable, default :func:`penalised_statistic`
        Passed to :func:`release_penalised_llr` (only the audit's tests change it).

    Returns
    -------
    TappedKernel
        ``taps = {"llr": Λ̃ (released), "llr_sigma": σ, "sensitivity": c, "theta": θ,
        "theta_new": θ', "batch": the batch indices}``.
    """
    check_mode(mode)
    b = int(batch_size)
    if b < 1:
        raise ValueError(f"batch_size must satisfy 1 <= batch_size <= n, got {b}")

    def release(keys, theta, theta_new, data, cache):
        # n is the data's static row count, known when the step is traced.
        n = num_rows(data)
        if b > n:
            raise ValueError(f"batch_size must satisfy 1 <= batch_size <= n = {n}, got {b}")
        k_batch, k_noise = keys
        idx = sample_batch_indices(k_batch, n, b, noise)
        rel = release_penalised_llr(k_noise, model, batch_rows(data, idx), theta, theta_new, n,
                                    tau, clip, noise=noise, statistic=statistic)
        return (rel.value, rel.sigma, rel.clip_count / b,
                {"llr": rel.value, "llr_sigma": rel.sigma, "sensitivity": rel.sensitivity,
                 "batch": idx}, None)

    # A batch changes every iteration: nothing per record to carry, so no chunk-local cache.
    transition = proposal_transition(model, jnp.asarray(proposal_std), mode, 2, release,
                                     penalty_accept)
    return TappedKernel(init_state, plain_transition(transition))


def build_minibatch_penalty(model, tau: float, batch_size: int, clip: float,
                            proposal_std: Array, mode: str = "random-walk", *,
                            noise: Optional[NoiseSource] = None) -> Kernel:
    """The minibatch DP penalty kernel (see the module docstring).

    Parameters
    ----------
    model : Model
    tau : float
        τ > 0 (001 Thm 8): noise variance ``τ c(θ, θ')²``.
    batch_size : int
        ``b``, ``1 ≤ b ≤ n``.
    clip : float
        L > 0: per-example ratio bound per unit of ‖θ − θ'‖.
    proposal_std : array (dim,)
    mode : {"random-walk", "one-component", "guided-walk"}
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver passes a secure source in secure mode).

    Returns
    -------
    Kernel
        ``init(theta, data)``, ``step(key, state, data)``; ``data`` the rows (n, ...), an array
        or a ``ShardedRows`` (``SPEC.layout``); ``batch_size ≤ n`` is checked when the step is
        traced on them. State :class:`dpmcmc.kernels.proposals.ProposalState`; info
        :class:`Info` whose ``clip_fraction`` is the fraction of the ``b`` batch ratios clipped.
    """
    return tapped_minibatch_penalty(model, tau, batch_size, clip, proposal_std, mode,
                                    noise=noise).kernel()


# ---------------------------------------------------------------- the spec

_KEYS = {"tau", "batch_size", "clip", "proposal_std", "mode"}


def _prepare(params: dict, model, n: int) -> dict:
    check_common("minibatch-penalty", params, _KEYS, ("tau", "batch_size", "clip", "proposal_std"),
                 model, n)
    return {
        "tau": check_positive("tau", params["tau"], strict=True),
        "batch_size": check_batch_size(params["batch_size"], n),
        "clip": check_positive("clip", params["clip"], strict=True),
        "proposal_std": check_per_dim("proposal_std", params["proposal_std"], model.dim),
        "mode": check_choice("mode", params.get("mode", "random-walk"), MODES),
    }


def _build(model, p: dict, noise: Optional[NoiseSource] = None) -> Kernel:
    return build_minibatch_penalty(model, p["tau"], p["batch_size"], p["clip"],
                                   p["proposal_std"], p["mode"], noise=noise)


def _releases(n: int, p: dict) -> tuple[ReleaseEvent, ...]:
    # 001 Thm 8: one release of λ_B − σ_b²/2 per iteration, sensitivity c and noise variance
    # τc². In the accountant's units (σ over the per-example bound c/2) σ = √τ·c/(c/2) = 2√τ,
    # μ = 2/σ² = 1/(2τ): Thm 8's per-release RDP α/(2τ); release_penalised_llr draws
    # event.noise_std(c/2) = √τ·c.
    return (subsampled_gaussian_release("penalised log-likelihood ratio", 2.0 * math.sqrt(p["tau"]),
                                        p["batch_size"], n, "tau", p["tau"]),)


#: Minibatch DP penalty: private, one fixed-size batch per iteration.
def _noise_lines(p: dict, n: int, dim: int, temperature: float = 1.0) -> tuple:
    # σ = √τ·c with c = 2kc₀ + 2k²c₀²(b−1)/b, k = nT/b, c₀ = L·s (module docstring), and the
    # same penalty test as dp-penalty: ceiling 2Φ(−σ/2).
    step, b = norm(p["proposal_std"]), p["batch_size"]
    k, c0 = n * temperature / b, p["clip"] * step
    sigma = math.sqrt(p["tau"]) * (2 * k * c0 + 2 * k * k * c0 * c0 * (b - 1) / b)
    return (NoiseLine("penalised log-likelihood ratio", sigma,
                      f"acceptance ceiling 2Φ(−σ/2) for a proposal of length {step:.3g}",
                      float(2.0 * ndtr(-sigma / 2.0))),)


# All shared records at +FAR: for a proposal θ' > θ every shared ratio is +c₀ = L(θ' − θ) and
# the differing record (+FAR in D, −FAR in D') moves the released λ_B − σ_b²/2 by exactly the
# sensitivity c (the attaining case of the module docstring); for θ' < θ the move is
# Δ = 2kr + 2k²r²(b − 1)/b with r = L(θ' − θ) < 0, |Δ| = c(1 − a)/(1 + a) with
# a = k|r|(b − 1)/b. A small proposal keeps a ≈ 0.04, so |Δ| ≈ 0.93 c. On D every batch is
# the same (mean m = kbr); on D' the batches holding the record are shifted to m − Δ.
_AUDIT_BATCH = 2
_AUDIT_PROPOSAL = 0.02


def _audit_design(scale: float = 1.0) -> AuditDesign:
    return one_sided_design(SUBSAMPLED_N, FAR, FAR, -FAR)


def _audit_params(scale: float) -> dict:
    return {"tau": scale, "batch_size": _AUDIT_BATCH, "clip": 1.0,
            "proposal_std": _AUDIT_PROPOSAL, "mode": "random-walk"}


def _audit_tapped(model, p, noise=None):
    return tapped_minibatch_penalty(model, p["tau"], p["batch_size"], p["clip"],
                                    jnp.asarray(p["proposal_std"]), p["mode"], noise=noise)


def _audit_statistic(taps, p, n):
    # −Σ_t log[(1 − q) + q φ(y_t; m_t − Δ_t, σ_t)/φ(y_t; m_t, σ_t)]: the log likelihood ratio
    # D vs D' (the design model is untempered, T = 1). Public quantities only: θ, θ', σ.
    b = p["batch_size"]
    k = n / b
    r = p["clip"] * (taps["theta_new"] - taps["theta"])[..., 0]
    m = k * b * r
    shift = 2.0 * k * r + 2.0 * k * k * r * r * (b - 1) / b
    sigma = taps["llr_sigma"]
    positive = sigma > 0
    safe = jnp.where(positive, sigma, 1.0)
    log_lr = (-2.0 * shift * (taps["llr"] - m) - shift * shift) / (2.0 * safe * safe)
    return -jnp.sum(jnp.where(positive, log_mixture_ratio(log_lr, b / n), 0.0))


SPEC = AlgorithmSpec("minibatch-penalty", True, _prepare, _build, SUBSAMPLED,
                     releases=ReleaseSpec(SUBSAMPLED_GAUSSIAN, ("tau", "batch_size"), _releases),
                     audit=AuditEntry("minibatch-penalty", 5, _audit_params, _audit_design,
                                      _audit_tapped, _audit_statistic, last_draw),
                     adaptation=RANDOM_WALK, noise_lines=_noise_lines)
