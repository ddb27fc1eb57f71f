"""Cost of secure-mode noise (ChaCha20 in JAX) relative to ``jax.random`` (threefry).

Prints ratios measured in one run, since absolute times depend on the machine and its load:

1. ``secure_normal`` vs ``jax.random.normal`` for 10^3 .. 10^6 draws (jit'd, float64 and
   float32);
2. inside a jit'd ``lax.scan`` of ``--steps`` iterations that split the carried key and draw
   ``--dim`` normals per step (the shape of a sampler's noise draw), for: jax.random, secure
   ChaCha20, and host-side OS entropy (``os.urandom`` + ``scipy.special.ndtri``) fed through
   ``jax.experimental.io_callback``;
3. compile time of that scan for each variant.

Timings are medians over ``--repeats`` interleaved calls (each variant timed in turn, so load on a
shared machine affects all alike).

Usage::

    python benchmarks/bench_secure_rng.py [--repeats 7] [--steps 2000] [--dim 10]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special as sps
from jax.experimental import io_callback

jax.config.update("jax_enable_x64", True)

from dpmcmc.secure import secure_key, secure_normal, secure_split  # noqa: E402


def _timed(fn, *args) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0


def interleaved_medians(calls: dict, repeats: int) -> dict:
    """Median wall time of each zero-argument callable, calls interleaved round-robin."""
    for fn in calls.values():  # warm-up (compiles)
        jax.block_until_ready(fn())
    samples = {name: [] for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            samples[name].append(_timed(fn))
    return {name: statistics.median(v) for name, v in samples.items()}


def bench_sizes(repeats: int) -> list[tuple]:
    rows = []
    sk, jk = secure_key(2024), jax.random.key(2024)
    for dtype in (jnp.float64, jnp.float32):
        for n in (10**3, 10**4, 10**5, 10**6):
            sec = jax.jit(lambda k, n=n, dt=dtype: secure_normal(k, (n,), dt))
            thr = jax.jit(lambda k, n=n, dt=dtype: jax.random.normal(k, (n,), dt))
            med = interleaved_medians({"secure": lambda: sec(sk), "jax": lambda: thr(jk)}, repeats)
            rows.append((np.dtype(dtype).name, n, med["jax"], med["secure"], med["secure"] / med["jax"]))
    return rows


def _host_normals(dim: int):
    def draw(_step):
        # 52-bit open grid from the OS CSPRNG, the same construction as secure_normal.
        w = np.frombuffer(os.urandom(8 * dim), dtype=np.uint64) >> np.uint64(12)
        return sps.ndtri((w.astype(np.float64) + 0.5) * 2.0**-52)

    return draw


def bench_scan(steps: int, dim: int, repeats: int) -> list[tuple]:
    def make(split, normal):
        def body(carry, _):
            key, acc = carry
            key, sub = split(key)
            return (key, acc + normal(sub)), None

        return jax.jit(lambda key: jax.lax.scan(body, (key, jnp.zeros(dim)), None, length=steps)[0][1])

    def jsplit(key):
        k = jax.random.split(key)
        return k[0], k[1]

    def ssplit(key):
        k = secure_split(key, 2)
        return k[0], k[1]

    host = _host_normals(dim)
    shape = jax.ShapeDtypeStruct((dim,), jnp.float64)
    variants = {
        "jax.random (threefry)": (make(jsplit, lambda k: jax.random.normal(k, (dim,))),
                                  jax.random.key(1)),
        "secure (ChaCha20 in JAX)": (make(ssplit, lambda k: secure_normal(k, (dim,))), secure_key(1)),
        # The host variant still threads a JAX key only to keep the loop shape identical; its
        # noise comes from os.urandom, one callback per iteration.
        "host os.urandom callback": (make(jsplit, lambda k: io_callback(host, shape, 0)),
                                     jax.random.key(1)),
    }
    compile_s = {}
    for name, (fn, key) in variants.items():
        t0 = time.perf_counter()
        fn.lower(key).compile()
        compile_s[name] = time.perf_counter() - t0
    med = interleaved_medians({name: (lambda f=f, k=k: f(k)) for name, (f, k) in variants.items()},
                              repeats)
    base = med["jax.random (threefry)"]
    return [(name, med[name], med[name] / base, compile_s[name]) for name in variants]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=10)
    args = parser.parse_args()

    print(f"jax {jax.__version__} on {jax.devices()[0].platform}; medians of {args.repeats} runs\n")
    print("1. one jit'd call, n standard normals")
    print(f"{'dtype':<8}{'n':>10}{'jax.random ms':>16}{'secure ms':>12}{'ratio':>8}")
    for dt, n, tj, ts, r in bench_sizes(args.repeats):
        print(f"{dt:<8}{n:>10}{tj * 1e3:>16.3f}{ts * 1e3:>12.3f}{r:>8.2f}")

    print(f"\n2. jit'd lax.scan: {args.steps} steps, split + {args.dim} float64 normals per step")
    print(f"{'variant':<28}{'run ms':>10}{'ratio':>8}{'compile s':>11}")
    for name, t, r, c in bench_scan(args.steps, args.dim, args.repeats):
        print(f"{name:<28}{t * 1e3:>10.2f}{r:>8.2f}{c:>11.2f}")


if __name__ == "__main__":
    main()
