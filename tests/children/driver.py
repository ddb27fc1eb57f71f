"""test_driver.py's child functions, run in the shared child started with ``JAX_ENABLE_X64=0``:
samplers run with the global 64-bit setting off."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS, run_chains

PARAMS = {"rwmh": dict(proposal_std=0.1), "hmc": dict(step_size=0.05, leapfrog_steps=3),
          "dp-penalty": dict(tau=0.5, clip=5.0, proposal_std=0.1, mode="guided-walk"),
          "dp-hmc": dict(tau_l=0.5, tau_g=0.5, clip=5.0, grad_clip=3.0, step_size=0.05,
                         leapfrog_steps=3)}


def run_with_x64_off(names: list[str]) -> dict:
    """Run each sampler of ``names`` for 30 iterations; assert float64 draws that moved, and
    that the global setting stayed off."""
    assert not jax.config.jax_enable_x64
    model = Model(lambda th, x: -0.5 * jnp.sum((x - th) ** 2),
                  lambda th: -0.5 * jnp.sum(th ** 2), 2)
    data = np.random.default_rng(0).normal(size=(50, 2))
    for name in names:
        spec = ALGORITHMS[name]
        kernel = spec.build(model, spec.prepare(PARAMS[name], model, 50))
        pos, info = run_chains(kernel, np.zeros((2, 2)), jax.random.key(0), 30, data=data,
                               progress=False)
        # The run is traced with 64-bit types scoped to it (privacy noise is float64 always; was
        # float32 here, the bug fixed), and the global setting stays off.
        assert pos.dtype == jnp.float64, (name, pos.dtype)
        assert not jax.config.jax_enable_x64, name
        assert np.all(np.isfinite(np.asarray(pos))), name
        assert np.asarray(info.accepted).any(), name
        assert not np.asarray(info.diverged).any(), name
    return {"x32": names}


def private() -> dict:
    """A private sampler, whose privacy noise the fixed bug drew in float32."""
    return run_with_x64_off(["dp-hmc"])


def non_private() -> dict:
    """The slow test's case: the non-private samplers, and dp-penalty."""
    return run_with_x64_off(["rwmh", "hmc", "dp-penalty"])
