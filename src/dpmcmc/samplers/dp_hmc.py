"""DP-HMC (000 Algorithm 1; 001 §4.2, Thms 11–12).

One iteration from θ, with T = ``model.temperature``, step size ``η_i = η h_i`` (randomised
Halton, data-independent; see :mod:`dpmcmc.kernels.halton`) and diagonal mass M:

1. ``p ~ N(0, M)``.
2. Leapfrog with L steps and L+1 private gradients, each a fresh Gaussian release
   ``G(θ) = T (Σ_j clip_{b_g}(∇ℓ_j(θ)) + ξ_g) + ∇ ln p(θ)``, ``ξ_g ~ N(0, σ_g² I)``,
   ``σ_g = 2 τ_g √n b_g`` (T multiplies the clipped, noised sum). The gradient at θ is
   recomputed every iteration (no reuse across iterations: k(L+1) gradient releases in k
   iterations, the paper's default).
3. ``c = b_l‖θ−θ'‖``; release ``R̃ = Σ_j clip_c(ℓ_j(θ') − ℓ_j(θ)) + ξ``, ``σ_l = 2 τ_l √n c``.
4. ``λ̂ = T R̃ + ln p(θ') − ln p(θ) + ½pᵀM⁻¹p − ½p'ᵀM⁻¹p'``; accept with probability
   ``min(1, exp(λ̂ − (T σ_l)²/2))``.

Accounting: per iteration one log-likelihood-ratio release (μ = 1/(2 τ_l² n)) and L+1 gradient
releases (μ = 1/(2 τ_g² n) each). A non-finite leapfrog end point (computed from released values
only) is rejected without looking at the data; the log-likelihood-ratio release is then made at
θ' = θ (sensitivity 0), so the release count stays data-independent.

Run statistics (``docs/post_processing.md``): the trajectory is a function of the released
gradients, the prior gradient, the momentum and the Halton step size, and the test of ``R̃`` and
those; ``HMCInfo.accepted`` and ``HMCInfo.diverged`` are therefore post-processing, covered by
the guarantee (``Result.released``), and ``HMCInfo.step_size`` is data-independent.
``clip_fraction`` and ``grad_clip_fraction`` count clipped terms on the raw data: NOT private.
Non-finite per-record value: a NaN ratio becomes ``-c`` and ±inf ``±c`` in the ratio release; a
non-finite per-record gradient is zeroed in the clipped gradient sum (both counted as clipped);
never a rejection (docs/nonfinite.md).
"""
from __future__ import annotations

import math

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from dpmcmc.kernels.leapfrog import kinetic_energy, leapfrog, sample_momentum
from dpmcmc.accounting._checks import check_choice, check_positive
from dpmcmc.accounting.events import GAUSSIAN, ReleaseEvent, ReleaseSpec, gaussian_release
from dpmcmc.kernels.mechanisms import NoiseSource
from dpmcmc.records.layout import GRAD_DTYPES, num_rows
from dpmcmc.records.passes import GRAD_METHODS
from dpmcmc.kernels.penalty import penalty_accept
from dpmcmc.kernels.releases import release_grad, release_llr
from dpmcmc.samplers.audit_design import AuditEntry, far_row_design, last_draw, llr_statistic
from dpmcmc.samplers.defaults import TARGET_KICK, PublicScale, mu_per_iteration
from dpmcmc.samplers.spec import (FULL, AlgorithmSpec, NoiseLine, acceptance_line, check_common,
                                   optional_block)
from dpmcmc.kernels.warmup import HAMILTONIAN
from dpmcmc.kernels.types import HMCInfo, Kernel, TappedKernel
from dpmcmc.samplers.hmc import jittered_step_size, leapfrog_defaults, prepare_leapfrog

Array = Any

__all__ = ["DPHMCState", "build_dp_hmc", "tapped_dp_hmc", "SPEC"]


class DPHMCState(NamedTuple):
    """Position, iteration count and the chain's Halton mask."""

    position: Array
    iteration: Array
    halton_mask: Array


def tapped_dp_hmc(model, tau_l: float, tau_g: float, clip: float, grad_clip: float,
                  step_size: float, leapfrog_steps: int, mass: Array, *, jitter: bool = True,
                  grad_method: str = "auto", grad_dtype: Optional[str] = "float32",
                  noise: Optional[NoiseSource] = None,
                  accept: Callable = penalty_accept) -> TappedKernel:
    """The DP-HMC kernel with its taps (arguments as :func:`build_dp_hmc`).

    Parameters
    ----------
    accept : callable, default :func:`dpmcmc.kernels.penalty.penalty_accept`
        The test of step 4, as in :func:`dpmcmc.samplers.dp_penalty.tapped_dp_penalty`.

    Returns
    -------
    TappedKernel
        ``taps = {"llr", "llr_sigma", "theta", "theta_new"}`` (the log-likelihood-ratio release
        and its query) and ``"grad_sum"``, the sum of the iteration's L+1 released noisy gradient
        sums (untempered).
    """
    temp = model.temperature
    mass = jnp.asarray(mass)
    prior_grad = jax.grad(model.log_prior)

    def init(theta, data=None):
        theta = jnp.asarray(theta)
        return DPHMCState(theta, jnp.zeros((), jnp.uint32), jnp.zeros((), jnp.uint32))

    def transition(key, state, data):
        n = num_rows(data)

        def grad_fn(key, theta):
            rel = release_grad(key, model, data, theta, tau_g, grad_clip, method=grad_method,
                               grad_dtype=grad_dtype, noise=noise)
            # The leapfrog's aux sum also sums the released gradients (a tap for the audit).
            return temp * rel.value + prior_grad(theta), (rel.clip_count, rel.value)

        k_mask, k_mom, k_g0, k_lf, k_noise, k_acc = jax.random.split(key, 6)
        theta = state.position
        m = mass.astype(theta.dtype)
        eta, mask = jittered_step_size(k_mask, state.iteration, state.halton_mask, step_size,
                                       jitter, theta.dtype)
        p0 = sample_momentum(k_mom, m, theta)
        g0, c0 = grad_fn(k_g0, theta)
        lf = leapfrog(grad_fn, k_lf, theta, p0, g0, c0, eta, leapfrog_steps, m)
        finite = jnp.all(jnp.isfinite(lf.position)) & jnp.all(jnp.isfinite(lf.momentum))
        theta_new = jnp.where(finite, lf.position, theta)
        p_new = jnp.where(finite, lf.momentum, p0)
        rel = release_llr(k_noise, model, data, theta, theta_new, tau_l, clip, noise=noise)
        noisy_log_ratio = (temp * rel.value + model.log_prior(theta_new) - model.log_prior(theta)
                           + kinetic_energy(p0, m) - kinetic_energy(p_new, m))
        accepted, nan = accept(k_acc, noisy_log_ratio, temp * rel.sigma)
        diverged = nan | ~finite
        accepted = accepted & ~diverged
        new_state = DPHMCState(jnp.where(accepted, theta_new, theta),
                               state.iteration + jnp.uint32(1), mask)
        grad_clips, grad_sum = lf.aux_sum
        info = HMCInfo(accepted, rel.clip_count.astype(theta.dtype) / n, diverged,
                       grad_clips.astype(theta.dtype) / (n * (leapfrog_steps + 1)), eta)
        return new_state, info, {"llr": rel.value, "llr_sigma": rel.sigma, "theta": theta,
                                 "theta_new": theta_new, "grad_sum": grad_sum}

    return TappedKernel(init, transition)


def build_dp_hmc(model, tau_l: float, tau_g: float, clip: float, grad_clip: float,
                 step_size: float, leapfrog_steps: int, mass: Array, *, jitter: bool = True,
                 grad_method: str = "auto", grad_dtype: Optional[str] = "float32",
                 noise: Optional[NoiseSource] = None) -> Kernel:
    """The DP-HMC kernel.

    Parameters
    ----------
    model : Model
    tau_l, tau_g : float
        Noise parameters of the log-likelihood-ratio and gradient releases.
    clip : float
        b_l: per-example log-likelihood-ratio bound per unit of ‖θ−θ'‖.
    grad_clip : float
        b_g: per-example gradient norm bound.
    step_size : float
        Base step size η; iteration i uses ``η h_i`` with ``h_i ∈ (0, 1)`` (or η if not
        ``jitter``).
    leapfrog_steps : int
        L ≥ 1.
    mass : array (dim,)
        Diagonal mass matrix.
    jitter : bool, default True
    grad_method : {"auto", "reverse", "forward", "vmap"}
        Autodiff mode for per-example gradients (see :mod:`dpmcmc.records.passes`).
    grad_dtype : {"float32", "float64"}, default "float32"
        Dtype of the per-example gradient passes. The gradients only steer the proposal (the
        accept test, in float64, keeps the chain exact) and their released sum carries noise far
        above float32 rounding; float32 halves the memory traffic of the L+1 gradient passes.
        The log-likelihood-ratio release stays in the dtype of θ. The passes read the float32
        copy of the blocks that ``SPEC.layout`` (``prepare_data(..., grad_dtype=...)``) keeps.
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver builds the step with a secure source in secure
        mode).

    Returns
    -------
    Kernel
        ``init(theta, data)``, ``step(key, state, data)``; ``data`` a ``PreparedData``
        (``SPEC.layout``: blocks, split over a mesh if one is given; raw rows are laid out by
        each pass on the fly). Info is :class:`HMCInfo`.
    """
    return tapped_dp_hmc(model, tau_l, tau_g, clip, grad_clip, step_size, leapfrog_steps, mass,
                         jitter=jitter, grad_method=grad_method, grad_dtype=grad_dtype,
                         noise=noise).kernel()


# ---------------------------------------------------------------- the spec

_KEYS = {"tau_l", "tau_g", "clip", "grad_clip", "step_size", "leapfrog_steps", "mass",
         "jitter", "grad_method", "grad_dtype", "block_size"}


def _prepare(params: dict, model, n: int) -> dict:
    check_common("dp-hmc", params, _KEYS, ("tau_l", "tau_g", "clip", "grad_clip", "step_size"),
                 model, n)
    return {
        "tau_l": check_positive("tau_l", params["tau_l"], strict=True),
        "tau_g": check_positive("tau_g", params["tau_g"], strict=True),
        "clip": check_positive("clip", params["clip"], strict=True),
        "grad_clip": check_positive("grad_clip", params["grad_clip"], strict=True),
        **prepare_leapfrog(params, model),
        "grad_method": check_choice("grad_method", params.get("grad_method", "auto"), GRAD_METHODS),
        "grad_dtype": check_choice("grad_dtype", params.get("grad_dtype", "float32"), GRAD_DTYPES),
        "block_size": optional_block(params.get("block_size")),
    }


def _build(model, p: dict, noise: Optional[NoiseSource] = None) -> Kernel:
    # block_size is the layout's (SPEC.layout), not the kernel's; grad_dtype is both (the
    # layout keeps a copy of the blocks in it, the passes compute in it).
    return build_dp_hmc(model, p["tau_l"], p["tau_g"], p["clip"], p["grad_clip"],
                        p["step_size"], p["leapfrog_steps"], p["mass"], jitter=p["jitter"],
                        grad_method=p["grad_method"], grad_dtype=p["grad_dtype"], noise=noise)


def _releases(n: int, p: dict) -> tuple[ReleaseEvent, ...]:
    # 000 Algorithm 1, Thm 3.5: per iteration one log-likelihood ratio (μ_l = 1/(2τ_l²n)) and
    # L + 1 clipped gradient sums (σ_g = 2τ_g√n·b_g, μ_g = 1/(2τ_g²n)), no reuse across
    # iterations; release_llr and release_grad draw from the same constructor.
    return (
        gaussian_release("log-likelihood ratio", 1, p["tau_l"], n, "tau_l"),
        gaussian_release("gradient", p["leapfrog_steps"] + 1, p["tau_g"], n, "tau_g"),
    )


def _noise_lines(p: dict, n: int, dim: int, temperature: float = 1.0) -> tuple:
    # The final penalty test for a trajectory in free motion (length εL‖M^(−1/2)‖), and the
    # gradient noise: over one trajectory the momentum receives ε√L times its sd, compared with
    # the momentum's own sd √m on the worst axis.
    eps, steps = p["step_size"], p["leapfrog_steps"]
    inv_mass = [1.0 / float(m) for m in p["mass"]]
    move = eps * steps * math.sqrt(sum(inv_mass))
    llr, grad = SPEC.events(n, p)
    sigma_g = grad.noise_std(p["grad_clip"])
    kick = eps * math.sqrt(steps) * sigma_g * math.sqrt(max(inv_mass))
    return (acceptance_line(llr, p["clip"] * move, move, "trajectory"),
            NoiseLine("gradient", sigma_g, "momentum noise per trajectory over the momentum sd", kick))


def _defaults(s: PublicScale) -> dict:
    # HMC's leapfrog; τ_l by the dp-penalty rule for a trajectory of length (π/2) s₀ √D, and τ_g
    # such that the gradient noise moves the momentum by TARGET_KICK sd per trajectory
    # (2τ_g√n·b_g·ε√L = 1); where the budget would buy too few iterations, both raised by f
    # and the step shortened by g (budget_split: the trajectory's ratio noise and momentum kick
    # grow by f/g ≤ MAX_NOISE_RAISE).
    out = leapfrog_defaults(s)
    step, steps = out["step_size"], out["leapfrog_steps"]
    traj = 0.5 * math.pi * s.scale * math.sqrt(s.dim)
    llr, grad = SPEC.events(s.n, {"tau_l": 1.0, "tau_g": 1.0, "leapfrog_steps": steps})
    tau_l = s.sigma_target / llr.noise_std(s.clip * traj)
    tau_g = TARGET_KICK / (grad.noise_std(s.grad_clip) * step * math.sqrt(steps))
    f, g = s.budget_split(mu_per_iteration(((llr, tau_l), (grad, tau_g))))
    out.update(step_size=step / g, clip=s.clip, grad_clip=s.grad_clip, tau_l=f * tau_l,
               tau_g=f * tau_g)
    return out


# τ_g = 2 τ_l: with L = 3 and 2 iterations the 8 gradient releases and the 2 ratio releases
# carry equal shares of the total μ, so the audit exercises both paths.
_AUDIT_LEAPFROG = 3


def _audit_params(scale: float) -> dict:
    return {"tau_l": scale, "tau_g": 2.0 * scale, "clip": 1.0, "grad_clip": 1.0,
            "step_size": 0.2, "leapfrog_steps": _AUDIT_LEAPFROG}


def _audit_tapped(model, p, noise=None):
    return tapped_dp_hmc(model, p["tau_l"], p["tau_g"], p["clip"], p["grad_clip"],
                         p["step_size"], p["leapfrog_steps"], jnp.asarray(p["mass"]),
                         jitter=p["jitter"], grad_method=p["grad_method"],
                         grad_dtype=p["grad_dtype"], noise=noise)


def _audit_statistic(taps, p, n):
    # Gradient releases: mean +b_g on D, −b_g on D', σ_g of the release event the accountant
    # composes and the kernel draws from.
    _, grad_release = SPEC.events(n, p)
    sigma_g = grad_release.noise_std(p["grad_clip"])
    grad = 2.0 * p["grad_clip"] * jnp.sum(taps["grad_sum"][..., 0]) / (sigma_g * sigma_g)
    return llr_statistic(taps, p["clip"]) + grad


#: DP-HMC: private, full-data passes, L + 2 Gaussian releases per iteration.
SPEC = AlgorithmSpec("dp-hmc", True, _prepare, _build, FULL,
                     releases=ReleaseSpec(GAUSSIAN, ("tau_l", "tau_g", "leapfrog_steps"), _releases),
                     audit=AuditEntry("dp-hmc", 2, _audit_params, far_row_design, _audit_tapped,
                                      _audit_statistic, last_draw),
                     gradient=True, adaptation=HAMILTONIAN, noise_lines=_noise_lines,
                     defaults=_defaults)
