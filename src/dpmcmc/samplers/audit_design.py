"""The audit card of an algorithm: worst-case neighbouring designs, shared by the algorithms.

Each private algorithm's ``SPEC.audit`` is an :class:`AuditEntry` built in its own module from
the designs and statistics here; :mod:`dpmcmc.audit` runs it (its engine and tests), so the
audit of an algorithm is part of its card and no table is keyed by algorithm name.

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

The one-sided designs (subsampled samplers)
-------------------------------------------
For fixed-size batches of ``b`` out of ``n`` drawn without replacement the cancelling design
is not worst case; the accountant's dominating pair (:mod:`dpmcmc.accounting.pld`)
``(1 − q)N(0, σ²) + qN(2, σ²)`` vs ``N(0, σ²)`` (units of the per-example bound, q = b/n) is
attained when every shared record contributes the same clipped value, so that batches without
the differing record are identical under D and D' and batches with it differ by the full
sensitivity. :func:`one_sided_design` puts the ``n − 1`` shared records on one side.

* dp-sgld / dp-sgnht: shared records at −FAR (gradients clip to −C), the differing record at
  +FAR in D and −FAR in D'. A release is ``N(−bC, σ²)`` on D' and
  ``(1 − q)N(−bC, σ²) + qN(−bC + 2C, σ²)`` on D, σ = noise_multiplier·C. The log likelihood
  ratio of the transcript is ``Σ_t log[(1 − q) + q·exp((2C(y_t + bC) − 2C²)/σ²)]``
  (nonlinear; ``logaddexp``). n = 10, b = 2.
* minibatch-penalty: every record at +FAR in D; D' moves the differing one to −FAR. For
  θ' > θ the released ``λ_B − σ_b²/2`` moves by exactly the sensitivity ``c(θ, θ')`` when the
  batch holds the record (the case that attains it); for θ' < θ by
  ``Δ = 2kr + 2k²r²(b − 1)/b`` (r = L(θ' − θ) < 0), slightly less than c (a small proposal
  keeps it above 0.93 c). Known from θ, θ' alone, so the statistic is still the exact log
  likelihood ratio. n = 10, b = 2.

The cancelling full-batch design (dp-barker)
--------------------------------------------
DP Barker's noise is fixed (variance ``2 − s²``), so its privacy is set by the batch size b:
the audit runs with ``n = b`` (q = 1, every batch is the whole data set) and solves for the
smallest even b at which the accountant (``"rdp-direct"``, the sampler's default) charges at
most the requested ε. ``D`` holds b/2 records at +FAR (the differing one among them) and b/2
at −FAR; ``D'`` moves the differing record to −FAR. Every ratio clips to ±c, so on D the
clipped ratios in units of c are exactly half +1 and half −1: mean 0, ``s² = Var(u) = 1``,
the released ``Δ̃ ~ N(0, 1)``: the least noise the mechanism ever adds. On D' the mean moves
by the full sensitivity, ``Δ̃ ~ N(−2σ_t/√b, 1 + 4/b²)`` with ``σ_t = sign(θ'_t − θ_t)``. This
pair attains the mean term of the direct bound at its smallest variance; the statistic is the
exact log likelihood ratio of the transcript, ``Σ_t log φ(y_t; 0, 1) − log φ(y_t; m'_t, v')``.
(002 Thm 2 is looser: at these sizes its claim is 2–3× the direct one, far above what the
release leaks, so auditing against it could not flag the miscalibrated variants.)

Adding an algorithm
-------------------
Give its ``SPEC`` an ``audit=AuditEntry(...)`` (see docs/audit.md): its tapped core
(``tapped_<algorithm>(...) -> TappedKernel``, whose ``transition(key, state, data)`` returns
``(state, info, taps)`` with the released noisy values and their queries, and whose ``kernel()``
is what the public builder returns), noise drawn through
:func:`dpmcmc.kernels.mechanisms.gaussian_mechanism` and clipping through
:mod:`dpmcmc.records.clip` (so the miscalibration hook reaches it), worst-case parameters as a
function of one noise scale, a design from this module, and the two statistics.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax.numpy as jnp
import numpy as np

from dpmcmc.models.base import Model

Array = Any

__all__ = ["OneShotAudit", "AuditDesign", "AuditEntry", "far_row_design", "one_sided_design",
           "cancelling_design", "llr_statistic", "last_draw", "log_mixture_ratio", "FAR",
           "DESIGN_N", "SUBSAMPLED_N", "MAX_DESIGN_ROWS"]

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


def far_row_design(scale: float = 1.0, dtype=None) -> AuditDesign:
    """The far-row design of this module (n = 5, dim = 1).

    Parameters
    ----------
    scale : float
        Ignored (the design does not depend on the noise scale).
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
        Name in :data:`dpmcmc.samplers.ALGORITHMS` (the spec that carries this entry).
    iterations : int
        Default iterations per run.
    params : callable
        ``params(scale) -> dict``: registry parameters of the worst-case configuration with
        noise scale ``scale > 0`` (larger means more noise); the audit solves for the scale at
        which the accountant's ε equals the requested one.
    design : callable
        ``design(scale) -> AuditDesign`` (most designs ignore the scale; DP Barker's size is it).
    tapped : callable
        ``tapped(model, prepared_params, noise=None) -> TappedKernel``: the sampler's own
        kernel, built from its module's ``tapped_*`` core, whose ``transition(key, state, data)``
        also returns the taps; ``noise`` is the kernel's noise source (the audit passes a
        deliberately miscalibrated one to show its power). The data (each of the design's two
        data sets, laid out by the algorithm's ``SPEC.layout``) are the transition's argument.
    release_statistic : callable
        ``release_statistic(taps, prepared_params, n) -> scalar``: for ONE run, ``taps`` with a
        leading iterations axis; larger on D. Traced by JAX.
    draws_statistic : callable
        ``draws_statistic(positions (iterations, dim)) -> scalar``; larger on D. Traced by JAX.
    max_scale : float, optional
        The largest scale the audit configures, for designs whose size grows with the scale
        (DP Barker: ``n = b = 2 · scale`` rows); a smaller ε is refused before any run.
    integer_scale : bool
        The scale is an integer (DP Barker: half the batch size); the audit takes the smallest
        one whose claim is at most the requested ε instead of solving continuously.
    """

    algorithm: str
    iterations: int
    params: Callable[[float], dict]
    design: Callable[[], AuditDesign]
    tapped: Callable[[Any, dict], Any]
    release_statistic: Callable[[dict, dict, int], Array]
    draws_statistic: Callable[[Array], Array]
    integer_scale: bool = False
    max_scale: Optional[float] = None


class OneShotAudit(NamedTuple):
    """How to audit a one-shot algorithm (``spec.fit``, no chain): its releases, made by its own
    code, on a worst-case pair of neighbouring data sets, many times.

    Attributes
    ----------
    algorithm : str
        Name in :data:`dpmcmc.samplers.ALGORITHMS` (the spec that carries this entry).
    design : callable
        ``design(family=...) -> (D, D')``: the two data sets, differing in one record.
    setup : callable
        ``setup(epsilon, delta, noise, family) -> (claimed ε, params, runner)``: the configuration
        whose releases spend (ε, δ), the accountant's ε for it, a description, and the compiled
        ``runner(data, keys) -> (release statistic, draw statistic)`` per run (each larger on
        D), drawing its noise from ``noise``. ``noise.sensitivity_factor != 1`` is refused
        where the algorithm clips nothing inside its design.
    chunk : int
        Runs per compiled call (memory).
    families : tuple of str
        The model families the algorithm can be audited on (``dpmcmc.audit.audit``'s
        ``family``); the first is the default.
    """

    algorithm: str
    design: Callable[..., tuple]
    setup: Callable[..., tuple]
    chunk: int
    families: tuple = ()


def llr_statistic(taps: dict, clip: float) -> Array:
    """Σ_i 2 m_i y_i / σ_i² over the log-likelihood-ratio releases of a run.

    ``m_i = b_l (θ'_i − θ_i)`` (the mean on D; −m_i on D'). A release made at θ' = θ (σ = 0,
    nothing released) contributes 0.
    """
    step = (taps["theta_new"] - taps["theta"])[..., 0]
    sigma = taps["llr_sigma"]
    positive = sigma > 0
    safe = jnp.where(positive, sigma, 1.0)
    return jnp.sum(jnp.where(positive, 2.0 * clip * step * taps["llr"] / (safe * safe), 0.0))


def last_draw(positions: Array) -> Array:
    return positions[-1, 0]


#: Records per data set in the one-sided (subsampled) designs.
SUBSAMPLED_N = 10


def one_sided_design(n: int, others: float, differing: float, differing_prime: float,
                     dtype=None) -> AuditDesign:
    """``n − 1`` shared records at ``others``; the differing one at ``differing`` / ``differing_prime``.

    Model, prior and start as in :func:`far_row_design`. Used for the subsampled samplers, whose
    worst case is not a cancelling design: the shared records must all contribute the same
    clipped value so that batches without the differing record are identical under D and D'
    and batches with it differ by the full sensitivity (see the module docstring).

    Parameters
    ----------
    n : int
        Records per data set (≥ 2).
    others, differing, differing_prime : float
        Positions of the shared records and of the differing record in D and in D'.
    dtype : numpy dtype, optional
    """
    dtype = jnp.asarray(0.0).dtype if dtype is None else dtype
    model = Model(log_likelihood=_log_likelihood, log_prior=_log_prior, dim=1,
                  name="audit-one-sided")
    shared = [others] * (n - 1)
    data = jnp.asarray(np.array(shared + [differing])[:, None], dtype=dtype)
    data_prime = jnp.asarray(np.array(shared + [differing_prime])[:, None], dtype=dtype)
    return AuditDesign(model, data, data_prime, jnp.zeros((1,), dtype))


def log_mixture_ratio(log_lr: Array, q: float) -> Array:
    """``log((1 − q) + q·exp(log_lr))`` elementwise, stably (q = 1 gives ``log_lr``)."""
    if q >= 1.0:
        return log_lr
    return jnp.logaddexp(np.log1p(-q), np.log(q) + log_lr)


# The largest data set (rows) a design may have. DP Barker's noise is fixed, so the claimed ε
# falls only as its batch b = n grows: about ε ∝ 1/√b, an unbounded design as ε → 0. Each
# of the audit's runs reads all n rows per iteration, so the work is trials × iterations × n.
MAX_DESIGN_ROWS = 4096


def cancelling_design(scale: float) -> AuditDesign:
    """DP Barker's cancelling full-batch design: ``2·scale`` records, half at +FAR (the differing
    one among them) and half at −FAR in D; D' moves the differing record to −FAR."""
    half = int(scale)
    dtype = jnp.asarray(0.0).dtype
    model = Model(log_likelihood=_log_likelihood, log_prior=_log_prior, dim=1,
                  name="audit-barker-cancelling")
    shared = [FAR] * (half - 1) + [-FAR] * half
    data = jnp.asarray(np.array(shared + [FAR])[:, None], dtype=dtype)
    data_prime = jnp.asarray(np.array(shared + [-FAR])[:, None], dtype=dtype)
    return AuditDesign(model, data, data_prime, jnp.zeros((1,), dtype))
