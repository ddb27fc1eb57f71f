"""Noise-aware Bayesian GLM from privately released Newton statistics (``"noise-aware-glm"``).

Why this algorithm exists
-------------------------
The penalty-type samplers pay for every accepted move with a noisy log-likelihood-ratio
release, so a chain can travel only about √(μ_total / chains) / b in parameter space (issue
12 §3b); on a real table at ε = 4 that is a few posterior sds, too little to mix. For the
built-in generalised linear models with declared covariate bounds, a different route spends
the budget on a handful of released statistics and then does as much *non-private* inference
as needed on a model that includes the privacy noise. This is the approach of noise-aware
inference on released sufficient statistics (Bernstein & Sheldon 2018, 2019; Kulkarni et al.
2021), specialised here to the statistics of Newton's method, which stay exact for any link.

How it steps (``K = steps`` rounds)
-----------------------------------
The records are rows ``(x̃, y)`` of the scaled design (:mod:`dpmcmc.tabular`): ``x̃ = (1, x_s)``
with every ``x_s`` in ``[-1, 1]``, so ``‖x̃‖² ≤ d``. Starting from the public point ``θ₀ = 0``
(the prior mean), round ``k`` releases at the public point ``θ_k`` the gradient sum
``G_k = Σ_i ∇ℓ_i(θ_k)`` and the Hessian sum ``H_k = Σ_i −∇²ℓ_i(θ_k)``, each clipped per record
and noised (below), then moves by a Newton step of the log posterior,
``θ_{k+1} = θ_k + (H̄_k + P)⁻¹ (G_k − P θ_k)``, with ``H̄_k`` the released Hessian symmetrised and
projected onto the positive semi-definite cone (eigenvalues floored at the noise level,
:func:`hessian_floor`) and ``P`` the prior precision (public), capped at ``MAX_STEP`` in
Euclidean norm (a trust region, against an early noisy Hessian). Every quantity after the noise
is post-processing: ``θ_{k+1}`` is a function of released values only.

What it releases, and with which mechanism
------------------------------------------
The per-record bounds come from the declared box alone:

* logistic, ``ℓ_i = y z − softplus(z)``, ``z = x̃ᵀθ``: ``∇ℓ_i = (y − σ(z)) x̃``, so every
  coordinate lies in ``[−1, 1]`` and ``‖∇ℓ_i‖ ≤ √d``; ``−∇²ℓ_i = σ(z)(1 − σ(z)) x̃x̃ᵀ``, so each
  diagonal entry lies in ``[0, 1/4]``, each off-diagonal one in ``[−1/4, 1/4]`` and
  ``‖·‖_F ≤ d/4``;
* linear with declared noise sd ``s`` (target scaled to ``[-1, 1]``): ``ℓ_i`` is quadratic in θ,
  so one round at ``θ₀ = 0`` is exact: ``∇ℓ_i(0) = y x̃ / s²`` (coordinates in ``[−1/s², 1/s²]``,
  norm ≤ ``√d / s²``) and ``−∇²ℓ_i = x̃x̃ᵀ / s²`` (diagonal in ``[0, 1/s²]``, off-diagonal in
  ``[−1/s², 1/s²]``, Frobenius ≤ ``d / s²``): the sufficient statistics ``Σ y x̃`` and ``Σ x̃x̃ᵀ``.

Inside the box nothing is clipped (the bounds hold for every record), so the releases are exact
statistics plus noise. Two mechanisms, each calibrated to the replace-one sensitivity:

* **Gaussian** (the early rounds): per-record L2 / Frobenius bound ``C``, sensitivity ``2C``,
  noise ``σ = C √(2/μ)``, cost ``μ = (2C)²/(2σ²)`` in the units of
  :mod:`dpmcmc.accounting.gaussian`;
* **ℓ∞ K-norm** (the last round, where it adds less noise): the sensitivity set is the box of
  half-widths twice the per-coordinate range (the range itself for the diagonal of the
  Hessian, whose entries are ≥ 0); the mechanism (:func:`dpmcmc.kernels.mechanisms.knorm_mechanism`,
  Hardt & Talwar 2010) is pure ε-DP with that box; the Hessian is released as its upper
  triangle.

At the δ users ask for (~1e-6) a pure mechanism on a d-vector adds far less noise than a
Gaussian of the same ε while d is small (per coordinate, variance ``(d+1)(d+2)w²/(3ε²)``
against the Gaussian's ``(2C)² / (2μ)`` with μ ≈ ε²/22 at δ = 1e-6), while Gaussian releases
compose more cheaply over several rounds. :func:`release_plan` therefore spends
``1 − final_share`` of the Gaussian-only budget ``μ_all = gaussian_mu(ε, δ)`` on the early
rounds (Gaussian, geometric weights 1, 2, 4, …: a far-off round needs only the direction) and
gives the last round whatever (ε, δ) leaves, as the mechanism with the smaller gradient
variance (``mechanism="auto"``; public inputs only: d, ε, δ, the bounds). Within each round
the Hessian gets ``hessian_share``.

Accounting. Each Gaussian release is dominated by a symmetric Gaussian pair, each pure release
by randomized response (:mod:`dpmcmc.accounting.pure`); the f-DP composition theorem holds for
adaptive composition, so the rounds compose to the exact privacy profile of
``G_μ ⊗ RR_{ε_1} ⊗ …`` whatever order or neighbouring pair an adversary picks
(:func:`dpmcmc.accounting.pure.composed_epsilon`). The budget's ε is never exceeded at its δ.
Every noise scale is computed in one place (:class:`GLMRelease`) and the mechanism draws exactly
that scale.

The noise-aware posterior (post-processing)
-------------------------------------------
The last round's releases define the local log-likelihood
``ℓ(θ) ≈ gᵀ(θ − θ_K) − ½ (θ − θ_K)ᵀ H (θ − θ_K)`` with the *true* ``g, H`` unknown. Under a flat
prior on them, given the releases they are the released values minus a draw of the (known,
symmetric) noise distribution; each posterior draw takes one such ``(g, H)`` (``H`` projected
onto the positive semi-definite cone) and then draws θ exactly from the Gaussian
``N(θ_K + Q⁻¹(g − P θ_K), Q⁻¹)``, ``Q = H + P``. So the draws carry the privacy noise as extra
posterior spread (the sd grows by about √(1 + v λ⁻¹) in a direction of Hessian eigenvalue λ,
v the gradient noise variance). The draws are independent, so every chain is already mixed;
there is no warm-up. The noise draws of this step use public randomness.

This is a Laplace (Bernstein–von Mises) approximation: accurate when the posterior is close to
Gaussian (many records per coefficient), coarser for small n or separable data. How close it
gets on real tables, and where it cannot: docs/tutorial_real_data.md.

Reads the data
--------------
Full data, one pass per round (``2K`` accounted releases in all); the data never decide how many
rounds run, which mechanism is used or where the rounds are evaluated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpmcmc import linalg
from dpmcmc.kernels.mechanisms import DEFAULT_NOISE, NoiseSource

__all__ = ["FAMILIES", "MECHANISMS", "GLMRelease", "GLMReleasePlan", "release_plan", "fit",
           "hessian_floor", "noise_aware_draws", "MAX_STEP"]

FAMILIES = ("logistic", "linear")
GAUSSIAN = "gaussian"
KNORM = "knorm"
#: Choices of the last round's mechanism ("auto": the one with the smaller gradient variance).
MECHANISMS = ("auto", GAUSSIAN, KNORM)
#: Default number of Newton rounds for the logistic family (linear needs one).
DEFAULT_STEPS = 6
#: Default share of the Gaussian-only budget μ_all left to the last round (the early rounds
#: spend the rest).
DEFAULT_FINAL_SHARE = 0.8
#: Default share of each round's budget spent on its Hessian.
DEFAULT_HESSIAN_SHARE = 0.2
#: Ratio of the budgets of consecutive early rounds (the first is farthest from the mode and
#: needs only the direction of the step).
EARLY_GROWTH = 2.0
#: Trust-region radius of one Newton move, in units of the scaled coefficients.
MAX_STEP = 3.0
#: Default multiplier of the noise-level eigenvalue floor of released Hessians
#: (:func:`hessian_floor`).
DEFAULT_FLOOR_FACTOR = 1.0
#: Default multiplier of the (lower) floor of the Hessians drawn in the noise-aware posterior.
#: Lower than the Newton moves' floor on purpose: a direction whose curvature the releases
#: cannot resolve should come out WIDE (honest) rather than narrow; with the full floor the
#: ISLR Default runs at ε = 4 were off by ~4 private sds, with 0.3 by ~1.2 (scripts/real_data_eval.py).
DEFAULT_DRAW_FLOOR_FACTOR = 0.3


@dataclass(frozen=True)
class GLMRelease:
    """One released statistic: its mechanism and noise scale (public inputs only).

    Attributes
    ----------
    statistic : {"gradient", "Hessian"}
    round : int
        0-based round.
    kind : {"gaussian", "knorm"}
    d : int
        Coefficients; the gradient has d coordinates, the Hessian d(d+1)/2 free entries.
    bound : float
        Gaussian: the per-record L2 (gradient) or Frobenius (Hessian) bound C, the clip of the
        release. K-norm: the per-record bound of each coordinate (the Hessian's off-diagonal
        entries lie in ``[−bound, bound]``, its diagonal in ``[0, bound]``).
    mu : float
        Gaussian: μ = (2C)²/(2σ²) charged for the release (0 for K-norm).
    epsilon : float
        K-norm: the release's pure ε (0 for Gaussian).
    """

    statistic: str
    round: int
    kind: str
    d: int
    bound: float
    mu: float = 0.0
    epsilon: float = 0.0

    @property
    def size(self) -> int:
        """Released coordinates: d for the gradient, d(d+1)/2 (upper triangle) for a K-norm
        Hessian, d² for a Gaussian one (noised whole, then symmetrised)."""
        if self.statistic == "gradient":
            return self.d
        return self.d * (self.d + 1) // 2 if self.kind == KNORM else self.d * self.d

    @property
    def sigma(self) -> float:
        """Gaussian noise sd ``C √(2/μ)``: the one place σ is derived from μ (the mechanism
        draws this σ, the report charges μ)."""
        if self.kind != GAUSSIAN:
            raise AttributeError("sigma: only a Gaussian release has one")
        return self.bound * math.sqrt(2.0 / self.mu)

    def widths(self) -> np.ndarray:
        """K-norm: half-widths of the sensitivity box, one per released coordinate (the
        largest change of that coordinate between two data sets that differ in one record)."""
        if self.statistic == "gradient":
            return np.full(self.d, 2.0 * self.bound)
        iu = np.triu_indices(self.d)
        return np.where(iu[0] == iu[1], self.bound, 2.0 * self.bound)

    @property
    def noise_sd(self) -> float:
        """Sd of the noise on one released coordinate (for K-norm: the widest, i.e. a gradient
        coordinate or an off-diagonal Hessian entry)."""
        if self.kind == GAUSSIAN:
            return self.sigma
        m = self.size
        return math.sqrt((m + 1) * (m + 2) / 3.0) * 2.0 * self.bound / self.epsilon

    def report_entry(self) -> dict:
        """The release as a PrivacyReport mechanism entry."""
        name = f"{self.statistic} sum, round {self.round + 1}"
        if self.kind == GAUSSIAN:
            return {"name": name, "kind": GAUSSIAN, "per_iteration": 1, "count": 1,
                    "mu": self.mu, "total_mu": self.mu, "sigma": self.sigma / self.bound,
                    "bound": self.bound}
        return {"name": name, "kind": "knorm-linf (pure DP)", "per_iteration": 1, "count": 1,
                "epsilon": self.epsilon, "bound": self.bound, "noise_sd": self.noise_sd}


@dataclass(frozen=True)
class GLMReleasePlan:
    """The releases of one :func:`fit`, from public inputs only (:func:`release_plan`).

    Attributes
    ----------
    family : str
    n, d : int
        Records and coefficients (intercept included).
    epsilon, delta : float
        The budget.
    gradients, hessians : tuple of GLMRelease
        Each round's gradient and Hessian release.
    noise_sd : float
        Linear family: the declared noise sd of the scaled target (enters the bounds).
    floor_factor, draw_floor_factor : float
        Multipliers of the noise-level eigenvalue floor (:func:`hessian_floor`) of the released
        Hessians in the Newton moves and in the noise-aware draws.
    """

    family: str
    n: int
    d: int
    epsilon: float
    delta: float
    gradients: tuple
    hessians: tuple
    noise_sd: float = 0.5
    floor_factor: float = DEFAULT_FLOOR_FACTOR
    draw_floor_factor: float = DEFAULT_DRAW_FLOOR_FACTOR

    @property
    def steps(self) -> int:
        return len(self.gradients)

    def releases(self) -> tuple:
        """Every release, round by round (gradient, then Hessian)."""
        return tuple(r for pair in zip(self.gradients, self.hessians) for r in pair)

    @property
    def mu_total(self) -> float:
        """Total μ of the Gaussian releases."""
        return float(sum(r.mu for r in self.releases() if r.kind == GAUSSIAN))

    @property
    def pure(self) -> tuple:
        """ε of each pure (K-norm) release."""
        return tuple(r.epsilon for r in self.releases() if r.kind == KNORM)

    def epsilon_spent(self) -> float:
        """ε of the composition of all releases at the plan's δ (≤ the budget's ε)."""
        from dpmcmc.accounting.pure import composed_epsilon

        return composed_epsilon(self.delta, mu=self.mu_total, pure=self.pure)

    @property
    def grad_bound(self) -> float:
        """Per-record L2 bound of the gradient (√d logistic, √d/s² linear)."""
        return _bounds(self.family, self.d, self.noise_sd)[0]

    @property
    def hess_bound(self) -> float:
        """Per-record Frobenius bound of the Hessian (d/4 logistic, d/s² linear)."""
        return _bounds(self.family, self.d, self.noise_sd)[1]

    def mechanisms(self) -> list:
        """The releases as PrivacyReport mechanism entries."""
        return [r.report_entry() for r in self.releases()]


def _bounds(family: str, d: int, noise_sd: float) -> tuple[float, float]:
    """Per-record (L2 gradient, Frobenius Hessian) bounds on the declared box."""
    if family == "logistic":
        return math.sqrt(d), d / 4.0
    s2 = noise_sd * noise_sd
    return math.sqrt(d) / s2, d / s2


def _coordinate_bounds(family: str, noise_sd: float) -> tuple[float, float]:
    """Per-record bounds of one gradient coordinate and one Hessian entry on the declared box."""
    if family == "logistic":
        return 1.0, 0.25
    s2 = noise_sd * noise_sd
    return 1.0 / s2, 1.0 / s2


def _check_share(name: str, v) -> float:
    # Open interval: a share of 1 would leave the other releases with noise of infinite sd.
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {v!r}")
    return float(v)


def release_plan(family: str, n: int, d: int, epsilon: float, delta: float, *,
                 steps: Optional[int] = None,
                 final_share: float = DEFAULT_FINAL_SHARE,
                 hessian_share: float = DEFAULT_HESSIAN_SHARE,
                 mechanism: str = "auto",
                 noise_sd: float = 0.5,
                 floor_factor: float = DEFAULT_FLOOR_FACTOR,
                 draw_floor_factor: float = DEFAULT_DRAW_FLOOR_FACTOR) -> GLMReleasePlan:
    """Split the budget (ε, δ) over the rounds (public inputs only; module docstring).

    Parameters
    ----------
    family : {"logistic", "linear"}
    n, d : int
        Records, coefficients (intercept included).
    epsilon, delta : float
        The budget of the whole fit: ε > 0, δ in (0, 1).
    steps : int, optional
        Newton rounds; default 6 for logistic, 1 for linear (exact).
    final_share : float in (0, 1)
        Share of the Gaussian-only budget ``gaussian_mu(ε, δ)`` left to the last round (the
        early rounds spend the rest, in geometric weights 1, 2, 4, …; ignored when
        ``steps == 1``).
    hessian_share : float in (0, 1)
        Share of each round's budget for its Hessian release.
    mechanism : {"auto", "gaussian", "knorm"}
        The last round's mechanism. ``"auto"``: the one whose gradient noise has the smaller
        variance (decided from d, ε, δ and the bounds, never from data).
    noise_sd : float
        Linear family: the declared noise sd on the scaled target.
    floor_factor, draw_floor_factor : float
        See :class:`GLMReleasePlan`.
    """
    from dpmcmc.accounting._checks import check_positive, check_probability
    from dpmcmc.accounting.gaussian import gaussian_mu
    from dpmcmc.accounting.pure import max_pure_scale

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    epsilon = check_positive("epsilon", epsilon)
    delta = check_probability("delta", delta)
    if steps is None:
        steps = DEFAULT_STEPS if family == "logistic" else 1
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    if family == "linear" and steps != 1:
        raise ValueError("steps: the linear family is exact in one round (steps=1)")
    final_share = _check_share("final_share", final_share)
    hessian_share = _check_share("hessian_share", hessian_share)
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    steps, n, d = int(steps), int(n), int(d)
    mu_all = gaussian_mu(epsilon, delta)
    g_l2, h_fro = _bounds(family, d, noise_sd)
    g_box, h_box = _coordinate_bounds(family, noise_sd)

    def gaussian_round(k: int, mu: float) -> tuple:
        return (GLMRelease("gradient", k, GAUSSIAN, d, g_l2, mu=mu * (1.0 - hessian_share)),
                GLMRelease("Hessian", k, GAUSSIAN, d, h_fro, mu=mu * hessian_share))

    early = []
    mu_early = 0.0
    if steps > 1:
        mu_early = (1.0 - final_share) * mu_all
        weights = [EARLY_GROWTH ** k for k in range(steps - 1)]
        early = [gaussian_round(k, mu_early * w / sum(weights)) for k, w in enumerate(weights)]
    last = steps - 1
    gauss_last = gaussian_round(last, mu_all - mu_early)
    scale = max_pure_scale(epsilon, delta, [1.0 - hessian_share, hessian_share], mu=mu_early)
    knorm_last = (GLMRelease("gradient", last, KNORM, d, g_box,
                             epsilon=scale * (1.0 - hessian_share)),
                  GLMRelease("Hessian", last, KNORM, d, h_box, epsilon=scale * hessian_share))
    if mechanism == "auto":
        mechanism = KNORM if knorm_last[0].noise_sd < gauss_last[0].noise_sd else GAUSSIAN
    final = knorm_last if mechanism == KNORM else gauss_last
    rounds = early + [final]
    return GLMReleasePlan(family, n, d, epsilon, delta, tuple(r[0] for r in rounds),
                          tuple(r[1] for r in rounds), float(noise_sd), float(floor_factor),
                          float(draw_floor_factor))


# ------------------------------------------------------------------------ the data pass

def _clip_rows(v: jax.Array, bound: float) -> jax.Array:
    """Scale each row of ``v`` (flattened) to norm ≤ ``bound`` (no-op inside the box)."""
    flat = v.reshape(v.shape[0], -1)
    norm = jnp.sqrt(jnp.sum(flat * flat, axis=1))
    scale = jnp.minimum(1.0, bound / jnp.maximum(norm, 1e-300))
    return v * scale.reshape((-1,) + (1,) * (v.ndim - 1))


def _in_box(family: str, X: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The rows clipped into the declared box the release bounds assume: covariates into
    [-1, 1], the target into [0, 1] (logistic) or [-1, 1] (linear), ±inf to the nearer end; a
    NaN takes the centre of its range (as the table path's missing values). A no-op on the table
    path's design; for any other caller it is what keeps one record's influence within the
    bounds (and the draws finite), whatever its value."""
    X = jnp.where(jnp.isnan(X), 0.0, jnp.clip(X, -1.0, 1.0))
    lo, hi = (0.0, 1.0) if family == "logistic" else (-1.0, 1.0)
    y = jnp.where(jnp.isnan(y), 0.5 * (lo + hi), jnp.clip(y, lo, hi))
    return X, y


def _per_record(family: str, theta, X, y, noise_sd: float):
    if family == "logistic":
        p = jax.nn.sigmoid(X @ theta)
        g = (y - p)[:, None] * X
        w = p * (1.0 - p)
    else:
        s2 = noise_sd * noise_sd
        g = (y / s2)[:, None] * X  # at θ = 0 (the only round of the linear family)
        w = jnp.full(y.shape, 1.0 / s2)
    h = w[:, None, None] * X[:, :, None] * X[:, None, :]
    return g, h


def _symmetric(tri: jax.Array, d: int) -> jax.Array:
    """The symmetric (d, d) matrix of an upper triangle (row-major ``triu_indices`` order)."""
    iu = np.triu_indices(d)
    upper = jnp.zeros((d, d), tri.dtype).at[iu].set(tri)
    return upper + jnp.triu(upper, 1).T


def _clipped_sum(per_record: jax.Array, rel: GLMRelease) -> jax.Array:
    """Σ of the per-record terms clipped to the release's bound (no-op inside the box)."""
    if rel.kind == GAUSSIAN:
        return jnp.sum(_clip_rows(per_record, rel.bound), axis=0)
    if rel.statistic == "gradient":
        return jnp.sum(jnp.clip(per_record, -rel.bound, rel.bound), axis=0)
    iu = np.triu_indices(rel.d)
    tri = per_record[:, iu[0], iu[1]]
    lower = jnp.where(iu[0] == iu[1], 0.0, -rel.bound)
    return jnp.sum(jnp.clip(tri, lower, rel.bound), axis=0)


def _mechanism(key, value: jax.Array, rel: GLMRelease, noise: NoiseSource,
               scale=None) -> jax.Array:
    """The release of a clipped sum (``value``, as :func:`_clipped_sum` returns it) with the
    release's noise; a Hessian comes back as a (d, d) matrix.

    ``scale`` (σ for a Gaussian release, ε for a K-norm one; default the release's own) lets
    rounds of one kind run in one compiled loop over their scales.
    """
    if rel.kind == GAUSSIAN:
        return noise.gaussian(key, value, rel.sigma if scale is None else scale)
    eps = rel.epsilon if scale is None else scale
    out = noise.knorm(key, value, jnp.asarray(rel.widths()), eps)
    return out if rel.statistic == "gradient" else _symmetric(out, rel.d)


def _noise_draw(key, rel: GLMRelease) -> jax.Array:
    """One draw of the release's noise from public randomness (for the noise-aware posterior)."""
    zero = jnp.zeros(rel.size if rel.kind == KNORM or rel.statistic == "gradient"
                     else (rel.d, rel.d), jnp.float64)
    return _mechanism(key, zero, rel, DEFAULT_NOISE)


def _psd(m: jax.Array, floor=0.0) -> jax.Array:
    m = 0.5 * (m + m.T)
    vals, vecs = linalg.eigh(m)
    return (vecs * jnp.maximum(vals, floor)) @ vecs.T


def hessian_floor(noise_sd, d: int, factor: float = DEFAULT_FLOOR_FACTOR):
    """Eigenvalue floor of a released Hessian: ``factor · 2 s √d``, ``s`` its entries' noise sd.

    ``2 s √d`` is the typical spectral norm of a d×d symmetric noise matrix with entries of sd
    ``s``: below it an eigenvalue of the released Hessian is indistinguishable from noise.
    Public (the release's noise scale, :attr:`GLMRelease.noise_sd`, and d).
    """
    return factor * 2.0 * noise_sd * math.sqrt(d)


def _newton_move(theta, g, h, prior_prec, floor):
    q = _psd(h, floor) + prior_prec
    step = linalg.solve(q, g - prior_prec @ theta)
    norm = jnp.sqrt(jnp.sum(step * step))
    return theta + step * jnp.minimum(1.0, MAX_STEP / jnp.maximum(norm, 1e-300))


def _round(key, theta, X, y, plan: GLMReleasePlan, grad: GLMRelease, hess: GLMRelease,
           noise: NoiseSource, scales=(None, None)):
    """One round's two releases at the public point ``theta``."""
    k_g, k_h = jax.random.split(key)
    g_i, h_i = _per_record(plan.family, theta, X, y, plan.noise_sd)
    return (_mechanism(k_g, _clipped_sum(g_i, grad), grad, noise, scales[0]),
            _mechanism(k_h, _clipped_sum(h_i, hess), hess, noise, scales[1]))


def _releases(key, X, y, plan: GLMReleasePlan, prior_prec, noise: NoiseSource):
    """The ``2K`` releases and the public points they were made at.

    The early rounds are all Gaussian and differ only in their noise scales (and bounds, which
    are equal), so they run as one ``lax.scan`` over those scales — compiled once, not once per
    round; the last round, which may use another mechanism, follows.
    """
    theta = jnp.zeros(plan.d, jnp.float64)
    keys = jax.random.split(key, plan.steps)
    early = list(zip(plan.gradients[:-1], plan.hessians[:-1]))
    thetas, gs, hs = (jnp.zeros((0, plan.d)), jnp.zeros((0, plan.d)),
                      jnp.zeros((0, plan.d, plan.d)))
    if early:
        grad0, hess0 = early[0]
        if any(g.kind != GAUSSIAN or h.kind != GAUSSIAN or g.bound != grad0.bound
               or h.bound != hess0.bound for g, h in early):
            raise ValueError("plan: the early rounds must be Gaussian releases with equal bounds")

        def body(theta, xs):
            k, sigma_g, sigma_h = xs
            g_rel, h_rel = _round(k, theta, X, y, plan, grad0, hess0, noise, (sigma_g, sigma_h))
            floor = hessian_floor(sigma_h, plan.d, plan.floor_factor)  # this round's σ, traced
            return _newton_move(theta, g_rel, h_rel, prior_prec, floor), (theta, g_rel, h_rel)

        sig = jnp.asarray([[g.sigma, h.sigma] for g, h in early], jnp.float64)
        theta, (thetas, gs, hs) = jax.lax.scan(body, theta, (keys[:-1], sig[:, 0], sig[:, 1]))
    g_last, h_last = _round(keys[-1], theta, X, y, plan, plan.gradients[-1],
                            plan.hessians[-1], noise)
    return (jnp.concatenate([thetas, theta[None]]), jnp.concatenate([gs, g_last[None]]),
            jnp.concatenate([hs, h_last[None]]))


def noise_aware_draws(key, theta_k, g_rel, h_rel, grad: GLMRelease, hess: GLMRelease,
                      prior_prec, num: int, floor: float = 0.0) -> jax.Array:
    """Draws from the noise-aware posterior of the last round (post-processing only).

    Parameters
    ----------
    key : PRNG key
        Public randomness.
    theta_k, g_rel, h_rel : arrays
        The last round's public point and released gradient and Hessian sums.
    grad, hess : GLMRelease
        Their releases (mechanism and noise scale).
    prior_prec : (d, d) array
        Prior precision (Gaussian prior centred at 0).
    num : int
        Number of draws.
    floor : float
        Eigenvalue floor of each drawn Hessian (:func:`hessian_floor`).
    """
    d = theta_k.shape[0]

    def one(k):
        k1, k2, k3 = jax.random.split(k, 3)
        g = g_rel - _noise_draw(k1, grad)
        h = _psd(h_rel - _noise_draw(k2, hess), floor)
        q = h + prior_prec
        # Through dpmcmc.linalg: under the vmap below, one matrix per LAPACK call (a batched
        # call can deadlock XLA's CPU thread pool; dpmcmc/linalg.py).
        chol = linalg.cholesky(q)
        mean = theta_k + linalg.cho_solve(chol, g - prior_prec @ theta_k)
        z = jax.random.normal(k3, (d,), jnp.float64)
        # θ = mean + L⁻ᵀ z has covariance (L Lᵀ)⁻¹ = Q⁻¹.
        return mean + linalg.solve_triangular(chol.T, z, lower=False)

    return jax.vmap(one)(jax.random.split(key, num))


def fit(key, data: Any, plan: GLMReleasePlan, *, prior_sd: float, chains: int = 4,
        draws: int = 1000, noise: Optional[NoiseSource] = None) -> dict:
    """Run the releases on ``data`` and draw from the noise-aware posterior.

    Parameters
    ----------
    key : PRNG key
        Split into the privacy-noise key and the public draw key.
    data : (n, d + 1) array
        Rows ``(1, x_s..., y)`` of the scaled design, ``x_s ∈ [-1, 1]`` (logistic ``y ∈ {0, 1}``,
        linear ``y ∈ [-1, 1]``).
    plan : GLMReleasePlan
        From :func:`release_plan` (public inputs only): family, n, d, the mechanisms.
    prior_sd : float
        Sd of the independent N(0, prior_sd²) prior on each scaled coefficient.
    chains, draws : int
        Shape of the returned draws; all are independent (post-processing of the releases).
    noise : NoiseSource, optional
        The privacy-noise source (default ``jax.random``; secure mode passes its own).

    Returns
    -------
    dict
        ``samples`` (chains, draws, d) on the scaled design, and the released values
        ``thetas`` (K, d), ``gradients`` (K, d), ``hessians`` (K, d, d).
    """
    from dpmcmc.runtime import compile_cache as _compile_cache

    noise = NoiseSource() if noise is None else noise
    # The two programs take the data, keys and secret as arguments (the plan's public noise
    # scales are their only constants), so a new process may load them from JAX's persistent
    # cache like the samplers' programs (docs/compile_cache.md).
    _compile_cache.ensure_persistent_cache()
    with jax.enable_x64(True):
        arr = jnp.asarray(np.asarray(data, dtype=np.float64))
        X, y = _in_box(plan.family, arr[:, :-1], arr[:, -1])
        if X.shape[1] != plan.d or X.shape[0] != plan.n:
            raise ValueError(f"data has shape {tuple(arr.shape)}, the plan expects "
                             f"({plan.n}, {plan.d + 1})")
        prior_prec = jnp.eye(plan.d, dtype=jnp.float64) / (prior_sd * prior_sd)
        k_noise, k_draw = jax.random.split(key)
        thetas, gs, hs = jax.jit(_releases, static_argnums=(3,))(k_noise, X, y, plan, prior_prec,
                                                                 noise)
        grad, hess = plan.gradients[-1], plan.hessians[-1]
        out = jax.jit(noise_aware_draws, static_argnums=(4, 5, 7))(
            k_draw, thetas[-1], gs[-1], hs[-1], grad, hess, prior_prec, chains * draws,
            hessian_floor(hess.noise_sd, plan.d, plan.draw_floor_factor))
        return {"samples": np.asarray(out).reshape(chains, draws, plan.d),
                "thetas": np.asarray(thetas), "gradients": np.asarray(gs),
                "hessians": np.asarray(hs)}


# ------------------------------------------------------------------------------- the card
#
# The noise-aware GLM is a one-shot algorithm: a fixed set of releases (its release plan) and
# draws that are post-processing of them, so its card has ``fit`` instead of ``build``. Its
# releases are ordinary accounting events (Gaussian ones of their μ, pure ones of their ε),
# composed by the same accountant as every sampler's (dpmcmc.accounting.spent).

#: What ``family`` a model built by the table path declares in its metadata.
_MODEL_FAMILIES = {"logistic_regression": "logistic", "linear_regression": "linear"}
#: The parameters of the card (``prepare``), with their defaults (``None``: from the model).
_PARAMS = {"family": None, "noise_sd": None, "steps": None, "final_share": DEFAULT_FINAL_SHARE,
           "hessian_share": DEFAULT_HESSIAN_SHARE, "mechanism": "auto", "prior_sd": None,
           "draws": 1000}
#: Accounting parameters: the budget the releases were split for, and how.
_SPLIT = ("family", "dim", "split_epsilon", "split_delta")
_SPLIT_OPTIONAL = ("steps", "final_share", "hessian_share", "mechanism", "noise_sd")


def _prepare(params: dict, model, n) -> dict:
    """The card's ``prepare``: validate and fill the defaults (public inputs only)."""
    from dpmcmc.accounting._checks import check_int, check_positive
    from dpmcmc.samplers.spec import check_common

    from dpmcmc.models.base import Model

    check_common("noise-aware-glm", params, tuple(_PARAMS), (), model, n)
    meta = getattr(model, "metadata", None) or {}
    out = {k: params.get(k, v) for k, v in _PARAMS.items()}
    if isinstance(model, Model):
        # The releases bound the GLM's own per-record statistics: any other likelihood would be
        # fitted as if it were a GLM.
        family = _MODEL_FAMILIES.get(meta.get("family"))
        if family is None:
            raise ValueError(f"model: noise-aware-glm fits the logistic and linear GLMs of "
                             f"dpmcmc.glm (models.logistic_regression, or dpmcmc.glm's linear "
                             f"model) on rows (1, x..., y) of a design in [-1, 1]; model "
                             f"{model.name!r} is neither")
        if out["family"] not in (None, family):
            raise ValueError(f"family: the model is the {family} GLM, got family={out['family']!r}")
        out["family"] = family
    if out["family"] is None:
        raise ValueError(f"family: give the GLM family, one of {FAMILIES}")
    if out["family"] not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {out['family']!r}")
    if out["noise_sd"] is None:
        out["noise_sd"] = float(meta.get("noise_sd_scaled", 0.5))
    out["noise_sd"] = check_positive("noise_sd", out["noise_sd"])
    if out["prior_sd"] is None:
        out["prior_sd"] = math.sqrt(meta["prior_var"]) if "prior_var" in meta else 10.0
    out["prior_sd"] = check_positive("prior_sd", out["prior_sd"])
    out["draws"] = check_int("draws", out["draws"], minimum=1)
    if out["steps"] is None:
        out["steps"] = DEFAULT_STEPS if out["family"] == "logistic" else 1
    # The split's own checks (steps, shares, mechanism), naming the argument.
    release_plan(out["family"], int(n), int(model.dim), 1.0, 1e-6,
                 **{k: out[k] for k in _SPLIT_OPTIONAL})
    return out


def split_params(prepared: dict, dim: int, epsilon: float, delta: float) -> dict:
    """The accounting parameters of a fit: the prepared split and the budget it divides."""
    return dict({k: prepared[k] for k in _SPLIT_OPTIONAL if k in prepared},
                family=prepared["family"], dim=int(dim), split_epsilon=float(epsilon),
                split_delta=float(delta))


def plan_releases(n: int, split: dict) -> GLMReleasePlan:
    """The release plan of :func:`split_params`' output (public inputs only)."""
    return release_plan(split["family"], n, split["dim"], split["split_epsilon"],
                        split["split_delta"], **{k: split[k] for k in _SPLIT_OPTIONAL if k in split})


def _validate_split(n: int, params: dict) -> dict:
    from dpmcmc.accounting._checks import check_int, check_positive, check_probability

    out = dict(params)
    out["dim"] = check_int("dim", params["dim"], minimum=1)
    out["split_epsilon"] = check_positive("split_epsilon", params["split_epsilon"])
    out["split_delta"] = check_probability("split_delta", params["split_delta"])
    if "noise_sd" in params:
        out["noise_sd"] = check_positive("noise_sd", params["noise_sd"])
    plan_releases(n, out)  # the other checks of release_plan, naming the argument
    return out


def _events(n: int, params: dict) -> tuple:
    """The fit's releases as accounting events (one set: a one-shot algorithm)."""
    from dpmcmc.accounting.events import mu_release, pure_release

    out = []
    for r in plan_releases(n, params).releases():
        name = f"{r.statistic} sum, round {r.round + 1}"
        out.append(mu_release(name, r.mu) if r.kind == GAUSSIAN else pure_release(name, r.epsilon))
    return tuple(out)


def _noise_lines(p: dict, n: int, dim: int, temperature: float = 1.0) -> tuple:
    """The last round's noise, next to what it perturbs (public inputs only); ``p`` holds the
    prepared parameters and the split (:func:`split_params`)."""
    from dpmcmc.samplers.spec import NoiseLine

    rp = plan_releases(n, p)
    grad, hess = rp.gradients[-1], rp.hessians[-1]
    sg, sh = grad.noise_sd, hess.noise_sd
    # Gradient noise of sd s shifts the estimate along an eigendirection of the (scaled-design)
    # log-likelihood Hessian with eigenvalue λ by s/λ, against a posterior sd of 1/√λ: the
    # direction is noise-dominated when λ < s². Public threshold; λ itself is data.
    return (
        NoiseLine(f"gradient sum (last round, {grad.kind})", sg,
                  "Hessian eigenvalue (scaled design) below which a direction is noise-dominated, "
                  "s_g²", sg * sg),
        NoiseLine(f"Hessian sum (last round, {hess.kind})", sh,
                  "over the per-record bound of an entry",
                  sh / (hess.bound if hess.kind != GAUSSIAN else rp.hess_bound)),
    )


def _fit(key, data, plan, noise: Optional[NoiseSource] = None) -> dict:
    """The card's ``fit``: :func:`fit` with the plan's releases, prior and draws."""
    prepared = plan.params
    rp = plan_releases(plan.n, plan.report.params)
    return fit(key, data, rp, prior_sd=prepared["prior_sd"], chains=plan.chains,
               draws=prepared["draws"], noise=noise)


# ------------------------------------------------------------------------------- the audit
#
# ``dpmcmc audit noise-aware-glm`` runs the fit's own release code (:func:`_releases`, with the
# kernel-style noise source, so a miscalibrated source reaches it) many times on two
# neighbouring data sets and applies the tests of :mod:`dpmcmc.audit`:
#
# * ``releases``: the exact log-likelihood ratio ``log p_D(T)/p_D'(T)`` of each run's transcript
#   ``T``: the sum over releases of each mechanism's log density ratio at the realised query
#   point (Gaussian: ``(‖r − b‖² − ‖r − a‖²)/(2σ²)``; K-norm: ``ε(‖r − b‖_K − ‖r − a‖_K)``, with
#   ``a``, ``b`` the clipped sums on D and D'). By Neyman–Pearson the most powerful statistic
#   for this pair.
# * ``draws``: the noise-aware posterior mean of the slope (the last round's Newton estimate),
#   what a user would publish.
#
# Design (``n = 200`` records, one covariate, slope 6, so the fitted probabilities are near 0 or
# 1): D has the record ``(x = 1, y = 0)``, D' has ``(x = −1, y = 1)`` in its place. At a fitted
# point both records are "surprising", so their gradients differ by almost the whole width of
# the K-norm box in the intercept coordinate and by 2 in norm: the pair is close to worst case
# for the last round's mechanism, which dominates the budget.

#: Records per data set and the slope of the audit's design.
AUDIT_N = 200
AUDIT_SLOPE = 6.0
#: Runs per compiled call (memory: each run holds its n per-record Hessians per round).
AUDIT_CHUNK = 10000
#: Prior sd of the audited fit (dpmcmc.glm's default).
AUDIT_PRIOR_SD = 10.0


def audit_design(n: int = AUDIT_N, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The audit's neighbouring data sets ``(D, D')``: rows ``(1, x, y)`` of a scaled design."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(-0.5 + AUDIT_SLOPE * x)))).astype(float)
    d_set = np.column_stack([np.ones(n), x, y])
    d_set[0] = [1.0, 1.0, 0.0]
    dp_set = d_set.copy()
    dp_set[0] = [1.0, -1.0, 1.0]
    return d_set, dp_set


def _release_sum(plan: GLMReleasePlan, data, theta, rel: GLMRelease):
    X, y = data[:, :-1], data[:, -1]
    g, h = _per_record(plan.family, theta, X, y, plan.noise_sd)
    return _clipped_sum(g if rel.statistic == "gradient" else h, rel)


def audit_runner(plan: GLMReleasePlan, d_set, dp_set, noise: NoiseSource):
    """``(data, keys) -> (transcript log-ratio, posterior-mean slope)`` per run, compiled once."""
    prior = jnp.eye(plan.d) / AUDIT_PRIOR_SD ** 2
    d_set, dp_set = jnp.asarray(d_set), jnp.asarray(dp_set)

    def one(data, key):
        thetas, gs, hs = _releases(key, data[:, :-1], data[:, -1], plan, prior, noise)
        llr = 0.0
        for k in range(plan.steps):
            for rel, out in ((plan.gradients[k], gs[k]), (plan.hessians[k], hs[k])):
                a = _release_sum(plan, d_set, thetas[k], rel)
                b = _release_sum(plan, dp_set, thetas[k], rel)
                if rel.kind == GAUSSIAN:
                    s2 = 2.0 * rel.sigma ** 2
                    llr = llr + (jnp.sum((out - b) ** 2) - jnp.sum((out - a) ** 2)) / s2
                else:
                    r = out if rel.statistic == "gradient" else out[np.triu_indices(plan.d)]
                    w = jnp.asarray(rel.widths())
                    llr = llr + rel.epsilon * (jnp.max(jnp.abs(r - b) / w)
                                               - jnp.max(jnp.abs(r - a) / w))
        theta, g = thetas[-1], gs[-1]
        q = _psd(hs[-1], hessian_floor(plan.hessians[-1].noise_sd, plan.d,
                                       plan.draw_floor_factor)) + prior
        mean = theta + linalg.solve(q, g - prior @ theta)  # one matrix per call under the vmap
        return llr, mean[1]

    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


def _audit_setup(epsilon: float, delta: float, noise: Optional[NoiseSource]):
    """The audit entry's ``setup`` (:class:`~dpmcmc.samplers.audit_design.OneShotAudit`)."""
    if noise is not None and noise.sensitivity_factor != 1.0:
        raise ValueError("_miscalibration: the noise-aware GLM clips nothing inside its box; only "
                         "noise_scale applies")
    d_set, dp_set = audit_design()
    plan = release_plan("logistic", d_set.shape[0], d_set.shape[1] - 1, epsilon, delta)
    params = {"steps": plan.steps, "final_mechanism": plan.gradients[-1].kind,
              "mu_total": plan.mu_total, "pure_epsilon": list(plan.pure)}
    runner = audit_runner(plan, d_set, dp_set, NoiseSource() if noise is None else noise)
    return float(plan.epsilon_spent()), params, runner


def _card():
    from dpmcmc.accounting.events import PURE, ReleaseSpec
    from dpmcmc.samplers.audit_design import OneShotAudit
    from dpmcmc.samplers.spec import FULL, AlgorithmSpec

    return AlgorithmSpec(
        name="noise-aware-glm", private=True, prepare=_prepare, build=None, data_access=FULL,
        releases=ReleaseSpec(PURE, _SPLIT, _events, optional=_SPLIT_OPTIONAL,
                             validate=_validate_split),
        noise_lines=_noise_lines, fit=_fit, split=split_params,
        audit=OneShotAudit("noise-aware-glm", audit_design, _audit_setup, AUDIT_CHUNK))


SPEC = _card()
