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
  statistics are float64, with the resolution of float64 draws (their tail beyond 5.3σ has the
  normal rate: slow), and ``dpmcmc.sample``
  runs and leaves the user's setting off.
* The default key carries at least 128 bits drawn from ``secrets``.
"""
from __future__ import annotations

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
from dpmcmc.testing import count_secure_draws

from api_params import DIM, gaussian_data, valid_params

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


_ALONE = {}


def _run_alone(algorithm, key_seed, secret_seed):
    """The secure run of ``_run`` with ``secure_key(secret_seed)``, made alone (no rendezvous):
    once per module and XLA optimisation setting, for the tests that compare a threaded run with
    it (test_two_secure_runs_in_threads_draw_each_their_own_noise and
    test_secure_and_default_runs_in_threads_keep_their_modes both use dp-penalty, key 3, secret
    7)."""
    cache = (algorithm, key_seed, secret_seed, jax.config.read("jax_disable_most_optimizations"))
    if cache not in _ALONE:
        _ALONE[cache] = _run(_Lockstep(), algorithm, key_seed, secure_key(secret_seed))
    return _ALONE[cache]


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


# slow: minibatch-penalty's case. The noise source is carried by the kernel the same way for
# every sampler (dp-penalty's case and test_secure_and_default_runs_in_threads_keep_their_modes
# trace two runs in lockstep); minibatch-penalty's secure draws are counted against the
# accountant's releases by test_secure_mode.py::test_every_noise_draw_is_secure[minibatch-penalty].
@pytest.mark.parametrize("algorithm", [
    "dp-penalty", pytest.param("minibatch-penalty", marks=pytest.mark.slow)])
def test_two_secure_runs_in_threads_draw_each_their_own_noise(algorithm, monkeypatch):
    lockstep = _Lockstep()
    s1, s2 = secure_key(7), secure_key(202)
    alone = [_run_alone(algorithm, 3, 7), _run(lockstep, algorithm, 2, s2)]
    counts = count_secure_draws(monkeypatch)
    together = _concurrently(lockstep, [lambda: _run(lockstep, algorithm, 3, s1),
                                        lambda: _run(lockstep, algorithm, 2, s2)])
    jax.effects_barrier()
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)
    # Each run executes exactly its charged releases under its own secret (per chain).
    want = CHAINS * ITERATIONS * _charged(algorithm)
    words = {int(np.asarray(s1.words)[0]), int(np.asarray(s2.words)[0])}
    assert dict(counts) == {w: want for w in words}


@pytest.mark.slow  # threads with their own modes: two secure runs in threads are the default's
def test_secure_and_default_runs_in_threads_keep_their_modes(monkeypatch):
    lockstep = _Lockstep()
    secret = secure_key(7)
    # Both runs with the same JAX key: a secure run drawing from the public key, or the public
    # run from the secret, would give the other's draws.
    secure_alone = _run_alone("dp-penalty", 3, 7)
    public_alone = _run(lockstep, "dp-penalty", 3, False)
    counts = count_secure_draws(monkeypatch)
    secure_both, public_both = _concurrently(
        lockstep, [lambda: _run(lockstep, "dp-penalty", 3, secret),
                   lambda: _run(lockstep, "dp-penalty", 3, False)])
    jax.effects_barrier()
    np.testing.assert_array_equal(secure_both, secure_alone)
    np.testing.assert_array_equal(public_both, public_alone)
    # The secure run's noise is not the one its public JAX key gives (the chains move, so the
    # draws differ once any noisy acceptance does).
    assert not np.array_equal(secure_both, public_alone)
    assert dict(counts) == {int(np.asarray(secret.words)[0]):
                            CHAINS * ITERATIONS * _charged("dp-penalty")}


# ---------------------------------------------------------------- float64 with x64 off

# Run by the session's shared child with JAX_ENABLE_X64=0 (conftest.x64_off_results): the
# float64 resolution of 10^6 draws; the slow function counts the tail beyond 5.3σ of 10^8 draws.
X64_OFF_CHILD = "noise_source:resolution"
X64_OFF_CHILD_SLOW = "noise_source:tail"


def test_noise_is_float64_with_x64_off_and_the_setting_is_kept(x64_off_results):
    """In a process started with ``JAX_ENABLE_X64=0``: the released noise is float64 with the
    resolution of float64 draws; ``dpmcmc.sample`` runs; the global setting is still off
    afterwards; a bare mechanism call outside any x64 scope is refused rather than drawn in
    float32.

    Resolution, on 10^6 draws of one release (seeded key, so the outcome is fixed): (1) none is
    a float32 value (noise drawn in float32 and cast: all 10^6 are; a float64 N(0,1) draw is one
    with probability ~2^-29, 0.002 expected); (2) no value is drawn twice. JAX's float64 normal
    inverts a uniform with 52 mantissa bits: C(10^6, 2) / 2^52 = 1.1e-4 repeated pairs expected.
    A generator whose uniforms have 24 bits or fewer (float32 uniforms, whatever the arithmetic
    after: the float32 sampler never exceeds about 5.3σ) repeats C(10^6, 2) / 2^24 ≈ 3·10^4
    values or more (57476 measured for JAX's float32 uniform); even 32-bit uniforms repeat ~116 (131
    measured), whose truncation near 6.2σ the 10^8-draw tail count of
    test_noise_tail_beyond_5_3_sigma_with_x64_off (slow) cannot see."""
    out = x64_off_results[__name__]
    assert "error" not in out, out["error"]
    assert out["mechanism_dtype"] == "float64"
    assert out["float32_values"] == 0
    assert out["repeats"] == 0
    assert out["samples_dtype"] == "float64"
    assert out["x64_after"] is False
    assert out["refused"] is True


# slow: the float64 resolution of the draws, the direct cause of a normal tail, is checked on
# 10^6 draws by test_noise_is_float64_with_x64_off_and_the_setting_is_kept (which any
# float32-based generator fails by ~3·10^4 repeated values); this counts the tail itself.
@pytest.mark.slow
def test_noise_tail_beyond_5_3_sigma_with_x64_off(x64_off_results):
    """With x64 off, the released noise exceeds 5.3σ at the normal rate (10^8 draws, P(|Z| >
    5.3) = 1.158e-7: 11.6 expected; the float32 sampler never exceeds about 5.3σ; the bounds
    [1, 30] hold with probability > 1 − 1e-5 for the Poisson count, seeded keys so the outcome
    is fixed)."""
    out = x64_off_results[__name__ + ":slow"]
    assert "error" not in out, out["error"]
    assert out["mechanism_dtype"] == "float64"
    assert 1 <= out["tail"] <= 30
    assert out["x64_after"] is False


# ---------------------------------------------------------------- the default key

def test_default_key_holds_128_bits_from_secrets(monkeypatch):
    import secrets

    from dpmcmc.testing import resolve_key

    drawn = []

    def fake_randbits(k):
        drawn.append(k)
        return 0x9E3779B9 ^ len(drawn)

    monkeypatch.setattr(secrets, "randbits", fake_randbits)
    key = resolve_key(None)
    words = np.asarray(jax.random.key_data(key)).ravel()
    assert sum(drawn) >= 128 and words.size * 32 >= 128
    # Every word of the key comes from secrets, none is a constant or derived padding.
    np.testing.assert_array_equal(words, [0x9E3779B9 ^ i for i in range(1, len(drawn) + 1)])
    # The key works as any key: split, fold_in and a draw.
    assert jax.random.normal(jax.random.fold_in(jax.random.split(key)[0], 3)).shape == ()
    # A user's key is used as is (the reproducible path is unchanged).
    user = jax.random.key(4)
    assert resolve_key(user) is user


def test_default_key_runs_sample_and_differs_per_run(monkeypatch):
    # Two runs without a key hand the chain driver two different keys (the key fixes every noise
    # draw and the chains' randomness, so their draws differ with probability one), each from
    # the OS-entropy key of test_default_key_holds_128_bits_from_secrets. The driver is stopped
    # before it compiles anything: a run with the default key through to its draws is
    # tests/runtime/test_checkpoint.py's interrupted run (key=None).
    from dpmcmc.testing import replace_run_chains

    from api_params import gaussian_model

    class Stop(Exception):
        pass

    keys = []

    def driver(kernel, theta0, key, num_iterations, **kwargs):
        keys.append(np.asarray(jax.random.key_data(key)))
        raise Stop

    replace_run_chains(monkeypatch, driver)
    kw = dict(delta=1e-3, iterations=5, chains=1, progress=False, **valid_params("dp-sgld"))
    for _ in range(2):
        with pytest.raises(Stop):
            dpmcmc.sample(gaussian_model(), gaussian_data(), "dp-sgld", **kw)
    assert len(keys) == 2 and not np.array_equal(keys[0], keys[1])
