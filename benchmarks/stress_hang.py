"""Stress test of the default command: many default fits in concurrent processes, none may hang.

Issue 33 §2: ``dpmcmc.glm``'s default (the noise-aware GLM) hung at 0 % CPU on a 2-core machine,
every XLA pool thread waiting in a batched LAPACK call for chunks queued behind it
(dpmcmc/linalg.py explains the deadlock and the rule that removes it). This script runs the
default fit (``dpmcmc.glm(table, family, target=..., bounds=..., epsilon=1, delta=1e-6)``:
algorithm "auto", 4 chains × 1000 draws, a fresh OS-entropy key per fit) over and over in
``--procs`` concurrent worker processes, alternating the logistic and the linear family, on a
table of ``--rows`` rows whose design has 11 coefficients (intercept, four numeric columns, two
categorical ones with 3 and 5 levels): large enough that the unfixed draws' triangular solves
(4000 systems of 11 unknowns) were split over the pool. A worker that reports no finished fit
within ``--timeout`` seconds and used (almost) no CPU in that time has hung (one that used CPU
is only slow, on a loaded machine, and is given another window): its stacks are dumped with gdb
(``--gdb DIR``, when /usr/bin/gdb exists), it is killed, and a fresh worker runs the fits it had
left.

Usage::

    python benchmarks/stress_hang.py                       # 3 processes, 210 fits in all
    python benchmarks/stress_hang.py --procs 2 --fits 4    # the short version (tests/runtime/test_stress_hang.py)
    python benchmarks/stress_hang.py --cost --baseline-src OLD/src   # cost of the fix (below)

Prints one line per hang and a summary (fits, hangs, wall time, median seconds per fit), and
writes it as JSON with ``--json PATH``. Exit status 1 if any fit hung.

``--cost``: the price of the fix, as the wall and CPU time of one default fit (steady state,
programs compiled) in this checkout and in ``--baseline-src`` (a ``src`` directory of a checkout
before the fix), measured in alternating worker processes, one at a time (interleaved rounds,
so load drift hits both alike). A baseline worker that hangs is killed and its round repeated.

Results of the runs quoted in the commit that added this script: benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time

# ---------------------------------------------------------------------------- the worker

BOUNDS = {"a": [0, 10], "b": [-1, 1], "c": [0, 100], "d": [-5, 5],
          "e": {"categories": ["x", "y", "z"]}, "f": {"categories": ["p", "q", "r", "s", "t"]},
          "y": {"categories": ["no", "yes"]}, "t": [-10, 10]}


def table(rows: int, seed: int = 0):
    """A synthetic table: four numeric columns, two categorical ones, a binary and a numeric target."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.uniform(0, 10, rows), "b": rng.uniform(-1, 1, rows),
                       "c": rng.uniform(0, 100, rows), "d": rng.uniform(-5, 5, rows),
                       "e": rng.choice(["x", "y", "z"], rows),
                       "f": rng.choice(["p", "q", "r", "s", "t"], rows)})
    z = -0.5 + 0.2 * (df["a"] - 5) + 1.0 * df["b"] - 0.5 * (df["e"] == "y")
    df["y"] = np.where(rng.uniform(size=rows) < 1 / (1 + np.exp(-z)), "yes", "no")
    df["t"] = np.clip(z * 3 + rng.normal(size=rows), -10, 10)
    return df


def worker(fits: int, rows: int, start: int, threads: int = 1, family: str = "both") -> None:
    """Run ``fits`` default fits, split over ``threads`` threads of this process (which share its
    XLA thread pool); print ``ready`` once, then ``ok <i> <cpu s> <wall s>`` per fit (the CPU
    time is the whole process's, so per fit only with one thread). ``family``: "both"
    alternates logistic and linear fits."""
    import warnings

    import dpmcmc

    warnings.simplefilter("ignore")
    df = table(rows)
    features = ["a", "b", "c", "d", "e", "f"]
    lock = threading.Lock()

    def fit(i):
        logistic = family == "logistic" or (family == "both" and i % 2 == 0)
        model, target = ("logistic", "y") if logistic else ("linear", "t")
        bounds = {k: v for k, v in BOUNDS.items() if k in features or k == target}
        c0, w0 = time.process_time(), time.perf_counter()
        res = dpmcmc.glm(df[features + [target]], model, target=target, features=features,
                         bounds=bounds, epsilon=1.0, delta=1e-6)
        assert res.samples.shape == (4, 1000, 11), res.samples.shape
        with lock:
            print(f"ok {i} {time.process_time() - c0:.4f} {time.perf_counter() - w0:.4f}",
                  flush=True)

    print("ready", os.path.dirname(os.path.dirname(os.path.abspath(dpmcmc.__file__))), flush=True)
    if threads == 1:
        for i in range(start, start + fits):
            fit(i)
        return
    # The first fit alone (each family's first, with "both"): the threads then share compiled
    # programs instead of compiling the same ones at once.
    for i in range(start, min(start + fits, start + (2 if family == "both" else 1))):
        fit(i)
    start, fits = i + 1, fits - (i + 1 - start)
    errors = []

    def run(ids):
        try:
            for i in ids:
                fit(i)
        except BaseException as exc:  # noqa: BLE001 (re-raised below)
            errors.append(exc)

    pool = [threading.Thread(target=run, args=(range(start + t, start + fits, threads),))
            for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise errors[0]


# ---------------------------------------------------------------------------- the harness

#: A worker that used more CPU than this during a window of ``--timeout`` seconds without
#: finishing a fit is slow, not hung (a deadlocked worker uses none).
SLOW_CPU_S = 0.5

def _spawn(src: str, fits: int, rows: int, start: int, threads: int,
           family: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(fits),
                             "--rows", str(rows), "--start", str(start), "--threads", str(threads),
                             "--family", family],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _lines(proc: subprocess.Popen) -> queue.Queue:
    q: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stdout:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def _cpu_seconds(pid: int) -> float:
    """CPU time (user + system, all threads) of a running process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def _dump_stacks(pid: int, gdb_dir: str | None) -> str | None:
    if not gdb_dir or not os.path.exists("/usr/bin/gdb"):
        return None
    os.makedirs(gdb_dir, exist_ok=True)
    path = os.path.join(gdb_dir, f"hang_{pid}.txt")
    with open(path, "w") as f:
        try:
            subprocess.run(["/usr/bin/gdb", "-p", str(pid), "-batch", "-ex",
                            "thread apply all bt 30"], stdout=f, stderr=subprocess.STDOUT,
                           timeout=600)
        except subprocess.TimeoutExpired:
            f.write("\n(gdb timed out)\n")
    return path


def run_slot(src: str, fits: int, rows: int, timeout: float, startup: float, gdb_dir, log,
             threads: int = 1, stop_on_hang: bool = False, family: str = "both") -> dict:
    """Run ``fits`` fits in worker processes, one at a time, restarting a worker that hangs
    (or stopping there, with ``stop_on_hang``)."""
    done, hangs, cpu, wall, first = 0, 0, [], [], []
    while done < fits and not (hangs and stop_on_hang):
        proc = _spawn(src, fits - done, rows, done, threads, family)
        lines, fresh, limit = _lines(proc), True, startup + timeout
        cpu_mark = 0.0
        while True:
            try:
                line = lines.get(timeout=limit)
            except queue.Empty:
                # A deadlocked worker sits at 0 % CPU; one that used CPU in the window is only
                # slow (a loaded machine): wait on.
                used = _cpu_seconds(proc.pid)
                if used - cpu_mark > SLOW_CPU_S:
                    cpu_mark, limit = used, timeout
                    continue
                hangs += 1
                stacks = _dump_stacks(proc.pid, gdb_dir)
                proc.kill()
                proc.wait()
                log(f"HANG: worker {proc.pid} made no progress for {limit:.0f} s after {done} fits"
                    + (f"; stacks in {stacks}" if stacks else ""))
                break
            if line is None:
                proc.wait()
                if proc.returncode != 0:
                    raise RuntimeError(f"worker {proc.pid} failed (exit {proc.returncode}):\n"
                                       + proc.stderr.read()[-3000:])
                break
            cpu_mark = _cpu_seconds(proc.pid)
            if line.startswith("ok"):
                _, _, c, w = line.split()
                (first if fresh else wall).append(float(w))
                if not fresh and threads == 1:
                    cpu.append(float(c))
                fresh, limit = False, timeout
                done += 1
            elif line.startswith("ready"):
                imported = line.split(maxsplit=1)[1].strip()
                if os.path.realpath(imported) != os.path.realpath(src):
                    proc.kill()
                    raise RuntimeError(f"the worker imported dpmcmc from {imported}, not {src}")
                limit = startup + timeout  # the first fit compiles
    return {"fits": done, "hangs": hangs, "cpu": cpu, "wall": wall, "first": first}


def stress(src: str, procs: int, fits: int, rows: int, timeout: float, startup: float,
           gdb_dir=None, log=print, threads: int = 1, stop_on_hang: bool = False,
           family: str = "both") -> dict:
    """``fits`` default fits split over ``procs`` concurrent worker slots (of ``threads`` threads
    each)."""
    import platform

    shares = [fits // procs + (i < fits % procs) for i in range(procs)]
    results: list = [None] * procs
    errors: list = []

    def slot(i):
        try:
            results[i] = run_slot(src, shares[i], rows, timeout, startup, gdb_dir, log, threads,
                                  stop_on_hang, family)
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    t0 = time.perf_counter()
    slots = [threading.Thread(target=slot, args=(i,)) for i in range(procs)]
    for t in slots:
        t.start()
    for t in slots:
        t.join()
    if errors:
        raise errors[0]
    wall_all = time.perf_counter() - t0
    steady = [w for r in results for w in r["wall"]]
    firsts = [w for r in results for w in r["first"]]
    return {"procs": procs, "threads": threads, "fits": sum(r["fits"] for r in results),
            "hangs": sum(r["hangs"] for r in results), "wall_s": round(wall_all, 1),
            "family": family,
            "timeout_s": timeout, "rows": rows,
            "median_fit_wall_s": round(statistics.median(steady), 4) if steady else None,
            "median_first_fit_wall_s": round(statistics.median(firsts), 3) if firsts else None,
            "nproc": os.cpu_count(), "loadavg_end": os.getloadavg(), "python": platform.python_version(),
            "src": src}


def cost(src: str, baseline: str, rounds: int, fits: int, rows: int, timeout: float,
         startup: float, log=print) -> dict:
    """Steady-state time of one default fit, this checkout against ``baseline``, interleaved."""
    arms = {"fixed": src, "baseline": baseline}
    out = {name: {"cpu": [], "wall": [], "hangs": 0} for name in arms}
    for r in range(rounds):
        for name, path in (arms.items() if r % 2 == 0 else reversed(list(arms.items()))):
            while True:
                res = run_slot(path, fits, rows, timeout, startup, None, log)
                out[name]["hangs"] += res["hangs"]
                if not res["hangs"]:
                    break
                log(f"round {r}: the {name} worker hung; repeating its round")
            out[name]["cpu"] += res["cpu"]
            out[name]["wall"] += res["wall"]
    summary = {}
    for name, v in out.items():
        summary[name] = {"median_fit_cpu_s": round(statistics.median(v["cpu"]), 4),
                         "median_fit_wall_s": round(statistics.median(v["wall"]), 4),
                         "fits_timed": len(v["wall"]), "hangs": v["hangs"]}
    summary["ratio_cpu"] = round(summary["fixed"]["median_fit_cpu_s"]
                                 / summary["baseline"]["median_fit_cpu_s"], 3)
    summary["ratio_wall"] = round(summary["fixed"]["median_fit_wall_s"]
                                  / summary["baseline"]["median_fit_wall_s"], 3)
    summary.update(rounds=rounds, fits_per_round=fits, rows=rows, nproc=os.cpu_count(),
                   loadavg_end=os.getloadavg())
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--procs", type=int, default=3, help="concurrent worker processes (default 3)")
    ap.add_argument("--fits", type=int, default=210, help="default fits in all (default 210)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads per worker process, running fits at once (default 1)")
    ap.add_argument("--family", choices=("both", "logistic", "linear"), default="both",
                    help="the GLM family of the fits (default both, alternating)")
    ap.add_argument("--rows", type=int, default=100, help="rows of the table (default 100)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds without a finished fit after which a worker has hung (default 60)")
    ap.add_argument("--startup", type=float, default=120.0,
                    help="extra seconds for a worker's import and first fit (compilation; default 120)")
    ap.add_argument("--gdb", metavar="DIR", help="dump a hung worker's stacks with gdb into DIR")
    ap.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    ap.add_argument("--src", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"),
                    help="the src directory to test (default: this checkout's)")
    ap.add_argument("--cost", action="store_true", help="measure the cost of the fix (see above)")
    ap.add_argument("--baseline-src", help="--cost: src directory of a checkout before the fix")
    ap.add_argument("--rounds", type=int, default=6, help="--cost: interleaved rounds (default 6)")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker is not None:
        worker(a.worker, a.rows, a.start, a.threads, a.family)
        return 0
    src = os.path.abspath(a.src)
    if a.cost:
        if not a.baseline_src:
            ap.error("--cost needs --baseline-src")
        out = cost(src, os.path.abspath(a.baseline_src), a.rounds, max(a.fits // a.rounds, 2),
                   a.rows, a.timeout, a.startup)
    else:
        out = stress(src, a.procs, a.fits, a.rows, a.timeout, a.startup, a.gdb, threads=a.threads,
                     family=a.family)
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 1 if out.get("hangs") else 0


if __name__ == "__main__":
    sys.exit(main())
