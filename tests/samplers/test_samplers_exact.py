"""Exactness across samplers: convergence from a dispersed start and the banana's exact draws.

Each sampler's own exactness test lives in its module (tests/samplers/test_rwmh.py, test_hmc.py,
test_dp_penalty.py, test_dp_hmc.py); the shared design is tests/exactness.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS, run_chains
from exactness import ALPHA, DIM, GaussianProblem


@pytest.mark.slow
@pytest.mark.parametrize("name,params", [
    ("rwmh", dict(proposal_std=0.05)),
    ("rwmh", dict(proposal_std=0.05, clip=1e3)),
    ("hmc", dict(step_size=0.03, leapfrog_steps=5)),
    ("hmc", dict(step_size=0.03, leapfrog_steps=5, clip=1e3, jitter=False)),
    ("dp-penalty", dict(tau=0.05, clip=10.0, proposal_std=0.04)),
    ("dp-hmc", dict(tau_l=0.05, tau_g=0.2, clip=10.0, grad_clip=6.0, step_size=0.04,
                    leapfrog_steps=5)),
])
def test_converges_from_dispersed_start(name, params):
    # n = 1000, 20 chains from N(m, (20 s)²), 4000 iterations, first half discarded, thinned to
    # one draw per 40 iterations; per-dimension two-sample KS test against 4000 exact draws,
    # Bonferroni over the 2 dimensions at family false-alarm rate ALPHA. The thinning interval
    # is several integrated autocorrelation times for these settings (acceptance 0.3–0.9).
    problem = GaussianProblem(1000)
    spec = ALGORITHMS[name]
    kernel = spec.build(problem.model, spec.prepare(params, problem.model, 1000))
    rng = np.random.default_rng(5)
    theta0 = problem.mean + 20 * problem.sd * rng.normal(size=(20, DIM))
    pos, info = run_chains(kernel, jnp.asarray(theta0), jax.random.key(11), 4000,
                           data=problem.data, progress=False)
    draws = np.asarray(pos[:, 2000::40]).reshape(-1, DIM)
    exact = problem.exact_draws(4000, seed=9)
    for j in range(DIM):
        assert stats.ks_2samp(draws[:, j], exact[:, j]).pvalue > ALPHA / DIM
    assert float(info.clip_fraction.max()) == 0.0


class BananaProblem:
    """The banana model of 000 §4 at a small scale: posterior Ban(μ, Σ, a), exact draws by
    θ1 ~ N(μ1, Σ11), θ2 = u − a θ1² with u ~ N(μ2, Σ22)."""

    def __init__(self, n=200, a=1.0, s0=10.0, s1=2.0, s2=1.5, seed=0):
        rng = np.random.default_rng(seed)
        theta1, u = 0.3, 1.0
        x1 = rng.normal(theta1, s1, n)
        x2 = rng.normal(u, s2, n)
        self.data = jnp.asarray(np.stack([x1, x2], 1))
        self.a = a

        def loglik(th, x):
            return (-0.5 * (x[0] - th[0]) ** 2 / s1 ** 2
                    - 0.5 * (x[1] - th[1] - a * th[0] ** 2) ** 2 / s2 ** 2)

        def logprior(th):
            return -0.5 * (th[0] ** 2 + (th[1] + a * th[0] ** 2) ** 2) / s0 ** 2

        self.model = Model(loglik, logprior, 2)
        t0, t1, t2 = 1 / s0 ** 2, 1 / s1 ** 2, 1 / s2 ** 2
        self.mu = np.array([n * t1 * x1.mean() / (n * t1 + t0), n * t2 * x2.mean() / (n * t2 + t0)])
        self.sd = np.sqrt([1 / (n * t1 + t0), 1 / (n * t2 + t0)])
        self.n = n

    def exact_draws(self, num, seed=1):
        z = np.random.default_rng(seed).normal(size=(num, 2))
        th1 = self.mu[0] + self.sd[0] * z[:, 0]
        return np.stack([th1, self.mu[1] + self.sd[1] * z[:, 1] - self.a * th1 ** 2], 1)


@pytest.mark.slow
@pytest.mark.parametrize("name,params", [
    ("rwmh", dict(proposal_std=[0.2, 0.2])),
    ("hmc", dict(step_size=0.08, leapfrog_steps=6)),
    ("dp-penalty", dict(tau=0.03, clip=6.0, proposal_std=[0.1, 0.1])),
    ("dp-hmc", dict(tau_l=0.03, tau_g=0.3, clip=6.0, grad_clip=5.0, step_size=0.08,
                    leapfrog_steps=6)),
])
def test_banana_final_states_match_exact_draws(name, params):
    # Invariance on a curved posterior: chains started at exact draws stay exact. Two-sample
    # KS tests of both coordinates and of u = θ2 + a θ1² against independent exact draws,
    # Bonferroni over 3 at family false-alarm rate ALPHA.
    problem = BananaProblem()
    spec = ALGORITHMS[name]
    kernel = spec.build(problem.model, spec.prepare(params, problem.model, problem.n))
    theta0 = jnp.asarray(problem.exact_draws(1000, seed=2))
    pos, info = run_chains(kernel, theta0, jax.random.key(3), 200, data=problem.data,
                           progress=False)
    final = np.asarray(pos[:, -1])
    exact = problem.exact_draws(4000, seed=4)
    f_u = final[:, 1] + problem.a * final[:, 0] ** 2
    e_u = exact[:, 1] + problem.a * exact[:, 0] ** 2
    for x, y in ((final[:, 0], exact[:, 0]), (final[:, 1], exact[:, 1]), (f_u, e_u)):
        assert stats.ks_2samp(x, y).pvalue > ALPHA / 3
    assert float(info.accepted.mean()) > 0.1
    # The banana's ratios grow quadratically: a wild proposal far in the tail (rejected anyway)
    # can exceed any fixed bound, so require only that clipping is rare.
    assert float(info.clip_fraction.mean()) < 1e-3
