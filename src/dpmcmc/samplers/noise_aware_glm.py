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
Euclidean norm (a trust region, against an early noisy Hessian). The floor is a quarter of the
noise's spectral scale (``floor_factor``): a full one held the moves in a direction of small
curvature to a fraction of Newton's, so on ISLR Default the sixth point was still 11 posterior
sds from the mode at ε = 4 (5 with a quarter). Every quantity after the noise
is post-processing: ``θ_{k+1}`` is a function of released values only.

What it releases, and with which mechanism
------------------------------------------
The per-record bounds come from the declared box alone:

* logistic, ``ℓ_i = y z − softplus(z)``, ``z = x̃ᵀθ``: ``∇ℓ_i = (y − σ(z)) x̃``, so every
  coordinate lies in ``[−1, 1]`` and ``‖∇ℓ_i‖ ≤ √d``; ``−∇²ℓ_i = σ(z)(1 − σ(z)) x̃x̃ᵀ``, so each
  diagonal entry lies in ``[0, 1/4]``, each off-diagonal one in ``[−1/4, 1/4]`` and
  ``‖·‖_F ≤ d/4``;
* linear (target scaled to ``[-1, 1]``, residual sd ``s``): ``ℓ_i`` is quadratic in θ,
  so one round at ``θ₀ = 0`` is exact: it releases the sufficient statistics ``Σ y x̃``
  (coordinates in ``[−1, 1]``, norm ≤ ``√d``) and ``Σ x̃x̃ᵀ`` (diagonal in ``[0, 1]``,
  off-diagonal in ``[−1, 1]``, Frobenius ≤ ``d``), and, unless a residual sd is declared,
  ``Σ y²`` (each term in ``[0, 1]``) for the residual variance;
* Poisson (counts clipped to the declared public cap ``C``, ``y ∈ [0, C]``; log link,
  ``ℓ_i = y η − e^η − log y!``, ``η = x̃ᵀθ``): ``∇ℓ_i = (y − e^η) x̃`` and
  ``−∇²ℓ_i = e^η x̃x̃ᵀ`` are unbounded in θ; they are bounded on a public set of points,
  below, by ``C + 1`` per coordinate (norm ``(C + 1)√d``) and ``C + 1`` per Hessian entry
  (diagonal in ``[0, C + 1]``, Frobenius ``(C + 1) d``).

Inside the box nothing is clipped (the bounds hold for every record), so the releases are exact
statistics plus noise. Two mechanisms, each calibrated to the replace-one sensitivity:

* **Gaussian**: per-record L2 / Frobenius bound ``C``, sensitivity ``2C``,
  noise ``σ = C √(2/μ)``, cost ``μ = (2C)²/(2σ²)`` in the units of
  :mod:`dpmcmc.accounting.gaussian`;
* **ℓ∞ K-norm**: the sensitivity set is the box of half-widths twice the per-coordinate range
  (the range itself for the diagonal of the Hessian, whose entries are ≥ 0); the mechanism
  (:func:`dpmcmc.kernels.mechanisms.knorm_mechanism`, Hardt & Talwar 2010) is pure ε-DP with
  that box; the Hessian is released as its upper triangle.

At the δ users ask for (~1e-6) a pure mechanism on a d-vector adds far less noise than a
Gaussian of the same ε while d is small (per coordinate, variance ``(d+1)(d+2)w²/(3ε²)``
against the Gaussian's ``(2C)² / (2μ)`` with μ ≈ ε²/22 at δ = 1e-6). :func:`release_plan`
first chooses the last round's mechanisms (``mechanism="auto"``) as before pure early rounds
existed: ``1 − final_share`` (0.2) of the Gaussian-only budget ``μ_all = gaussian_mu(ε, δ)`` on
Gaussian early rounds (geometric weights 1, 2, 4, …: a far-off round needs only the direction),
the last round whatever (ε, δ) leaves, as the mechanism with the smaller gradient variance
(public inputs only: d, ε, δ, the bounds). Where that last gradient is a K-norm release (small
d), the early rounds are K-norm too (``early_mechanism="auto"``): a Gaussian's ε at small δ is
dear (ε ≈ 2√(μ log 1/δ) for small μ), so Gaussian early rounds of a fifth of μ_all cost about
40 % of ε; pure early rounds take ``1 − final_share`` (0.3) of a common pure scale, the last
round the rest, the scale the largest the tight composition allows at (ε, δ). Within each round
the Hessian gets ``hessian_share``.

The Poisson family's public points
----------------------------------
The Newton points θ_k are public (functions of earlier releases), so they may be moved by any
public rule before a round uses them. Each point is projected (Euclidean,
:func:`public_point`) onto ``Θ_B = {θ : θ₀ + Σ_{j≥1} |θ_j| ≤ B}``, ``B = log(C + 1)``: the
points whose log rate ``η = x̃ᵀθ`` stays ≤ B at every point of the declared box (``x̃₀ = 1``,
``|x̃_j| ≤ 1``, so ``x̃ᵀθ ≤ θ₀ + Σ|θ_j|``, with equality at a corner). A rate above ``C + 1``
somewhere in the box would put most counts there above the declared cap, outside the model the
cap declares. ``θ₀ = 0`` lies in ``Θ_B``. The per-record terms are computed with the log rate
capped, ``μ = e^{min(η, B)}``, which is the identity on ``Θ_B`` (the releases are the exact
gradient and Hessian sums of the capped counts' Poisson log-likelihood at θ_k) and makes the
bounds hold at every θ, whatever a caller passes.

*Replace-one sensitivity.* For any θ and any record in the box (``y ∈ [0, C]``,
``|x̃_j| ≤ 1``): ``μ ∈ (0, C + 1]``, so ``y − μ ∈ (−(C + 1), C]`` and every gradient coordinate
``(y − μ) x̃_j`` lies in ``[−(C + 1), C + 1]``, its L2 norm ≤ ``(C + 1)√d``; every Hessian
entry ``μ x̃_j x̃_k`` lies in ``[−(C + 1), C + 1]``, the diagonal in ``[0, C + 1]``, the
Frobenius norm ``μ‖x̃‖² ≤ (C + 1) d``. Replacing one record changes a sum by the difference of
two such terms: each gradient coordinate by at most ``2(C + 1)``, each diagonal Hessian entry by
at most ``C + 1``, each off-diagonal one by at most ``2(C + 1)`` — the K-norm sensitivity box
(:meth:`GLMRelease.widths`, bound ``C + 1``) — and the L2 / Frobenius norm by at most twice the
per-record bound — the Gaussian sensitivity ``2C_g``. So the per-record bounds are
``max(C, e^B) = C + 1`` times those of a unit weight, from the declared cap and box alone; the
clip of each release (:func:`_clipped_sum`) enforces the same boxes and is a no-op. No bound,
scale or branch depends on a record: the projection reads released values only, and the
composition below holds for adaptively chosen points and neighbouring pairs, in either order.

Accounting. Each Gaussian release is dominated by a symmetric Gaussian pair, each pure release
by randomized response (:mod:`dpmcmc.accounting.pure`); the f-DP composition theorem holds for
adaptive composition, so the rounds compose to the exact privacy profile of
``G_μ ⊗ RR_{ε_1} ⊗ …`` whatever order or neighbouring pair an adversary picks
(:func:`dpmcmc.accounting.pure.composed_epsilon`). The budget's ε is never exceeded at its δ.
Every noise scale is computed in one place (:class:`GLMRelease`) and the mechanism draws exactly
that scale.

The noise-aware posterior (post-processing)
-------------------------------------------
The last round's releases at the public point ``θ_K`` are modelled given θ: the score
``ĝ = H(θ − θ_K) + e + z`` with ``e ~ N(0, s²H)`` the records' sampling noise (the
Bernstein–von Mises / CLT model; exact for the linear family, ``θ_K = 0``), ``z`` the release's
noise, and the curvature ``Ĥ = H + z_H``. Each draw (:func:`noise_aware_draws`) takes a
curvature from the releases (``Ĥ`` minus a fresh noise draw), with each eigenvalue moved down by
what eigenvalue repulsion could have added to it (:func:`curvature_shrinkage`: the i-th smallest
by ``2√2 s √(i − 1)``, ``s`` the entries' noise sd, and not below 0; otherwise a curvature made
of noise would make the posterior narrow), then θ from the Gaussian posterior of the score model
under the N(0, τ²) prior: precision ``H (s²H + κ²Σ_z)⁻¹ H + P`` (centred where the unshrunk
curvature draw puts it: the shrinkage widens, it does not move the centre). For the logistic and
Poisson families the score at θ_K is ``H̄(θ − θ_K)`` with ``H̄`` the mean Hessian between θ_K
and θ, which differs from ``H(θ_K)`` when the last point is away from the mode: each draw
scales its curvature by factors within the bound ``e^{±‖θ − θ_K‖₁}`` (a logistic weight changes
by at most e^{|Δz|}, a Poisson weight by exactly e^{Δη}; capped, :data:`SECANT_M_MAX`). For
both, the records' sampling variance of the score is the Hessian itself (``Var y = σ(1 − σ)``,
resp. ``e^η``; a capped count varies less), so ``s = 1``. Where the curvature is small next
to the noise this is the prior, not the noisy score extrapolated; where the releases resolve
it, the spread is the sampling spread plus the privacy noise's. So the draws carry the noise of the score, of the
curvature and, for linear regression without a declared residual sd, of the released ``Σ y²``
(the residual variance ``s²`` drawn from ``RSS/χ²_{n−d}``, RSS from the releases). The draws are independent: no chains to mix, no warm-up. Their randomness is
public.

The logistic family's ObjPert finder (``finder="objpert"``, the default where the gradient is a
K-norm release)
-----------------------------------------------------------------------------------------------
Newton rounds spend a third of the budget getting near the mode, and their last point is still
off it (ISLR Default at ε = 4: median worst error 3.8 non-private sds, 6.9× the oracle's of
benchmarks/glm_oracle.py). Objective perturbation (Chaudhuri, Monteleoni & Sarwate 2011;
Kifer, Smith & Thakurta 2012) finds a point near the mode *and* a gradient at it in one release:
draw ``b`` from the ℓ∞ K-norm density ``∝ exp(−ε_b max_j |b_j|/2)`` and release the minimiser
θ* of ``J_D(θ) = Σ_i [softplus(x̃_iᵀθ) − y_i x̃_iᵀθ] + (Λ/2)‖θ‖² + bᵀθ``,
``Λ = β/(e^{ε_J} − 1)``, ``β = d/4``. Its stationarity says ``∇L_D(θ*) = Λθ* + b``: the
log-likelihood gradient at θ* is the public ``Λθ*`` up to K-norm noise of exactly the law of a
gradient release at ε_b. So the noise-aware posterior above applies unchanged with θ_K = θ*,
ĝ = Λθ*, the gradient noise that of ``b``, and one Hessian release at θ* (K-norm, or Gaussian
by the last round's rule).

*Replace-one privacy of θ*.* J_D is Λ-strongly convex, so each θ is the minimiser for exactly
one ``b_D(θ) = ∇L_D(θ) − Λθ`` and the output's density is ``ν(b_D(θ)) det(ΛI + H_D(θ))``. For D,
D′ differing in one record (either order, any θ): ``b_D(θ) − b_D′(θ)`` is a difference of two
per-record gradients, every coordinate in (−2, 2), so the ν ratio is ≤ e^{ε_b}; with the common
part ``A₀ = ΛI + Σ_{j≠i} H_j ⪰ ΛI`` and rank-one terms of eigenvalue ≤ β, the determinant ratio
is ≤ ``det(A₀ + aaᵀ)/det A₀ = 1 + aᵀA₀⁻¹a ≤ 1 + β/Λ = e^{ε_J}`` (one rank-one change, not
two: the smaller determinant is bounded below by det A₀). So θ* is pure (ε_b + ε_J)-DP.
ε_J is :data:`OBJPERT_JACOBIAN_SHARE` of the release's ε.

*The solver.* The argument is about the exact θ*. :func:`objpert_solve` (damped Newton, float64)
stops at ``‖∇J‖ ≤ γ`` (:data:`OBJPERT_TOL`), so ``‖θ̂ − θ*‖ ≤ γ/Λ``; the released point is
``θ̂ + N(0, σ_r²)``, a Gaussian release of ``θ̂ − θ*`` (a function of D and θ*, sensitivity
2γ/Λ) composed with θ* and post-processed (the approximate-minimiser argument of Iyengar et al.
2019). It costs :data:`OBJPERT_RESIDUAL_SHARE` of μ_all; σ_r is ~10⁻⁶ scaled units, and the
posterior still carries it (``σ_r²(H + ΛI)²`` in the score's covariance). The iteration cap is a
public constant, met on separable, single-outcome, corner and large steep tables in
tests/samplers/test_glm_objpert.py (~10 iterations on real tables); the number of iterations is
never released.

*Why Λ is not undone for free.* The ridge pulls θ* towards 0 by about ``(H + Λ)⁻¹Λθ̂``; the
posterior's Newton step from θ* with the released curvature removes it, so its error is the
curvature's noise times that pull. ε_J = 0.2 of the point's ε (the measured best of {0.1, 0.2,
0.35, 0.5} on the development tables, benchmarks/results/glm_oracle_width.md) keeps Λ ≈ d/4
at ε = 4. The Poisson family keeps Newton rounds: its capped log-likelihood is not concave and
its per-record Hessian is bounded only on the public set Θ_B.

Calibration on tables simulated from the model (coverage of the true coefficients by the
central 50 % and 90 % intervals): :mod:`dpmcmc.tabular.calibration`, benchmarks/calibration.py,
docs/calibration.md.

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

__all__ = ["FAMILIES", "NEWTON_FAMILIES", "MECHANISMS", "GLMRelease", "GLMReleasePlan",
           "release_plan", "fit", "hessian_floor", "noise_aware_draws", "curvature_shrinkage",
           "kappa", "public_point", "check_count_cap", "MAX_STEP", "FINDERS",
           "objpert_solve", "objpert_log_ratio"]

FAMILIES = ("logistic", "linear", "poisson")
#: The families fitted by Newton rounds at moving public points: their score is nonlinear in θ,
#: and the records' variance of the score is its Hessian (``s = 1`` in the draws).
NEWTON_FAMILIES = ("logistic", "poisson")
GAUSSIAN = "gaussian"
SUM_OF_SQUARES = "sum of squares"
#: The objective-perturbation release (:func:`objpert_point`): a point whose log-likelihood
#: gradient is known up to K-norm noise, and the Gaussian release of its solver's residual.
OBJPERT_POINT = "ObjPert point"
OBJPERT_RESIDUAL = "ObjPert residual"
#: Statistics released as d-vectors (K-norm box of half-width twice the coordinate bound).
VECTOR_STATISTICS = ("gradient", OBJPERT_POINT)
#: How the point of the last round is found: Newton rounds at public points, or one
#: objective-perturbation release (logistic only); "auto" picks from public inputs.
NEWTON = "newton"
OBJPERT = "objpert"
FINDERS = ("auto", NEWTON, OBJPERT)
#: Share of the ObjPert release's ε that pays for its Jacobian term (sets the ridge Λ =
#: β/(e^{ε_J} − 1)). Smaller: less noise in the point's gradient, a larger ridge to undo with
#: the released curvature (benchmarks/results/glm_oracle_width.md, debiased ObjPert rows).
OBJPERT_JACOBIAN_SHARE = 0.2
#: The solver's tolerance γ on ‖∇J‖₂ (public): the released point lies within γ/Λ of the exact
#: minimiser, which the residual release covers.
OBJPERT_TOL = 1e-7
#: Damped Newton iterations at most (public; ~10 are used on real tables).
OBJPERT_MAX_ITER = 100
#: Step sizes tried by the backtracking line search: 1, 1/2, ..., 2^-(this − 1).
OBJPERT_HALVINGS = 31
#: Share of μ_all (:func:`dpmcmc.accounting.gaussian_mu`) spent on the residual release.
OBJPERT_RESIDUAL_SHARE = 0.005
KNORM = "knorm"
MIXED = "mixed"
#: Choices of the last round's mechanisms: all Gaussian, all K-norm, or "mixed" (Gaussian
#: Hessian, K-norm gradient); "auto" picks from public inputs (:func:`release_plan`).
MECHANISMS = ("auto", GAUSSIAN, KNORM, MIXED)
#: Default number of Newton rounds for the logistic and Poisson families (linear needs one).
DEFAULT_STEPS = 6
#: Default share of the Gaussian-only budget μ_all left to the last round (the early rounds
#: spend the rest).
DEFAULT_FINAL_SHARE = 0.8
#: The same with pure (K-norm) early rounds: the last round's share of the common pure scale.
DEFAULT_FINAL_SHARE_PURE = 0.7
#: Default share of each round's budget spent on its Hessian, per family. A larger logistic
#: share resolves more curvature (0.5 cut the median worst error on ISLR Default at ε = 4 from
#: 18 to 3.5 non-private sds) but broke calibration on rare outcomes (3 % base rate, n = 1000 at
#: ε = 4 and n = 10⁴ at ε = 1: joint 90 % coverage 0.69; benchmarks/results/
#: calibration_logistic_hessian_share_0.5.json), so it stays 0.2 (Poisson too). Linear: 0.4, since its single
#: round's curvature ``Σ x̃x̃ᵀ`` must be resolved for any coefficient to be.
DEFAULT_HESSIAN_SHARE = 0.2
LINEAR_HESSIAN_SHARE = 0.4
#: Linear family, residual sd inferred: default share of the round's budget spent on ``Σ y²``.
DEFAULT_SS_SHARE = 0.1
#: Ratio of the budgets of consecutive early rounds (the first is farthest from the mode and
#: needs only the direction of the step).
EARLY_GROWTH = 2.0
#: Trust-region radius of one Newton move, in units of the scaled coefficients.
MAX_STEP = 3.0
#: Default multiplier of the noise-level eigenvalue floor of released Hessians in the early
#: Newton moves (:func:`hessian_floor`): 1 held the moves along a direction of small curvature
#: to a fraction of Newton's (ISLR Default, ε = 4: the sixth point 11 posterior sds from the
#: mode; 5 with 0.25; docs/calibration.md).
DEFAULT_FLOOR_FACTOR = 0.25
#: Default multiplier of the shrinkage of the curvatures drawn in the noise-aware posterior
#: (:func:`curvature_shrinkage`): a direction whose curvature the releases cannot resolve
#: comes out as wide as the prior allows, not as narrow as the noise's size would make it
#: (chosen by the calibration grid, docs/calibration.md).
DEFAULT_DRAW_FLOOR_FACTOR = 1.0


@dataclass(frozen=True)
class GLMRelease:
    """One released statistic: its mechanism and noise scale (public inputs only).

    Attributes
    ----------
    statistic : {"gradient", "Hessian", "sum of squares"}
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
    jacobian: float = 0.0

    @property
    def size(self) -> int:
        """Released coordinates: d for the gradient (and the ObjPert point), d(d+1)/2 (upper
        triangle) for a K-norm Hessian, d² for a Gaussian one (noised whole, then
        symmetrised)."""
        if self.statistic in VECTOR_STATISTICS:
            return self.d
        if self.statistic == SUM_OF_SQUARES:
            return 1
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
        if self.statistic in VECTOR_STATISTICS:
            return np.full(self.d, 2.0 * self.bound)
        if self.statistic == SUM_OF_SQUARES:  # y² ∈ [0, bound]: a change of at most the bound
            return np.full(1, self.bound)
        iu = np.triu_indices(self.d)
        return np.where(iu[0] == iu[1], self.bound, 2.0 * self.bound)

    @property
    def noise_sd(self) -> float:
        """Sd of the noise on one released coordinate (for K-norm: the widest, i.e. a gradient
        coordinate or an off-diagonal Hessian entry)."""
        if self.kind == GAUSSIAN:
            return self.sigma
        m = self.size
        return (math.sqrt((m + 1) * (m + 2) / 3.0) * float(np.max(self.widths()))
                / self.noise_epsilon)

    @property
    def noise_epsilon(self) -> float:
        """K-norm: the ε its noise is drawn at. The ObjPert point's charge also pays the
        Jacobian term (:attr:`jacobian`), which adds no noise."""
        return self.epsilon - self.jacobian

    @property
    def name(self) -> str:
        """The release's name in reports and accounting events."""
        if self.statistic in (OBJPERT_POINT, OBJPERT_RESIDUAL):
            return self.statistic
        return f"{self.statistic} sum, round {self.round + 1}"

    def report_entry(self) -> dict:
        """The release as a PrivacyReport mechanism entry."""
        name = self.name
        if self.kind == GAUSSIAN:
            return {"name": name, "kind": GAUSSIAN, "per_iteration": 1, "count": 1,
                    "mu": self.mu, "total_mu": self.mu, "sigma": self.sigma / self.bound,
                    "bound": self.bound}
        out = {"name": name, "kind": "knorm-linf (pure DP)", "per_iteration": 1, "count": 1,
               "epsilon": self.epsilon, "bound": self.bound, "noise_sd": self.noise_sd}
        if self.jacobian:
            out["jacobian_epsilon"] = self.jacobian
        return out


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
    noise_sd : float or None
        Linear family: the declared residual sd of the scaled target; None (the default): it
        is inferred from the released ``Σ y²`` (:attr:`sum_of_squares`).
    floor_factor, draw_floor_factor : float
        Multipliers of the noise-level eigenvalue floor (:func:`hessian_floor`) of the released
        Hessians in the Newton moves and of the curvature shrinkage in the noise-aware draws
        (:func:`noise_aware_draws`).
    sum_of_squares : GLMRelease or None
        Linear family with the residual sd inferred: the release of ``Σ y²`` (last round).
    count_cap : int or None
        Poisson family: the declared cap C of the counts (targets clipped to ``[0, C]``).
    finder : {"newton", "objpert"}
        How the last round's point is found (module docstring). ``"objpert"``: one round,
        ``gradients[0]`` the ObjPert point (its gradient's noise), ``hessians[0]`` the
        curvature at it, :attr:`residual` the solver residual's release.
    residual : GLMRelease or None
        ``finder="objpert"``: the Gaussian release of the solver's residual (bound γ/Λ).
    """

    family: str
    n: int
    d: int
    epsilon: float
    delta: float
    gradients: tuple
    hessians: tuple
    noise_sd: Optional[float] = None
    floor_factor: float = DEFAULT_FLOOR_FACTOR
    draw_floor_factor: float = DEFAULT_DRAW_FLOOR_FACTOR
    sum_of_squares: Optional[GLMRelease] = None
    count_cap: Optional[int] = None
    finder: str = NEWTON
    residual: Optional[GLMRelease] = None

    @property
    def steps(self) -> int:
        return len(self.gradients)

    def releases(self) -> tuple:
        """Every release, round by round (gradient, then Hessian; the linear family's ``Σ y²``
        last; the ObjPert point, its residual, then the Hessian)."""
        if self.finder == OBJPERT:
            return (self.gradients[0], self.residual, self.hessians[0])
        out = tuple(r for pair in zip(self.gradients, self.hessians) for r in pair)
        return out if self.sum_of_squares is None else out + (self.sum_of_squares,)

    @property
    def ridge(self) -> float:
        """``finder="objpert"``: the ridge Λ = β/(e^{ε_J} − 1) of the perturbed objective,
        β = d/4 the largest eigenvalue of one record's Hessian in the box."""
        if self.finder != OBJPERT:
            raise AttributeError("ridge: only an ObjPert plan has one")
        return (self.d / 4.0) / math.expm1(self.gradients[0].jacobian)

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
        """Per-record L2 bound of the gradient (√d; Poisson (C + 1)√d)."""
        return _bounds(self.family, self.d, self.count_cap)[0]

    @property
    def hess_bound(self) -> float:
        """Per-record Frobenius bound of the Hessian (d/4 logistic, d linear, (C + 1) d
        Poisson)."""
        return _bounds(self.family, self.d, self.count_cap)[1]

    @property
    def target_range(self) -> tuple[float, float]:
        """The declared box of the target: [0, 1] logistic, [−1, 1] linear, [0, C] Poisson."""
        if self.family == "poisson":
            return 0.0, float(self.count_cap)
        return (0.0, 1.0) if self.family == "logistic" else (-1.0, 1.0)

    def mechanisms(self) -> list:
        """The releases as PrivacyReport mechanism entries."""
        return [r.report_entry() for r in self.releases()]


def _coordinate_bounds(family: str, count_cap=None) -> tuple[float, float]:
    """Per-record bounds of one gradient coordinate (the residual's bound: ``|x̃_j| ≤ 1``) and
    one Hessian entry (the weight's bound) on the declared box. Poisson: both ``e^B = C + 1``
    at the public points (module docstring)."""
    if family == "poisson":
        return float(count_cap) + 1.0, float(count_cap) + 1.0
    return (1.0, 0.25) if family == "logistic" else (1.0, 1.0)


def _bounds(family: str, d: int, count_cap=None) -> tuple[float, float]:
    """Per-record (L2 gradient, Frobenius Hessian) bounds on the declared box: the coordinate
    bounds times ``‖x̃‖ ≤ √d`` and ``‖x̃‖² ≤ d``."""
    r, w = _coordinate_bounds(family, count_cap)
    return r * math.sqrt(d), w * d


def check_count_cap(family: str, count_cap):
    """The Poisson family's declared cap: a positive integer (public); no other family has one."""
    if family != "poisson":
        if count_cap is not None:
            raise ValueError(f"count_cap applies to the poisson family only, got "
                             f"family={family!r}")
        return None
    if count_cap is None:
        raise ValueError("count_cap: the poisson family needs the declared cap C of the counts "
                         "(targets are clipped to [0, C]; it bounds each record's influence)")
    if (isinstance(count_cap, bool) or not isinstance(count_cap, (int, float, np.integer,
                                                                   np.floating))
            or not math.isfinite(count_cap) or count_cap < 1 or count_cap != int(count_cap)):
        raise ValueError(f"count_cap must be a positive integer (the declared cap of the "
                         f"counts), got {count_cap!r}")
    return int(count_cap)


def _check_share(name: str, v) -> float:
    # Open interval: a share of 1 would leave the other releases with noise of infinite sd.
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {v!r}")
    return float(v)


def release_plan(family: str, n: int, d: int, epsilon: float, delta: float, *,
                 steps: Optional[int] = None,
                 final_share: Optional[float] = None,
                 hessian_share: Optional[float] = None,
                 mechanism: str = "auto",
                 early_mechanism: str = "auto",
                 noise_sd: Optional[float] = None,
                 sum_of_squares_share: float = DEFAULT_SS_SHARE,
                 floor_factor: float = DEFAULT_FLOOR_FACTOR,
                 draw_floor_factor: float = DEFAULT_DRAW_FLOOR_FACTOR,
                 count_cap: Optional[int] = None,
                 finder: str = "auto") -> GLMReleasePlan:
    """Split the budget (ε, δ) over the rounds (public inputs only; module docstring).

    Parameters
    ----------
    family : {"logistic", "linear", "poisson"}
    n, d : int
        Records, coefficients (intercept included).
    epsilon, delta : float
        The budget of the whole fit: ε > 0, δ in (0, 1).
    steps : int, optional
        Newton rounds; default 6 for logistic and Poisson, 1 for linear (exact).
    final_share : float in (0, 1), optional
        Share of the budget left to the last round (the early rounds spend the rest, in
        geometric weights 1, 2, 4, …; ignored when ``steps == 1``): of the Gaussian-only budget
        ``gaussian_mu(ε, δ)`` with Gaussian early rounds (default 0.8), of the common pure scale
        with K-norm ones (default 0.7).
    hessian_share : float in (0, 1), optional
        Share of each round's budget for its Hessian release; default 0.2 (logistic,
        Poisson), 0.4 (linear).
    mechanism : {"auto", "gaussian", "knorm", "mixed"}
        The last round's mechanisms. ``"auto"``: the Hessian's by the smaller noise sd of its
        entries (K-norm or Gaussian), then the gradient's by the smaller noise sd of its
        coordinates (decided from d, ε, δ and the bounds, never from data).
    early_mechanism : {"auto", "gaussian", "knorm"}
        The early rounds' mechanism. ``"auto"``: K-norm where the last round's gradient is a
        K-norm release, else Gaussian (public inputs only; module docstring).
    noise_sd : float, optional
        Linear family: a declared residual sd on the scaled target. Default (None): inferred
        from a release of ``Σ y²`` in the (single) round.
    sum_of_squares_share : float in (0, 1)
        Linear family with the residual sd inferred: share of the round's budget for ``Σ y²``
        (taken from the gradient's share).
    floor_factor, draw_floor_factor : float
        See :class:`GLMReleasePlan`.
    count_cap : int
        Poisson family (required there, refused elsewhere): the declared cap C of the counts;
        the per-record bounds are ``C + 1`` times a unit weight's (module docstring).
    finder : {"auto", "newton", "objpert"}
        How the point of the last round is found: ``"newton"`` rounds at public points, or
        ``"objpert"``, one objective-perturbation release (logistic only) whose point comes
        with its log-likelihood gradient (module docstring). ``"auto"``: ``"objpert"`` for the
        logistic family when ``steps`` is not given and the last round's gradient would be a
        K-norm release (public inputs only), else ``"newton"``.
    """
    from dpmcmc.accounting._checks import check_positive, check_probability
    from dpmcmc.accounting.gaussian import gaussian_mu
    from dpmcmc.accounting.pure import max_pure_scale

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    epsilon = check_positive("epsilon", epsilon)
    delta = check_probability("delta", delta)
    count_cap = check_count_cap(family, count_cap)
    if finder not in FINDERS:
        raise ValueError(f"finder must be one of {FINDERS}, got {finder!r}")
    if finder == OBJPERT and family != "logistic":
        raise ValueError(f"finder: 'objpert' applies to the logistic family only (its "
                         f"per-record Hessian is bounded and its objective convex), got "
                         f"family={family!r}")
    if finder == OBJPERT and steps not in (None, 1):
        raise ValueError(f"steps: finder='objpert' makes one release of the point (steps=1), "
                         f"got steps={steps!r}")
    steps_given = steps is not None
    mechanism_given = mechanism
    if steps is None:
        steps = DEFAULT_STEPS if family in NEWTON_FAMILIES else 1
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    if family == "linear" and steps != 1:
        raise ValueError("steps: the linear family is exact in one round (steps=1)")
    if final_share is not None:
        final_share = _check_share("final_share", final_share)
    if early_mechanism not in ("auto", GAUSSIAN, KNORM):
        raise ValueError(f"early_mechanism must be one of ('auto', 'gaussian', 'knorm'), got "
                         f"{early_mechanism!r}")
    if hessian_share is None:
        hessian_share = (DEFAULT_HESSIAN_SHARE if family in NEWTON_FAMILIES
                         else LINEAR_HESSIAN_SHARE)
    hessian_share = _check_share("hessian_share", hessian_share)
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if noise_sd is not None:
        if family != "linear":
            raise ValueError("noise_sd applies to the linear family only")
        noise_sd = check_positive("noise_sd", noise_sd)
    infer = family == "linear" and noise_sd is None
    ss_share = _check_share("sum_of_squares_share", sum_of_squares_share) if infer else 0.0
    if hessian_share + ss_share >= 1.0:
        raise ValueError("hessian_share + sum_of_squares_share must be below 1")
    g_share = 1.0 - hessian_share - ss_share
    steps, n, d = int(steps), int(n), int(d)
    mu_all = gaussian_mu(epsilon, delta)
    g_l2, h_fro = _bounds(family, d, count_cap)
    g_box, h_box = _coordinate_bounds(family, count_cap)

    weights = [EARLY_GROWTH ** k for k in range(steps - 1)]

    def build(early_kind: str, final_kind: str, fs: float) -> tuple:
        """The early rounds and the last round's (gradient, Hessian, Σ y²) releases when the early
        rounds use ``early_kind`` and the last round ``final_kind``, the last round taking a
        share ``fs`` of the budget (of μ_all for its Gaussian releases, of the common pure
        scale for its pure ones). The pure releases share what (ε, δ) leaves after the
        Gaussian ones (:func:`~dpmcmc.accounting.pure.max_pure_scale`, tight composition)."""
        specs = []  # (statistic, round, kind, d, bound, share of μ_all or of the pure scale)
        for k, w in enumerate(weights):
            a = (1.0 - fs) * w / sum(weights)
            if early_kind == GAUSSIAN:
                specs += [("gradient", k, GAUSSIAN, d, g_l2, a * g_share),
                          ("Hessian", k, GAUSSIAN, d, h_fro, a * hessian_share)]
            else:
                specs += [("gradient", k, KNORM, d, g_box, a * g_share),
                          ("Hessian", k, KNORM, d, h_box, a * hessian_share)]
        last = steps - 1
        h_kind = KNORM if final_kind == KNORM else GAUSSIAN
        g_kind = GAUSSIAN if final_kind == GAUSSIAN else KNORM
        specs += [("gradient", last, g_kind, d, g_l2 if g_kind == GAUSSIAN else g_box,
                   fs * g_share),
                  ("Hessian", last, h_kind, d, h_fro if h_kind == GAUSSIAN else h_box,
                   fs * hessian_share)]
        if infer:
            # y² ∈ [0, 1]: per-record bound 1 (Gaussian: sensitivity 2C = 2, twice the exact
            # range; that branch is chosen only at large d, where this release is a small part).
            specs.append((SUM_OF_SQUARES, last, g_kind, 1, 1.0, fs * ss_share))
        mu_gauss = sum(sp[5] * mu_all for sp in specs if sp[2] == GAUSSIAN)
        pure = [sp[5] for sp in specs if sp[2] == KNORM]
        scale = max_pure_scale(epsilon, delta, pure, mu=mu_gauss) if pure else 0.0
        rels = [GLMRelease(st, k, kind, dd, b, mu=a * mu_all) if kind == GAUSSIAN
                else GLMRelease(st, k, kind, dd, b, epsilon=a * scale)
                for st, k, kind, dd, b, a in specs]
        early = [tuple(rels[2 * k:2 * k + 2]) for k in range(steps - 1)]
        fin = rels[2 * (steps - 1):]
        return early, (fin[0], fin[1], fin[2] if infer else None)

    fs_gauss = final_share if final_share is not None else DEFAULT_FINAL_SHARE
    plans = {m: build(GAUSSIAN, m, fs_gauss) for m in (KNORM, GAUSSIAN, MIXED)}
    knorm_last, gauss_last, mixed_last = (plans[m][1] for m in (KNORM, GAUSSIAN, MIXED))
    if mechanism == "auto":
        # Public inputs only (d, ε, δ, the bounds): the Hessian's mechanism by the noise sd of
        # its entries, then the gradient's by the noise sd of its coordinates.
        # The Gaussian Hessian costs the gradient some of its ε (a Gaussian's ε at the small δ
        # users ask for is dear): taken only when it cuts the Hessian's noise by a fifth.
        if gauss_last[1].noise_sd < 0.8 * knorm_last[1].noise_sd:
            mechanism = MIXED if mixed_last[0].noise_sd < gauss_last[0].noise_sd else GAUSSIAN
        else:
            mechanism = KNORM if knorm_last[0].noise_sd < gauss_last[0].noise_sd else GAUSSIAN
    if early_mechanism == "auto":
        # Where the last round's gradient is a pure release (small d), pure early rounds too:
        # at the δ users ask for a Gaussian's ε is dear (ε ≈ 2√(μ log 1/δ) for small μ), so
        # Gaussian early rounds of a fifth of μ_all cost about 40 % of ε.
        early_mechanism = GAUSSIAN if mechanism == GAUSSIAN else KNORM
    if steps > 1 and early_mechanism == KNORM:
        early, final = build(KNORM, mechanism, final_share if final_share is not None
                             else DEFAULT_FINAL_SHARE_PURE)
    else:
        early, final = plans[mechanism]
    if finder == "auto":
        # Public inputs only: the family, whether Newton rounds were asked for, and the
        # mechanism the last round's gradient would use (d, ε, δ and the bounds).
        finder = (OBJPERT if family == "logistic" and not steps_given
                  and final[0].kind == KNORM else NEWTON)
    if finder == OBJPERT:
        return _objpert_plan(n, d, epsilon, delta, hessian_share, mechanism_given,
                             float(floor_factor), float(draw_floor_factor))
    rounds = early + [final[:2]]
    return GLMReleasePlan(family, n, d, epsilon, delta, tuple(r[0] for r in rounds),
                          tuple(r[1] for r in rounds),
                          None if noise_sd is None else float(noise_sd), float(floor_factor),
                          float(draw_floor_factor), final[2], count_cap)


def _objpert_plan(n: int, d: int, epsilon: float, delta: float, hessian_share: float,
                  mechanism: str, floor_factor: float, draw_floor_factor: float
                  ) -> GLMReleasePlan:
    """The releases of ``finder="objpert"`` (public inputs only; module docstring): the ObjPert
    point (pure, its ε split into the Jacobian share and the noise's), the Gaussian release of
    the solver's residual (a small share of μ_all) and the Hessian at the point, the pure
    releases taking the largest common scale (ε, δ) allows after the Gaussian ones. The
    Hessian's mechanism: K-norm (``mechanism="knorm"``), Gaussian (``"gaussian"``, ``"mixed"``)
    or, with ``"auto"``, the Gaussian only where it cuts the Hessian's noise sd by a fifth (the
    rule of the Newton plan's last round)."""
    from dpmcmc.accounting.gaussian import gaussian_mu
    from dpmcmc.accounting.pure import max_pure_scale

    mu_all = gaussian_mu(epsilon, delta)
    mu_r = OBJPERT_RESIDUAL_SHARE * mu_all
    g_box, h_box = _coordinate_bounds("logistic")

    def build(h_kind: str) -> GLMReleasePlan:
        if h_kind == GAUSSIAN:
            mu_h = hessian_share * mu_all
            eps_op = max_pure_scale(epsilon, delta, [1.0], mu=mu_r + mu_h)
            hess = GLMRelease("Hessian", 0, GAUSSIAN, d, _bounds("logistic", d)[1], mu=mu_h)
        else:
            scale = max_pure_scale(epsilon, delta, [1.0 - hessian_share, hessian_share],
                                   mu=mu_r)
            eps_op = (1.0 - hessian_share) * scale
            hess = GLMRelease("Hessian", 0, KNORM, d, h_box, epsilon=hessian_share * scale)
        eps_j = OBJPERT_JACOBIAN_SHARE * eps_op
        point = GLMRelease(OBJPERT_POINT, 0, KNORM, d, g_box, epsilon=eps_op, jacobian=eps_j)
        ridge = (d / 4.0) / math.expm1(eps_j)
        residual = GLMRelease(OBJPERT_RESIDUAL, 0, GAUSSIAN, d, OBJPERT_TOL / ridge, mu=mu_r)
        return GLMReleasePlan("logistic", n, d, epsilon, delta, (point,), (hess,), None,
                              floor_factor, draw_floor_factor, None, None, OBJPERT, residual)

    if mechanism == KNORM:
        return build(KNORM)
    if mechanism in (GAUSSIAN, MIXED):
        return build(GAUSSIAN)
    pure, gauss = build(KNORM), build(GAUSSIAN)
    return gauss if gauss.hessians[0].noise_sd < 0.8 * pure.hessians[0].noise_sd else pure


# ------------------------------------------------------------------------ the data pass

def _clip_rows(v: jax.Array, bound: float) -> jax.Array:
    """Scale each row of ``v`` (flattened) to norm ≤ ``bound`` (no-op inside the box)."""
    flat = v.reshape(v.shape[0], -1)
    norm = jnp.sqrt(jnp.sum(flat * flat, axis=1))
    scale = jnp.minimum(1.0, bound / jnp.maximum(norm, 1e-300))
    return v * scale.reshape((-1,) + (1,) * (v.ndim - 1))


def _in_box(plan: GLMReleasePlan, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows clipped into the declared box the release bounds assume: covariates into
    [-1, 1], the target into :attr:`GLMReleasePlan.target_range` ([0, 1] logistic, [-1, 1]
    linear, [0, C] Poisson), ±inf to the nearer end; a NaN takes the centre of its range (as the
    table path's missing values). A no-op on the table path's design; for any other caller it is
    what keeps one record's influence within the bounds (and the draws finite), whatever its
    value."""
    # In NumPy on the host (fit's data are concrete): op by op, JAX would compile a small
    # program per operation and per table shape; the values are the same bit for bit.
    X = np.where(np.isnan(X), 0.0, np.clip(X, -1.0, 1.0))
    lo, hi = plan.target_range
    y = np.where(np.isnan(y), 0.5 * (lo + hi), np.clip(y, lo, hi))
    return X, y


def _per_record(family: str, theta, X, y, noise_sd=None, count_cap=None):
    """Per-record gradient and Hessian terms at ``theta``. Linear: the sufficient statistics
    ``y x̃`` and ``x̃x̃ᵀ`` (the gradient and Hessian at θ = 0 for unit residual variance; the
    residual variance enters only the posterior). ``noise_sd`` is ignored (kept for callers).
    Poisson: at the log rate capped at ``B = log(C + 1)`` (``count_cap`` = C), the identity at
    a public point (:func:`public_point`), which bounds every term at any θ."""
    del noise_sd
    if family == "logistic":
        p = jax.nn.sigmoid(X @ theta)
        g = (y - p)[:, None] * X
        w = p * (1.0 - p)
    elif family == "poisson":
        w = jnp.exp(jnp.minimum(X @ theta, math.log(count_cap + 1.0)))
        g = (y - w)[:, None] * X
    else:
        g = y[:, None] * X  # at θ = 0 (the only round of the linear family)
        w = jnp.ones(y.shape, X.dtype)
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
    if rel.statistic == SUM_OF_SQUARES:
        return jnp.sum(jnp.clip(per_record, 0.0, rel.bound), axis=0)
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
    return _symmetric(out, rel.d) if rel.statistic == "Hessian" else out


def _noise_draw(key, rel: GLMRelease) -> jax.Array:
    """One draw of the release's noise from public randomness (for the noise-aware posterior)."""
    zero = jnp.zeros(rel.size if rel.kind == KNORM or rel.statistic != "Hessian"
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


def public_point(plan: GLMReleasePlan, theta: jax.Array) -> jax.Array:
    """The public point a round evaluates at: θ itself, except for the Poisson family, whose
    points are projected onto ``Θ_B = {θ : θ₀ + Σ_{j≥1} |θ_j| ≤ B}``, ``B = log(C + 1)``
    (module docstring: there every record's log rate is ≤ B, so the release bounds hold
    unclipped). Post-processing of released values; public inputs only.

    The Euclidean projection of an outside point is ``θ₀ − λ`` and ``soft(θ_j, λ)``
    (soft-thresholding of the slopes) with ``λ > 0`` the root of the decreasing
    ``f(λ) = θ₀ − λ + Σ_j (|θ_j| − λ)₊ − B`` (the KKT conditions). With the ``|θ_j|`` sorted
    in decreasing order, ``λ_k = (θ₀ + Σ_{j≤k} |θ_j| − B)/(k + 1)`` solves the linear piece with
    the k largest slopes active, each ``λ_k ≤ λ*`` (that piece lies below f), and the active
    count's ``λ_k`` is the root: ``λ* = max_k λ_k``.
    """
    if plan.family != "poisson":
        return theta
    b = math.log(plan.count_cap + 1.0)
    a = jnp.abs(theta[1:])
    top = jnp.cumsum(-jnp.sort(-a))                    # sums of the k largest, k = 1..d−1
    lam = jnp.max(jnp.concatenate([(theta[:1] - b),
                                   (theta[0] + top - b) / jnp.arange(2.0, plan.d + 1.0)]))
    proj = jnp.concatenate([theta[:1] - lam, jnp.sign(theta[1:]) * jnp.maximum(a - lam, 0.0)])
    return jnp.where(theta[0] + jnp.sum(a) > b, proj, theta)


def _newton_move(theta, g, h, prior_prec, floor):
    q = _psd(h, floor) + prior_prec
    step = linalg.solve(q, g - prior_prec @ theta)
    norm = jnp.sqrt(jnp.sum(step * step))
    return theta + step * jnp.minimum(1.0, MAX_STEP / jnp.maximum(norm, 1e-300))


def _round(key, theta, X, y, plan: GLMReleasePlan, grad: GLMRelease, hess: GLMRelease,
           noise: NoiseSource, scales=(None, None)):
    """One round's two releases at the public point ``theta``."""
    k_g, k_h = jax.random.split(key)
    g_i, h_i = _per_record(plan.family, theta, X, y, plan.noise_sd, plan.count_cap)
    return (_mechanism(k_g, _clipped_sum(g_i, grad), grad, noise, scales[0]),
            _mechanism(k_h, _clipped_sum(h_i, hess), hess, noise, scales[1]))


def _objective_terms(z, y):
    # Σ of the logistic losses softplus(z) − y z, column by column.
    return jnp.sum(jax.nn.softplus(z) - y[:, None] * z, axis=0)


def objpert_solve(X, y, ridge: float, b):
    """The minimiser of the perturbed objective
    ``J(θ) = Σ_i [softplus(x̃_iᵀθ) − y_i x̃_iᵀθ] + (Λ/2)‖θ‖² + bᵀθ`` (Λ = ``ridge``), by damped
    Newton in float64 until ``‖∇J‖₂ ≤ γ`` (:data:`OBJPERT_TOL`), at most
    :data:`OBJPERT_MAX_ITER` iterations.

    ``J`` is Λ-strongly convex, so the minimiser θ* is unique and ``‖θ − θ*‖ ≤ ‖∇J(θ)‖/Λ``.
    Each iteration tries the Newton step scaled by 1, 1/2, …, 2^-30 in one pass over the data
    and takes the first that passes the Armijo test on J up to J's float resolution (near the
    minimiser the promised decrease is below it, and the full step passes: the region of
    quadratic convergence); where none passes, the full step. The stopping rule and the iteration cap are public constants; the
    number of iterations is never released.
    """
    d = X.shape[1]
    alphas = 0.5 ** jnp.arange(OBJPERT_HALVINGS, dtype=jnp.float64)

    def grad(t):
        return X.T @ (jax.nn.sigmoid(X @ t) - y) + ridge * t + b

    def cond(state):
        _, g, it = state
        return (jnp.sqrt(g @ g) > OBJPERT_TOL) & (it < OBJPERT_MAX_ITER)

    def body(state):
        t, g, it = state
        p = jax.nn.sigmoid(X @ t)
        h = (X * (p * (1.0 - p))[:, None]).T @ X + ridge * jnp.eye(d, dtype=X.dtype)
        step = linalg.solve(h, g)
        cands = jnp.concatenate([t[None, :], t[None, :] - alphas[:, None] * step[None, :]])
        f = (_objective_terms(X @ cands.T, y) + 0.5 * ridge * jnp.sum(cands * cands, axis=1)
             + cands @ b)
        # The Armijo test up to J's float resolution: near the minimiser the decrease a step
        # promises is below it, and a test without the slack passes a tiny step by rounding
        # alone, which stalls the iteration above γ (seen in 0.3 % of noise draws).
        slack = 64.0 * jnp.finfo(f.dtype).eps * (jnp.abs(f[0]) + 1.0)
        ok = f[1:] <= f[0] - 1e-4 * alphas * (g @ step) + slack
        alpha = jnp.where(jnp.any(ok), alphas[jnp.argmax(ok)], 1.0)
        t = t - alpha * step
        return t, grad(t), it + 1

    t0 = jnp.zeros(d, X.dtype)
    return jax.lax.while_loop(cond, body, (t0, grad(t0), jnp.asarray(0)))[0]


def _objpert_releases(key, X, y, plan: GLMReleasePlan, noise: NoiseSource):
    """``finder="objpert"``: the ObjPert point θ, the gradient it comes with (``Λθ``: the
    stationarity of J says ``∇L(θ*) = Λθ* + b``) and the Hessian released at θ, each with a
    leading axis of one round (as :func:`_releases`)."""
    point, hess, res = plan.gradients[0], plan.hessians[0], plan.residual
    k_b, k_r, k_h = jax.random.split(key, 3)
    zero = jnp.zeros(plan.d, jnp.float64)
    b = noise.knorm(k_b, zero, jnp.asarray(point.widths()), point.noise_epsilon)
    theta = noise.gaussian(k_r, objpert_solve(X, y, plan.ridge, b), res.sigma)
    _, h_i = _per_record("logistic", theta, X, y)
    h_rel = _mechanism(k_h, _clipped_sum(h_i, hess), hess, noise)
    return theta[None], (plan.ridge * theta)[None], h_rel[None]


def _releases(key, X, y, plan: GLMReleasePlan, prior_prec, noise: NoiseSource):
    """The ``2K`` releases and the public points they were made at.

    The early rounds are all of one kind (Gaussian or K-norm) and differ only in their noise
    scales (σ or ε; bounds equal), so they run as one ``lax.scan`` over those scales — compiled
    once, not once per round; the last round, which may use another mechanism, follows.
    """
    if plan.finder == OBJPERT:
        return _objpert_releases(key, X, y, plan, noise)
    theta = jnp.zeros(plan.d, jnp.float64)
    keys = jax.random.split(key, plan.steps)
    early = list(zip(plan.gradients[:-1], plan.hessians[:-1]))
    thetas, gs, hs = (jnp.zeros((0, plan.d)), jnp.zeros((0, plan.d)),
                      jnp.zeros((0, plan.d, plan.d)))
    if early:
        grad0, hess0 = early[0]
        if any(g.kind != grad0.kind or h.kind != grad0.kind or g.bound != grad0.bound
               or h.bound != hess0.bound for g, h in early):
            raise ValueError("plan: the early rounds must be releases of one kind with equal "
                             "bounds")
        pure = grad0.kind == KNORM
        # The Hessian's entry noise sd is (noise sd at scale 1) / ε for K-norm, σ for Gaussian.
        h_unit = hess0.noise_sd * hess0.epsilon if pure else 1.0

        def body(theta, xs):
            k, scale_g, scale_h = xs
            g_rel, h_rel = _round(k, theta, X, y, plan, grad0, hess0, noise, (scale_g, scale_h))
            sd_h = h_unit / scale_h if pure else scale_h  # this round's scale, traced
            floor = hessian_floor(sd_h, plan.d, plan.floor_factor)
            moved = public_point(plan, _newton_move(theta, g_rel, h_rel, prior_prec, floor))
            return moved, (theta, g_rel, h_rel)

        sc = jnp.asarray([[g.epsilon, h.epsilon] if pure else [g.sigma, h.sigma]
                          for g, h in early], jnp.float64)
        theta, (thetas, gs, hs) = jax.lax.scan(body, theta, (keys[:-1], sc[:, 0], sc[:, 1]))
    g_last, h_last = _round(keys[-1], theta, X, y, plan, plan.gradients[-1],
                            plan.hessians[-1], noise)
    return (jnp.concatenate([thetas, theta[None]]), jnp.concatenate([gs, g_last[None]]),
            jnp.concatenate([hs, h_last[None]]))


def kappa(rel: GLMRelease) -> float:
    """Widening factor of the Gaussian that stands in for a gradient release's noise.

    The conditional draw of θ (:func:`noise_aware_draws`) replaces the gradient noise by the
    Gaussian of the same covariance times κ². A Gaussian release is exact (κ = 1). A K-norm
    coordinate has the law of ``r·u·w`` (``r ~ Gamma(m + 1)``, ``u ~ U(−1, 1)``), which near
    the centre is *more peaked* than the Gaussian of equal variance: κ is the smallest factor
    ≥ 1 with which every central interval from 50 % to 90 % of the widened Gaussian contains
    that of the coordinate (exact quantiles: ``P(|ru| ≤ t) = P(m+1, t) + (t/m) Q(m, t)``, the
    regularised incomplete gamma functions). Public (m only).
    """
    if rel.kind != KNORM:
        return 1.0
    # special.ndtri is stats.norm.ppf's own kernel (same values): importing scipy.stats costs
    # ~1.5 CPU-s, once per process, in every first GLM fit.
    from scipy import optimize, special

    m = rel.size
    sd = math.sqrt((m + 1) * (m + 2) / 3.0)
    best = 1.0
    for p in (0.5, 0.6, 0.7, 0.8, 0.9):
        if m == 1:
            q = _laplace_quantile(p)
        else:
            q = optimize.brentq(lambda t: special.gammainc(m + 1, t)
                                + t / m * special.gammaincc(m, t) - p, 1e-12, 20.0 * m + 50.0)
        best = max(best, q / (sd * special.ndtri((1.0 + p) / 2.0)))
    return best


def _laplace_quantile(p: float) -> float:
    # m = 1: r·u with r ~ Gamma(2) and u ~ U(−1, 1) is Laplace: P(|z| ≤ t) = 1 − e^{−t}.
    return -math.log(1.0 - p)


def curvature_shrinkage(plan: GLMReleasePlan) -> float:
    """The scale of the eigenvalue shrinkage of a drawn curvature (public).

    ``draw_floor_factor · 2 s √d`` (:func:`hessian_floor`), ``s`` the released Hessian's entry
    noise sd: the typical spectral norm of the release's noise. :func:`noise_aware_draws` moves
    the i-th smallest eigenvalue (1-based) of each drawn curvature ``Ĥ − z`` down by this times
    ``√(2 (i − 1)/d)``, i.e. by ``2√2 s √(i − 1)``. Why: noise repels eigenvalues, and only the
    ones below an eigenvalue push it up; at worst the i − 1 below it sit with it in one cluster,
    whose top the draw's noise (``z_H − z``: variance 2s² per entry against the truth) lifts
    by about the spectral norm of such a block. The smallest eigenvalue is only pushed down (no
    shrinkage: the draws' spread covers its first-order noise), and a spectrum made of noise
    (small n) still goes to about 0. The former rule moved every eigenvalue by ``2 s √d``, which
    sent resolved directions to the prior's width (Ecdat HI at ε = 2: smallest eigenvalue 63
    against 62; posterior sd 28× the non-private one; benchmarks/results/glm_oracle_width.md).
    """
    return hessian_floor(plan.hessians[-1].noise_sd, plan.d, plan.draw_floor_factor)


def _shrink_eigenvalues(vals, t, cap):
    """λ ↦ (λ² − t²)/λ above t, 0 below, at most ``cap``: a resolved direction (λ ≫ t) moves
    by t²/λ only (relative bias (t/λ)²), an unresolved one goes to 0."""
    vpos = jnp.maximum(vals, t)
    return jnp.clip((vpos * vpos - t * t) / jnp.maximum(vpos, 1e-300), 0.0, cap)


def _curvature_cap(plan: GLMReleasePlan) -> float:
    # Largest eigenvalue a Hessian of n records in the box can have: n · (weight bound) · d
    # (each record adds w x̃x̃ᵀ with ‖x̃‖² ≤ d).
    return plan.n * plan.hess_bound


def noise_aware_draws(key, theta_k, g_rel, h_rel, plan: GLMReleasePlan, prior_prec, num: int,
                      ss_rel=None) -> jax.Array:
    """Draws from the noise-aware posterior of the last round (post-processing only).

    The model of the last round's releases at the public point ``θ_K`` (module docstring):
    ``ĝ = H(θ − θ_K) + e + z``, ``e ~ N(0, s²H)`` (the records' sampling noise of the score;
    logistic and Poisson ``s = 1``, linear ``θ_K = 0``, ``ĝ = Σ y x̃``, ``H = Σ x̃x̃ᵀ``), ``z`` the release's
    noise; ``Ĥ = H + z_H``; linear with the residual sd inferred, ``Σy²`` released too. Each
    draw

    1. takes a curvature ``H = Ĥ − z_H`` (``z_H`` a fresh draw of the Hessian release's noise),
       symmetrised, its eigenvalues moved down as :func:`curvature_shrinkage` says and kept in
       ``[0, n·w_max·d]`` (the box's bound); logistic and Poisson: each eigenvalue then
       scaled by a factor log-uniform in ``[e^{−m}, e^{m}]``, ``m = min(‖θ̄ − θ_K‖₁, SECANT_M_MAX)`` (θ̄ the
       draw's centre), for the mean Hessian between θ_K and θ that the score holds;
    2. linear, residual sd inferred: ``RSS = (Σy² − z_ss) − gᵀ H_f⁻¹ g`` with ``g = ĝ − z_g``
       and ``H_f`` the draw's eigenvalues floored (not shrunk) at the shrinkage, kept in
       ``[ν s_lo², ν]`` (``ν = n − d``, ``s_lo² = 2 sd(z_ss)/ν``: below it ``Σy²``'s noise
       cannot tell the residual variance from 0; the target lies in [−1, 1]), and
       ``s² = RSS / χ²_ν``;
    3. draws θ from the Gaussian posterior of ``ĝ ~ N(H(θ − θ_K), s²H + κ²Σ_z)`` under the
       N(0, P⁻¹) prior: precision ``Λ = H A⁻¹ H + P``, ``A = s²H + κ²Σ_z``, mean
       ``Λ⁻¹ H A⁻¹ (ĝ + H θ_K)`` (:func:`kappa` widens the K-norm noise's Gaussian stand-in).
       Where the curvature is small next to the noise this is the prior, not a wild
       extrapolation of the noisy score. With :data:`CENTRE_FROM_UNSHRUNK` (the default) the
       mean is computed from the draw's unshrunk curvature (eigenvalues kept ≥ 0), ``Λ``
       from the shrunk one.

    Parameters
    ----------
    key : PRNG key
        Public randomness.
    theta_k, g_rel, h_rel : arrays
        The last round's public point and released gradient and Hessian sums.
    plan : GLMReleasePlan
        The releases (mechanisms and noise scales; static).
    prior_prec : (d, d) array
        Prior precision (Gaussian prior centred at 0).
    num : int
        Number of draws.
    ss_rel : array, optional
        The released ``Σ y²`` (linear family, residual sd inferred).
    """
    d = theta_k.shape[0]
    grad, hess = plan.gradients[-1], plan.hessians[-1]
    sz = (kappa(grad) * grad.noise_sd) ** 2 * jnp.eye(d)
    shrink = curvature_shrinkage(plan)
    cap = _curvature_cap(plan)
    infer = plan.sum_of_squares is not None
    nu = max(plan.n - d, 1)
    # ObjPert: the residual release's noise on the point (module docstring).
    extra = ((plan.residual.sigma ** 2, plan.ridge) if plan.finder == OBJPERT else (0.0, 0.0))

    def one(k):
        k1, k2, k3, k4, k5, k6 = jax.random.split(k, 6)
        hz = h_rel - _noise_draw(k1, hess)
        vals, vecs = linalg.eigh(0.5 * (hz + hz.T))
        # Eigenvalue i (ascending) is moved down by 2√2 s √(i − 1) (:func:`curvature_shrinkage`).
        t = shrink * jnp.sqrt(2.0 * jnp.arange(d) / d)
        if plan.family in NEWTON_FAMILIES:
            s2 = 1.0
        elif not infer:
            s2 = plan.noise_sd ** 2
        else:
            g = g_rel - _noise_draw(k2, grad)
            proj = vecs.T @ g
            fitted = jnp.sum(proj * proj / jnp.clip(vals, max(shrink, 1e-12), None))
            ss_true = ss_rel[0] - _noise_draw(k3, plan.sum_of_squares)[0]
            s_lo2 = 2.0 * plan.sum_of_squares.noise_sd / nu
            rss = jnp.clip(ss_true - fitted, nu * s_lo2, float(nu))
            s2 = rss / (2.0 * jax.random.gamma(k4, nu / 2.0, dtype=jnp.float64))
        lam_w = _shrink_eigenvalues(vals, t, cap)      # the width's curvature (shrunk)
        lam_c = jnp.clip(vals, 0.0, cap)                # the centre's (unshrunk)
        mean = _conjugate((vecs * lam_c) @ vecs.T, s2, sz, g_rel, theta_k, prior_prec,
                          *extra)[0]
        if plan.family in NEWTON_FAMILIES and SECANT:
            # The score at θ_K is H̄(θ − θ_K) with H̄ the mean Hessian on the segment, not
            # H(θ_K): a logistic weight σ(1 − σ) changes by at most e^{|Δz|} when the logit moves
            # by Δz (a Poisson weight e^η by exactly e^{Δη}), and |x̃ᵀΔ| ≤ ‖Δ‖₁ in the box, so e^{−m} H ≼ H(θ) ≼ e^{m} H along the
            # segment, m = ‖θ − θ_K‖₁ (public bound). Each draw scales the curvature of each
            # eigendirection by its own factor, log-uniform in [e^{−m}, e^{m}], m from the draw's
            # centre (capped at SECANT_M_MAX): a last point far from the mode widens the posterior
            # for what the nonlinearity could move it. (The narrower range of the mean secant,
            # [(1 − e^{−m})/m, (e^{m} − 1)/m], left the intercept of rare outcomes, n = 10⁴,
            # d = 5, ε = 4, covered at 90 % in 76 of 100 tables: the truth lies at one end.)
            m = jnp.clip(jnp.sum(jnp.abs(mean - theta_k)), 1e-12, SECANT_M_MAX)
            c = jnp.exp(m * jax.random.uniform(k6, (d,), jnp.float64, -1.0, 1.0))
            lam_w, lam_c = jnp.minimum(lam_w * c, cap), jnp.minimum(lam_c * c, cap)
            mean = _conjugate((vecs * lam_c) @ vecs.T, s2, sz, g_rel, theta_k, prior_prec,
                              *extra)[0]
        chol = _conjugate((vecs * lam_w) @ vecs.T, s2, sz, g_rel, theta_k, prior_prec,
                          *extra)[1]
        z = jax.random.normal(k5, (d,), jnp.float64)
        # θ = mean + L⁻ᵀ z has covariance (L Lᵀ)⁻¹ = Λ⁻¹ (Λ from the shrunk curvature).
        return mean + linalg.solve_triangular(chol.T, z, lower=False)

    return jax.vmap(one)(jax.random.split(key, num))


#: Logistic and Poisson families: widen each draw's curvature for the distance between the last point θ_K
#: and the draw's centre (:func:`noise_aware_draws`).
SECANT = True
#: Cap on that distance m (the factors e^{±m}): beyond it the bound (a record at the box's
#: corner along θ − θ_K) is far from any real table's change and would make the posterior as
#: wide as the prior in every direction (ISLR Default at ε = 4: m ≈ 3–10, median worst error
#: 19 non-private sds with no cap against 3.7 with the cap; benchmarks/results/
#: glm_oracle_width.md). Chosen on the calibration grid (docs/calibration.md).
SECANT_M_MAX = 1.0

#: Centre each draw on the conjugate mean of the unshrunk curvature draw (the width keeps the
#: shrunk one's): :func:`noise_aware_draws`.
CENTRE_FROM_UNSHRUNK = True


def _conjugate(h, s2, sz, g_rel, theta_k, prior_prec, sr2=0.0, ridge=0.0):
    """Mean and Cholesky factor of the precision of θ's Gaussian posterior given curvature
    ``h``: ``ĝ ~ N(h(θ − θ_K), s²h + Σ_z)``, prior N(0, P⁻¹). ObjPert (``sr2 > 0``): the point's
    residual noise r (sd² ``sr2``) adds ``(h + ΛI) r`` to the score, covariance
    ``sr2 (h + ΛI)²``."""
    # Through dpmcmc.linalg: under the vmap of the draws, one matrix per LAPACK call (a batched
    # call can deadlock XLA's CPU thread pool; dpmcmc/linalg.py).
    a = s2 * h + sz
    if sr2:
        hr = h + ridge * jnp.eye(h.shape[0], dtype=h.dtype)
        a = a + sr2 * (hr @ hr)
    la = linalg.cholesky(a)
    x = linalg.solve_triangular(la, h, lower=True)            # L_A⁻¹ H
    r = linalg.solve_triangular(la, g_rel + h @ theta_k, lower=True)
    chol = linalg.cholesky(x.T @ x + prior_prec)
    return linalg.cho_solve(chol, x.T @ r), chol


def _sum_of_squares(key, y, plan: GLMReleasePlan, noise: NoiseSource) -> jax.Array:
    """The release of ``Σ y²`` (linear family, residual sd inferred), shape (1,)."""
    rel = plan.sum_of_squares
    return _mechanism(key, _clipped_sum((y * y)[:, None], rel), rel, noise)


def fit(key, data: Any, plan: GLMReleasePlan, *, prior_sd: float, chains: int = 4,
        draws: int = 1000, noise: Optional[NoiseSource] = None) -> dict:
    """Run the releases on ``data`` and draw from the noise-aware posterior.

    Parameters
    ----------
    key : PRNG key
        Split into the privacy-noise key and the public draw key.
    data : (n, d + 1) array
        Rows ``(1, x_s..., y)`` of the scaled design, ``x_s ∈ [-1, 1]`` (logistic ``y ∈ {0, 1}``,
        linear ``y ∈ [-1, 1]``, Poisson ``y ∈ [0, C]``).
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
        ``thetas`` (K, d), ``gradients`` (K, d), ``hessians`` (K, d, d); linear with the
        residual sd inferred, ``sum_of_squares`` (1,). ``finder="objpert"``: K = 1, ``thetas``
        the released ObjPert point θ and ``gradients`` its log-likelihood gradient as the
        release gives it, ``Λθ`` (a function of θ; the noise is in θ).
    """
    from dpmcmc.runtime import compile_cache as _compile_cache

    noise = NoiseSource() if noise is None else noise
    # The programs take the data, keys and secret as arguments (the plan's public noise
    # scales are their only constants), so a new process may load them from JAX's persistent
    # cache like the samplers' programs (docs/compile_cache.md).
    _compile_cache.ensure_persistent_cache()
    with jax.enable_x64(True):
        # The data's clipping, the prior and the slicing below in NumPy: as eager JAX operations
        # each would compile a small program per table shape (the same values bit for bit).
        arr = np.asarray(data, dtype=np.float64)
        X, y = _in_box(plan, arr[:, :-1], arr[:, -1])
        if X.shape[1] != plan.d or X.shape[0] != plan.n:
            raise ValueError(f"data has shape {tuple(arr.shape)}, the plan expects "
                             f"({plan.n}, {plan.d + 1})")
        prior_prec = np.eye(plan.d, dtype=np.float64) / (prior_sd * prior_sd)
        k_noise, k_draw = jax.random.split(key)
        thetas, gs, hs = map(np.asarray, jax.jit(_releases, static_argnums=(3,))(
            k_noise, X, y, plan, prior_prec, noise))
        ss = None
        if plan.sum_of_squares is not None:
            # Its own key, apart from the rounds' (split from k_noise inside _releases).
            ss = jax.jit(_sum_of_squares, static_argnums=(2,))(
                jax.random.fold_in(k_noise, plan.steps), y, plan, noise)
        out = jax.jit(noise_aware_draws, static_argnums=(4, 6))(
            k_draw, thetas[-1], gs[-1], hs[-1], plan, prior_prec, chains * draws, ss)
        res = {"samples": np.asarray(out).reshape(chains, draws, plan.d),
               "thetas": thetas, "gradients": gs, "hessians": hs}
        if ss is not None:
            res["sum_of_squares"] = np.asarray(ss)
        return res


# ------------------------------------------------------------------------------- the card
#
# The noise-aware GLM is a one-shot algorithm: a fixed set of releases (its release plan) and
# draws that are post-processing of them, so its card has ``fit`` instead of ``build``. Its
# releases are ordinary accounting events (Gaussian ones of their μ, pure ones of their ε),
# composed by the same accountant as every sampler's (dpmcmc.accounting.spent).

#: What ``family`` a model built by the table path declares in its metadata.
_MODEL_FAMILIES = {"logistic_regression": "logistic", "linear_regression": "linear",
                   "poisson_regression": "poisson"}
#: The parameters of the card (``prepare``), with their defaults (``None``: from the model).
_PARAMS = {"family": None, "noise_sd": None, "steps": None, "final_share": None,
           "hessian_share": None, "sum_of_squares_share": DEFAULT_SS_SHARE, "mechanism": "auto",
           "early_mechanism": "auto", "prior_sd": None, "draws": 1000, "count_cap": None,
           "finder": "auto"}
#: Accounting parameters: the budget the releases were split for, and how (the Poisson
#: family's declared cap sets its releases' bounds, so it is one of them).
_SPLIT = ("family", "dim", "split_epsilon", "split_delta")
_SPLIT_OPTIONAL = ("steps", "final_share", "hessian_share", "mechanism", "noise_sd",
                   "sum_of_squares_share", "early_mechanism", "count_cap", "finder")


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
            raise ValueError(f"model: noise-aware-glm fits the logistic, linear and Poisson GLMs "
                             f"of dpmcmc.glm (models.logistic_regression, or dpmcmc.glm's "
                             f"linear and Poisson models) on rows (1, x..., y) of a design in "
                             f"[-1, 1]; model {model.name!r} is none of them")
        if out["family"] not in (None, family):
            raise ValueError(f"family: the model is the {family} GLM, got family={out['family']!r}")
        out["family"] = family
        # The Poisson model carries its declared cap: the releases' bounds are the model's.
        if "count_cap" in meta:
            if out["count_cap"] not in (None, meta["count_cap"]):
                raise ValueError(f"count_cap: the model declares the cap {meta['count_cap']}, "
                                 f"got count_cap={out['count_cap']!r}")
            out["count_cap"] = meta["count_cap"]
    if out["family"] is None:
        raise ValueError(f"family: give the GLM family, one of {FAMILIES}")
    if out["family"] not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {out['family']!r}")
    # Linear: the residual sd is declared (noise_sd, public) or inferred from a release of Σy²
    # (None); the logistic and Poisson families have none. Poisson: the declared cap, checked
    # (and required) before anything else is.
    out["count_cap"] = check_count_cap(out["family"], out["count_cap"])
    if out["noise_sd"] is not None:
        out["noise_sd"] = check_positive("noise_sd", out["noise_sd"])
    if "sum_of_squares_share" not in params and (out["family"] != "linear"
                                                 or out["noise_sd"] is not None):
        # Its default applies only where Σy² is released (linear, residual sd inferred): the
        # fit's parameters and report list what the fit used.
        out["sum_of_squares_share"] = None
    if out["prior_sd"] is None:
        out["prior_sd"] = math.sqrt(meta["prior_var"]) if "prior_var" in meta else 10.0
    out["prior_sd"] = check_positive("prior_sd", out["prior_sd"])
    out["draws"] = check_int("draws", out["draws"], minimum=1)
    # The split's own checks (steps, shares, mechanism, finder), naming the argument. The
    # finder (and with it the number of rounds) is resolved with the budget, in split_params.
    release_plan(out["family"], int(n), int(model.dim), 1.0, 1e-6,
                 **{k: out[k] for k in _SPLIT_OPTIONAL if out[k] is not None})
    return out


def split_params(prepared: dict, dim: int, epsilon: float, delta: float) -> dict:
    """The accounting parameters of a fit: the prepared split and the budget it divides.

    The early rounds' mechanism is recorded resolved (``"gaussian"`` or ``"knorm"``, never
    ``"auto"``), so the record re-derives the same releases whatever a later default."""
    out = dict({k: prepared[k] for k in _SPLIT_OPTIONAL if prepared.get(k) is not None},
               family=prepared["family"], dim=int(dim), split_epsilon=float(epsilon),
               split_delta=float(delta))
    # Resolved from the budget and recorded, so the record re-derives the same releases
    # whatever a later default: the finder, the rounds it makes, the early rounds' mechanism.
    resolved = release_plan(out["family"], 1, out["dim"], out["split_epsilon"],
                            out["split_delta"], **{k: out[k] for k in _SPLIT_OPTIONAL if k in out})
    out["finder"] = resolved.finder
    out["steps"] = resolved.steps
    if out.get("early_mechanism", "auto") == "auto":
        out["early_mechanism"] = _early_kind(resolved)
    return out


def _early_kind(plan: GLMReleasePlan) -> str:
    # A one-round plan has no early rounds; record the Gaussian kind (ignored there).
    return plan.gradients[0].kind if plan.steps > 1 else GAUSSIAN


def plan_releases(n: int, split: dict) -> GLMReleasePlan:
    """The release plan of :func:`split_params`' output (public inputs only). A record without
    ``early_mechanism`` predates pure early rounds: its early rounds were Gaussian."""
    kw = {k: split[k] for k in _SPLIT_OPTIONAL if k in split}
    kw.setdefault("early_mechanism", GAUSSIAN)
    # A record without ``finder`` predates the ObjPert finder: its rounds were Newton's.
    kw.setdefault("finder", NEWTON)
    return release_plan(split["family"], n, split["dim"], split["split_epsilon"],
                        split["split_delta"], **kw)


def _validate_split(n: int, params: dict) -> dict:
    from dpmcmc.accounting._checks import check_int, check_positive, check_probability

    out = dict(params)
    out["dim"] = check_int("dim", params["dim"], minimum=1)
    out["split_epsilon"] = check_positive("split_epsilon", params["split_epsilon"])
    out["split_delta"] = check_probability("split_delta", params["split_delta"])
    if params.get("noise_sd") is not None:
        out["noise_sd"] = check_positive("noise_sd", params["noise_sd"])
    if "count_cap" in params:
        out["count_cap"] = check_count_cap(params["family"], params["count_cap"])
    plan_releases(n, out)  # the other checks of release_plan, naming the argument
    return out


def _events(n: int, params: dict) -> tuple:
    """The fit's releases as accounting events (one set: a one-shot algorithm)."""
    from dpmcmc.accounting.events import mu_release, pure_release

    out = []
    for r in plan_releases(n, params).releases():
        out.append(mu_release(r.name, r.mu) if r.kind == GAUSSIAN
                   else pure_release(r.name, r.epsilon))
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
        NoiseLine(f"gradient at the ObjPert point ({grad.kind})" if rp.finder == OBJPERT
                  else f"gradient sum (last round, {grad.kind})", sg,
                  "Hessian eigenvalue (scaled design) below which a direction is noise-dominated, "
                  "s_g²", sg * sg),
        NoiseLine(f"Hessian sum (last round, {hess.kind})", sh,
                  "over the per-record bound of an entry",
                  sh / (hess.bound if hess.kind != GAUSSIAN else rp.hess_bound)),
    ) + ((NoiseLine(f"sum of squares of the target ({rp.sum_of_squares.kind})",
                    rp.sum_of_squares.noise_sd, "over the per-record bound (y² ≤ 1)",
                    rp.sum_of_squares.noise_sd),) if rp.sum_of_squares is not None else ())


def _notes(p: dict, n: int, dim: int) -> tuple:
    """Plan notes (public): the Hessian noise's spectral scale next to the largest curvature n
    records in the box can give along one coefficient. Above it no eigenvalue can be resolved
    and the noise-aware posterior falls back to the prior (honest, but uninformative); said
    before anything is spent."""
    rp = plan_releases(n, p)
    t, cap = curvature_shrinkage(rp), _curvature_cap(rp) / rp.d
    if t < cap:
        return ()
    return (f"At n = {rp.n} and ε = {rp.epsilon:g} the curvature release's noise (spectral "
            f"scale {t:.3g}) exceeds what {rp.n} records can give along a single coefficient "
            f"({cap:.3g}): the posterior will be about as wide as the prior; the budget, not the "
            "data, limits the answer.",)


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
# The configuration and the pair reach the claim (issue 33 §5: at least 0.6 of it). A finite
# audit sees a privacy loss only where its trials can: the Gaussian rounds' cost at δ ≈ 1e-6
# lies in tails no 10⁴-run audit reaches, so the audited fit spends its whole budget in pure
# (K-norm) releases (``mechanism="knorm"``: the early rounds follow the last round's gradient).
# The default family is linear with a declared residual sd (one round: Σyx̃ and Σx̃x̃ᵀ). Design:
# ``n = 200`` rows ``(1, x, y)`` in the box; D has the record ``(x = 1, y = 1)``, D' has
# ``(x = −1, y = −1)`` in its place. Their gradient terms y·x̃, (1, 1) and (−1, 1), differ by
# the whole width of the K-norm box in the intercept coordinate, and their Hessian terms x̃x̃ᵀ by
# the whole width in the off-diagonal entry: both releases at their full sensitivity, so the
# transcript's privacy loss reaches ε_gradient + ε_Hessian. ``family="logistic"`` and
# ``"poisson"`` (count cap AUDIT_COUNT_CAP) audit the Newton families' rounds on the pair whose
# moved record goes from (x = 1, y = 0) to (x = −1, y at its top): its gradient terms'
# residuals change sign, at x = 1 and x = −1 on a steep design, so that the gradient's
# intercept coordinate moves by most of the K-norm box's width at every public point.

#: Records per data set, the slope and the declared residual sd of the audit's design.
AUDIT_N = 200
AUDIT_SLOPE = 0.5
AUDIT_NOISE_SD = 0.5
#: Count cap of the Poisson family's audit design.
AUDIT_COUNT_CAP = 3
#: Runs per compiled call (memory: each run holds its n per-record Hessians per round).
AUDIT_CHUNK = 10000
#: Prior sd of the audited fit (dpmcmc.glm's default).
AUDIT_PRIOR_SD = 10.0


def audit_design(n: int = AUDIT_N, seed: int = 0, family: str = "linear"
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The audit's neighbouring data sets ``(D, D')``: rows ``(1, x, y)`` of a scaled design of
    ``family`` (every value in the declared box), differing in the first record."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n)
    if family == "linear":
        y = np.clip(0.2 + AUDIT_SLOPE * x + 0.3 * rng.normal(size=n), -1.0, 1.0)
        first, first_prime = [1.0, 1.0, 1.0], [1.0, -1.0, -1.0]
    elif family == "logistic":
        # Steep (p = 0.92 at x = 1, 0.12 at x = −1): the moved record's residual y − p is
        # −0.92 on D and +0.88 on D', in the intercept coordinate 0.9 of the box's width.
        y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(0.2 + 2.2 * x)))).astype(float)
        first, first_prime = [1.0, 1.0, 0.0], [1.0, -1.0, 1.0]
    elif family == "poisson":
        # Rates 3.0 at x = 1 and 0.41 at x = −1 (counts capped at 3): the moved record's
        # residual y − rate is about −2.4 on D and +2.6 on D', 0.7 of the box's width.
        y = np.minimum(rng.poisson(np.exp(0.1 + x)), AUDIT_COUNT_CAP).astype(float)
        first, first_prime = [1.0, 1.0, 0.0], [1.0, -1.0, float(AUDIT_COUNT_CAP)]
    else:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    d_set = np.column_stack([np.ones(n), x, y])
    d_set[0] = first
    dp_set = d_set.copy()
    dp_set[0] = first_prime
    return d_set, dp_set


def _release_sum(plan: GLMReleasePlan, data, theta, rel: GLMRelease):
    X, y = data[:, :-1], data[:, -1]
    g, h = _per_record(plan.family, theta, X, y, plan.noise_sd, plan.count_cap)
    return _clipped_sum(g if rel.statistic == "gradient" else h, rel)


def objpert_log_ratio(plan: GLMReleasePlan, d_set, dp_set, theta):
    """``log p_D(θ) − log p_D'(θ)`` of the ObjPert point: its density is
    ``ν(b_D(θ)) det(ΛI + H_D(θ))`` with ``b_D(θ) = ∇L_D(θ) − Λθ`` the noise that makes θ the
    minimiser on D (module docstring), so the ratio is ``ε_b (‖b_D'‖_K − ‖b_D‖_K)`` plus the
    log-determinants' difference. At the released point (its residual noise, sd ~1e-6, is
    ignored)."""
    point, lam = plan.gradients[0], plan.ridge
    width = float(np.max(point.widths()))

    def parts(data):
        g, h = _per_record("logistic", theta, data[:, :-1], data[:, -1])
        b = jnp.sum(g, axis=0) - lam * theta
        chol = linalg.cholesky(jnp.sum(h, axis=0) + lam * jnp.eye(plan.d, dtype=h.dtype))
        return jnp.max(jnp.abs(b)) / width, 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))

    (ka, la), (kb, lb) = parts(d_set), parts(dp_set)
    return point.noise_epsilon * (kb - ka) + la - lb


def audit_runner(plan: GLMReleasePlan, d_set, dp_set, noise: NoiseSource):
    """``(data, keys) -> (transcript log-ratio, posterior-mean slope)`` per run, compiled once."""
    # Built in NumPy and put on the device as they are: as eager JAX operations (jnp.eye, and
    # jnp.asarray's lift of a NumPy array) each would compile a small program (same values).
    prior = jax.device_put(np.eye(plan.d) / AUDIT_PRIOR_SD ** 2)
    d_set, dp_set = jax.device_put(np.asarray(d_set)), jax.device_put(np.asarray(dp_set))

    def one(data, key):
        thetas, gs, hs = _releases(key, data[:, :-1], data[:, -1], plan, prior, noise)
        llr = 0.0
        rounds = [((plan.gradients[k], gs[k]), (plan.hessians[k], hs[k]))
                  for k in range(plan.steps)]
        if plan.finder == OBJPERT:
            # The point's density ratio, then the Hessian's like any other release.
            llr = objpert_log_ratio(plan, d_set, dp_set, thetas[0])
            rounds = [((plan.hessians[0], hs[0]),)]
        for k, pairs in enumerate(rounds):
            for rel, out in pairs:
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


def _audit_setup(epsilon: float, delta: float, noise: Optional[NoiseSource],
                 family: str = "linear"):
    """The audit entry's ``setup`` (:class:`~dpmcmc.samplers.audit_design.OneShotAudit`)."""
    if noise is not None and noise.sensitivity_factor != 1.0:
        raise ValueError("_miscalibration: the noise-aware GLM clips nothing inside its box; only "
                         "noise_scale applies")
    d_set, dp_set = audit_design(family=family)
    plan = release_plan(family, d_set.shape[0], d_set.shape[1] - 1, epsilon, delta,
                        noise_sd=AUDIT_NOISE_SD if family == "linear" else None,
                        count_cap=AUDIT_COUNT_CAP if family == "poisson" else None,
                        mechanism=KNORM)
    params = {"family": family, "steps": plan.steps, "final_mechanism": plan.gradients[-1].kind,
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
        noise_lines=_noise_lines, fit=_fit, split=split_params, notes=_notes,
        audit=OneShotAudit("noise-aware-glm", audit_design, _audit_setup, AUDIT_CHUNK,
                           families=("linear", *(f for f in FAMILIES if f != "linear"))))


SPEC = _card()
