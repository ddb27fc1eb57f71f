"""DP-SGLD: stochastic gradient Langevin dynamics with a private minibatch gradient (000 §4.1).

The baseline of 000 §4.1 (Li et al. 2019; Wang et al. 2015): a constant step size, no
accept/reject step, a fresh minibatch every iteration.

One iteration from θ, with T = ``model.temperature``, step size η, batch size b, n records:

1. ``B`` — a uniformly random subset of ``b`` records, drawn without replacement
   (:func:`dpmcmc.kernels.minibatch.sample_batch_indices`; data-independent).
2. Release ``S̃ = Σ_{j∈B} clip_C(∇ℓ_j(θ)) + N(0, (s C)² I)`` through
   :func:`dpmcmc.kernels.mechanisms.gaussian_mechanism`, with ``C = grad_clip`` and
   ``s = noise_multiplier``. In the accounting units (noise standard deviation ÷ per-example
   bound; neighbouring batch sums differ by at most 2C under the substitute relation) this is
   the subsampled Gaussian mechanism with σ = ``noise_multiplier`` and q = b/n, exactly what
   ``accounting.max_iterations("dp-sgld", ..., noise_multiplier=s, batch_size=b)`` charges.
3. Gradient estimate ``ĝ(θ) = T (n/b) S̃ + ∇ ln p(θ)`` (T multiplies the released value).
4. Euler–Maruyama step of the Langevin diffusion ``dθ = ½ ∇ ln π(θ) dt + dW``::

       θ' = θ + (η/2) ĝ(θ) + √η z,    z ~ N(0, I).

The factor ½ matters: ``θ + η ĝ + √η z`` (the update of the papers' reference code) is the
discretisation of ``dθ = ∇ ln π dt + dW``, whose stationary law is π², half the posterior
variance on a Gaussian. For a Gaussian target of precision λ and exact gradients, the update
here has stationary variance ``1/(λ(1 − ηλ/4))``: the discretisation error is ``ηλ/4``.

The Langevin noise ``√η z`` is part of the dynamics, not privacy noise: it is not accounted
(the guarantee rests on the Gaussian release of step 2 alone) and is drawn with
``jax.random.normal``, not through the mechanism.

Step size convention: ``step_size`` is η above, the step in θ-space. The papers' reference code
takes a parameter ``eta`` and steps with ``eta / n``; its settings (banana: ``eta = 1``;
10-d Gaussian: ``eta = 0.008``) correspond to ``step_size = eta / n`` here.

A non-finite θ' (computed from released values and public quantities only) is discarded: the
chain stays at θ and ``Info.diverged`` is set. Every iteration releases exactly one gradient
sum, diverged or not, so the iteration count the accountant charges stays data-independent.

Run statistics (``docs/post_processing.md``): ``Info.accepted`` is the constant True and
``Info.diverged`` a function of ``S̃``, the prior gradient and the Langevin noise: both covered
by the guarantee (``Result.released``). ``Info.clip_fraction`` (batch gradients clipped) is
counted on the raw data: NOT private.
Non-finite per-record value: a batch record's non-finite gradient is zeroed inside the clipped
sum (counted as clipped), so θ' stays finite; never a rejection (docs/nonfinite.md).
"""
from __future__ import annotations

import math

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from dpmcmc.accounting._checks import check_batch_size, check_choice, check_per_dim, check_positive
from dpmcmc.accounting.events import (
    SUBSAMPLED_GAUSSIAN,
    ReleaseEvent,
    ReleaseSpec,
    subsampled_gaussian_release,
)
from dpmcmc.kernels.mechanisms import NoiseSource, gaussian_mechanism
from dpmcmc.kernels.minibatch import batch_rows, sample_batch_indices
from dpmcmc.records.layout import auto_block_size, num_rows
from dpmcmc.records.passes import GRAD_METHODS, clipped_grad_sum
from dpmcmc.kernels.releases import NoisySum
from dpmcmc.samplers.audit_design import (FAR, SUBSAMPLED_N, AuditDesign, AuditEntry, last_draw,
                                           log_mixture_ratio, one_sided_design)
from dpmcmc.samplers.defaults import (TARGET_SGLD_DISCRETISATION, TARGET_SGLD_RATIO, PublicScale,
                                       langevin_noise_multiplier)
from dpmcmc.samplers.spec import SUBSAMPLED, AlgorithmSpec, NoiseLine, check_common, optional_block
from dpmcmc.kernels.warmup import LANGEVIN
from dpmcmc.kernels.types import Info, Kernel, TappedKernel

Array = Any

__all__ = ["SGLDState", "build_dp_sgld", "tapped_dp_sgld", "release_batch_grad", "gradient_estimator",
           "preconditioner",
           "tapped_stochastic_gradient", "SPEC", "prepare_sgd", "sgd_releases", "SGD_RELEASES"]


class SGLDState(NamedTuple):
    """The chain's position (dim,)."""

    position: Array


def release_batch_grad(key: Array, model, data: Array, theta: Array, batch_size: int,
                       noise_multiplier: float, grad_clip: float, *, method: str = "auto",
                       block_size: Optional[int] = None, noise: Optional[NoiseSource] = None
                       ) -> tuple[NoisySum, Array]:
    """Draw a batch and release ``Σ_{j∈B} clip_C(∇ℓ_j(θ)) + N(0, (noise_multiplier·C)² I)``.

    The only data access of DP-SGLD and DP-SGNHT: a fixed-size batch drawn without replacement,
    per-example gradients clipped to L2 norm ``C = grad_clip``, and one Gaussian release.

    Parameters
    ----------
    key : PRNG key
        Split into the batch key and the noise key.
    model : Model
    data : array (n, ...)
    theta : array (dim,)
    batch_size : int
        b (static), ``1 ≤ b ≤ n``.
    noise_multiplier : float
        Noise standard deviation over the per-example bound (σ of the accountant).
    grad_clip : float
        C, the per-example gradient norm bound.
    method : {"auto", "forward", "reverse"}
        Autodiff mode for the per-example gradients.
    block_size : int, optional
        Scan the batch in blocks of this many rows (see :mod:`dpmcmc.records.layout`).
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver passes a secure source in secure mode).

    Returns
    -------
    release : NoisySum
        ``value`` the noisy UNTEMPERED batch sum (dim,), ``sigma = noise_multiplier · C``,
        ``clip_count`` (NOT private) the number of batch gradients clipped.
    indices : array (b,)
        The batch (NOT private; for tests and the audit only).
    """
    n = num_rows(data)
    k_batch, k_noise = jax.random.split(key)
    idx = sample_batch_indices(k_batch, n, batch_size, noise)
    batch = batch_rows(data, idx)
    dtype = jnp.result_type(theta, jnp.float32)
    bound = jnp.asarray(grad_clip, dtype)
    clip_to = bound if noise is None else noise.clip_bound(bound)
    total, count = clipped_grad_sum(model, batch, theta, clip_to, method=method,
                                    block_size=block_size)
    # σ = noise_multiplier·C, read from the event the accountant composes.
    (event,) = sgd_releases(n, {"noise_multiplier": noise_multiplier, "batch_size": batch_size})
    sigma = event.noise_std(bound)
    return NoisySum(gaussian_mechanism(k_noise, total, sigma, noise), sigma, count), idx


def gradient_estimator(model, batch_size: int, noise_multiplier: float, grad_clip: float, *,
                       method: str = "auto", block_size: Optional[int] = None,
                       noise: Optional[NoiseSource] = None):
    """The private estimate ``ĝ(θ) = T (n/b) S̃ + ∇ ln p(θ)`` of ∇ ln π(θ) as a function.

    Returns
    -------
    callable
        ``grad(key, theta, data) -> (g_hat, release)`` with ``release`` the :class:`NoisySum` of
        :func:`release_batch_grad` (untempered); ``n`` is the data's row count.
    """
    prior_grad = jax.grad(model.log_prior)
    block_size = auto_block_size(batch_size, block_size)

    def grad(key, theta, data):
        scale = model.temperature * num_rows(data) / batch_size
        rel, _ = release_batch_grad(key, model, data, theta, batch_size, noise_multiplier,
                                    grad_clip, method=method, block_size=block_size,
                                    noise=noise)
        return scale * rel.value + prior_grad(theta), rel

    return grad


def tapped_stochastic_gradient(model, batch_size: int, noise_multiplier: float,
                               grad_clip: float, init: Callable, move: Callable, *,
                               grad_method: str = "auto", block_size: Optional[int] = None,
                               noise: Optional[NoiseSource] = None) -> TappedKernel:
    """The part DP-SGLD and DP-SGNHT share: one private gradient, one dynamics draw, one move.

    Each iteration splits its key into the gradient key and the dynamics key (in that order),
    makes the one release of :func:`gradient_estimator`, draws ``z ~ N(0, I)`` and applies
    ``move``; a non-finite result is discarded (the chain keeps its whole state and
    ``Info.diverged`` is set). One release per iteration, diverged or not.

    Parameters
    ----------
    model, batch_size, noise_multiplier, grad_clip, grad_method, block_size, noise
        As in :func:`build_dp_sgld`.
    init : callable
        ``init(theta, data) -> State`` (a NamedTuple with a ``position`` field).
    move : callable
        ``move(state, g_hat, z) -> State``: the dynamics, given the private gradient estimate
        ``ĝ(θ)`` and the dynamics noise ``z`` (not privacy noise: not accounted).

    Returns
    -------
    TappedKernel
        ``taps = {"grad_sum", "grad_sigma", "theta"}``: the released noisy untempered batch sum,
        its noise standard deviation, and the query point.
    """
    grad = gradient_estimator(model, batch_size, noise_multiplier, grad_clip,
                              method=grad_method, block_size=block_size, noise=noise)

    def transition(key, state, data):
        k_grad, k_lang = jax.random.split(key)
        theta = state.position
        dtype = theta.dtype
        g, rel = grad(k_grad, theta, data)
        # Dynamics noise of the Langevin / thermostat step (not privacy noise: not accounted).
        z = jax.random.normal(k_lang, theta.shape, dtype)
        moved = move(state, g, z)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(moved)]))
        new_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old), moved, state)
        info = Info(jnp.asarray(True), rel.clip_count.astype(dtype) / batch_size, ~finite)
        return new_state, info, {"grad_sum": rel.value, "grad_sigma": rel.sigma, "theta": theta}

    return TappedKernel(init, transition)


def tapped_dp_sgld(model, step_size: float, batch_size: int,
                   noise_multiplier: float, grad_clip: float, *, grad_method: str = "auto",
                   block_size: Optional[int] = None, noise: Optional[NoiseSource] = None,
                   precondition: Optional[Array] = None,
                   langevin_noise: float = 1.0) -> TappedKernel:
    """The DP-SGLD kernel with its taps (arguments as :func:`build_dp_sgld`; taps as
    :func:`tapped_stochastic_gradient`)."""
    def init(theta, data=None):
        return SGLDState(jnp.asarray(theta))

    def move(state, g, z):
        theta = state.position
        eta = jnp.asarray(step_size, theta.dtype)
        d = preconditioner(precondition, theta)
        # Langevin dynamics in φ = θ / d: the φ-gradient is d·g, the move in θ is d times it.
        return SGLDState(theta + 0.5 * eta * d * d * g + jnp.sqrt(eta * langevin_noise) * d * z)

    return tapped_stochastic_gradient(model, batch_size, noise_multiplier, grad_clip, init,
                                      move, grad_method=grad_method, block_size=block_size,
                                      noise=noise)


def preconditioner(precondition: Optional[Array], theta: Array) -> Array:
    """The diagonal preconditioner ``d`` of DP-SGLD/SGNHT as an array like θ (ones if None).

    The samplers run their dynamics in ``φ = θ / d`` (a linear change of variables, so the
    target is unchanged): each coordinate's steps are scaled by ``d_j``. The released gradient
    and its cost are untouched: ``d`` only changes what is done with the release.
    """
    if precondition is None:
        return jnp.ones_like(theta)
    return jnp.broadcast_to(jnp.asarray(precondition, theta.dtype), theta.shape)


def build_dp_sgld(model, step_size: float, batch_size: int, noise_multiplier: float,
                  grad_clip: float, *, grad_method: str = "auto",
                  block_size: Optional[int] = None, noise: Optional[NoiseSource] = None,
                  precondition: Optional[Array] = None, langevin_noise: float = 1.0) -> Kernel:
    """The DP-SGLD kernel (see the module docstring for the update).

    Parameters
    ----------
    model : Model
    step_size : float
        η > 0, constant (the papers' ``eta`` divided by n).
    batch_size : int
        b, ``1 ≤ b ≤ n``: records per iteration, drawn without replacement.
    noise_multiplier : float
        Privacy noise standard deviation over ``grad_clip`` (the accountant's σ).
    grad_clip : float
        C > 0: per-example gradient norm bound.
    grad_method : {"auto", "forward", "reverse"}
        Autodiff mode for per-example gradients.
    block_size : int, optional
        Block size of the per-example pass over a batch (default: one pass unless the batch
        exceeds 8192 rows on CPU).
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver passes a secure source in secure mode).
    precondition : array (dim,), optional
        Diagonal preconditioner d > 0: the move is ``θ + (η/2) d² ĝ + √η d z`` (Langevin
        dynamics in θ/d; :func:`preconditioner`). Default none (d = 1). The warm-up
        (``dpmcmc.sample(warmup=W)``) can set it from the warm-up draws.
    langevin_noise : float in (0, 1], default 1
        Share ``a`` of the Langevin noise's variance η that the move draws: ``√(a η) d z``.
        The privacy noise enters the move as Gaussian noise of sd ``(η/2)(nT/b) σ_m C`` per
        coordinate (where the clip does not bind, all of it is that noise), so with
        ``a = 1 − ((η/2)(nT/b) σ_m C)² / η`` it stands in for the rest of the diffusion instead
        of heating the chain (the noise correction of stochastic-gradient MCMC, Chen, Fox &
        Guestrin 2014 §3.2; :mod:`dpmcmc.auto` uses it). Post-processing of the release: no
        change to the privacy cost.

    Returns
    -------
    Kernel
        ``init(theta, data)``, ``step(key, state, data)``; ``data`` the rows (n, ...), an array
        or a ``ShardedRows`` (``SPEC.layout``). ``Info.accepted`` is always True (no
        accept/reject step); ``clip_fraction`` is the fraction of the b batch gradients
        clipped; ``diverged`` marks a discarded non-finite update.
    """
    return tapped_dp_sgld(model, step_size, batch_size, noise_multiplier, grad_clip,
                          grad_method=grad_method, block_size=block_size, noise=noise,
                          precondition=precondition, langevin_noise=langevin_noise).kernel()


# ---------------------------------------------------------------- the spec

_KEYS = {"step_size", "batch_size", "noise_multiplier", "grad_clip", "grad_method", "block_size",
         "precondition"}
_REQUIRED = ("step_size", "batch_size", "noise_multiplier", "grad_clip")


def prepare_sgd(algorithm: str, params: dict, model, n: int, extra: frozenset = frozenset()) -> dict:
    """The parameters DP-SGLD and DP-SGNHT share, validated; ``extra`` names further keys."""
    check_common(algorithm, params, _KEYS | extra, _REQUIRED, model, n)
    return {
        "step_size": check_positive("step_size", params["step_size"], strict=True),
        "batch_size": check_batch_size(params["batch_size"], n),
        "noise_multiplier": check_positive("noise_multiplier", params["noise_multiplier"],
                                           strict=True),
        "grad_clip": check_positive("grad_clip", params["grad_clip"], strict=True),
        "grad_method": check_choice("grad_method", params.get("grad_method", "auto"), GRAD_METHODS),
        "block_size": optional_block(params.get("block_size")),
        "precondition": (None if params.get("precondition") is None
                         else check_per_dim("precondition", params["precondition"], model.dim)),
    }


def _prepare(params: dict, model, n: int) -> dict:
    out = prepare_sgd("dp-sgld", params, model, n, frozenset({"langevin_noise"}))
    if "langevin_noise" in params:  # only when given: the default runs' parameters unchanged
        a = params["langevin_noise"]
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0.0 < a <= 1.0:
            raise ValueError(f"langevin_noise must lie in (0, 1], got {a!r}")
        out["langevin_noise"] = float(a)
    return out


def _build(model, p: dict, noise: Optional[NoiseSource] = None) -> Kernel:
    return build_dp_sgld(model, p["step_size"], p["batch_size"],
                         p["noise_multiplier"], p["grad_clip"], grad_method=p["grad_method"],
                         block_size=p["block_size"], noise=noise,
                         precondition=p.get("precondition"),
                         langevin_noise=p.get("langevin_noise", 1.0))


def sgd_releases(n: int, p: dict) -> tuple[ReleaseEvent, ...]:
    """One subsampled clipped-gradient sum per iteration, σ = ``noise_multiplier`` per unit
    bound (DP-SGLD and DP-SGNHT; :func:`release_batch_grad` draws from this event)."""
    return (subsampled_gaussian_release("gradient", p["noise_multiplier"], p["batch_size"], n,
                                        "noise_multiplier", p["noise_multiplier"]),)


#: The release declaration of DP-SGLD and DP-SGNHT.
SGD_RELEASES = ReleaseSpec(SUBSAMPLED_GAUSSIAN, ("noise_multiplier", "batch_size"), sgd_releases)

def sgd_noise_lines(p: dict, n: int, dim: int, temperature: float = 1.0) -> tuple:
    """DP-SGLD/SGNHT add (η/2)(n/b)·σ·C of privacy noise per coordinate and step, next to the
    Langevin noise √η; a ratio above 1 samples a posterior widened by about √(1 + ratio²)."""
    eta, b = p["step_size"], p["batch_size"]
    drift = 0.5 * eta * (n / b) * p["noise_multiplier"] * p["grad_clip"]
    return (NoiseLine("step (privacy noise per coordinate)", drift, "over the Langevin noise √η",
                      drift / math.sqrt(eta)),)


def sgd_defaults(name: str):
    """The rule of DP-SGLD/SGNHT (``name``) from public inputs; needs the budget.

    Batch ``⌈√n⌉`` (a small sampling rate amplifies most), the noise multiplier that buys
    ``TARGET_LANGEVIN_ITERATIONS`` per chain under the RDP accountant (the run's tighter PLD
    accountant then allows more), and the step η that keeps the privacy noise per step at
    ``TARGET_SGLD_RATIO`` of the Langevin noise ((√η/2)(n/b)·σ·C) and the discretisation error
    ηλ/4 ≤ 2.5 % at λ = 1/s₀².
    """
    def defaults(s: PublicScale) -> dict:
        if s.epsilon is None or s.delta is None:
            return {}
        batch = min(s.n, math.ceil(math.sqrt(s.n)))
        sigma = langevin_noise_multiplier(SGD_RELEASES, s, batch)
        eta_noise = (2 * TARGET_SGLD_RATIO * batch / (s.n * sigma * s.grad_clip)) ** 2
        eta_disc = 4 * TARGET_SGLD_DISCRETISATION * s.scale * s.scale
        return {"batch_size": batch, "noise_multiplier": sigma, "grad_clip": s.grad_clip,
                "step_size": min(eta_noise, eta_disc)}

    return defaults


# n = 10, b = 2 (q = 0.2), 3 iterations: the shared records at −FAR clip to −C, the differing
# record (+FAR in D, −FAR in D') to ±C, so a release is N(−bC, σ²) on D' and
# (1 − q)N(−bC, σ²) + qN(−bC + 2C, σ²) on D: the accountant's dominating pair. The step size
# keeps θ within a few units of 0 over a run (every gradient stays clipped).
_AUDIT_BATCH = 2
_AUDIT_STEP = 0.05


def sgd_audit_design(scale: float = 1.0) -> AuditDesign:
    """The one-sided design of DP-SGLD/SGNHT (samplers/audit_design.py)."""
    return one_sided_design(SUBSAMPLED_N, -FAR, FAR, -FAR)


def sgd_audit_params(scale: float) -> dict:
    """Worst-case DP-SGLD parameters at noise multiplier ``scale`` (DP-SGNHT adds a friction)."""
    return {"noise_multiplier": scale, "batch_size": _AUDIT_BATCH, "grad_clip": 1.0,
            "step_size": _AUDIT_STEP}


def sgd_audit_statistic(taps, p, n):
    """Σ_t log[(1 − q) + q φ(y_t; 2C, σ)/φ(y_t; 0, σ)], y_t = released sum + bC: the log
    likelihood ratio of the whole transcript (D vs D'), computed in the release's dtype."""
    clip, b = p["grad_clip"], p["batch_size"]
    y = taps["grad_sum"][..., 0] + b * clip
    sigma = taps["grad_sigma"]
    log_lr = (2.0 * clip * y - 2.0 * clip * clip) / (sigma * sigma)
    return jnp.sum(log_mixture_ratio(log_lr, b / n))


def _audit_tapped(model, p, noise=None):
    return tapped_dp_sgld(model, p["step_size"], p["batch_size"], p["noise_multiplier"],
                          p["grad_clip"], grad_method=p["grad_method"], block_size=p["block_size"],
                          noise=noise)


#: DP-SGLD: private, one fixed-size batch per iteration.
SPEC = AlgorithmSpec("dp-sgld", True, _prepare, _build, SUBSAMPLED, releases=SGD_RELEASES,
                     audit=AuditEntry("dp-sgld", 3, sgd_audit_params, sgd_audit_design,
                                      _audit_tapped, sgd_audit_statistic, last_draw),
                     gradient=True, adaptation=LANGEVIN, noise_lines=sgd_noise_lines,
                     defaults=sgd_defaults("dp-sgld"))
