"""Worst-case neighbouring data sets and the per-algorithm audit entries.

The far-row design
------------------
Model: one-dimensional Gaussian mean, ``ℓ(θ, x) = −(x − θ)²/2``, prior N(0, 1). Records sit
at ``±FAR`` with ``FAR = 20`` far beyond every clip bound used (b_l = b_g = 1), and θ stays
within a few units of 0, so every per-example term is clipped:

* log-likelihood ratio of a record at ``±FAR``: ``(θ' − θ)(±FAR − (θ + θ')/2)``, clipped to
  ``±b_l (θ' − θ)`` (its bound ``b_l|θ' − θ|`` with the sign of ``±(θ' − θ)``);
* gradient ``±FAR − θ``, clipped to ``±b_g``.

``D`` holds two records at +FAR, two at −FAR and the differing record at +FAR; ``D'``
replaces that record by −FAR. The four shared records cancel exactly, so the released sums
have means ``+b_l(θ'−θ)`` and ``+b_g`` on D and their negatives on D': the differing record
moves every clipped sum by its full substitute sensitivity (``2 b_l|θ'−θ|``, ``2 b_g``), the
case the accountant's Gaussian composition is tight for.

Test statistics
---------------
Given the query points, each release is Gaussian with a mean that differs by a known shift
between D and D' and a known σ, so the Neyman–Pearson statistic of the whole transcript (the
releases are adaptively composed, the queries depend only on earlier releases and
data-independent randomness) is ``Σ_i 2 m_i y_i / σ_i²`` with ``±m_i`` the two means: linear in
the released values ``y_i``. Under the design it is N(±M, 2M) with M the accountant's total μ,
so its trade-off curve is the accountant's own. For DP-HMC the L+1 gradient releases of an
iteration share mean and σ, and their sum is sufficient; the kernel's audit tap supplies it.

The draws statistic is the last draw of the run (what a user publishes): the far record tilts
the clipped likelihood towards +θ on D and −θ on D'.

Adding an algorithm
-------------------
One :class:`AuditEntry` in :data:`AUDITS`. A new sampler must provide (see docs/audit.md):
its kernel builder's ``_audit=True`` tap (``step`` returns ``(state, (info, taps))`` with the
released noisy values and their queries), noise drawn through
:func:`dpmcmc.samplers._mechanisms.gaussian_mechanism` and clipping through
:mod:`dpmcmc.samplers._clip` (so the miscalibration hook reaches it), a registry entry, and an
``accounting.releases`` description; the entry supplies worst-case parameters as a function
of one noise scale, the kernel construction with the tap, and the two statistics.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax.numpy as jnp
import numpy as np

from dpmcmc.models.base import Model
from dpmcmc.samplers._mechanisms import noise_std
from dpmcmc.samplers.dp_hmc import build_dp_hmc
from dpmcmc.samplers.dp_penalty import build_dp_penalty

Array = Any

__all__ = ["AuditDesign", "AuditEntry", "AUDITS", "far_row_design", "FAR", "DESIGN_N"]

#: Distance of every record from the origin (in units where every clip bound is 1).
FAR = 20.0
#: Records per data set: the differing record plus two cancelling pairs.
DESIGN_N = 5


class AuditDesign(NamedTuple):
    """A pair of neighbouring data sets, the model, and the (public) starting point.

    Attributes
    ----------
    model : Model
    data : array (n, ...)
        D: the differing record pushes every clipped statistic to its upper bound.
    data_prime : array (n, ...)
        D': the same with the differing record replaced.
    theta0 : array (dim,)
        Start of every run (data-independent).
    """

    model: Model
    data: Array
    data_prime: Array
    theta0: Array


def _log_likelihood(theta, x):
    return -0.5 * jnp.sum((x - theta) ** 2)


def _log_prior(theta):
    return -0.5 * jnp.sum(theta ** 2)


def far_row_design(dtype=None) -> AuditDesign:
    """The far-row design of this module (n = 5, dim = 1).

    Parameters
    ----------
    dtype : numpy dtype, optional
        Floating dtype of data and start; default: JAX's default float (float64 under x64).
    """
    dtype = jnp.asarray(0.0).dtype if dtype is None else dtype
    model = Model(log_likelihood=_log_likelihood, log_prior=_log_prior, dim=1, name="audit-far-row")
    shared = [FAR, FAR, -FAR, -FAR]
    data = jnp.asarray(np.array(shared + [FAR])[:, None], dtype=dtype)
    data_prime = jnp.asarray(np.array(shared + [-FAR])[:, None], dtype=dtype)
    return AuditDesign(model, data, data_prime, jnp.zeros((1,), dtype))


class AuditEntry(NamedTuple):
    """How to audit one registered algorithm.

    Attributes
    ----------
    algorithm : str
        Name in :data:`dpmcmc.samplers.ALGORITHMS` and :data:`dpmcmc.accounting.ALGORITHMS`.
    iterations : int
        Default iterations per run.
    params : callable
        ``params(scale) -> dict``: registry parameters of the worst-case configuration with
        noise scale ``scale > 0`` (larger means more noise); the audit solves for the scale at
        which the accountant's ε equals the requested one.
    design : callable
        ``design() -> AuditDesign``.
    build : callable
        ``build(model, data, prepared_params) -> Kernel`` with the kernel's ``_audit`` tap on.
    release_statistic : callable
        ``release_statistic(taps, prepared_params, n) -> scalar``: for ONE run, ``taps`` with a
        leading iterations axis; larger on D. Traced by JAX.
    draws_statistic : callable
        ``draws_statistic(positions (iterations, dim)) -> scalar``; larger on D. Traced by JAX.
    """

    algorithm: str
    iterations: int
    params: Callable[[float], dict]
    design: Callable[[], AuditDesign]
    build: Callable[[Any, Array, dict], Any]
    release_statistic: Callable[[dict, dict, int], Array]
    draws_statistic: Callable[[Array], Array]


def _llr_term(taps: dict, clip: float) -> Array:
    """Σ_i 2 m_i y_i / σ_i² over the log-likelihood-ratio releases of a run.

    ``m_i = b_l (θ'_i − θ_i)`` (the mean on D; −m_i on D'). A release made at θ' = θ (σ = 0,
    nothing released) contributes 0.
    """
    step = (taps["theta_new"] - taps["theta"])[..., 0]
    sigma = taps["llr_sigma"]
    positive = sigma > 0
    safe = jnp.where(positive, sigma, 1.0)
    return jnp.sum(jnp.where(positive, 2.0 * clip * step * taps["llr"] / (safe * safe), 0.0))


def _last_draw(positions: Array) -> Array:
    return positions[-1, 0]


# ---------------------------------------------------------------- dp-penalty

def _penalty_params(scale: float) -> dict:
    return {"tau": scale, "clip": 1.0, "proposal_std": 0.5, "mode": "random-walk"}


def _penalty_build(model, data, p):
    return build_dp_penalty(model, data, p["tau"], p["clip"], jnp.asarray(p["proposal_std"]),
                            p["mode"], block_size=p["block_size"], _audit=True)


def _penalty_statistic(taps, p, n):
    return _llr_term(taps, p["clip"])


# ---------------------------------------------------------------- dp-hmc

# τ_g = 2 τ_l: with L = 3 and 2 iterations the 8 gradient releases and the 2 ratio releases
# carry equal shares of the total μ, so the audit exercises both paths.
_HMC_LEAPFROG = 3


def _hmc_params(scale: float) -> dict:
    return {"tau_l": scale, "tau_g": 2.0 * scale, "clip": 1.0, "grad_clip": 1.0,
            "step_size": 0.2, "leapfrog_steps": _HMC_LEAPFROG}


def _hmc_build(model, data, p):
    return build_dp_hmc(model, data, p["tau_l"], p["tau_g"], p["clip"], p["grad_clip"],
                        p["step_size"], p["leapfrog_steps"], jnp.asarray(p["mass"]),
                        jitter=p["jitter"], grad_method=p["grad_method"],
                        block_size=p["block_size"], _audit=True)


def _hmc_statistic(taps, p, n):
    # Gradient releases: mean +b_g on D, −b_g on D', σ_g from the shared noise definition.
    sigma_g = noise_std(p["tau_g"], n, p["grad_clip"])
    grad = 2.0 * p["grad_clip"] * jnp.sum(taps["grad_sum"][..., 0]) / (sigma_g * sigma_g)
    return _llr_term(taps, p["clip"]) + grad


AUDITS: dict[str, AuditEntry] = {
    "dp-penalty": AuditEntry("dp-penalty", 5, _penalty_params, far_row_design, _penalty_build,
                             _penalty_statistic, _last_draw),
    "dp-hmc": AuditEntry("dp-hmc", 2, _hmc_params, far_row_design, _hmc_build, _hmc_statistic,
                         _last_draw),
}
