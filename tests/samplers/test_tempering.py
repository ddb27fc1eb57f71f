"""Tempering: on the built-in banana with T = n0/n < 1 the samplers target 001 Thm 13's tempered
posterior, and not the untempered one.

Design. C chains start from C exact draws of the tempered posterior (the preset's exact sampler,
001 Thm 13) and run K iterations of a kernel built on the tempered model. If the kernel leaves
the tempered posterior invariant, the C final states are again iid tempered-posterior draws, so
a permutation MMD two-sample test against fresh exact draws keeps its level. Exactness is
asserted at false-alarm rate ALPHA = 1e-3. Power: a kernel built on the same data with the
temperature dropped (T = 1) contracts the chains towards the untempered posterior, which is
about 1/√T = 4.5 times narrower, and the same test must reject at ALPHA.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.diagnostics import mmd_test
from dpmcmc.models import preset
from dpmcmc.samplers import ALGORITHMS, run_chains

ALPHA = 1e-3
N = 20_000  # the preset keeps n0 = 1000, so T = n0 / n = 0.05
CHAINS, ITERS = 400, 100


@pytest.fixture(scope="module")
def banana():
    pre = preset("thesis-tempered-banana-2d", n=N)
    assert pre.model.temperature == pytest.approx(1000 / N)
    return pre


def _final_states(pre, model, algorithm, key, **params):
    spec = ALGORITHMS[algorithm]
    kernel = spec.build(model, spec.prepare(params, model, N))
    start = pre.posterior_sampler(jax.random.key(100 + key), CHAINS)
    pos, info = run_chains(kernel, jnp.asarray(start), jax.random.key(key), ITERS,
                           data=jnp.asarray(pre.data), progress=False)
    return np.asarray(pos[:, -1]), info


def _pvalue(pre, final, key):
    exact = np.asarray(pre.posterior_sampler(jax.random.key(200 + key), CHAINS))
    return mmd_test(final, exact, seed=key, num_permutations=1000).p_value


# Proposal scales near the tempered posterior's z-scales (sd 0.14 and 0.05 before the banana
# map, smaller so that the chains also move under the 4.5× narrower untempered
# target). DP penalty needs every ratio inside its bound (clip) and noise small enough for the
# chains to move: σ = 2 τ √n b ‖θ−θ'‖ enters λ̂ as T σ ≈ 0.1 here (a tiny τ, because this test
# is about the target, not about privacy).
RWMH = dict(proposal_std=[0.02, 0.2])
PENALTY = dict(tau=1e-4, clip=200.0, proposal_std=[0.02, 0.2])


# Both cases slow (each case is two level-1 compiles over n = 20 000 records, ~3 CPU-s for the
# pair). In the default run the same properties are guarded by
# test_samplers_exact.py::test_rwmh_is_exact[tempered] and test_dp_penalty_is_exact_with_noise_
# and_tempering (the samplers' T, on a T = 0.5 Gaussian posterior, where a dropped T halves the
# variance: p = 6e-25 for RWMH); the tempered banana's exact posterior by
# test_models.py::test_tempered_banana_density_matches_log_posterior. (The same MMD design on
# this preset, test_minibatch_penalty.py::test_tempered_banana_two_sample_fast, is slow too.)
CASES = [pytest.param("rwmh", RWMH, marks=pytest.mark.slow),
         pytest.param("dp-penalty", PENALTY, marks=pytest.mark.slow)]


@pytest.mark.xla_optimized  # a long chain: compiled at XLA level 1 (tests/conftest.py)
@pytest.mark.parametrize("algorithm,params", CASES)
def test_tempered_banana_is_invariant(banana, algorithm, params):
    final, info = _final_states(banana, banana.model, algorithm, key=1, **params)
    assert float(info.accepted.mean()) > 0.1  # the chains move: the test can see a wrong target
    assert float(info.clip_fraction.max()) == 0.0
    assert _pvalue(banana, final, key=1) > ALPHA


@pytest.mark.xla_optimized  # a long chain: compiled at XLA level 1 (tests/conftest.py)
@pytest.mark.parametrize("algorithm,params", CASES)
def test_dropping_the_temperature_is_detected(banana, algorithm, params):
    untempered = dataclasses.replace(banana.model, temperature=1.0)
    final, _ = _final_states(banana, untempered, algorithm, key=1, **params)
    assert _pvalue(banana, final, key=1) < ALPHA
