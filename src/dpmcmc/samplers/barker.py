"""DP Barker (002, Heikkilä et al. 2019; 001 §3.3, Algorithm 3): subsampled Barker test with a CLT
correction.

Correction distribution
-----------------------
The acceptance test ``Δ* + X_nc + X_corr > 0`` needs ``X_corr`` with
``N(0, C) + X_corr ≈ Logistic(0, 1)``. The fit, its measured accuracy and sampling live in
:mod:`dpmcmc.kernels.barker_correction` and are re-exported here:
:func:`correction_mixture`, :func:`correction_error`, :func:`sample_correction`,
:func:`acceptance_probability`, :func:`fit_correction`.

The kernel
----------
One iteration (002 §2.3, §3.2 and App. B; 001 Algorithm 3), for a data-independent symmetric
proposal θ' (the proposal modes of :mod:`dpmcmc.kernels.proposals`):

1. Draw a batch ``B`` of ``b`` distinct records uniformly without replacement
   (:func:`dpmcmc.kernels.minibatch.sample_batch_indices`).
2. ``r_j = clip_c(ℓ_j(θ') − ℓ_j(θ))`` for ``j ∈ B``, ``c = √b / n₀`` (untempered ratios; 002
   eq. 30, 001 §3.3; a NaN ratio counts as ``−c``).
3. The tempered batch estimate of the log-likelihood ratio, with ``T = n₀/n`` and
   ``k = nT/b = n₀/b``: ``Δ*_data = k Σ_{j∈B} r_j``, and the estimate of its variance (002
   eqs. 55–56, 61) ``s² = k² Σ_{j∈B} (r_j − r̄)² = (n₀²/b) · Var(r)``, ``Var`` the plain
   ``1/b`` batch variance.
4. Release ``Δ̃ = Δ*_data + X_nc``, ``X_nc ~ N(0, C − s²)``, ``C = 2`` (002 eq. 54): drawn by
   :func:`dpmcmc.kernels.mechanisms.gaussian_mechanism` with ``σ = √(C − s²)``.
5. Accept iff ``Δ̃ + ln p(θ') − ln p(θ) + X_corr > 0`` with ``X_corr`` from
   :func:`sample_correction` at ``C = 2`` (002 eq. 18; the proposal ratio is 1).

If the batch estimate were exactly ``Δ + N(0, s²)`` (the CLT approximation of 002 eqs. 12–16)
the total noise would be ``N(0, C)`` and the test would accept with probability
``acceptance_probability(Δ) ≈ 1/(1 + e^{−Δ})``, the Barker test on the tempered posterior
``p(θ) Π_i p(x_i|θ)^T``, which satisfies detailed balance (002 Lemma 1). The chain therefore
targets the tempered posterior only approximately (002 App. C): the CLT error of the batch
estimate and the ``≤ 1.5e-3`` sup-CDF error of ``X_corr`` remain, and clipping changes the
target where it acts.

No data-dependent halt
----------------------
002's reference code stops the chain when the batch variance exceeds its bound. A halt decided
from the data is itself a release that no theorem accounts for, so this kernel never halts.
None is needed: with every ``|r_j| ≤ √b/n₀`` the variance estimate obeys (002 App. B, eq. 61)
``Var(r) ≤ (1/b) Σ r_j² ≤ b/n₀²``, hence ``s² ≤ 1`` and the noise variance ``C − s²`` lies in
``[1, 2]`` (eq. 62) by construction. The kernel clamps ``s²`` to ``[0, 1]``, which changes
nothing but float rounding.

The data-dependent noise scale
------------------------------
Unlike DP penalty, the noise standard deviation ``√(2 − s²)`` depends on the data through
``s²``. Theorem 2 of 002 is proved for exactly this mechanism: it bounds the Rényi divergence
between the two Gaussians ``N(Δ*_data(D), 2 − s²(D))`` and ``N(Δ*_data(D'), 2 − s²(D'))`` of
neighbouring batches, both the mean and the variance terms (App. B, ``f₁, f₂, f₃`` of eq. 59,
with the variance difference bounded by ``5/b`` in eqs. 63–78). The part ``s²`` of the total
``N(0, C)`` is supplied by the subsampling error of the estimate and only ``C − s²`` is added;
what is released is one draw from a Gaussian whose mean and variance are both covered by the
theorem. The accountant (``dpmcmc.accounting``, algorithm ``"dp-barker"``: 002 Thm 2 amplified by
Cor. 3 and composed over iterations, RDP only, ``batch_size > 10``) charges that release; the
acceptance decision and ``X_corr`` are post-processing. Tempering enters only through ``n₀``,
on which the RDP bound does not depend (App. B, last paragraph).

Run statistics (``docs/post_processing.md``): ``Info.accepted`` (the test of ``Δ̃`` with the
prior and the data-independent ``X_corr``) and ``Info.diverged`` (``Δ̃ + Δ_prior`` NaN or θ'
non-finite) are post-processing of the release, covered by the guarantee (``Result.released``).
``s²`` and the noise variance stay inside the mechanism and are reported nowhere;
``Info.clip_fraction`` is counted on the batch's raw ratios: NOT private.
Non-finite per-record value: a NaN ratio of a batch record becomes ``−c`` and ±inf ``±c`` inside
the released sum (counted as clipped); never a rejection (docs/nonfinite.md).
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

import jax.numpy as jnp

from dpmcmc.accounting._checks import (
    check_batch_size,
    check_choice,
    check_n0,
    check_per_dim,
    check_positive,
)
from dpmcmc.accounting.events import (
    BARKER,
    BARKER_NOISE_VARIANCE,
    ReleaseEvent,
    ReleaseSpec,
    barker_release,
)
from dpmcmc.kernels.barker_correction import (
    sample_correction,
)
from dpmcmc.records.layout import num_rows
from dpmcmc.kernels.mechanisms import NoiseSource, gaussian_mechanism
from dpmcmc.kernels.minibatch import (
    batch_llr_moments,
    batch_rows,
    clipped_batch_llr,
    sample_batch_indices,
)
from dpmcmc.kernels.proposals import (MODES, check_mode, init_state, plain_transition,
                                         proposal_transition)
from dpmcmc.samplers.audit_design import (MAX_DESIGN_ROWS, AuditEntry, cancelling_design,
                                           last_draw)
from dpmcmc.samplers.spec import SUBSAMPLED, AlgorithmSpec, NoiseLine, check_common
from dpmcmc.kernels.warmup import RANDOM_WALK
from dpmcmc.kernels.types import Kernel, TappedKernel

Array = Any

__all__ = [
    "DP_BARKER_C",
    "MIN_BATCH_SIZE",
    "BarkerRelease",
    "barker_clip_bound",
    "release_barker",
    "barker_accept",
    "draw_correction",
    "build_dp_barker",
    "tapped_dp_barker",
    "SPEC",
]

DP_BARKER_C: float = BARKER_NOISE_VARIANCE
"""Total noise variance ``C`` of the DP Barker test: 2, the value 002 Thm 2 is proved for."""

MIN_BATCH_SIZE: int = 11
"""Smallest batch size for which 002 Thm 2 admits an order (``2 ≤ α < b/5``)."""


class BarkerRelease(NamedTuple):
    """One DP Barker release (the noisy tempered batch estimate) and NON-private side values.

    Attributes
    ----------
    value : scalar
        ``Δ̃ = (n₀/b) Σ_{j∈B} r_j + N(0, C − s²)``: the released statistic (prior term excluded).
    noise_variance : scalar
        ``C − s²`` ∈ [1, 2]: the variance of the Gaussian noise added.
    s2 : scalar
        ``s²``, the batch variance estimate. Data-dependent and NOT private on its own (it is
        released only through the noise variance, as 002 Thm 2 accounts for).
    clip_count : scalar int
        Number of batch ratios clipped (NOT private).
    """

    value: Array
    noise_variance: Array
    s2: Array
    clip_count: Array


def barker_clip_bound(batch_size: int, n0: float) -> float:
    """The per-example bound ``√b / n₀`` on untempered log-likelihood ratios (002 eq. 30)."""
    return math.sqrt(batch_size) / n0


def release_barker(key: Array, model, batch: Array, theta: Array, theta_new: Array, n0: float,
                   *, noise: Optional[NoiseSource] = None,
                   mechanism: Optional[Callable] = None) -> BarkerRelease:
    """Release the noisy tempered batch estimate ``Δ̃`` of DP Barker (steps 2–4 of the module doc).

    Parameters
    ----------
    key : PRNG key
    model : Model
    batch : array (b, ...)
        The rows of the batch (drawn by the caller with ``sample_batch_indices``).
    theta, theta_new : array (dim,)
    n0 : float
        ``n₀ = T n``: the tempering of 002 §3.2 (``n₀ = n`` without tempering).
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver passes a secure source in secure mode).
    mechanism : callable, optional
        ``mechanism(key, value, sigma, noise)``; default (None): this module's
        ``gaussian_mechanism``, looked up at call time like every other sampler's, so that a
        test replacing the module's mechanism replaces DP Barker's too. Only the audit's tests
        pass another one (no noise at all, to see the exact released means, or with an exact
        logistic test the noiseless limit the privacy noise approximates).

    Returns
    -------
    BarkerRelease
    """
    b = batch.shape[0]
    dtype = jnp.result_type(theta, jnp.float32)
    bound = jnp.asarray(barker_clip_bound(b, n0), dtype)
    clip_to = bound if noise is None else noise.clip_bound(bound)
    r, clipped = clipped_batch_llr(model, batch, theta, theta_new, clip_to)
    total, sq_dev = batch_llr_moments(r)
    k = jnp.asarray(n0 / b, dtype)
    # s² ≤ 1 holds exactly for clipped ratios (002 eq. 61); the clamp only absorbs rounding.
    s2 = jnp.clip(k * k * sq_dev, 0.0, 1.0)
    noise_variance = jnp.asarray(DP_BARKER_C, dtype) - s2
    count = jnp.sum(clipped, dtype=jnp.int32)
    if mechanism is None:
        mechanism = gaussian_mechanism
    value = mechanism(key, k * total, jnp.sqrt(noise_variance), noise)
    return BarkerRelease(value, noise_variance, s2, count)


def draw_correction(key: Array, dtype: Any, noise: Optional[NoiseSource] = None) -> Array:
    """One ``X_corr`` draw at ``C = 2`` from the kernel's noise source (:func:`sample_correction`)."""
    return sample_correction(key, (), C=DP_BARKER_C, dtype=dtype, noise=noise)


def barker_accept(key: Array, noisy_log_ratio: Array, *, noise: Optional[NoiseSource] = None,
                  correction: Callable = draw_correction) -> tuple[Array, Array]:
    """The corrected Barker test: accept iff ``noisy_log_ratio + X_corr > 0``, ``X_corr`` at C = 2.

    Parameters
    ----------
    key : PRNG key
    noisy_log_ratio : scalar
        ``Δ̃ + ln p(θ') − ln p(θ)``: the released estimate plus the prior (and proposal) terms.
    noise : NoiseSource, optional
        The kernel's noise source, which draws ``X_corr`` (secret in secure mode).
    correction : callable, default :func:`draw_correction`
        ``correction(key, dtype, noise)``, the draw of ``X_corr``. Only the audit's tests pass
        another one (an exact standard logistic: with a noiseless ``Δ*`` this is the exact
        Barker test, the limit the privacy noise approximates).

    Returns
    -------
    accepted : bool
        False whenever ``noisy_log_ratio`` is NaN.
    nan : bool
        ``noisy_log_ratio`` is NaN: the caller reports a divergence.
    """
    dtype = jnp.result_type(noisy_log_ratio, jnp.float32)
    x = correction(key, dtype, noise)
    nan = jnp.isnan(noisy_log_ratio)
    return (~nan) & (noisy_log_ratio + x > 0), nan


def tapped_dp_barker(model, batch_size: int, n0: float, proposal_std: Array,
                     mode: str = "random-walk", *, noise: Optional[NoiseSource] = None,
                     mechanism: Optional[Callable] = None,
                     correction: Callable = draw_correction) -> TappedKernel:
    """The DP Barker kernel with its taps (arguments as :func:`build_dp_barker`).

    Parameters
    ----------
    mechanism, correction : callable
        Passed to :func:`release_barker` and :func:`barker_accept` (only the audit's tests
        change them).

    Returns
    -------
    TappedKernel
        ``taps = {"delta": Δ̃ (released), "noise_variance": C − s², "theta": θ,
        "theta_new": θ', "batch": the batch indices}``.
    """
    check_mode(mode)
    b = int(batch_size)
    if b < MIN_BATCH_SIZE:
        raise ValueError(f"batch_size must satisfy {MIN_BATCH_SIZE} <= batch_size <= n, got {b}")
    n0 = float(n0)
    if not (math.isfinite(n0) and 0.0 < n0):
        raise ValueError(f"n0 must satisfy 0 < n0 <= n, got {n0!r}")

    def release(keys, theta, theta_new, data, cache):
        # n is the data's static row count, known when the step is traced.
        n = num_rows(data)
        if b > n:
            raise ValueError(f"batch_size must satisfy {MIN_BATCH_SIZE} <= batch_size <= n = {n}, "
                             f"got {b}")
        if n0 > n:
            raise ValueError(f"n0 must satisfy 0 < n0 <= n = {n}, got {n0!r}")
        k_batch, k_noise = keys
        idx = sample_batch_indices(k_batch, n, b, noise)
        rel = release_barker(k_noise, model, batch_rows(data, idx), theta, theta_new, n0,
                             noise=noise, mechanism=mechanism)
        return (rel.value, rel.noise_variance, rel.clip_count / b,
                {"delta": rel.value, "noise_variance": rel.noise_variance, "batch": idx}, None)

    def accept(key, noisy_log_ratio, _noise_variance):
        # The Barker test needs no noise scale: X_nc + X_corr already total Logistic(0, 1).
        return barker_accept(key, noisy_log_ratio, noise=noise, correction=correction)

    # A batch changes every iteration: nothing per record to carry, so no chunk-local cache.
    transition = proposal_transition(model, jnp.asarray(proposal_std), mode, 2, release, accept)
    return TappedKernel(init_state, plain_transition(transition))


def build_dp_barker(model, batch_size: int, n0: float, proposal_std: Array,
                    mode: str = "random-walk", *, noise: Optional[NoiseSource] = None) -> Kernel:
    """The DP Barker kernel (see the module docstring).

    Parameters
    ----------
    model : Model
        Its ``temperature`` is NOT read here: the tempering is ``T = n0 / n`` (the registry's
        ``prepare`` reconciles the two).
    batch_size : int
        ``b``, the fixed batch size, ``11 ≤ b ≤ n``.
    n0 : float
        ``n₀ ∈ (0, n]``: tempering ``T = n₀/n`` and clip bound ``√b/n₀``.
    proposal_std : array (dim,)
        Proposal standard deviations.
    mode : {"random-walk", "one-component", "guided-walk"}
        Proposal of :func:`dpmcmc.kernels.proposals.propose`. The guided walk is valid with the
        Barker acceptance function too: its argument needs only detailed balance of the move on
        ``(θ, d)``, which any ``g`` with ``g(s) = e^s g(−s)`` gives (002 Lemma 1).
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver passes a secure source in secure mode).

    Returns
    -------
    Kernel
        ``init(theta, data)``, ``step(key, state, data)``; ``data`` the rows (n, ...), an array
        or a ``ShardedRows`` (``SPEC.layout``). ``batch_size ≤ n`` and ``n0 ≤ n`` are checked
        when the step is traced on them. State
        :class:`dpmcmc.kernels.proposals.ProposalState`; info :class:`Info` whose
        ``clip_fraction`` is the fraction of the ``b`` batch ratios clipped.
    """
    return tapped_dp_barker(model, batch_size, n0, proposal_std, mode, noise=noise).kernel()


# ---------------------------------------------------------------- the spec

_KEYS = {"batch_size", "n0", "proposal_std", "mode"}


def _prepare(params: dict, model, n: int) -> dict:
    check_common("dp-barker", params, _KEYS, ("batch_size", "proposal_std"), model, n)
    # 002 Thm 2 needs an order 2 <= alpha < b/5, i.e. b > 10.
    b = check_batch_size(params["batch_size"], n, MIN_BATCH_SIZE)
    temperature = float(model.temperature)
    if params.get("n0") is None:
        n0 = temperature * n
    else:
        n0 = check_n0(check_positive("n0", params["n0"], strict=True), n)  # accounting's rule
        # The tempering T = n0/n is the model's own unless the model is untempered.
        if temperature != 1.0 and not math.isclose(n0, temperature * n, rel_tol=1e-9):
            raise ValueError(f"n0={params['n0']!r} disagrees with model.temperature * n = "
                             f"{temperature * n:g}; omit n0 or use an untempered model")
    return {
        "batch_size": b,
        "n0": n0,
        "proposal_std": check_per_dim("proposal_std", params["proposal_std"], model.dim),
        "mode": check_choice("mode", params.get("mode", "random-walk"), MODES),
    }


def _build(model, p: dict, noise: Optional[NoiseSource] = None) -> Kernel:
    return build_dp_barker(model, p["batch_size"], p["n0"], p["proposal_std"], p["mode"],
                           noise=noise)


def _releases(n: int, p: dict) -> tuple[ReleaseEvent, ...]:
    # 002 Thm 2 and Cor. 3, 001 Thm 7: one Barker test per iteration on a batch of b, total
    # noise variance C = DP_BARKER_C (the event's noise_variance), ratios clipped to √b/n₀.
    return (barker_release(p["batch_size"], n, p.get("n0")),)


#: DP Barker: private, one fixed-size batch per iteration, one Barker test per iteration.
def _noise_lines(p: dict, n: int, dim: int, temperature: float = 1.0) -> tuple:
    # Its test noise is fixed (variance 2); the plan reports the tempering and the clip.
    n0 = p.get("n0") or temperature * n
    return (NoiseLine("Barker test (noise variance 2)", math.sqrt(2.0),
                      f"tempering n0/n, clip √b/n0 = {math.sqrt(p['batch_size']) / n0:.3g}", n0 / n),)


# Proposal scale 1: a step shorter than c/FAR (c = 1/√b) would leave a ratio unclipped; with
# this scale that happens in well under 1 % of iterations (reported as all_clipped < 1).
_AUDIT_PROPOSAL = 1.0


def _audit_params(scale: float) -> dict:
    # n = b (q = 1), n0 = n: the clip bound √b/n₀ = 1/√b.
    return {"batch_size": 2 * int(scale), "proposal_std": _AUDIT_PROPOSAL, "mode": "random-walk"}


def _audit_tapped(model, p, noise=None):
    return tapped_dp_barker(model, p["batch_size"], p["n0"], jnp.asarray(p["proposal_std"]),
                            p["mode"], noise=noise)


def _audit_statistic(taps, p, n):
    # Σ_t log φ(y; 0, 1) − log φ(y; m', v'): D releases N(0, 1), D' releases
    # N(−2 sign(θ' − θ)/√b, 1 + 4/b²) (samplers/audit_design.py). Public quantities only.
    b = p["batch_size"]
    y = taps["delta"]
    sign = jnp.sign((taps["theta_new"] - taps["theta"])[..., 0])
    m_prime = -2.0 * sign / math.sqrt(b)
    v_prime = 1.0 + 4.0 / (b * b)
    log_lr = -0.5 * y * y + 0.5 * (y - m_prime) ** 2 / v_prime + 0.5 * math.log(v_prime)
    return jnp.sum(log_lr)


SPEC = AlgorithmSpec("dp-barker", True, _prepare, _build, SUBSAMPLED,
                     releases=ReleaseSpec(BARKER, ("batch_size",), _releases, optional=("n0",)),
                     audit=AuditEntry("dp-barker", 8, _audit_params, cancelling_design,
                                      _audit_tapped, _audit_statistic, last_draw,
                                      integer_scale=True, max_scale=MAX_DESIGN_ROWS // 2),
                     adaptation=RANDOM_WALK, noise_lines=_noise_lines)
