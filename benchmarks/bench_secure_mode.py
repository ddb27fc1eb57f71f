"""Cost of ``secure=True`` per sampler iteration: time per iteration secure / default.

For DP penalty and DP-HMC on a Gaussian model, runs the chain driver with and without the
secret ChaCha20 key and reports the time per iteration of each and their ratio. Compilation is
excluded: each variant runs once through the public driver (``run_chains`` with a
``cache_key``, one compiled chunk of ``--length`` iterations: ``lax.scan`` over iterations,
``vmap`` over chains), then its later calls reuse that program and are timed. Variants are timed in
turn (interleaved) and medians are reported, so machine load affects both alike.

The extra work of secure mode is per release and does not depend on n: two ChaCha20 blocks to
derive the release key plus ⌈2·size/16⌉ blocks for the noise (float64), against an O(n) pass over
the data for the statistic itself. The ratio therefore falls towards 1 as n grows.

Usage::

    python benchmarks/bench_secure_mode.py [--n 1000] [--dim 10] [--chains 4] [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from dpmcmc.models.base import Model  # noqa: E402
from dpmcmc.samplers import ALGORITHMS, run_chains  # noqa: E402
from dpmcmc.secure import secure_key  # noqa: E402


def setup(algorithm: str, n: int, dim: int):
    model = Model(lambda th, x: -0.5 * jnp.sum((x - th) ** 2), lambda th: -0.5 * jnp.sum(th ** 2) / 100.0,
                  dim, name=f"gauss-{dim}d")
    data = jnp.asarray(np.random.default_rng(0).normal(size=(n, dim)))
    params = {
        "dp-penalty": dict(tau=0.5, clip=5.0, proposal_std=0.05),
        "dp-hmc": dict(tau_l=0.5, tau_g=0.5, clip=5.0, grad_clip=3.0, step_size=0.01, leapfrog_steps=10),
    }[algorithm]
    spec = ALGORITHMS[algorithm]
    prepared = spec.prepare(params, model, n)
    # The kernel builder (its noise source left open for secure mode) and the laid-out data.
    return (lambda noise: spec.build(model, prepared, noise)), spec.layout(data, prepared, model)


def warmed_run(algorithm, build, data, theta0, length, secure):
    """``run()``: one chain-driver run of ``length`` iterations, compiled once (warm-up call)."""
    secret = secure_key(7).words if secure else None

    def run():
        return run_chains(build, theta0, jax.random.key(1), length, data=data, progress=False,
                          secure_secret=secret, cache_key=("bench_secure_mode", algorithm))

    jax.block_until_ready(run())
    return run


def per_iteration(algorithm: str, n: int, dim: int, chains: int, length: int, repeats: int) -> dict:
    build, data = setup(algorithm, n, dim)
    theta0 = jnp.zeros((chains, dim))
    variants = {"default": warmed_run(algorithm, build, data, theta0, length, False),
                "secure": warmed_run(algorithm, build, data, theta0, length, True)}
    samples = {name: [] for name in variants}
    for _ in range(repeats):
        for name, run in variants.items():
            t0 = time.perf_counter()
            jax.block_until_ready(run())
            samples[name].append((time.perf_counter() - t0) / length)
    return {name: statistics.median(v) for name, v in samples.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=10)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--length", type=int, default=200, help="iterations per timed call")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(f"backend={jax.default_backend()} n={args.n} dim={args.dim} chains={args.chains} "
          f"(per iteration = all chains; medians of {args.repeats})")
    print(f"{'algorithm':<12} {'default µs/it':>14} {'secure µs/it':>14} {'ratio':>7}")
    for algorithm in ("dp-penalty", "dp-hmc"):
        t = per_iteration(algorithm, args.n, args.dim, args.chains, args.length, args.repeats)
        print(f"{algorithm:<12} {1e6 * t['default']:>14.1f} {1e6 * t['secure']:>14.1f} "
              f"{t['secure'] / t['default']:>7.2f}")


if __name__ == "__main__":
    main()
