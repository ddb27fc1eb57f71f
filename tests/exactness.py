"""Shared design of the exactness tests: the samplers target the exact posterior; without the
penalty correction they do not (tests/samplers/test_rwmh.py, test_hmc.py, test_dp_penalty.py,
test_dp_hmc.py, test_samplers_exact.py).

Design. For a Gaussian-mean model with a conjugate prior the tempered posterior is
N(m, s² I) in closed form. C chains are started from C exact posterior draws and run for K
iterations: if the kernel leaves the posterior invariant, the C final states are again iid
exact draws, whatever K (no burn-in, no autocorrelation). The standardised final coordinates
z = (θ − m)/s (2C iid N(0, 1) values under H0) are tested with a one-sample KS test and a
two-sided χ² test of Σ z² (2C degrees of freedom); Bonferroni over the two gives a combined
p-value. Exactness is asserted at false-alarm rate ALPHA = 1e-3 per sampler; the same test
must reject at level ALPHA when the penalty correction is removed (a kernel with too-high
acceptance, hence too-wide draws), which shows the test has power.

The fixed key makes each test deterministic; ALPHA is the probability that a correct sampler
fails for a random key.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS, run_chains

ALPHA = 1e-3
DIM = 2
PRIOR_SD = 10.0


class GaussianProblem:
    """x_i ~ N(θ, I_d), θ ~ N(0, PRIOR_SD² I_d), likelihood tempered by T."""

    def __init__(self, n, temperature=1.0, seed=0):
        rng = np.random.default_rng(seed)
        self.data = jnp.asarray(rng.normal([0.5, -1.0], 1.0, size=(n, DIM)))
        self.model = Model(
            log_likelihood=lambda th, x: -0.5 * jnp.sum((x - th) ** 2),
            log_prior=lambda th: -0.5 * jnp.sum(th ** 2) / PRIOR_SD ** 2,
            dim=DIM,
            temperature=temperature,
        )
        precision = 1.0 / PRIOR_SD ** 2 + temperature * n
        self.mean = temperature * np.asarray(self.data).sum(0) / precision
        self.sd = 1.0 / np.sqrt(precision)
        self.n = n

    def exact_draws(self, num, seed=1):
        return self.mean + self.sd * np.random.default_rng(seed).normal(size=(num, DIM))


def exactness_pvalue(final, problem):
    """Combined (Bonferroni) p-value of KS and χ² tests of the standardised final states."""
    z = ((np.asarray(final) - problem.mean) / problem.sd).ravel()
    p_ks = stats.kstest(z, "norm").pvalue
    q = float(np.sum(z ** 2))
    p_chi = 2 * min(stats.chi2.cdf(q, z.size), stats.chi2.sf(q, z.size))
    return min(1.0, 2 * min(p_ks, p_chi)), float(np.mean(z ** 2))


def run_from_stationarity(kernel, problem, chains, iterations, key):
    # Each test draws its own starting sample (seed = key), so that the tests' p-values are
    # independent of one another; a corrected/uncorrected pair shares its key.
    theta0 = jnp.asarray(problem.exact_draws(chains, seed=1000 + key))
    pos, info = run_chains(kernel, theta0, jax.random.key(key), iterations, data=problem.data,
                           progress=False)
    return pos[:, -1], info


def build(name, problem, **params):
    spec = ALGORITHMS[name]
    return spec.build(problem.model, spec.prepare(params, problem.model, problem.n))


# Fast configuration (default run): n = 200, 300 chains, 150 iterations.
N, CHAINS, ITERS = 200, 300, 150


@pytest.fixture(scope="module")
def problem():
    return GaussianProblem(N, temperature=1.0)


@pytest.fixture(scope="module")
def tempered():
    return GaussianProblem(N, temperature=0.5, seed=3)


def penalty_params(p, tau=0.08):
    return dict(tau=tau, clip=10.0, proposal_std=1.0 * p.sd)


def dphmc_params(p, tau_l=0.08):
    # grad_clip = 1 clips a good share of the per-example gradients: gradient clipping and
    # noise change the proposal only, never the invariant distribution (000 Thm 3.3).
    return dict(tau_l=tau_l, tau_g=0.5, clip=10.0, grad_clip=1.0, step_size=1.5 * p.sd,
                leapfrog_steps=3)
