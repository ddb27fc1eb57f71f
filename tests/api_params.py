"""Valid parameters for every registered algorithm, for the API tests (not a test module).

Known algorithms have hand-chosen values; an algorithm registered later gets its required
parameters discovered from its ``prepare`` error messages ("requires parameter 'x'") and filled
from a pool of generic values, so the input-validation tests cover it without edits. If that
fails the tests say which algorithm needs an entry here.
"""
from __future__ import annotations

import re

import jax.numpy as jnp
import numpy as np

from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS

N = 60
DIM = 2

# Steps short enough that the privacy noise leaves the chains able to move at N = 60 records
# (dpmcmc.plan raises no PlanWarning for them): tests that want a warning ask for it.
KNOWN = {
    "rwmh": dict(proposal_std=0.3),
    "hmc": dict(step_size=0.2, leapfrog_steps=3),
    "dp-penalty": dict(tau=0.5, clip=5.0, proposal_std=0.03),
    "dp-hmc": dict(tau_l=0.5, tau_g=0.5, clip=5.0, grad_clip=3.0, step_size=0.02, leapfrog_steps=3),
    "dp-barker": dict(batch_size=20, proposal_std=0.05),
    "minibatch-penalty": dict(tau=1.0, batch_size=20, clip=1.0, proposal_std=0.05),
    "dp-sgld": dict(step_size=1e-3, batch_size=20, noise_multiplier=1.0, grad_clip=3.0),
    "dp-sgnht": dict(step_size=1e-3, batch_size=20, noise_multiplier=1.0, grad_clip=3.0),
}

POOL = dict(tau=0.5, tau_l=0.5, tau_g=0.5, clip=5.0, grad_clip=3.0, step_size=0.05,
            leapfrog_steps=3, proposal_std=0.05, batch_size=20, noise_multiplier=1.0,
            learning_rate=1e-3)


def gaussian_model(name: str = "gauss-2d") -> Model:
    """A FRESH model object on every call: nothing compiled for an earlier one is reused
    (test_released_statistics patches the mechanism and relies on it)."""
    return Model(lambda th, x: -0.5 * jnp.sum((x - th) ** 2),
                 lambda th: -0.5 * jnp.sum(th ** 2) / 100.0, DIM, name=name)


def gaussian_data(n: int = N, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM))


def valid_params(name: str, model: Model | None = None, n: int = N) -> dict:
    """Parameters ``ALGORITHMS[name].prepare`` accepts."""
    model = model or gaussian_model()
    spec = ALGORITHMS[name]
    params = dict(KNOWN.get(name, {}))
    for _ in range(len(POOL) + 1):
        try:
            spec.prepare(dict(params), model, n)
            return params
        except (TypeError, ValueError) as exc:
            m = re.search(r"requires parameter '(\w+)'", str(exc))
            if not m or m.group(1) not in POOL or m.group(1) in params:
                raise AssertionError(f"tests/api_params.py: add valid parameters for {name!r} "
                                     f"({exc})") from None
            params[m.group(1)] = POOL[m.group(1)]
    raise AssertionError(f"tests/api_params.py: add valid parameters for {name!r}")


def budget_kwargs(name: str) -> dict:
    """A budget argument set that is valid for ``name`` (private: delta + iterations; the tiny
    data cannot support a run that moves, which the tests do not need: ``force``)."""
    return dict(delta=1e-3, iterations=5, force=True) if ALGORITHMS[name].private else dict(iterations=5)


def takes_batch_size(name: str) -> bool:
    return "batch_size" in valid_params(name)
