"""test_noise_source.py's child functions, run in the shared child started with
``JAX_ENABLE_X64=0``, which compiles with most optimisations off like the suite: the draws are
compiled with XLA's optimisations on. The default function checks the float64 resolution of
10^6 draws directly; the slow one counts the tail beyond 5.3σ of 10^8 draws."""
from __future__ import annotations

from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

import dpmcmc
from dpmcmc.kernels.mechanisms import gaussian_mechanism
from dpmcmc.models.base import Model


def draws(size: int, releases: int) -> Iterator[jax.Array]:
    """``releases`` releases of ``size`` draws through the public mechanism, on a float32
    statistic; yields each release's draws."""
    assert not jax.config.jax_enable_x64
    cheap = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        with jax.enable_x64(True):
            release = jax.jit(lambda kk: gaussian_mechanism(kk, jnp.zeros(size, jnp.float32), 1.0))
            for i in range(releases):
                yield release(jax.random.key(i))
    finally:
        jax.config.update("jax_disable_most_optimizations", cheap)


def resolution() -> dict:
    """The dtype and resolution of 10^6 draws, a ``dpmcmc.sample`` run, the global setting after
    it, and whether a bare mechanism call outside any x64 scope is refused."""
    out = {}
    (z,) = draws(1_000_000, 1)
    out["mechanism_dtype"] = str(z.dtype)
    z = np.asarray(z)
    # Resolution: how many draws are float32 values, and how many values are drawn twice.
    out["float32_values"] = int(np.sum(z == z.astype(np.float32).astype(np.float64)))
    out["repeats"] = int(z.size - np.unique(z).size)
    model = Model(lambda th, x: -0.5 * jnp.sum((x - th) ** 2), lambda th: 0.0 * jnp.sum(th), 1)
    res = dpmcmc.sample(model, np.random.default_rng(0).normal(size=(30, 1)), "dp-penalty",
                        delta=1e-3, iterations=20, chains=2, key=jax.random.key(0),
                        progress=False, tau=0.5, clip=5.0, proposal_std=0.1)
    out["samples_dtype"] = str(res.samples.dtype)
    out["x64_after"] = bool(jax.config.jax_enable_x64)
    try:
        gaussian_mechanism(jax.random.key(0), jnp.zeros(2), 1.0)
        out["refused"] = False
    except RuntimeError as exc:
        out["refused"] = "float64" in str(exc)
    return out


def tail() -> dict:
    """The slow test's case: the draws beyond 5.3σ of 10^8 draws in 20 releases."""
    count, dtypes = 0, set()
    for z in draws(5_000_000, 20):
        dtypes.add(str(z.dtype))
        count += int(jnp.sum(jnp.abs(z) > 5.3))
    return {"mechanism_dtype": "/".join(sorted(dtypes)), "tail": count,
            "x64_after": bool(jax.config.jax_enable_x64)}
