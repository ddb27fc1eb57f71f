"""The logistic default's objective-perturbation finder (``finder="objpert"``,
dpmcmc.samplers.noise_aware_glm): its plan spends the budget, its solver meets the tolerance the
residual release assumes on hard tables, its point comes with the log-likelihood gradient the
posterior uses, and its density ratio between neighbours stays within the ε it is charged, for
either order of the pair."""
from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.accounting.pure import composed_delta
from dpmcmc.samplers import noise_aware_glm as nag

DELTA = 1e-6


@pytest.mark.parametrize("d, eps", [(3, 0.3), (4, 2.0), (6, 4.0), (11, 1.0)])
def test_auto_picks_objpert_for_logistic_and_spends_the_budget(d, eps):
    plan = nag.release_plan("logistic", 1000, d, eps, DELTA)
    assert plan.finder == "objpert" and plan.steps == 1
    point, residual, hess = plan.releases()
    assert point.kind == "knorm" and residual.kind == "gaussian"
    # The ridge makes the Jacobian term cost exactly its share: log(1 + β/Λ) = ε_J, β = d/4.
    assert math.log1p((d / 4) / plan.ridge) == pytest.approx(point.jacobian, rel=1e-12)
    assert point.jacobian == pytest.approx(nag.OBJPERT_JACOBIAN_SHARE * point.epsilon)
    # The residual release: sensitivity 2γ/Λ (bound γ/Λ), its σ far below any posterior sd.
    assert residual.bound == pytest.approx(nag.OBJPERT_TOL / plan.ridge)
    assert residual.sigma < 1e-4
    # Tight composition of the three releases spends (ε, δ), and not less.
    assert plan.epsilon_spent() == pytest.approx(eps, rel=1e-9)
    assert composed_delta(0.999 * eps, mu=plan.mu_total, pure=plan.pure) > DELTA
    # Where the Newton plan's last gradient would be Gaussian (large d, small ε), or Newton
    # rounds are asked for, or the family is not logistic, the Newton finder stays.
    assert nag.release_plan("logistic", 1000, d, eps, DELTA, steps=6).finder == "newton"
    assert nag.release_plan("poisson", 1000, d, eps, DELTA, count_cap=5).finder == "newton"
    assert nag.release_plan("logistic", 1000, 16, 0.3, DELTA).finder == "newton"


def test_finder_arguments_are_checked_by_name():
    with pytest.raises(ValueError, match="finder must be one of"):
        nag.release_plan("logistic", 100, 3, 1.0, DELTA, finder="lbfgs")
    with pytest.raises(ValueError, match="finder: 'objpert' applies to the logistic"):
        nag.release_plan("linear", 100, 3, 1.0, DELTA, finder="objpert")
    with pytest.raises(ValueError, match="steps: finder='objpert'"):
        nag.release_plan("logistic", 100, 3, 1.0, DELTA, finder="objpert", steps=4)
    # A record made before the finder existed re-derives Newton rounds (its charge unchanged).
    legacy = {"family": "logistic", "dim": 3, "split_epsilon": 2.0, "split_delta": DELTA,
              "steps": 6}
    assert nag.plan_releases(300, legacy).finder == "newton"


def _tables():
    """Hard tables for the solver, with the noise draws each gets: perfectly separable at
    n = 30, one outcome only, every row at a corner of the box, the audit's steep design (where
    a line search without float slack stalled above γ in 0.3 % of draws), a large steep one."""
    rng = np.random.default_rng(0)
    out = []
    x = rng.uniform(-1, 1, (30, 2))
    out.append((x, (x[:, 0] > 0).astype(float), 400))                  # separable
    out.append((rng.uniform(-1, 1, (50, 3)), np.ones(50), 400))         # one outcome
    c = np.array(list(itertools.product([-1.0, 1.0], repeat=3)) * 8)
    out.append((c, rng.integers(0, 2, len(c)).astype(float), 400))      # corners
    d_set, _ = nag.audit_design(family="logistic")
    out.append((d_set[:, 1:2], d_set[:, -1], 2000))                     # the audit's design
    x = rng.uniform(-1, 1, (20000, 4))
    y = (rng.uniform(size=20000) < 1 / (1 + np.exp(-(4 * x[:, 0] - 3)))).astype(float)
    out.append((x, y, 4))                                               # large, steep
    return [(np.column_stack([np.ones(len(x)), x]), y, k) for x, y, k in out]


@pytest.mark.parametrize("eps", [0.3, 2.0])
def test_solver_meets_the_tolerance_and_the_point_carries_its_gradient(eps):
    """On every hard table and every noise draw the solver stops with ‖∇J‖ ≤ γ (what the
    residual release's sensitivity 2γ/Λ assumes), and the log-likelihood gradient there is
    Λθ + b: the gradient the noise-aware posterior takes as released."""
    with jax.enable_x64(True):
        for X, y, draws in _tables():
            d = X.shape[1]
            plan = nag.release_plan("logistic", len(y), d, eps, DELTA, finder="objpert")
            lam, point = plan.ridge, plan.gradients[0]

            def one(key, X=X, y=y, lam=lam, point=point, d=d):
                b = nag.DEFAULT_NOISE.knorm(key, jnp.zeros(d), jnp.asarray(point.widths()),
                                            point.noise_epsilon)
                return nag.objpert_solve(X, y, lam, b), b

            theta, b = map(np.asarray, jax.jit(jax.vmap(one))(
                jax.random.split(jax.random.key(d), draws)))
            p = 1 / (1 + np.exp(-(theta @ X.T)))                  # (draws, n)
            score = (y - p) @ X                                     # Σ ∇ℓ_i(θ), per draw
            grad_j = -score + lam * theta + b
            assert np.max(np.linalg.norm(grad_j, axis=1)) <= nag.OBJPERT_TOL
            np.testing.assert_allclose(score, lam * theta + b, atol=2 * nag.OBJPERT_TOL)


def test_point_density_ratio_stays_within_its_charge_either_way():
    """``objpert_log_ratio`` (the audit's statistic: the point's exact density ratio) for
    neighbours that differ in one record placed at the box's worst corners, at many points θ:
    within ±ε of the release (noise term ≤ ε_b, Jacobian term ≤ ε_J), for (D, D') and
    (D', D). At n = 1 the Jacobian term is as large as the bound allows; it is then close to
    ε_J (the bound is tight)."""
    rng = np.random.default_rng(1)
    d, eps = 3, 2.0
    plan = nag.release_plan("logistic", 2, d, eps, DELTA, finder="objpert")
    point = plan.gradients[0]
    ratio = jax.jit(lambda a, b, t: nag.objpert_log_ratio(plan, a, b, t))
    worst = 0.0
    with jax.enable_x64(True):
        for _ in range(200):
            base = np.column_stack([np.ones(1), rng.uniform(-1, 1, (1, d - 1)),
                                    rng.integers(0, 2, 1)])
            r1 = np.array([1.0, *rng.choice([-1.0, 1.0], d - 1), 0.0])
            r2 = np.array([1.0, *rng.choice([-1.0, 1.0], d - 1), 1.0])
            D, Dp = np.vstack([base, r1]), np.vstack([base, r2])
            theta = rng.normal(0, 2, d)
            for a, b in ((D, Dp), (Dp, D)):
                v = float(ratio(a, b, theta))
                assert abs(v) <= point.epsilon * (1 + 1e-12)
                worst = max(worst, abs(v))
        # Closed form at θ = 0 with y = 1/2 (no gradient, so no noise term): one record at a
        # corner (‖x̃‖² = d) against one with its slopes at 0 (‖x̃‖² = 1), each weight 1/4:
        # the Jacobian term alone, log(1 + (d/4)/Λ) − log(1 + (1/4)/Λ), close to ε_J.
        corner = np.array([[1.0, 1.0, 1.0, 0.5]])
        centre = np.array([[1.0, 0.0, 0.0, 0.5]])
        v = float(ratio(corner, centre, jnp.zeros(d)))
    lam = plan.ridge
    assert v == pytest.approx(math.log1p(d / 4 / lam) - math.log1p(0.25 / lam), rel=1e-10)
    assert 0.5 * point.jacobian < v <= point.jacobian
    assert worst > 0.5 * point.noise_epsilon  # the pairs reach the noise term's bound
