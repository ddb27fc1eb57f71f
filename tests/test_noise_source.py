"""The privacy-noise source: carried by the kernel, float64 whatever the user's JAX settings.

* Two runs traced at the same time in two threads (one secure and one not, or two secure runs
  under different secrets) each draw exactly their own noise: the draws equal those of the same
  run made alone, and the executions of the secure generator, counted per secret, equal the
  releases the accountant charges each run. The threads are made to trace in lockstep (the
  model's log-likelihood meets the other thread at trace time), which is where process-global
  trace-time flags crossed over (the old ``_SECURE`` flag: UnexpectedTracerError, or noise from
  the public key). Each run has its own log-likelihood function: JAX caches the trace of a
  function it has seen, and a second trace of the same function at the same shapes waits for
  the first, which would turn the rendezvous into a timeout. Tiny runs (12 rows, 2 iterations,
  1 chain) keep each test to a few seconds.
* With ``jax_enable_x64`` off (the session's x64-off child process, since conftest turns it on) the released noisy
  statistics are float64 and their tail beyond 5.3σ has the normal rate, and ``dpmcmc.sample``
  runs and leaves the user's setting off.
* The default key carries at least 128 bits drawn from ``secrets``.
"""
from __future__ import annotations

import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpmcmc
from dpmcmc import accounting
from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS
from dpmcmc.secure import secure_key

from api_params import DIM, count_secure_draws, gaussian_data, valid_params

ITERATIONS = 2
CHAINS = 1
ROWS = 12


class _Lockstep:
    """Trace-time rendezvous of two threads: every trace of the log-likelihood in one thread
    waits for a trace in the other, so the two runs are traced together.

    ``pairs`` counts the rendezvous that happened: a test asserts there was at least one, so it
    cannot pass by the two runs having been traced one after the other. Both runs of a test
    trace the log-likelihood equally often, so no wait runs into the timeout; it is generous so
    that a loaded machine cannot break the first rendezvous."""

    def __init__(self):
        self.active = False
        self.pairs = 0
        self.barrier = threading.Barrier(2, timeout=10.0, action=self._paired)

    def _paired(self):
        self.pairs += 1

    def meet(self):
        if self.active:
            try:
                self.barrier.wait()
            except threading.BrokenBarrierError:
                pass  # the other thread has no trace left to pair with: go on alone


def _model(lockstep: _Lockstep) -> Model:
    def loglik(th, x):
        lockstep.meet()  # Python: runs while JAX traces, never at run time
        return -0.5 * jnp.sum((x - th) ** 2)

    return Model(loglik, lambda th: -0.5 * jnp.sum(th ** 2) / 100.0, DIM, name="lockstep-gauss")


def _params(algorithm):
    params = valid_params(algorithm)
    if "batch_size" in params:
        params["batch_size"] = 4  # of the ROWS rows
    return params


def _run(lockstep, algorithm, key_seed, secure):
    """One run with a fresh log-likelihood function (see the module docstring)."""
    return np.asarray(dpmcmc.sample(
        _model(lockstep), gaussian_data(ROWS), algorithm, delta=1e-3, iterations=ITERATIONS,
        chains=CHAINS, key=jax.random.key(key_seed), progress=False, secure=secure,
        **_params(algorithm)).samples)


def _concurrently(lockstep, jobs):
    out, errors = [None] * len(jobs), []

    def work(i, job):
        try:
            out[i] = job()
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, job)) for i, job in enumerate(jobs)]
    lockstep.active = True
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        lockstep.active = False
    if errors:
        raise errors[0]
    assert lockstep.pairs >= 1, "the two runs were never traced at the same time"
    return out


def _charged(algorithm):
    spec = ALGORITHMS[algorithm]
    params = spec.prepare(_params(algorithm), _model(_Lockstep()), ROWS)
    return sum(r.per_iteration for r in accounting.releases(algorithm, ROWS,
                                                            **spec.accounting_params(params)))


@pytest.mark.parametrize("algorithm", ["dp-penalty", "minibatch-penalty"])
def test_two_secure_runs_in_threads_draw_each_their_own_noise(algorithm, monkeypatch):
    lockstep = _Lockstep()
    s1, s2 = secure_key(101), secure_key(202)
    alone = [_run(lockstep, algorithm, 1, s1), _run(lockstep, algorithm, 2, s2)]
    counts = count_secure_draws(monkeypatch)
    together = _concurrently(lockstep, [lambda: _run(lockstep, algorithm, 1, s1),
                                        lambda: _run(lockstep, algorithm, 2, s2)])
    jax.effects_barrier()
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)
    # Each run executes exactly its charged releases under its own secret (per chain).
    want = CHAINS * ITERATIONS * _charged(algorithm)
    words = {int(np.asarray(s1.words)[0]), int(np.asarray(s2.words)[0])}
    assert dict(counts) == {w: want for w in words}


def test_secure_and_default_runs_in_threads_keep_their_modes(monkeypatch):
    lockstep = _Lockstep()
    secret = secure_key(7)
    secure_alone = _run(lockstep, "dp-penalty", 3, secret)
    public_alone = _run(lockstep, "dp-penalty", 4, False)
    public_same_key = _run(lockstep, "dp-penalty", 3, False)
    counts = count_secure_draws(monkeypatch)
    secure_both, public_both = _concurrently(
        lockstep, [lambda: _run(lockstep, "dp-penalty", 3, secret),
                   lambda: _run(lockstep, "dp-penalty", 4, False)])
    jax.effects_barrier()
    np.testing.assert_array_equal(secure_both, secure_alone)
    np.testing.assert_array_equal(public_both, public_alone)
    # The secure run's noise is not the one its public JAX key gives (the chains move, so the
    # draws differ once any noisy acceptance does).
    assert not np.array_equal(secure_both, public_same_key)
    assert dict(counts) == {int(np.asarray(secret.words)[0]):
                            CHAINS * ITERATIONS * _charged("dp-penalty")}


# ---------------------------------------------------------------- float64 with x64 off

# Run by the session's shared child with JAX_ENABLE_X64=0 (conftest.x64_off_results), which
# compiles with most optimisations off like the suite: the 10^8 draws are compiled with XLA's
# optimisations on.
X64_OFF_CHILD = textwrap.dedent("""
    import json, math
    import jax, jax.numpy as jnp, numpy as np
    assert not jax.config.jax_enable_x64
    import dpmcmc
    from dpmcmc.models.base import Model
    from dpmcmc.samplers import ALGORITHMS
    from dpmcmc.samplers import run_chains

    out = {}
    model = Model(lambda th, x: -0.5 * jnp.sum((x - th) ** 2), lambda th: 0.0 * jnp.sum(th), 1)
    from dpmcmc.samplers._mechanisms import gaussian_mechanism
    # 10^8 draws through the public mechanism, on a float32 statistic, in 20 releases.
    tail, dtypes = 0, set()
    cheap = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", False)
    with jax.enable_x64(True):
        release = jax.jit(lambda kk: gaussian_mechanism(kk, jnp.zeros(5_000_000, jnp.float32), 1.0))
        for i in range(20):
            z = release(jax.random.key(i))
            dtypes.add(str(z.dtype))
            tail += int(jnp.sum(jnp.abs(z) > 5.3))
    jax.config.update("jax_disable_most_optimizations", cheap)
    out["mechanism_dtype"] = "/".join(sorted(dtypes))
    out["tail"] = tail
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
    print("RESULT" + json.dumps(out))
""")


def test_noise_is_float64_with_x64_off_and_the_setting_is_kept(x64_off_results):
    """In a process started with ``JAX_ENABLE_X64=0``: the released noise is float64 and exceeds
    5.3σ at the normal rate (10^8 draws, P(|Z| > 5.3) = 1.158e-7: 11.6 expected; the float32
    sampler never exceeds about 5.3σ; the bounds [1, 30] hold with probability > 1 − 1e-5 for
    the Poisson count, seeded keys so the outcome is fixed); ``dpmcmc.sample``
    runs; the global setting is still off afterwards; a bare mechanism call outside any x64
    scope is refused rather than drawn in float32."""
    out = x64_off_results[__name__]
    assert "error" not in out, out["error"]
    assert out["mechanism_dtype"] == "float64"
    assert 1 <= out["tail"] <= 30
    assert out["samples_dtype"] == "float64"
    assert out["x64_after"] is False
    assert out["refused"] is True


# ---------------------------------------------------------------- the default key

def test_default_key_holds_128_bits_from_secrets(monkeypatch):
    from dpmcmc import _keys

    drawn = []

    def fake_randbits(k):
        drawn.append(k)
        return 0x9E3779B9 ^ len(drawn)

    monkeypatch.setattr(_keys.secrets, "randbits", fake_randbits)
    key = _keys.resolve_key(None)
    words = np.asarray(jax.random.key_data(key)).ravel()
    assert sum(drawn) >= 128 and words.size * 32 >= 128
    # Every word of the key comes from secrets, none is a constant or derived padding.
    np.testing.assert_array_equal(words, [0x9E3779B9 ^ i for i in range(1, len(drawn) + 1)])
    # The key works as any key: split, fold_in and a draw.
    assert jax.random.normal(jax.random.fold_in(jax.random.split(key)[0], 3)).shape == ()
    # A user's key is used as is (the reproducible path is unchanged).
    user = jax.random.key(4)
    assert _keys.resolve_key(user) is user


def test_default_key_runs_sample_and_differs_per_run():
    # dp-sgld moves at every iteration (no accept step, fresh Langevin and privacy noise), so two
    # runs with fresh OS-entropy keys differ with probability one; a penalty sampler that rejects
    # all of a few proposals from the same start would not show it.
    kw = dict(delta=1e-3, iterations=5, chains=1, progress=False, **valid_params("dp-sgld"))
    from api_params import gaussian_model

    a = dpmcmc.sample(gaussian_model(), gaussian_data(), "dp-sgld", **kw).samples
    b = dpmcmc.sample(gaussian_model(), gaussian_data(), "dp-sgld", **kw).samples
    assert a.shape == (1, 5, DIM) and np.all(np.isfinite(a)) and not np.array_equal(a, b)
