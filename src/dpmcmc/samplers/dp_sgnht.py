"""DP-SGNHT: the stochastic gradient Nosé–Hoover thermostat with a private minibatch gradient.

The baseline of 000 §4.1 (Ding et al. 2014, made private as in Wang et al. 2015): momentum p,
a scalar thermostat ξ, a constant step size, no accept/reject step.

Each iteration draws a fresh batch and makes ONE Gaussian release of the clipped batch gradient
sum, exactly as DP-SGLD does (:func:`dpmcmc.samplers.dp_sgld.release_batch_grad`; accounted as
the subsampled Gaussian mechanism with σ = ``noise_multiplier``, q = b/n), giving
``ĝ(θ) = T (n/b) S̃ + ∇ ln p(θ)``. With step size η, friction A (Ding et al.'s A, the intensity
of the injected diffusion) and d = dim, the discretisation of Ding et al. (2014, Alg. 1) is::

    p' = p − ξ p η + ĝ(θ) η + √(2Aη) z,      z ~ N(0, I)
    θ' = θ + p' η                              (the NEW momentum)
    ξ' = ξ + (p'ᵀp'/d − 1) η

(unit mass). Updating θ with the new momentum makes the (θ, p) part a symplectic-Euler step. The
papers' reference code moves θ (and ξ) with the old momentum: explicit Euler, which multiplies
the energy of a mode of curvature λ by about ``1 + η²λ`` per step. On a one-dimensional
Gaussian the thermostat soaks that up (ξ settles ηλ higher, the variance is unchanged), but one
scalar ξ cannot do so for several curvatures at once: on a Gaussian with posterior precisions
100 and 900 (η = 0.005, A = 2) the reference update gives 0.39× and 1.7× the posterior
variances, this update 1.00× and 1.02× (``tests/samplers/test_sgld.py``).

Stationarity: ξ has zero mean drift exactly when E[p'ᵀp'/d] = 1, and it settles where the
friction balances all the noise entering p: ``ξ ≈ A + η V/2`` with V the per-coordinate variance
of the gradient estimate (privacy noise ``(T (n/b) noise_multiplier C)²`` plus the minibatch
noise) — the thermostat absorbs the unknown gradient noise. The Langevin noise √(2Aη) z is
dynamics, not privacy noise: it is not accounted and is drawn with ``jax.random.normal``.

Initial state: ``p = 0`` and ``ξ = A`` (``init`` takes no key; p is heated by the injected noise
within about ``1/(2Aη)`` iterations).

Step size convention: ``step_size`` is η above. The papers' reference code steps with
``eta / n``; its settings (banana: ``eta = 100, A = 50``; 10-d Gaussian: ``eta = 0.2, A = 30``)
correspond to ``step_size = eta / n``, ``friction = A`` here.

A non-finite (θ', p', ξ') is discarded: the chain keeps its whole state and ``Info.diverged``
is set. One release per iteration, diverged or not.

Run statistics (``docs/post_processing.md``): as in DP-SGLD, ``Info.accepted`` (always True) and
``Info.diverged`` (a function of ``S̃``, the prior gradient and the thermostat noise) are covered
by the guarantee (``Result.released``); ``Info.clip_fraction`` is NOT private.
Non-finite per-record value: as in DP-SGLD, a batch record's non-finite gradient is zeroed
inside the clipped sum (counted as clipped); never a rejection (docs/nonfinite.md).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax.numpy as jnp

from dpmcmc.accounting._checks import check_positive
from dpmcmc.kernels.mechanisms import NoiseSource
from dpmcmc.samplers.audit_design import AuditEntry, last_draw
from dpmcmc.samplers.spec import SUBSAMPLED, AlgorithmSpec
from dpmcmc.kernels.types import Kernel, TappedKernel
from dpmcmc.kernels.warmup import LANGEVIN
from dpmcmc.samplers.dp_sgld import (SGD_RELEASES, preconditioner, prepare_sgd, sgd_audit_design,
                                    sgd_audit_params, sgd_audit_statistic, sgd_defaults,
                                    sgd_noise_lines, tapped_stochastic_gradient)

Array = Any

__all__ = ["SGNHTState", "build_dp_sgnht", "tapped_dp_sgnht", "SPEC", "DEFAULT_FRICTION"]


class SGNHTState(NamedTuple):
    """Position θ (dim,), momentum p (dim,) and thermostat ξ (scalar)."""

    position: Array
    momentum: Array
    thermostat: Array


def tapped_dp_sgnht(model, step_size: float, batch_size: int,
                    noise_multiplier: float, grad_clip: float, friction: float, *,
                    grad_method: str = "auto", block_size: Optional[int] = None,
                    noise: Optional[NoiseSource] = None,
                    precondition: Optional[Array] = None) -> TappedKernel:
    """The DP-SGNHT kernel with its taps (arguments as :func:`build_dp_sgnht`; taps as
    :func:`dpmcmc.samplers.dp_sgld.tapped_stochastic_gradient`)."""
    def init(theta, data=None):
        theta = jnp.asarray(theta)
        return SGNHTState(theta, jnp.zeros_like(theta), jnp.asarray(friction, theta.dtype))

    def move(state, g, z):
        theta, p, xi = state
        eta = jnp.asarray(step_size, theta.dtype)
        a = jnp.asarray(friction, theta.dtype)
        d = preconditioner(precondition, theta)
        # The dynamics of φ = θ / d (φ-gradient d·g; p is φ's momentum), mapped back to θ.
        p_new = p - xi * p * eta + d * g * eta + jnp.sqrt(2.0 * a * eta) * z
        theta_new = theta + d * p_new * eta
        xi_new = xi + (jnp.sum(p_new * p_new) / theta.shape[0] - 1.0) * eta
        return SGNHTState(theta_new, p_new, xi_new)

    return tapped_stochastic_gradient(model, batch_size, noise_multiplier, grad_clip, init,
                                      move, grad_method=grad_method, block_size=block_size,
                                      noise=noise)


def build_dp_sgnht(model, step_size: float, batch_size: int,
                   noise_multiplier: float, grad_clip: float, friction: float, *,
                   grad_method: str = "auto", block_size: Optional[int] = None,
                   noise: Optional[NoiseSource] = None,
                   precondition: Optional[Array] = None) -> Kernel:
    """The DP-SGNHT kernel (see the module docstring for the update).

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
    friction : float
        A > 0 of Ding et al.: injected diffusion √(2Aη) and the thermostat's initial value.
    grad_method : {"auto", "forward", "reverse"}
    block_size : int, optional
        As in :func:`dpmcmc.samplers.dp_sgld.build_dp_sgld`.
    noise : NoiseSource, optional
        Where the kernel's privacy noise comes from (default: ``jax.random`` keyed by each
        release's JAX key; the chain driver passes a secure source in secure mode).
    precondition : array (dim,), optional
        Diagonal preconditioner d > 0 (as in DP-SGLD): the thermostat dynamics run in θ/d.

    Returns
    -------
    Kernel
        ``init(theta, data)``, ``step(key, state, data)`` (data as in
        :func:`~dpmcmc.samplers.dp_sgld.build_dp_sgld`). State :class:`SGNHTState`; ``Info.accepted`` always True, ``clip_fraction`` the fraction
        of the b batch gradients clipped, ``diverged`` a discarded non-finite update.
    """
    return tapped_dp_sgnht(model, step_size, batch_size, noise_multiplier, grad_clip,
                           friction, grad_method=grad_method, block_size=block_size,
                           noise=noise, precondition=precondition).kernel()


# ---------------------------------------------------------------- the spec

#: Default friction A (Ding et al. 2014).
DEFAULT_FRICTION = 1.0


def _prepare(params: dict, model, n: int) -> dict:
    p = prepare_sgd("dp-sgnht", params, model, n, extra=frozenset({"friction"}))
    p["friction"] = check_positive("friction", params.get("friction", DEFAULT_FRICTION), strict=True)
    return p


def _build(model, p: dict, noise: Optional[NoiseSource] = None) -> Kernel:
    return build_dp_sgnht(model, p["step_size"], p["batch_size"],
                          p["noise_multiplier"], p["grad_clip"], p["friction"],
                          grad_method=p["grad_method"], block_size=p["block_size"], noise=noise,
                          precondition=p.get("precondition"))


def _audit_params(scale: float) -> dict:
    return {**sgd_audit_params(scale), "friction": 1.0}


def _audit_tapped(model, p, noise=None):
    return tapped_dp_sgnht(model, p["step_size"], p["batch_size"], p["noise_multiplier"],
                           p["grad_clip"], p["friction"], grad_method=p["grad_method"],
                           block_size=p["block_size"], noise=noise)


#: DP-SGNHT: private, one fixed-size batch per iteration; releases, plan, defaults and audit
#: design as DP-SGLD.
SPEC = AlgorithmSpec("dp-sgnht", True, _prepare, _build, SUBSAMPLED, releases=SGD_RELEASES,
                     audit=AuditEntry("dp-sgnht", 3, _audit_params, sgd_audit_design,
                                      _audit_tapped, sgd_audit_statistic, last_draw),
                     gradient=True, adaptation=LANGEVIN, noise_lines=sgd_noise_lines,
                     defaults=sgd_defaults("dp-sgnht"))
