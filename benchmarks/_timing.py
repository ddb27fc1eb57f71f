"""CPU-time measurement shared by the benchmarks.

Why batches. XLA's CPU client runs a computation on a worker thread and wakes the caller when it
is done, often before that worker has been switched out. Linux adds a running thread's time to
``CLOCK_PROCESS_CPUTIME_ID`` (``time.process_time``) only when the thread is switched out or at a
scheduler tick, so one short call measured alone can miss most of its own work (we saw 0.05 ms for
a pass whose batch average is 1.6 ms) and hand the missing time to a later call. The minimum of
single calls, our earlier method, therefore picked those under-counted calls: for passes of a few
milliseconds it was off by up to 20×. A batch of calls lasting at least ``min_batch_s`` bounds that
error by one lag per batch; the result is the minimum over ``reps`` batch means.
"""
from __future__ import annotations

import math
import time

import jax


def cpu_time(fn, *args, reps: int = 3, min_batch_s: float = 0.25, max_calls: int = 200):
    """(CPU seconds, wall seconds) per call of ``fn(*args)``: minimum over ``reps`` batch means.

    One warm-up call (compilation) is excluded; each batch repeats the call until it has used
    ``min_batch_s`` of CPU time (estimated from a timed trial call), at most ``max_calls`` times.
    """
    jax.block_until_ready(fn(*args))
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(3):
        jax.block_until_ready(fn(*args))
    trial = max(time.process_time() - c0, time.perf_counter() - w0) / 3
    calls = max(1, min(max_calls, math.ceil(min_batch_s / max(trial, 1e-6))))
    cpu, wall = math.inf, math.inf
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(fn(*args))
        cpu = min(cpu, (time.process_time() - c0) / calls)
        wall = min(wall, (time.perf_counter() - w0) / calls)
    return cpu, wall
