"""Compile time of ``dpmcmc.sample``: first call, repeated call, new process with a warm cache.

For DP-HMC and DP penalty on the banana preset (the papers' settings, n = 10⁵, 4 chains, a fixed
number of iterations), each round runs two fresh Python processes sharing one empty temporary
persistent-cache directory (``XDG_CACHE_HOME``):

- process 1 times the **first call** (trace + compile + sample, persistent cache empty) and a
  **repeated call** in the same process with the same model object and parameters on new data of
  the same shape (the in-process cache: nothing traced or compiled);
- process 2 times the **same call in a new process** (the persistent cache is warm: the chain
  program is loaded, not compiled).

The figures are wall-clock seconds of the whole ``dpmcmc.sample`` call (what a user waits for)
and the process CPU seconds, medians over rounds; the README quotes ratios to the first call.
Writes ``benchmarks/results/compile.json``.

Usage::

    python benchmarks/bench_compile.py [--rounds 3] [--n 100000] [--out benchmarks/results/compile.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")

# Iterations per chain: a few seconds of sampling each, as in the measurement.
ITERATIONS = {"dp-hmc": 20, "dp-penalty": 400}

CHILD = textwrap.dedent(r"""
    import json, sys, time
    import numpy as np
    t_import = time.perf_counter()
    import jax
    import dpmcmc
    from dpmcmc.models import preset

    algorithm, n, iterations, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    p = preset("banana-2d", n=n, key=jax.random.key(0))
    params = {k: v for k, v in p.settings["algorithms"][algorithm].items() if k != "source"}
    theta0 = np.tile(np.asarray(p.theta_true), (4, 1))
    data = np.asarray(p.data)

    def call(d, seed):
        w, c = time.perf_counter(), time.process_time()
        dpmcmc.sample(p.model, d, algorithm, chains=4, iterations=iterations, delta=1e-6,
                      key=jax.random.key(seed), theta0=theta0, progress=False, **params)
        return time.perf_counter() - w, time.process_time() - c

    out = {"first": call(data, 1)}
    if repeat:
        # New data of the same shape (a permutation, shifted): the in-process cache must not
        # depend on the values.
        out["repeated"] = call(data[np.random.default_rng(0).permutation(n)] + 0.5, 2)
    print("RESULT" + json.dumps(out))
""")


def child(algorithm: str, n: int, cache_home: str, repeat: bool) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=cache_home,
               PYTHONPATH=os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")]))
    env.pop("DPMCMC_NO_COMPILE_CACHE", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, algorithm, str(n),
                           str(ITERATIONS[algorithm]), "1" if repeat else "0"],
                          env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed:\n{proc.stderr[-3000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "compile.json"))
    args = ap.parse_args(argv)

    import jax

    results = {}
    for algorithm in ITERATIONS:
        rounds = []
        for r in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="dpmcmc-bench-compile-") as home:
                a = child(algorithm, args.n, home, repeat=True)
                b = child(algorithm, args.n, home, repeat=False)
            rounds.append({"first": a["first"], "repeated": a["repeated"], "new_process": b["first"]})
            print(f"{algorithm} round {r + 1}: first {a['first'][0]:.2f} s, repeated "
                  f"{a['repeated'][0]:.2f} s, new process {b['first'][0]:.2f} s (wall)", flush=True)

        def med(what, i):
            return statistics.median(x[what][i] for x in rounds)

        first, repeated, new = med("first", 0), med("repeated", 0), med("new_process", 0)
        results[algorithm] = {
            "iterations": ITERATIONS[algorithm],
            "wall_s": {"first": first, "repeated": repeated, "new_process": new},
            "cpu_s": {k: med(k, 1) for k in ("first", "repeated", "new_process")},
            "ratio_to_first": {"repeated": repeated / first, "new_process": new / first},
            # The repeated call compiles nothing: its time is the sampling (and checks). What a
            # call costs beyond it is the compile-time overhead.
            "overhead_ratio_new_process": (new - repeated) / (first - repeated),
            "rounds": rounds,
        }
    out = {
        "description": "dpmcmc.sample wall/CPU seconds on the banana preset (papers' settings, "
                       "4 chains): first call (empty persistent cache), repeated call in the same "
                       "process on new data of the same shape, same call in a new process with "
                       "the persistent cache warm; medians over rounds",
        "n": args.n,
        "chains": 4,
        "rounds": args.rounds,
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                    "jax": jax.__version__, "backend": jax.default_backend(),
                    "loadavg": os.getloadavg()},
        "results": results,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=2)
    for algorithm, r in results.items():
        w = r["wall_s"]
        print(f"{algorithm}: first {w['first']:.2f} s; repeated {w['repeated']:.2f} s "
              f"({r['ratio_to_first']['repeated']:.3f}×); new process {w['new_process']:.2f} s "
              f"({r['ratio_to_first']['new_process']:.3f}×; overhead "
              f"{r['overhead_ratio_new_process']:.2f}× the first call's)")
    return out


if __name__ == "__main__":
    main()
