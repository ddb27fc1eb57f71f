"""dpmcmc.sample end to end: randomness from OS entropy, mid-chain NaNs, the result's parts."""
from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpmcmc
from dpmcmc.models.base import Model
from dpmcmc.testing import count_os_entropy_keys, replace_run_chains, resolve_key

from api_params import gaussian_data, gaussian_model, valid_params


class Captured(Exception):
    pass


def test_key_none_draws_os_entropy_and_no_fixed_seed(monkeypatch):
    """key=None takes fresh bits from the OS for every call (captured before any run)."""
    keys = []

    def capture(kernel, theta0, key, num_iterations, **kw):
        keys.append(np.asarray(jax.random.key_data(key)))
        raise Captured

    calls = count_os_entropy_keys(monkeypatch)
    replace_run_chains(monkeypatch, capture)
    for _ in range(3):
        with pytest.raises(Captured):
            dpmcmc.sample(gaussian_model(), gaussian_data(), "dp-penalty", delta=1e-3, iterations=5,
                          progress=False, **valid_params("dp-penalty"), force=True)
    assert len(calls) == 3
    # Three 64-bit keys from the OS: equal ones would have probability ~3 * 2^-64.
    assert len({k.tobytes() for k in keys}) == 3
    # A given key is used as is, so runs are reproducible on request.
    with pytest.raises(Captured):
        dpmcmc.sample(gaussian_model(), gaussian_data(), "dp-penalty", delta=1e-3, iterations=5,
                      progress=False, key=jax.random.key(3), **valid_params("dp-penalty"), force=True)
    assert len(calls) == 3


def test_resolve_key_forms():
    k = resolve_key(jax.random.PRNGKey(5))
    assert jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key)
    np.testing.assert_array_equal(jax.random.key_data(k), jax.random.key_data(jax.random.key(5)))
    with pytest.raises(TypeError, match="key"):
        resolve_key(5)
    with pytest.raises(TypeError, match="key"):
        resolve_key(jax.random.split(jax.random.key(0), 2))


def nan_region_model():
    """A Gaussian model whose log-density is NaN wherever θ₀ > 1.5 (likelihood and prior).

    A private sampler turns a NaN per-example ratio into a clipped one (its sensitivity must not
    depend on the model misbehaving); the NaN prior, and for HMC the NaN gradient that sends the
    leapfrog off to NaN, are what make a proposal there diverge.
    """
    def loglik(th, x):
        return jnp.where(th[0] > 1.5, jnp.nan, -0.5 * jnp.sum((x - th) ** 2))

    def logprior(th):
        return jnp.where(th[0] > 1.5, jnp.nan, -0.5 * jnp.sum(th ** 2) / 100.0)

    return Model(loglik, logprior, 2, name="nan-region")


@pytest.mark.parametrize("algorithm,params", [
    # Large steps from θ = (1.2, 0): many proposals land in the NaN region.
    ("dp-penalty", dict(tau=2.0, clip=5.0, proposal_std=0.6)),
    ("dp-hmc", dict(tau_l=2.0, tau_g=2.0, clip=5.0, grad_clip=5.0, step_size=0.3, leapfrog_steps=3)),
    pytest.param("hmc", dict(step_size=0.3, leapfrog_steps=3), marks=pytest.mark.slow),
])
def test_mid_chain_nan_is_a_counted_rejection(algorithm, params):
    data = gaussian_data(40) * 0.1 + np.array([1.2, 0.0])
    budget = dict(delta=1e-3) if algorithm.startswith("dp-") else {}
    budget = dict(budget, force=True) if budget else budget  # large steps by design: force
    # The plan says such steps leave a private chain almost stuck: asserted, then run anyway.
    with _plan_warns(algorithm.startswith("dp-"), "almost never move"):
        res = dpmcmc.sample(nan_region_model(), data, algorithm, **budget, iterations=60, chains=2,
                            theta0=np.array([1.2, 0.0]), key=jax.random.key(11), progress=False,
                            **params)
    # Never propagated into the draws, and no draw ever enters the NaN region.
    assert np.all(np.isfinite(res.samples))
    assert np.all(res.samples[..., 0] <= 1.5)
    # Counted per chain: for a private sampler in the released statistics (the flag is a
    # function of noisy releases and public values), for HMC in the non-private diagnostics.
    stats = res.released if algorithm.startswith("dp-") else res.diagnostics
    assert (res.released is None) == (not algorithm.startswith("dp-"))
    div = stats.divergences
    assert div.shape == (2,) and np.all(div > 0) and np.all(div <= 60)
    # A rejection leaves the chain where it was: at least that many repeated draws per chain.
    prev = np.concatenate([np.broadcast_to([1.2, 0.0], (2, 1, 2)), res.samples[:, :-1]], axis=1)
    stays = np.all(res.samples == prev, axis=2).sum(axis=1)
    assert np.all(stays >= div)
    assert np.all(stats.acceptance_rate <= 1 - div / 60 + 1e-12)


def _plan_warns(expected: bool, match: str):
    """``pytest.warns(PlanWarning)`` where the plan must warn; elsewhere the suite's filter turns
    any PlanWarning into an error (pyproject.toml)."""
    return pytest.warns(dpmcmc.PlanWarning, match=match) if expected else contextlib.nullcontext()


def test_result_parts_and_report():
    with pytest.warns(dpmcmc.PlanWarning, match="ε = 30 is above 10"):
        res = dpmcmc.sample(gaussian_model(), gaussian_data(), "dp-penalty", epsilon=30.0, delta=1e-3,
                            chains=2, key=jax.random.key(0), progress=False,
                            **valid_params("dp-penalty"), force=True)
    assert res.samples.shape == (2, res.privacy.iterations, 2)
    assert res.privacy.epsilon <= 30.0 and res.privacy.chains == 2
    # The budget buys exactly this many iterations: one more would overspend.
    # theta0=None: the run starts privately (init_share 0.1 of μ, 30 steps), charged in the report.
    init = dict(init_mu=0.1 * dpmcmc.accounting.gaussian_mu(30.0, 1e-3), init_steps=30)
    assert any(m["name"].startswith("private initialisation") for m in res.privacy.mechanisms)
    more = dpmcmc.accounting.spent("dp-penalty", res.privacy.iterations + 1, 1e-3, 60, chains=2, tau=0.5,
                                   **init)
    assert more.epsilon > 30.0
    assert res.secure is False
    assert res.param_names is None  # an unnamed model (named: tests/test_plan.py::test_plan_does_not_depend_on_the_data)
    assert "NOT PRIVATE" in repr(res.diagnostics)
    idata = res.to_inference_data()
    # The released accept/divergence flags are published (post-processing); nothing else.
    assert list(idata.groups()) == ["posterior", "sample_stats"]
    assert set(idata.sample_stats.data_vars) == {"accepted", "diverging"}
    assert "acceptance_rate" not in str(idata.posterior.attrs)
    assert "clip_fraction" not in str(idata.posterior.attrs) + str(idata.sample_stats.attrs)


# Model(param_names=...) naming the posterior variables of dpmcmc.sample's result is checked in
# tests/test_plan.py::test_plan_does_not_depend_on_the_data, on a chain program that test file
# compiles anyway (here a named model's run compiled one of its own).
