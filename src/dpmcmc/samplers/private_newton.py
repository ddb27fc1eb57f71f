"""A private start for any differentiable model: Newton (Fisher-scoring) rounds on released
gradient statistics, ending in a Gaussian approximation of the posterior.

Why
---
A penalty-type chain travels only about √(μ/chains)/b in a whole run (issue 12 §3b), so on a
table of 10⁵ rows it must start inside the posterior. The noise-aware GLM reaches the posterior
with a few Newton rounds on released gradient and Hessian sums; this module does the same for a
user's model, where no per-record Hessian bound is declared: the curvature is the Fisher
information, estimated from the outer products of the clipped per-record gradients, whose
bound follows from the gradients' own clip (the "outer product of gradients" Newton method of
Berndt, Hall, Hall & Hausman 1974). The released curvature defines a Gaussian approximation of
the posterior, each chain starts from an independent draw of it, and the same curvature
whitens the sampler's moves (post-processing, :mod:`dpmcmc.auto`).

How it steps (``K = rounds``)
-----------------------------
Round ``k`` works at the public point ``θ_k``, with ``g_j = ∇ℓ_j(θ_k)`` and the previous round's
whitening ``W`` (``W_0 = I / scale``, ``scale`` the user's declared per-record gradient bound).
Each of its three stages releases, at ``θ_k`` and for a public centre ``c`` and whitening ``W``,
the counts of ``‖W(g_j − c)‖`` in fixed log-spaced bins
(:func:`~dpmcmc.records.passes.whitened_grad_histogram`; one record moves one count, L2
sensitivity √2), takes as clip ``C`` :data:`CLIP_FACTOR` times the bin edge where the noisy
cumulative count reaches ``DEFAULT_QUANTILE · n`` (post-processing: the bins and ``n`` are
public), and releases what the stage needs of ``Σ_j u_j`` and ``Σ_j u_j u_jᵀ``,
``u_j = clip_C(W(g_j − c))`` (:func:`~dpmcmc.records.passes.whitened_grad_moments`;
sensitivities ``2C`` and ``√2 C²``; the d×d noise is symmetrised afterwards):

1. **centre** (``c = 0``): the gradient sum; ``c ← W⁻¹Σ̃u / n``, the mean gradient. Far from
   the mode the gradients share a large mean: clipping around it, the later stages' clips cover
   the gradients' spread, not their mean.
2. **shape**: the outer products around ``c``; their covariance, its eigenvalues less the
   noise level (:func:`eigen_floor`, :func:`_shrunk`: noise never counts as curvature), gives the whitening ``W ← (F̂/n)^{−1/2}`` of the main stage *at the
   same point* (a whitening from the previous point is off where the curvature changes fast,
   as along the banana, and a clip that covers a mismatched whitening carries noise that throws
   the next move many posterior sds off).
3. **main**: gradient sum and outer products, whitened so that the ``u_j`` have about unit
   covariance: ``G = n c + W⁻¹Σ̃u`` (the centre's noise cancels where nothing is clipped),
   ``F̂ = W⁻¹ (Σ̃uuᵀ − Σ̃u Σ̃uᵀ/n − noise level)₊ W⁻ᵀ``; with the prior's gradient and curvature (public:
   autodiff of ``log_prior`` at ``θ_k``, projected onto the PSD cone, ``P``) and the
   temperature T, the Newton (Fisher-scoring) move ``θ_{k+1} = θ_k + (T F̂ + P)⁻¹ (T G +
   ∇ ln p(θ_k))``, shortened to at most :data:`MAX_PRIOR_STEP` prior sds where the prior has
   curvature.

The clip rule is what makes the curvature estimate unbiased whatever bound the user declared:
the declared bound only sets the unit of the first histogram (the DP-HMC paper's tuned bounds
clip 87 % of the banana's per-record gradients and 98 % of the 10-d Gaussian's, which shrinks a
Fisher estimate made at them by a factor 4–5).

The approximate posterior is ``N(θ_K, (T F̂_{K−1} + P)⁻¹)``, widened by the noise of the last
gradient release (:attr:`NewtonFit.start_cov`); the chains start from independent draws of it.

Budget
------
``mu_total`` is split over the rounds: the last gets :data:`FINAL_SHARE`, the earlier ones the
rest in geometric weights 1, 2, 4, … (far from the mode only the direction of a move matters),
and within a round as :data:`ROUND_RELEASES` says (in whitened units the gradient noise moves
the mean by ``C√(2/μ_g)/√n`` posterior sds, the outer-product noise the curvature by a relative
``2√d C²/(n√μ_s)``: at n = 10⁵ the curvature is the cheaper of the two). Every release is a
full-data Gaussian mechanism built by :func:`dpmcmc.accounting.events.gaussian_release_mu`,
whose ``noise_std`` the mechanism draws; the accountant composes their μ (μ-GDP composes
adaptively: each stage's point, centre, whitening and clip are functions of earlier releases).

Reads the data
--------------
Full data, six passes per round (a histogram and a moments pass per stage); the number of
rounds, the bins and every noise scale per unit bound are fixed before the first pass; a non-finite per-record gradient counts in the top bin and
contributes zero to the sums (counted as clipped).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpmcmc import linalg
from dpmcmc.accounting.events import ReleaseEvent, gaussian_release_mu
from dpmcmc.records.layout import prepare_data
from dpmcmc.kernels.mechanisms import DEFAULT_NOISE, NoiseSource
from dpmcmc.records.passes import whitened_grad_histogram, whitened_grad_moments

__all__ = ["NewtonPlan", "NewtonFit", "newton_plan", "private_newton", "start_draws",
           "eigen_floor", "whitening_floor", "DEFAULT_ROUNDS", "DEFAULT_QUANTILE", "FINAL_SHARE",
           "ROUND_RELEASES", "MAX_PRIOR_STEP", "chi2_ppf"]

#: Newton rounds at most by default (fewer where n·μ is small: :func:`newton_plan`).
DEFAULT_ROUNDS = 6
#: The clip of the whitened gradients is CLIP_FACTOR times their noisy QUANTILE-quantile: for
#: light-tailed gradients beyond almost every record (χ_d: P(‖u‖ > 1.5 q₀.₉₅) is 1.2e-3 for
#: d = 2, 1e-5 for d = 10), so that clipping leaves the sums nearly unbiased (a skewed score
#: distribution clipped at its 98 % quantile moves a mode by ~√n × 2 % of a score sd: posterior
#: sds at n = 10⁴), while a heavy tail is still cut.
DEFAULT_QUANTILE = 0.95
CLIP_FACTOR = 1.5
#: Share of the start's μ spent on its last round (the one that defines the approximation).
FINAL_SHARE = 0.5
#: The releases of one round, in order: (stage, statistic, share of the round's μ). The
#: ``centre`` stage estimates the mean gradient at the round's point (under the previous
#: whitening), the ``shape`` stage the covariance of the gradients around it (the whitening of
#: the main stage, at the same point), the ``main`` stage the gradient and curvature of the
#: Newton move. In whitened units the gradient noise moves the mean by ``C√(2/μ_g)/√n``
#: posterior sds and the outer-product noise the curvature by a relative ``2√d C²/(n√μ_s)``:
#: at n = 10⁵ the curvature is the cheaper of the two.
HISTOGRAM = "gradient-norm histogram"
ROUND_RELEASES = (
    ("centre", HISTOGRAM, 0.02),
    ("centre", "whitened gradient sum", 0.07),
    ("shape", HISTOGRAM, 0.02),
    ("shape", "whitened gradient outer products", 0.07),
    ("main", HISTOGRAM, 0.04),
    ("main", "whitened gradient sum", 0.62),
    ("main", "whitened gradient outer products", 0.16),
)
#: A stage is saturated when the trace of its clipped outer products exceeds this share of
#: n C² (almost every gradient at the clip); the next whitening then shrinks by
#: SATURATION_GROWTH, so that the clip grows by that factor.
SATURATED = 0.8
SATURATION_GROWTH = math.e ** 2
#: Longest Newton move, in prior standard deviations (where the prior has curvature).
MAX_PRIOR_STEP = 3.0
#: Log-spaced bin edges of the histogram, relative to the round's unit: e^-8 ... e^8 (81 bins
#: of a fifth of an e-fold: a clip at most 22 % above the quantile).
LOG_EDGES = np.arange(-8.0, 8.0 + 1e-9, 0.2)


@dataclass(frozen=True)
class NewtonPlan:
    """The releases of one private Newton start (public inputs only; :func:`newton_plan`).

    Attributes
    ----------
    n, dim : int
    scale : float
        Unit of the first round's gradient norms (the declared per-record gradient bound).
    quantile : float
    rounds : tuple of tuples
        Each round's releases' μ, in the order of :data:`ROUND_RELEASES`.
    """

    n: int
    dim: int
    scale: float
    quantile: float
    rounds: tuple

    @property
    def steps(self) -> int:
        return len(self.rounds)

    def releases(self) -> tuple[ReleaseEvent, ...]:
        """Every release, round by round, in the order of :data:`ROUND_RELEASES`."""
        return tuple(gaussian_release_mu(f"{what}, round {k + 1} ({stage})", mu)
                     for k, mus in enumerate(self.rounds)
                     for (stage, what, _), mu in zip(ROUND_RELEASES, mus) if mu > 0)

    @property
    def mu_total(self) -> float:
        """Σ μ of the releases: what the accountant charges for the start."""
        return float(sum(r.mu for r in self.releases()))

    def sigmas(self) -> np.ndarray:
        """``(K, 7)`` noise sds per unit bound, in the order of :data:`ROUND_RELEASES`, from the
        release events (the σ the mechanism draws); ``inf`` for a release the plan skips."""
        rel = iter(self.releases())
        return np.asarray([[next(rel).noise_std(1.0) if mu > 0 else math.inf for mu in mus]
                           for mus in self.rounds], dtype=np.float64)


def newton_plan(n: int, dim: int, mu_total: float, scale: float, *,
                rounds: Optional[int] = None, quantile: float = DEFAULT_QUANTILE) -> NewtonPlan:
    """Split ``mu_total`` over ``rounds`` rounds of seven releases (module docstring).

    Parameters
    ----------
    n, dim : int
        Records and parameters (public).
    mu_total : float
        The start's budget, μ = Δ²/(2σ²) summed over its releases.
    scale : float
        The declared per-record gradient bound: the unit of the first round's bins.
    rounds : int, optional
        Default: ``log₂(n μ / 50)`` within [4, :data:`DEFAULT_ROUNDS`].
    quantile : float in (0.5, 1)
    """
    from dpmcmc.accounting._checks import check_int, check_positive

    n = check_int("n", n, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    mu_total = check_positive("init_mu", mu_total, strict=True)
    scale = check_positive("grad_clip", scale, strict=True)
    if not (isinstance(quantile, float) and 0.5 < quantile < 1.0):
        raise ValueError(f"quantile must be a float in (0.5, 1), got {quantile!r}")
    if rounds is None:
        # Fewer rounds when n·μ is small: each must locate its quantiles and move (public).
        rounds = int(min(DEFAULT_ROUNDS, max(4, math.floor(math.log2(n * mu_total / 50.0)))))
    rounds = check_int("init_steps", rounds, minimum=1)
    if rounds == 1:
        weights = [1.0]
    else:
        early = [2.0 ** k for k in range(rounds - 1)]
        weights = [(1.0 - FINAL_SHARE) * w / sum(early) for w in early] + [FINAL_SHARE]
    per = []
    for w in weights:
        mus = [mu_total * w * share for _, _, share in ROUND_RELEASES]
        for i, (_, what, _) in enumerate(ROUND_RELEASES):
            # A histogram too noisy to place the quantile (its noise summed over all bins
            # above half the records the quantile leaves out) is not released; the stage
            # clips at the quantile expected of its unit, and its μ goes to the others.
            if what == HISTOGRAM and 2.0 * math.sqrt(LOG_EDGES.size / mus[i]) > 0.5 * (1 - quantile) * n:
                rest = sum(mus) - mus[i]
                mus = [0.0 if j == i else m * sum(mus) / rest for j, m in enumerate(mus)]
        per.append(tuple(mus))
    return NewtonPlan(n, dim, float(scale), float(quantile), tuple(per))


class NewtonFit(NamedTuple):
    """What a private Newton start released and what follows from it (all post-processing).

    Attributes
    ----------
    mean : array (dim,)
        ``θ_K``, the centre of the approximation.
    precision : array (dim, dim)
        ``T F̂ + P`` at the last round: the approximation's precision.
    start_cov : array (dim, dim)
        ``precision⁻¹`` plus the covariance the last gradient release's noise gives ``mean``:
        the chains' starts are drawn from ``N(mean, start_cov)``.
    thetas : array (K + 1, dim)
        The public points of the rounds and ``θ_K``.
    clips : array (K,)
        Each round's clip of the whitened gradients.
    fisher : array (dim, dim)
        ``F̂`` of the last round (untempered, θ units).
    whiten : array (dim, dim)
        ``W`` for the per-record gradients at the last round's curvature:
        ``(F̂/n)^{−1/2}`` (whitened per-record gradients have about unit covariance).
    """

    mean: Any
    precision: Any
    start_cov: Any
    thetas: Any
    clips: Any
    fisher: Any
    whiten: Any

    @property
    def cov_chol(self):
        """Lower Cholesky factor of ``precision⁻¹``."""
        return linalg.cholesky(linalg.inv(self.precision))


def _sym(m):
    return 0.5 * (m + m.T)


def eigen_floor(noise_sd, dim: int):
    """Eigenvalue floor of a released d×d symmetric sum: ``2 s √d``, the typical spectral norm
    of a symmetrised noise matrix of entry sd ``s`` (below it, an eigenvalue is noise)."""
    return 2.0 * noise_sd * math.sqrt(dim)


def _psd_floor(m, floor):
    vals, vecs = linalg.eigh(_sym(m))
    return (vecs * jnp.maximum(vals, floor)) @ vecs.T


def whitening_floor(sd_outer, dim: int, n: int):
    """Eigenvalue floor of a stage's whitened outer-product sum where it only sets a whitening
    (and the Newton move's metric): the noise level, but at most ``n``. In whitened units the
    sum is about ``n I`` when the previous whitening is right, so an eigenvalue below a floor
    above ``n`` says nothing, and raising it to that floor would claim more curvature than the
    previous whitening did: the next whitening then shrinks that direction, its gradients sink
    below the next stage's noise, and the direction is lost round after round (a narrow banana:
    a stage clipping at 95 × the expected norm put its floor at 3n, and the start's
    approximation came out 3500× too wide along the banana; the chain from it diverged).
    Capped at ``n``, an unresolved direction keeps the previous whitening. Public: the noise
    sd and ``n``."""
    return jnp.minimum(eigen_floor(sd_outer, dim), float(n))


def _shrunk(m, noise_floor):
    """A released d×d covariance sum made positive definite without adding information: its
    eigenvalues less the noise level (:func:`eigen_floor`), at least 0 (a direction the noise
    swamps keeps no curvature: the prior, not the noise, decides
    its width; flooring AT the noise level would report the noise as precision). Returns the
    matrix and whether any eigenvalue rose above the noise."""
    vals, vecs = linalg.eigh(_sym(m))
    vals = vals - noise_floor
    top = jnp.max(vals)
    vals = jnp.maximum(vals, 0.0)
    return (vecs * vals) @ vecs.T, top > 0.0


def _inv_sqrt(m):
    vals, vecs = linalg.eigh(_sym(m))
    return (vecs / jnp.sqrt(vals)) @ vecs.T


def chi2_ppf(q: float, dim: int) -> float:
    """``scipy.stats.chi2.ppf(q, dim)``, through its own kernel (same values) so that the
    private start does not import scipy.stats (~1.5 CPU-s per process)."""
    from scipy.special import gammaincinv

    return float(2.0 * gammaincinv(0.5 * dim, q))


def _quantile_clip(noisy_counts, edges, n: int, q: float, count_sd, fallback):
    """The first bin edge below which at least ``q·n`` records lie with two noise sds to spare:
    the noisy count above an edge, plus twice its noise sd (``count_sd · √bins above``), must
    be at most ``(1 − q) n``, so noise can only make the clip larger. Where no edge qualifies
    (a histogram too noisy to locate the quantile: small n or budget) ``fallback``, the
    quantile expected of the round's unit. Post-processing: ``noisy_counts`` are released,
    everything else is public."""
    above = jnp.cumsum(noisy_counts[::-1])[::-1][1:]     # records at or above each edge
    bins_above = jnp.arange(above.shape[0], 0, -1)
    ok = above + 2.0 * count_sd * jnp.sqrt(bins_above) <= (1.0 - q) * n
    return jnp.where(jnp.any(ok), edges[jnp.argmax(ok)], fallback)


def _releases_at(model, prepared, n: int, quantile: float, key, theta, whiten, center, unit,
                 s_hist, s_grad, s_outer, noise):
    """The releases of one stage at ``theta`` with whitening ``whiten`` and centre ``center``:
    the norm histogram and the clip it gives, then the sums of the clipped whitened gradients
    (released with noise sd ``s_grad`` per unit bound) and of their outer products (``s_outer``;
    symmetrised). A stage releases only what its plan pays for: the caller uses only those.
    Returns ``(clip, g_u, s_u, sd_outer)`` in whitened units."""
    k_h, k_g, k_s = jax.random.split(key, 3)
    edges = unit * jnp.exp(jnp.asarray(LOG_EDGES))
    used = jnp.isfinite(s_hist)  # public: the plan skips a histogram too noisy to use
    counts = jnp.where(used, whitened_grad_histogram(model, prepared, theta, whiten, center,
                                                     edges), 0)
    # Sensitivity √2 = 2 × (1/√2): the histogram's per-record bound is 1/√2.
    count_sd = jnp.where(used, s_hist / math.sqrt(2.0), 1.0)
    noisy = noise.gaussian(k_h, counts.astype(jnp.float64), count_sd)
    # Round 0's unit is the declared bound (expected quantile: the bound itself); later units
    # are √d, the norm of a unit-covariance whitened gradient, whose quantile is χ_d's.
    dim = theta.shape[0]
    expected = jnp.where(unit == 1.0, 1.0, math.sqrt(float(chi2_ppf(quantile, dim))))
    clip = CLIP_FACTOR * jnp.where(used, _quantile_clip(noisy, edges, n, quantile, count_sd,
                                                        expected), expected)
    total, outer, _ = whitened_grad_moments(model, prepared, theta, whiten, center, clip)
    g_u = noise.gaussian(k_g, total, s_grad * clip)
    sd_outer = s_outer * clip * clip / math.sqrt(2.0)  # per-record Frobenius bound C²/√2
    s_u = _sym(noise.gaussian(k_s, outer, sd_outer))
    return clip, g_u, s_u, sd_outer


def _fisher(whiten, f_u):
    """``(W⁻¹ F_u W⁻ᵀ, W⁻¹)``: a whitened Fisher estimate in θ units."""
    w_inv = linalg.inv(whiten)
    return _sym(w_inv @ f_u @ w_inv.T), w_inv


def _round(model, prepared, n: int, quantile: float, key, theta, whiten, unit, sigmas, noise):
    """One round at ``theta`` (module docstring): centre, shape, main releases, Newton move.

    ``whiten``, ``unit``: the previous round's whitening and the unit of its norms. Returns
    ``(θ_next, whitening, clips, F̂, covariance of the mean's noise)``.
    """
    dim = theta.shape[0]
    temp = model.temperature
    k_c, k_s, k_m = jax.random.split(key, 3)
    zero = jnp.zeros(dim, theta.dtype)
    s = sigmas
    # Centre: the mean gradient at θ (clipped around 0 under the previous whitening).
    clip_c, g_c, _, _ = _releases_at(model, prepared, n, quantile, k_c, theta, whiten, zero, unit,
                                     s[0], s[1], 1.0, noise)
    center = linalg.solve(whiten, g_c) / n
    # Shape: the gradients' covariance around that centre, at θ: the main stage's whitening.
    clip_s, _, s_u, sd_outer = _releases_at(model, prepared, n, quantile, k_s, theta, whiten,
                                            center, unit, s[2], 1.0, s[3], noise)
    fisher_s, _ = _fisher(whiten, _psd_floor(s_u, whitening_floor(sd_outer, dim, n)))
    # Saturation: where almost every gradient was clipped (tr Σ̃uuᵀ ≈ n C²: a clip at the
    # fallback, far below the gradients), their covariance says little about their scale;
    # the main stage's clip then grows by SATURATION_GROWTH instead (post-processing).
    saturated = jnp.trace(s_u) > SATURATED * n * clip_s * clip_s
    whiten = _inv_sqrt(fisher_s / n) / jnp.where(saturated, SATURATION_GROWTH, 1.0)
    unit = math.sqrt(dim)
    # Main: gradient and curvature, whitened at θ itself.
    clip, g_u, s_u, sd_outer = _releases_at(model, prepared, n, quantile, k_m, theta, whiten,
                                            center, unit, s[4], s[5], s[6], noise)
    f_raw = s_u - jnp.outer(g_u, g_u) / n
    fisher, w_inv = _fisher(whiten, _psd_floor(f_raw, whitening_floor(sd_outer, dim, n)))
    # For the approximation: the noise level subtracted rather than added (_shrunk).
    honest, _ = _fisher(whiten, _shrunk(f_raw, eigen_floor(sd_outer, dim))[0])
    # Σ_j (∇ℓ_j − c) = W⁻¹ Σ_j u_j (where unclipped): the gradient sum is n c plus it.
    grad = n * center + w_inv @ g_u
    # The prior is public: its gradient and curvature enter the move exactly.
    prior_grad = jax.grad(model.log_prior)(theta)
    prior_prec = _psd_floor(-jax.hessian(model.log_prior)(theta), 0.0)
    q = _sym(temp * fisher + prior_prec)
    step = linalg.solve(q, temp * grad + prior_grad)
    prior_len = jnp.sqrt(jnp.maximum(step @ prior_prec @ step, 0.0))
    step = step * jnp.minimum(1.0, MAX_PRIOR_STEP / jnp.maximum(prior_len, 1e-300))
    # The noise of the main gradient release moves the mean by q⁻¹ T W⁻¹ ξ (the centre's noise
    # cancels where nothing is clipped: Σ_j u_j = W(G − n c)); its covariance is public.
    a_main = linalg.solve(q, temp * w_inv)
    mean_noise = (s[5] * clip) ** 2 * (a_main @ a_main.T)
    return (theta + step, _inv_sqrt(fisher / n), jnp.stack([clip_c, clip_s, clip]), honest,
            mean_noise)


def _approximation(model, theta, fisher, mean_noise):
    """The approximation's precision at θ_K, ``T F̂ + P`` with the prior's curvature there
    (public), and the starts' covariance, its inverse plus the mean's noise covariance."""
    prior_prec = _psd_floor(-jax.hessian(model.log_prior)(theta), 0.0)
    precision = _sym(model.temperature * fisher + prior_prec)
    return precision, _sym(linalg.inv(precision) + mean_noise)


_ROUNDS: dict = {}


def _compiled_round(model, n: int, quantile: float):
    """The jitted round for ``model`` and the jitted :func:`_approximation` after the last
    (shared by runs on the same model, keyed like the chain programs by
    :func:`dpmcmc.runtime.compile_cache.model_key`). The data (and a secure source's secret)
    are arguments of the compiled round, never constants baked into it; one program serves
    every round of a start. (The approximation, op by op, compiled some forty small programs:
    the prior's Hessian, its eigendecomposition, the inverse.)"""
    from dpmcmc.runtime import compile_cache as _compile_cache

    def fresh():
        return (jax.jit(lambda prep, src, k, th, w, unit, sig: _round(
                    model, prep, n, quantile, k, th, w, unit, sig, src)),
                jax.jit(lambda th, fisher, mean_noise: _approximation(model, th, fisher,
                                                                      mean_noise)))

    try:
        key = (_compile_cache.model_key(model), n, quantile)
    except TypeError:  # no value key: programs for this call alone
        return fresh()
    if key not in _ROUNDS:
        if len(_ROUNDS) >= 16:
            _ROUNDS.pop(next(iter(_ROUNDS)))
        _ROUNDS[key] = fresh()
    return _ROUNDS[key]


def private_newton(key, model, data, start, plan: NewtonPlan,
                   noise: Optional[NoiseSource] = None) -> NewtonFit:
    """Run the rounds of ``plan`` from the public point ``start`` (module docstring).

    Parameters
    ----------
    key : PRNG key
        The privacy noise's key (unless ``noise`` is a secure source).
    model : Model
    data : array (n, ...)
    start : array (dim,)
        Public starting point (data-independent).
    plan : NewtonPlan
    noise : NoiseSource, optional

    Returns
    -------
    NewtonFit
    """
    noise = DEFAULT_NOISE if noise is None else noise
    with jax.enable_x64(True):
        prepared = prepare_data(jnp.asarray(data), model=model)
        n = int(prepared.n)
        if n != plan.n:
            raise ValueError(f"data has {n} records, the plan expects {plan.n}")
        one, approximation = _compiled_round(model, n, plan.quantile)
        theta = jnp.asarray(start, jnp.float64)
        dim = theta.shape[0]
        whiten = jnp.eye(dim, dtype=jnp.float64) / plan.scale
        unit = 1.0
        sigmas = jnp.asarray(plan.sigmas())
        thetas, clips = [theta], []
        for k, k_round in enumerate(jax.random.split(key, plan.steps)):
            theta, whiten, clip, fisher, mean_noise = one(prepared, noise, k_round, theta, whiten,
                                                          unit, sigmas[k])
            unit = math.sqrt(dim)
            thetas.append(theta)
            clips.append(clip)
        precision, start_cov = approximation(theta, fisher, mean_noise)
        return NewtonFit(theta, precision, start_cov, jnp.stack(thetas), jnp.stack(clips),
                         fisher, whiten)


def start_draws(key, fit: NewtonFit, chains: int) -> jax.Array:
    """``chains`` independent draws of ``N(mean, start_cov)`` (public randomness)."""
    with jax.enable_x64(True):
        return _gaussian_draws(key, jnp.asarray(fit.mean, jnp.float64),
                               jnp.asarray(fit.start_cov, jnp.float64), int(chains))


@functools.partial(jax.jit, static_argnums=3)
def _gaussian_draws(key, mean, cov, count: int):
    # One program (op by op the draws compiled half a dozen small ones, for every new count).
    chol = linalg.cholesky(cov)
    z = jax.random.normal(key, (count, chol.shape[0]), dtype=jnp.float64)
    return mean[None, :] + z @ chol.T
