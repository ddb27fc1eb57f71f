"""Non-finite values met mid-chain are rejections, never draws.

Non-private samplers reject a proposal whose log density (or log ratio) is NaN, and any
non-finite leapfrog end point, and flag ``Info.diverged``. The private samplers reject a
non-finite leapfrog end point or a NaN in the data-independent terms (prior) the same way; a
NaN per-example log-likelihood ratio is, instead, replaced by the clip bound −c inside the
released sum (deciding on it directly would leak whether some record makes the likelihood NaN),
which makes the proposal all but impossible to accept.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS, run_chains

N = 100
DATA = jnp.asarray(np.random.default_rng(0).normal(size=(N, 2)) * 0.3)


def gauss_ll(th, x):
    return -0.5 * jnp.sum((x - th) ** 2)


# log-likelihood NaN beyond the wall θ0 > 0.25 (for every record)
NAN_WALL = Model(lambda th, x: jnp.where(th[0] > 0.25, jnp.nan, gauss_ll(th, x)),
                 lambda th: -0.5 * jnp.sum(th ** 2), 2)
PLAIN = Model(gauss_ll, lambda th: -0.5 * jnp.sum(th ** 2), 2)
# prior NaN beyond θ1 > 0.2 (data-independent)
NAN_PRIOR = Model(gauss_ll, lambda th: jnp.where(th[1] > 0.2, jnp.nan, -0.5 * jnp.sum(th ** 2)), 2)
# Both walls at once: for a non-private sampler, whose log density is prior plus likelihood,
# each is a NaN log ratio of its own, met by one chain (one compiled program, not two).
NAN_BOTH = Model(NAN_WALL.log_likelihood, NAN_PRIOR.log_prior, 2)


def run(name, model, theta0, iters=300, chains=4, **params):
    spec = ALGORITHMS[name]
    kernel = spec.build(model, spec.prepare(params, model, N))
    pos, info = run_chains(kernel, jnp.tile(jnp.asarray(theta0), (chains, 1)), jax.random.key(0),
                           iters, data=DATA, progress=False)
    return np.asarray(pos), jax.tree.map(np.asarray, info)


def check_common(pos, info):
    assert np.all(np.isfinite(pos))
    assert not np.any(info.accepted & info.diverged)
    # The kernel contract's info (test_samplers_registry.py's first-step check, slow for hmc and
    # dp-hmc, whose default-run contract check is this one): boolean flags, a clip fraction.
    assert info.accepted.dtype == bool and info.diverged.dtype == bool
    assert np.all((info.clip_fraction >= 0.0) & (info.clip_fraction <= 1.0))


@pytest.mark.parametrize("name,params", [
    ("rwmh", dict(proposal_std=0.15)),
    # slow: guard in default: test_nan_likelihood_is_a_rejection_nonprivate[rwmh-params0] (same
    # rejection of a NaN log ratio; the clip only bounds the finite ones)
    pytest.param("rwmh", dict(proposal_std=0.15, clip=50.0), marks=pytest.mark.slow),
    # slow: guard in default: test_divergent_leapfrog_is_a_rejection[hmc-params0] (hmc's rejection
    # of a non-finite end point, the same check a NaN energy meets)
    pytest.param("hmc", dict(step_size=0.03, leapfrog_steps=5), marks=pytest.mark.slow),
])
def test_nan_likelihood_is_a_rejection_nonprivate(name, params):
    # NAN_BOTH: the NaN likelihood beyond θ0 > 0.25 and the NaN prior beyond θ1 > 0.2, both
    # walls a small step from the start; neither is ever crossed. (rwmh's NaN prior alone is
    # test_nan_prior_is_a_rejection[rwmh-params0], slow: tests/suite_budget.py.)
    pos, info = run(name, NAN_BOTH, [0.2, 0.15], **params)
    check_common(pos, info)
    assert np.all(pos[..., 0] <= 0.25)
    assert np.all(pos[..., 1] <= 0.2)
    assert info.diverged.sum() > 0
    assert info.accepted.sum() > 0


@pytest.mark.parametrize("name,params", [
    ("hmc", dict(step_size=1e3, leapfrog_steps=50, jitter=False)),
    # DP-HMC: the clipped data gradient is bounded, the prior's is not; 100 steps overflow.
    ("dp-hmc", dict(tau_l=1.0, tau_g=1.0, clip=5.0, grad_clip=2.0, step_size=1e3,
                    leapfrog_steps=100, jitter=False)),
])
def test_divergent_leapfrog_is_a_rejection(name, params):
    # Step size 1000 on a posterior of width ~0.1: |θ| grows ~(1000·10)² per step and
    # overflows float64 within the 50 steps.
    pos, info = run(name, PLAIN, [0.1, -0.1], iters=20, **params)
    check_common(pos, info)
    assert info.diverged.all()
    np.testing.assert_array_equal(pos, np.broadcast_to([0.1, -0.1], pos.shape))


def test_private_penalty_never_propagates_a_nan_likelihood():
    pos, info = run("dp-penalty", NAN_WALL, [0.2, 0.0], tau=0.3, clip=5.0, proposal_std=0.15)
    check_common(pos, info)
    assert np.all(pos[..., 0] <= 0.25)
    # Proposals past the wall: every ratio replaced by -c, i.e. clip fraction 1, not a divergence.
    assert np.any(info.clip_fraction == 1.0)
    assert not info.diverged.any()
    assert info.accepted.sum() > 0


# slow: guard in default: test_private_penalty_never_propagates_a_nan_likelihood (the clipped
# ratio sum that replaces a NaN ratio by -c, shared by dp-hmc) and
# test_divergent_leapfrog_is_a_rejection[dp-hmc-params1] (dp-hmc's non-finite rejection)
@pytest.mark.slow
def test_private_hmc_never_propagates_a_nan_likelihood():
    pos, info = run("dp-hmc", NAN_WALL, [0.2, 0.0], tau_l=0.3, tau_g=0.5, clip=5.0, grad_clip=2.0,
                    step_size=0.03, leapfrog_steps=5)
    check_common(pos, info)
    assert np.all(pos[..., 0] <= 0.25)
    assert info.accepted.sum() > 0


@pytest.mark.parametrize("name,params", [
    ("rwmh", dict(proposal_std=0.15)),
    ("dp-penalty", dict(tau=0.3, clip=5.0, proposal_std=0.15, mode="one-component")),
])
def test_nan_prior_is_a_rejection(name, params):
    pos, info = run(name, NAN_PRIOR, [0.0, 0.15], **params)
    check_common(pos, info)
    assert np.all(pos[..., 1] <= 0.2)
    assert info.diverged.sum() > 0
