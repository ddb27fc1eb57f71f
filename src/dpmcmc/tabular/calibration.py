"""Calibration of the default table path: coverage of the true coefficients on simulated tables.

One code path for the small default test (tests/test_glm_calibration.py) and the full grid
(benchmarks/calibration.py, which writes docs/calibration.md and its figure):

1. :func:`simulate` draws one table of a :class:`Case`: true coefficients from a public prior
   (slopes uniform, the intercept set so the outcome has the case's base rate), covariates in
   the declared box [-1, 1] from a mixed public design (continuous uniform, skewed, binary and
   the indicators of a 3-level categorical, the column types rotated between replicates),
   targets from the model (logistic; linear with a residual sd drawn from [0.05, 0.1]; Poisson
   counts clipped at the declared cap: :data:`COUNT_CAPS`, a cap the rates almost never reach,
   and one that bites, whose coverage says what the cap does to the model).
2. The default path runs on it: the release plan :func:`dpmcmc.glm` builds (its defaults:
   :func:`dpmcmc.samplers.noise_aware_glm.release_plan` with no overrides, prior sd
   :data:`dpmcmc.tabular.front.DEFAULT_PRIOR_SD`, the linear residual sd inferred), the fit's own
   release code and its own posterior draws, replicates batched (every LAPACK call goes
   through :mod:`dpmcmc.linalg`, so batching cannot deadlock).
3. :func:`coverage` checks that the central 50 % and 90 % intervals cover the true
   coefficients at least at the nominal rate minus Monte Carlo error: per coefficient
   (one-sided binomial test), pooled over the coefficients (a one-sided z-test on the
   replicates' fractions, which keeps the correlation between one table's coefficients) and
   jointly (the central 50 % / 90 % ellipsoidal region of the draws, Mahalanobis distance in
   their own covariance, must contain the true vector: a binomial test). Each test's
   false-alarm rate is ``alpha``; callers choose it (Bonferroni over their tests).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from ..kernels.mechanisms import NoiseSource
from ..samplers import noise_aware_glm as nag
from .front import DEFAULT_PRIOR_SD

__all__ = ["Case", "simulate", "run_case", "coverage", "LEVELS", "FAMILIES"]

#: Central interval levels checked.
LEVELS = (0.5, 0.9)
#: Simulated families: logistic with a balanced outcome, logistic with a rare one (3 %), linear
#: (residual sd inferred from the released Σ y²), Poisson counts under a cap they almost never
#: reach and under one that bites.
FAMILIES = ("logistic", "logistic-rare", "linear", "poisson", "poisson-capped")
#: The declared count caps of the Poisson cases. Rates: ``exp(θ₀ + x̃ᵀβ)`` with the rate at the
#: design's mean covariates in ``1.5 · e^{±0.2}`` and ``Σ|β_j| ≤ 0.5``, so no point of the box
#: has a rate above ``1.5 e^{0.2 + 0.5 · 1.6} ≈ 4.1`` (the columns' means are within 0.6 of 0):
#: a count above 10 has probability ≤ 0.0033 at the worst corner of the worst truth, 6·10⁻⁷ at
#: the typical rate 1.5. A cap of 3 bites: P(y > 3) = 0.066 at rate 1.5, 0.58 at 4.1.
COUNT_CAPS = {"poisson": 10, "poisson-capped": 3}
#: Log rate at the mean covariates (before the ±0.2 jitter) and the L1 size of the slopes.
POISSON_BASE_RATE = 1.5
POISSON_SLOPES = 0.5
#: Column types of the mixed design, rotated between replicates.
COLUMN_TYPES = ("uniform", "skewed", "binary", "category-1", "category-2")
#: Their means (to centre the linear predictor): U(−1, 1); 2U³ − 1; ±1 with P(1) = 0.3; the
#: indicators (scaled to ±1) of levels 1 and 2 of a categorical with P = (0.5, 0.3, 0.2).
COLUMN_MEANS = (0.0, -0.5, -0.4, -0.4, -0.6)


@dataclass(frozen=True)
class Case:
    """One grid point: family, table size, covariates (``d = covariates + 1`` coefficients with
    the intercept), budget."""

    family: str
    n: int
    covariates: int
    epsilon: float
    delta: float = 1e-6
    prior_sd: float = DEFAULT_PRIOR_SD

    def __post_init__(self):
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {FAMILIES}, got {self.family!r}")

    @property
    def d(self) -> int:
        return self.covariates + 1

    @property
    def glm_family(self) -> str:
        return self.family.split("-")[0]

    @property
    def count_cap(self):
        """Poisson: the declared cap of the counts (:data:`COUNT_CAPS`); else None."""
        return COUNT_CAPS.get(self.family)

    def plan(self) -> nag.GLMReleasePlan:
        """The plan dpmcmc.glm makes for this table (its defaults)."""
        return nag.release_plan(self.glm_family, self.n, self.d, self.epsilon, self.delta,
                                count_cap=self.count_cap)

    def label(self) -> str:
        return f"{self.family} n={self.n} d={self.covariates} ε={self.epsilon:g}"


def _design(key, n: int, dx: int, offset):
    """Covariates (n, dx) of the mixed design (column j of type ``(j + offset) mod 5``) and
    their means."""
    k_u, k_c = jax.random.split(key)
    u = jax.random.uniform(k_u, (n, dx), jnp.float64)
    cat = jax.random.choice(k_c, 3, (n, dx), p=jnp.asarray([0.5, 0.3, 0.2]))
    types = (jnp.arange(dx) + offset) % len(COLUMN_TYPES)
    cols = jnp.stack([2.0 * u - 1.0, 2.0 * u ** 3 - 1.0, jnp.where(u < 0.3, 1.0, -1.0),
                      jnp.where(cat == 1, 1.0, -1.0), jnp.where(cat == 2, 1.0, -1.0)])
    x = jnp.take_along_axis(cols, types[None, None, :], axis=0)[0]
    return x, jnp.asarray(COLUMN_MEANS)[types]


def simulate(key, case: Case, offset=0):
    """One table of ``case``: ``(data (n, d + 1) rows (1, x, y), θ_true (d,))``."""
    k_t, k_x, k_y, k_s = jax.random.split(key, 4)
    dx = case.covariates
    x, means = _design(k_x, case.n, dx, offset)
    kb, ki = jax.random.split(k_t)
    u = jax.random.uniform(kb, (dx,), jnp.float64, minval=-1.0, maxval=1.0)
    v = jax.random.uniform(ki, (), jnp.float64, minval=-1.0, maxval=1.0)
    X = jnp.concatenate([jnp.ones((case.n, 1)), x], axis=1)
    if case.family == "linear":
        # |x̃ᵀθ| ≤ 0.7 and sd ≤ 0.1: the target stays in [-1, 1] (clipped with probability
        # < 1e-3 per record), so the simulated model is the one the fit assumes.
        slopes = 0.3 * u / dx
        theta = jnp.concatenate([(0.2 * v - slopes @ means)[None], slopes])
        sd = jax.random.uniform(k_s, (), jnp.float64, minval=0.05, maxval=0.1)
        y = jnp.clip(X @ theta + sd * jax.random.normal(k_y, (case.n,), jnp.float64), -1.0, 1.0)
    elif case.glm_family == "poisson":
        # Σ|β_j| ≤ POISSON_SLOPES (COUNT_CAPS says what that does to P(y > C)); the counts are
        # clipped at the declared cap, as the table path clips them.
        slopes = POISSON_SLOPES * u / dx
        theta = jnp.concatenate([(math.log(POISSON_BASE_RATE) + 0.2 * v - slopes @ means)[None],
                                 slopes])
        counts = jax.random.poisson(k_y, jnp.exp(X @ theta), (case.n,))
        y = jnp.minimum(counts, case.count_cap).astype(jnp.float64)
    else:
        rare = case.family == "logistic-rare"
        slopes = (0.5 if rare else 1.0) * u
        base = math.log(0.03 / 0.97) if rare else 0.0
        theta = jnp.concatenate([(base - slopes @ means + 0.2 * v)[None], slopes])
        y = (jax.random.uniform(k_y, (case.n,), jnp.float64)
             < jax.nn.sigmoid(X @ theta)).astype(jnp.float64)
    return jnp.concatenate([X, y[:, None]], axis=1), theta


def _fit_one(key, case: Case, plan, draws: int, offset):
    """One replicate: simulate, release (the fit's own code), draw (the fit's own posterior)."""
    k_sim, k_noise, k_draw = jax.random.split(key, 3)
    data, theta = simulate(k_sim, case, offset)
    X, y = data[:, :-1], data[:, -1]
    prior_prec = jnp.eye(case.d) / case.prior_sd ** 2
    noise = NoiseSource()
    thetas, gs, hs = nag._releases(k_noise, X, y, plan, prior_prec, noise)
    ss = None
    if plan.sum_of_squares is not None:
        ss = nag._sum_of_squares(jax.random.fold_in(k_noise, plan.steps), y, plan, noise)
    out = nag.noise_aware_draws(k_draw, thetas[-1], gs[-1], hs[-1], plan, prior_prec, draws, ss)
    return theta, out


def _batch(n: int, d: int) -> int:
    # Replicates per vmapped data pass: each holds its n per-record Hessians (n d² entries).
    return max(1, min(32, int(4e6 // (n * d * d))))


def run_case(key, case: Case, reps: int, *, draws: int = 400) -> dict:
    """Simulate ``reps`` tables of ``case`` and fit each by the default path.

    Returns
    -------
    dict
        ``theta`` (reps, d) true coefficients, ``draws`` (reps, draws, d) posterior draws.
    """
    with jax.enable_x64(True):
        plan = case.plan()
        keys = jax.random.split(key, reps)
        offsets = jnp.arange(reps) % len(COLUMN_TYPES)

        @jax.jit
        def run(keys, offsets):
            return jax.lax.map(lambda a: _fit_one(a[0], case, plan, draws, a[1]),
                               (keys, offsets))

        theta, out = run(keys, offsets)
        return {"theta": np.asarray(theta), "draws": np.asarray(out)}


def coverage(theta, draws, *, alpha: float, levels=LEVELS) -> dict:
    """Coverage of ``theta`` (reps, d) by the central intervals of ``draws`` (reps, S, d).

    For each level ``c``: ``per_coef`` (d,) coverage rates and their one-sided binomial
    p-values (H₀: rate ≥ c), the ``pooled`` rate and its z-test p-value, the ``joint`` rate of
    the central ellipsoidal region and its binomial p-value; ``passed`` when no p-value is
    below ``alpha``. Also ``width`` (reps, d): the 90 % interval widths.
    """
    theta, draws = np.asarray(theta), np.asarray(draws)
    reps, _, d = draws.shape
    out = {"levels": {}, "passed": True, "reps": reps}
    mean = draws.mean(axis=1)
    centred = draws - mean[:, None, :]
    cov = np.einsum("rsi,rsj->rij", centred, centred) / (draws.shape[1] - 1)
    cov = cov + 1e-12 * np.eye(d) * np.trace(cov, axis1=1, axis2=2)[:, None, None]
    prec = np.linalg.inv(cov)
    m_draws = np.einsum("rsi,rij,rsj->rs", centred, prec, centred)
    dt = theta - mean
    m_true = np.einsum("ri,rij,rj->r", dt, prec, dt)
    for c in levels:
        lo = np.quantile(draws, (1 - c) / 2, axis=1)
        hi = np.quantile(draws, (1 + c) / 2, axis=1)
        inside = (theta >= lo) & (theta <= hi)
        k = inside.sum(axis=0)
        p_coef = stats.binom.cdf(k, reps, c)
        frac = inside.mean(axis=1)
        se = max(frac.std(ddof=1) / math.sqrt(reps), math.sqrt(c * (1 - c) / (reps * d)))
        p_pool = float(stats.norm.cdf((frac.mean() - c) / se))
        joint = m_true <= np.quantile(m_draws, c, axis=1)
        p_joint = float(stats.binom.cdf(joint.sum(), reps, c))
        ok = bool(p_coef.min() >= alpha and p_pool >= alpha and p_joint >= alpha)
        out["levels"][c] = {"per_coef": k / reps, "p_coef": p_coef, "pooled": float(frac.mean()),
                            "p_pooled": p_pool, "joint": float(joint.mean()),
                            "p_joint": p_joint, "passed": ok}
        out["passed"] = out["passed"] and ok
    q = np.quantile(draws, [0.05, 0.95], axis=1)
    out["width"] = q[1] - q[0]
    return out
