"""Runs of nearby lengths share one compiled chain program (``chunk_length``'s buckets).

The chunk program skips the iterations past a run's end, so the driver compiles a chunk length
rounded up to ``m * 2**k`` (``m`` in 4..7): the same model and parameters run again for another
number of iterations (another ε) in the same bucket compile no chain program, and give the same
draws as the longer run up to their length.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import dpmcmc
from dpmcmc.models import preset
from dpmcmc.runtime.driver import chunk_length
from dpmcmc.testing import fresh_program_cache
from test_compile_cache import PENALTY, CompileCounter


def test_chunk_length_buckets():
    got = [chunk_length(i) for i in range(1, 5000)]
    assert got[:8] == list(range(1, 9))  # short runs compile their own length
    for i, c in enumerate(got, start=1):
        assert i <= c <= max(i, 1.25 * i)  # at most a quarter of a chunk skipped
        if c > 8:  # of the form m * 2**k, m in 4..7
            k = c.bit_length() - 3
            assert c % (1 << k) == 0 and 4 <= c >> k <= 7
    assert got == sorted(got)  # monotone: a longer run never gets a shorter chunk
    assert len(set(got)) < 60  # 4999 run lengths, a few dozen programs
    assert [chunk_length(i) for i in (9, 29, 30, 32, 33, 100, 1000)] == [10, 32, 32, 32, 40, 112, 1024]


def test_a_run_in_the_same_bucket_compiles_no_chain_program_and_draws_alike(monkeypatch):
    # An empty program cache: the first run compiles its chain program here, whatever ran before.
    fresh_program_cache(monkeypatch)
    p = preset("banana-2d", n=500, key=jax.random.key(0))
    model, data, theta0 = p.model, np.asarray(p.data), np.asarray(p.theta_true)

    def run(iterations):
        return dpmcmc.sample(model, data, "dp-penalty", chains=2, iterations=iterations,
                             delta=1e-5, key=jax.random.key(3), progress=False, theta0=theta0,
                             **PENALTY)

    # The chain program is the driver's ``run``; slicing the last chunk's rows off is host work.
    # The counter sees a new program: the first run compiles it. (That 33 iterations fall in
    # the next bucket, 40, is test_chunk_length_buckets'.)
    with CompileCounter() as first:
        long = run(30)  # chunk_length(30) == 32
    assert "run" in first.traced, first.traced
    with CompileCounter() as same_bucket:
        short = run(29)  # chunk_length(29) == 32: the same program
    assert "run" not in same_bucket.traced, same_bucket.traced
    assert short.samples.shape[1] == 29
    np.testing.assert_array_equal(short.samples, long.samples[:, :29])
    assert np.ptp(long.samples[0, :, 0]) > 0  # the chains move
