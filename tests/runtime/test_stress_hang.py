"""The default command never hangs: the short version of benchmarks/stress_hang.py (issue 33 §2).

One worker process runs three default fits of ``dpmcmc.glm`` (the noise-aware GLM, linear
family, 4 chains × 1000 draws, 11 coefficients): the first alone (it compiles the programs),
the other two in two threads at once, so that two fits' programs share the process's XLA
thread pool. The worker must report every fit, none more than a minute after the one before
unless it is still using CPU (a deadlocked process sits at 0 %). Before the fix (batched LAPACK
calls in the draws; dpmcmc/linalg.py) this configuration hung in most runs
(benchmarks/README.md, "Stress test of the default command"); the structural guard is
tests/runtime/test_pool_deadlock.py. The full stress test (at least 200 fits over three concurrent
processes) is ``python benchmarks/stress_hang.py``.
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import stress_hang  # noqa: E402  (benchmarks/ on the path first)


def test_default_fits_in_concurrent_threads_finish():
    hangs = []
    out = stress_hang.stress(os.path.join(ROOT, "src"), procs=1, threads=2, fits=3, rows=100,
                             timeout=60.0, startup=120.0, log=hangs.append, stop_on_hang=True,
                             family="linear")
    assert not hangs and out["hangs"] == 0, hangs
    assert out["fits"] == 3
