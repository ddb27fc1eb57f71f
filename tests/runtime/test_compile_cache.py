"""Compile once: repeated ``dpmcmc.sample`` calls reuse their program; a new process loads it.

- In one process, a second call with the same model object and parameters on new data of the
  same shape compiles nothing (counted with JAX's compile-time events) and gives the draws of a
  fresh compilation; other parameters get their own program.
- JAX's persistent cache is turned on in a user cache directory at the first sampling call
  (opt-out by environment or ``dpmcmc.set_compile_cache``; a user's own JAX cache setting is
  left alone), a new process loads the chain program from it, and no file it writes holds a
  value of the data: the files are decompressed and searched for the data's bytes, and the same
  search finds them in a program that closes over the data (so it can fail).
- With a progress bar, compiling is shown as its own phase before the sampling bar.
"""
from __future__ import annotations

import json
import os
import traceback

import jax
import numpy as np
import pytest

import dpmcmc
from dpmcmc.runtime import compile_cache as _compile_cache
from dpmcmc.models import preset
from dpmcmc.testing import fresh_program_cache, reset_compile_cache_settings

from host_devices import run_module

PENALTY = dict(tau=0.17, proposal_std=0.06, clip=0.15)
SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


class CompileCounter:
    """Counts XLA compilations, and traces of sampler code (the chain driver or a kernel),
    through JAX's monitoring events. (``dpmcmc.sample`` traces the model's functions on every
    call, by design: the model contract is checked on shapes before anything runs.)"""

    def __init__(self):
        self.compiles = self.traces = 0
        self.traced = []  # the names of all functions traced for compilation

    def __call__(self, name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            self.compiles += 1
        elif name == "/jax/core/compile/jaxpr_trace_duration":
            self.traced.append(kwargs.get("fun_name"))
            where = [f.filename for f in traceback.extract_stack()]
            self.traces += any(os.path.join("dpmcmc", "samplers") in w for w in where)

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self)


@pytest.fixture(scope="module")
def banana():
    p = preset("banana-2d", n=500, key=jax.random.key(0))
    return p.model, np.asarray(p.data), np.asarray(p.theta_true)


def test_repeated_call_on_new_data_compiles_nothing(banana, capsys, monkeypatch):
    """A second call on new data of the same shape compiles and traces nothing; the progress
    display shows compiling apart from (and before) sampling, and only when it compiles."""
    # An empty program cache: the first call compiles here, whatever ran before.
    fresh_program_cache(monkeypatch)
    model, data, theta0 = banana

    def run(d, iterations, key):
        # With a progress bar the driver runs chunks of about iterations / 20, each compiled at
        # chunk_length of that: 200 iterations in chunks of chunk_length(10) == 10.
        return dpmcmc.sample(model, d, "dp-penalty", chains=2, iterations=iterations,
                             delta=1e-5, key=jax.random.key(key), progress=True, theta0=theta0,
                             **PENALTY)

    first = run(data, 200, 1)
    out = capsys.readouterr().out
    assert "compil" in out and "sampling" in out
    assert out.index("compil") < out.index("sampling")
    new_data = data[::-1] + 30.0  # same shape, other values
    with CompileCounter() as count:
        again = run(new_data, 200, 2)
    assert count.compiles == 0 and count.traces == 0, (count.compiles, count.traces)
    # Compiled already: the second call shows the sampling bar only.
    out = capsys.readouterr().out
    assert "sampling" in out and "compil" not in out
    # The program reads the data it is given: the same key on the new data gives other draws
    # than on the first data (the data are an argument, not a constant of the cached program).
    same_key = run(new_data, 200, 1)
    assert not np.array_equal(same_key.samples, first.samples)
    assert np.ptp(first.samples[0, :, 0]) > 0  # the chains move
    assert again.samples.shape == first.samples.shape
    # Another run length whose chunks fall in the same bucket (chunk_length(9) == 10, at most a
    # quarter of a chunk skipped; test_chunk_buckets.py) compiles no chain program and gives
    # the same draws up to its length (each iteration's key is the chain's key folded with t).
    with CompileCounter() as bucket:
        short = run(data, 180, 1)
    assert "run" not in bucket.traced, bucket.traced
    assert short.samples.shape[1] == 180
    np.testing.assert_array_equal(short.samples, first.samples[:, :180])


def _gauss_model(scale, offset=0.0):
    import jax.numpy as jnp

    def log_likelihood(theta, x):
        return -0.5 * jnp.sum(((x - theta) / scale) ** 2) + offset

    return dpmcmc.Model(log_likelihood=log_likelihood, log_prior=lambda t: -0.5 * jnp.sum(t ** 2),
                        dim=2, record_shape=(2,))


def test_a_model_built_again_alike_reuses_the_program_and_another_does_not():
    """Programs are keyed on what a model computes, not on the model object: the same
    constructor with the same hyperparameters (new closures) compiles nothing, while another
    closure constant (a scale, or an offset the data-free key must also tell apart) compiles
    its own program and draws what a fresh compilation draws."""
    data = np.random.default_rng(0).normal(size=(300, 2))
    kw = dict(chains=2, iterations=25, delta=1e-5, progress=False, theta0=np.zeros(2), **PENALTY)
    first = dpmcmc.sample(_gauss_model(1.0), data, "dp-penalty", key=jax.random.key(5), **kw)
    with CompileCounter() as count:
        again = dpmcmc.sample(_gauss_model(1.0), data, "dp-penalty", key=jax.random.key(5), **kw)
    assert count.compiles == 0 and count.traces == 0, (count.compiles, count.traces)
    np.testing.assert_array_equal(again.samples, first.samples)
    fresh_draws = []
    for other in (_gauss_model(2.0), _gauss_model(1.0, offset=1.0)):
        with CompileCounter() as count:
            got = dpmcmc.sample(other, data, "dp-penalty", key=jax.random.key(5), **kw)
        assert count.compiles > 0
        _compile_cache.PROGRAMS.clear()
        fresh = dpmcmc.sample(other, data, "dp-penalty", key=jax.random.key(5), **kw)
        np.testing.assert_array_equal(got.samples, fresh.samples)
        fresh_draws.append(fresh.samples)
    # The scale changes the log-likelihood ratios the chain accepts on: other draws (those of
    # the fresh compilation of _gauss_model(2.0) above, with the same key).
    assert not np.array_equal(fresh_draws[0], first.samples)


_GLOBAL_SCALE = 1.0


def _reads_a_global(theta, x):
    return -0.5 * ((x - theta) / _GLOBAL_SCALE) ** 2


def test_model_key_tells_apart_what_a_trace_would():
    """model_key equals for models that trace alike and differs wherever a trace would differ:
    a closure constant's value or type (``x ** 2`` and ``x ** 2.0`` are other primitives), a
    module-level constant changed between builds, another code object, the temperature or the
    record shape; an array constant over the size limit is keyed by identity."""
    import jax.numpy as jnp

    from dpmcmc.runtime.compile_cache import model_key

    def make(c, temperature=1.0, record_shape=None, big=None):
        def ll(theta, x):
            return -((x - theta) ** c) + (0.0 if big is None else big[0])
        return dpmcmc.Model(ll, lambda t: -jnp.sum(t ** 2), dim=1, temperature=temperature,
                            record_shape=record_shape)

    assert model_key(make(2.0)) == model_key(make(2.0))
    assert hash(model_key(make(2.0))) == hash(model_key(make(2.0)))
    for other in (make(2), make(3.0), make(-0.0), make(2.0, temperature=0.5),
                  make(2.0, record_shape=(1,))):
        assert model_key(other) != model_key(make(2.0))
    assert model_key(make(0.0)) != model_key(make(-0.0))
    small = np.ones(4)
    assert model_key(make(2.0, big=small)) == model_key(make(2.0, big=small.copy()))
    large = np.ones((1 << 21) + 1)  # over 16 MiB: by identity
    assert model_key(make(2.0, big=large)) == model_key(make(2.0, big=large))
    assert model_key(make(2.0, big=large)) != model_key(make(2.0, big=large.copy()))
    table = list(range(5000))  # a long container: by identity too
    assert model_key(make(2.0, big=table)) == model_key(make(2.0, big=table))
    assert model_key(make(2.0, big=table)) != model_key(make(2.0, big=list(table)))
    lp = lambda t: -jnp.sum(t ** 2)  # noqa: E731
    first = model_key(dpmcmc.Model(_reads_a_global, lp, dim=1))
    global _GLOBAL_SCALE
    try:
        _GLOBAL_SCALE = 2.0
        assert model_key(dpmcmc.Model(_reads_a_global, lp, dim=1)) != first
    finally:
        _GLOBAL_SCALE = 1.0
    assert model_key(dpmcmc.Model(_reads_a_global, lp, dim=1)) == first
    # Same code and constants but another function object of another def: other code object.
    def ll2(theta, x):
        return -((x - theta) ** 2.0)
    assert model_key(dpmcmc.Model(ll2, lp, dim=1)) != model_key(make(2.0))


# slow (suite budget): a hit and a miss each give the draws of a fresh compilation in the default
# run too (test_a_model_built_again_alike_reuses_the_program_and_another_does_not), and a hit on
# new data compiles nothing (test_repeated_call_on_new_data_compiles_nothing); this one adds a hit
# after another program of the same sampler was cached.
@pytest.mark.slow
def test_cached_programs_give_the_draws_of_a_fresh_compilation(banana):
    """A cache hit must run the program of ITS parameters and data: the draws of every call
    equal those after the cache is emptied, whichever programs were cached before."""
    model, data, theta0 = banana
    runs = [("dp-penalty", dict(PENALTY)), ("dp-penalty", dict(PENALTY, proposal_std=0.1)),
            ("dp-penalty", dict(PENALTY)), ("rwmh", dict(proposal_std=0.06))]
    # From an empty cache: the first run's draws are those of a fresh compilation; the later
    # ones run with the programs of the runs before them cached (the third one's a hit).
    _compile_cache.PROGRAMS.clear()
    warm = []
    for algorithm, params in runs:
        delta = 1e-5 if algorithm != "rwmh" else None
        warm.append(dpmcmc.sample(model, data, algorithm, chains=2, iterations=20, delta=delta,
                                  key=jax.random.key(3), progress=False, theta0=theta0,
                                  **params).samples)
    # The third run is the first one again (a cache hit after another program): both are
    # compared with the one fresh compilation of their program, the first run's.
    fresh = {(runs[0][0], tuple(sorted(runs[0][1].items()))): warm[0]}
    for (algorithm, params), drawn in zip(runs, warm):
        run_id = (algorithm, tuple(sorted(params.items())))
        if run_id not in fresh:
            _compile_cache.PROGRAMS.clear()
            delta = 1e-5 if algorithm != "rwmh" else None
            fresh[run_id] = dpmcmc.sample(model, data, algorithm, chains=2, iterations=20,
                                          delta=delta, key=jax.random.key(3), progress=False,
                                          theta0=theta0, **params).samples
        np.testing.assert_array_equal(drawn, fresh[run_id])
    assert len(fresh) == 3
    assert not np.array_equal(warm[0], warm[1])  # another proposal scale, another program


def test_persistent_cache_switches(tmp_path, monkeypatch):
    """Opt-out by environment or switch, the XDG location, and a user's JAX setting left alone."""
    from jax.experimental.compilation_cache import compilation_cache

    assert jax.config.jax_compilation_cache_dir is None  # the suite runs without one
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _compile_cache.persistent_cache_dir() == str(tmp_path / "xdg" / "dpmcmc" / "jax")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # ignored, as the XDG spec says
    assert _compile_cache.persistent_cache_dir() == os.path.join(
        os.path.expanduser("~"), ".cache", "dpmcmc", "jax")
    monkeypatch.setenv("DPMCMC_NO_COMPILE_CACHE", "1")
    assert _compile_cache.ensure_persistent_cache() is None
    assert jax.config.jax_compilation_cache_dir is None
    try:
        dpmcmc.set_compile_cache(True, directory=tmp_path / "mine")  # overrides the environment
        assert _compile_cache.ensure_persistent_cache() == str(tmp_path / "mine")
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")
        assert (os.stat(tmp_path / "mine").st_mode & 0o777) == 0o700
        dpmcmc.set_compile_cache(False)
        assert jax.config.jax_compilation_cache_dir is None
        assert _compile_cache.ensure_persistent_cache() is None
        # The user's own cache directory is theirs: dpmcmc neither moves nor turns it off.
        dpmcmc.set_compile_cache(True)
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "users"))
        assert _compile_cache.ensure_persistent_cache() == str(tmp_path / "users")
        dpmcmc.set_compile_cache(False)
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "users")
        with pytest.raises(TypeError, match="enabled"):
            dpmcmc.set_compile_cache("yes")
    finally:
        reset_compile_cache_settings()
        jax.config.update("jax_compilation_cache_dir", None)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        compilation_cache.reset_cache()


def _child(phase, tmp_path):
    """A fresh process with the persistent cache in a temporary XDG_CACHE_HOME, running
    ``phase`` of tests/children/compile_cache.py; the dict it printed."""
    env = dict(XDG_CACHE_HOME=str(tmp_path / "xdg"), DATA_FILE=str(tmp_path / "data.npy"),
               PYTHONPATH=os.pathsep.join([os.path.abspath(SRC), os.environ.get("PYTHONPATH", "")]),
               JAX_ENABLE_X64="1")
    drop = ("DPMCMC_NO_COMPILE_CACHE", "JAX_COMPILATION_CACHE_DIR")
    proc = run_module("compile_cache", phase, env=env, drop=drop)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def _leaks(blob: bytes, data: np.ndarray) -> int:
    """How many records of ``data`` appear in ``blob``, as float64 values or as float32 pairs
    (the gradient copy, row- or column-major): 8-byte patterns, never found by chance."""
    found = 0
    for i in range(0, data.shape[0], 7):
        pats = [data[i, 0].tobytes(), data[i, 1].tobytes(),
                data[i].astype(np.float32).tobytes()]
        if i + 1 < data.shape[0]:
            pats.append(data[i:i + 2, 0].astype(np.float32).tobytes())
        found += any(p in blob for p in pats)
    return found


def _check_written(first, tmp_path, run_compiles):
    """The chain programs were written to the cache directory and no file holds the data; a
    closure over the data is found by the same search. Returns the sampling files."""
    data = np.load(tmp_path / "data.npy")
    sampling = {k: bytes.fromhex(v) for k, v in first["sampling_files"].items()}
    # The chain programs were written to the user cache directory ...
    assert first["run_compiles"] == run_compiles and len(sampling) >= run_compiles
    assert all(k.startswith(str(tmp_path / "xdg" / "dpmcmc" / "jax")) for k in sampling)
    # ... and none of the files holds a record of the data.
    assert sum(_leaks(blob, data) for blob in sampling.values()) == 0
    # The search can fail: a program closing over the data is written with the data inside.
    closure = [bytes.fromhex(v) for k, v in first["all_files"].items() if k not in sampling]
    assert closure and max(_leaks(blob, data) for blob in closure) > 10
    return sampling


def test_persistent_cache_holds_no_data_and_serves_a_new_process(tmp_path):
    first = _child("write", tmp_path)
    _check_written(first, tmp_path, run_compiles=1)
    # A new process loads the dp-penalty chain program instead of compiling it.
    second = _child("read", tmp_path)
    assert second["run_hits"] == 1, second["log"]
    np.testing.assert_array_equal(second["samples"], first["samples"])


# slow: the dp-hmc chain program's file is the executable whose optimised HLO
# test_driver_data_argument.py::test_compiled_run_holds_no_data_constant[dp-hmc] finds free of
# any data-sized constant (its float32 gradient copy an entry parameter); the default test above
# searches the cache files of a dp-penalty run.
@pytest.mark.slow
def test_persistent_cache_holds_no_gradient_copy_of_the_data(tmp_path):
    """The dp-hmc run's cache files hold no record of the data, as float64 values or in its
    float32 gradient copy (row- or column-major)."""
    _check_written(_child("write-hmc", tmp_path), tmp_path, run_compiles=2)
