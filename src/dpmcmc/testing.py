"""The test API: what tests of dpmcmc may reach beneath the public surface, in one place.

dpmcmc's own tests use it, and so may a user's tests of a model, a sampler or an audit. Nothing
here belongs in a real run: the deliberately wrong pieces release data without the noise they
should add, and the guards replace library functions for the duration of one test.

Deliberately wrong pieces (a test shows it has power by swapping one in; pass them to an
algorithm's tapped core, e.g. ``tapped_dp_penalty(..., accept=uncorrected_accept).kernel()``):

- :func:`uncorrected_accept` — the penalty test without its ``−σ²/2`` correction;
- :func:`uncorrected_statistic` — the minibatch penalty statistic without its correction;
- :func:`noiseless_mechanism` — a "release" of the exact value (DP Barker ``mechanism=``);
- :func:`logistic_correction` — an exact logistic draw for DP Barker's correction.

Keys and secure randomness:

- :func:`resolve_key` — the key a run uses (``None``: a fresh one from OS entropy);
- :func:`os_entropy_key` — a fresh 128-bit key from OS entropy;
- :func:`chacha20_block`, :func:`chacha20_words` — the ChaCha20 block function (RFC 8439) and
  keystream that secure mode draws its noise from, for checks against the RFC's vectors.

Guards (each takes pytest's ``monkeypatch``, or anything with its ``setattr(obj, name, value)``,
and lasts until that fixture undoes it):

- :func:`forbid_noise` — running the chains, a private start or drawing noise raises
  :class:`NoiseDrawn`, so a test of an input error fails if the error comes after the run
  started;
- :func:`replace_run_chains` — the chain driver that ``dpmcmc.sample`` calls, replaced;
- :func:`forbid_chunk_runs` — any compiled chunk program that runs raises (a finished
  checkpoint must not run again);
- :func:`forbid_audit_runner` — :func:`dpmcmc.audit.audit` raises if it builds its runner (a
  refused audit must be refused before any simulation);
- :func:`count_os_entropy_keys` — counts the keys drawn from OS entropy;
- :func:`data_blind_mechanism` — every Gaussian release becomes N(0, 1) noise, whatever the data;
- :func:`count_secure_draws` — counts the secure normal draws executed, per run secret;
- :func:`fresh_program_cache` — dpmcmc's in-process program cache emptied for the test (needed
  wherever a patch changes what a trace bakes in).

Resets: :func:`reset_compile_cache_settings` (what :func:`dpmcmc.set_compile_cache` set) and
:func:`clear_correction_cache` (DP Barker's per-``C`` correction fits).

Programs: :func:`driver_programs` — the initialisation and chunk programs the chain driver
compiles for a kernel, traced to jaxprs, for tests that inspect what XLA will run.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, Callable

import jax
import jax.numpy as jnp

from dpmcmc._chacha import chacha20_block, chacha20_words
from dpmcmc._keys import os_entropy_key, resolve_key
from dpmcmc.audit._variants import (logistic_correction, noiseless_mechanism, uncorrected_accept,
                                    uncorrected_statistic)

__all__ = [
    "uncorrected_accept", "uncorrected_statistic", "noiseless_mechanism", "logistic_correction",
    "resolve_key", "os_entropy_key", "chacha20_block", "chacha20_words",
    "NoiseDrawn", "forbid_noise", "replace_run_chains", "forbid_chunk_runs",
    "forbid_audit_runner", "count_os_entropy_keys", "data_blind_mechanism", "count_secure_draws",
    "fresh_program_cache", "reset_compile_cache_settings", "clear_correction_cache",
    "driver_programs",
]


class NoiseDrawn(AssertionError):
    """Raised by the stand-ins of :func:`forbid_noise`: the sampler ran, so noise could be drawn."""


def forbid_noise(monkeypatch: Any) -> None:
    """Replace the chain driver, the private starts and the noise functions by stand-ins that
    raise :class:`NoiseDrawn`.

    Input errors must come before any run or noise draw; a test that expects one uses this so
    that a late error shows up as :class:`NoiseDrawn` instead of passing. The starts are
    replaced whole: their compiled programs are cached across runs (in
    ``compile_cache.PROGRAMS`` and the Newton start's own cache), and a program traced before
    the patch would draw its noise without calling the patched functions.
    """
    from dpmcmc.kernels import mechanisms
    from dpmcmc.runtime import driver
    from dpmcmc.samplers import private_init, private_newton

    def fail(*args, **kwargs):
        raise NoiseDrawn("the sampler ran (noise could be drawn) before the input was rejected")

    monkeypatch.setattr(driver, "run_chains", fail)
    monkeypatch.setattr(private_init, "private_start", fail)
    monkeypatch.setattr(private_newton, "private_newton", fail)
    monkeypatch.setattr(mechanisms, "noise_normal", fail)
    monkeypatch.setattr(mechanisms, "gaussian_mechanism", fail)


def replace_run_chains(monkeypatch: Any, run_chains: Callable) -> Callable:
    """Make ``dpmcmc.sample`` call ``run_chains`` (same signature as
    :func:`dpmcmc.samplers.run_chains`) instead of the driver; returns the real driver, so a test
    can wrap it or put it back with a second call."""
    from dpmcmc.runtime import driver

    real = driver.run_chains
    monkeypatch.setattr(driver, "run_chains", run_chains)
    return real


def forbid_chunk_runs(monkeypatch: Any, message: str = "a compiled chunk ran") -> None:
    """Any chunk program the driver compiles from now on raises ``AssertionError(message)`` when
    run; its ``Info`` shape, which a resumed run needs, stays the real one.

    Also empties the program cache (:func:`fresh_program_cache`), so that a program compiled
    before the patch cannot stand in for the failing one."""
    from dpmcmc.runtime import driver

    make_chunk_runner = driver._make_chunk_runner

    def no_runner(*args, **kwargs):
        _, info = make_chunk_runner(*args, **kwargs)

        def run(*a):
            raise AssertionError(message)

        return run, info

    monkeypatch.setattr(driver, "_make_chunk_runner", no_runner)
    fresh_program_cache(monkeypatch)


def forbid_audit_runner(monkeypatch: Any) -> None:
    """:func:`dpmcmc.audit.audit` raises ``AssertionError`` if it gets as far as building the
    runner that simulates its design (so a refusal is shown to come before any simulation)."""
    from dpmcmc.audit import _core

    def no_runner(*args, **kwargs):
        raise AssertionError("the audit built its runner")

    monkeypatch.setattr(_core, "_make_runner", no_runner)


def count_os_entropy_keys(monkeypatch: Any) -> list:
    """Count the keys drawn from OS entropy (``key=None``): returns a list that gains one item
    per key drawn."""
    from dpmcmc import _keys

    calls: list = []
    real = _keys.os_entropy_key

    def counting():
        calls.append(1)
        return real()

    monkeypatch.setattr(_keys, "os_entropy_key", counting)
    return calls


def fresh_program_cache(monkeypatch: Any) -> None:
    """Swap dpmcmc's in-process program cache for an empty one until the test ends.

    Call it where a test patches a library function that a trace bakes in: programs are keyed on
    what the model and the parameters compute, not on the library's code, so a program cached
    before the patch would run without it, and one traced under the patch must not serve a
    later test."""
    from dpmcmc.runtime import compile_cache

    monkeypatch.setattr(compile_cache, "PROGRAMS",
                        compile_cache._LRU(compile_cache.PROGRAMS.maxsize))


def data_blind_mechanism(monkeypatch: Any) -> None:
    """Every Gaussian privacy release becomes N(0, 1) noise from its own key, whatever the data.

    Patched wherever a loaded dpmcmc module holds the mechanism, so the releases of two runs with
    the same key are equal on any data; the program cache is emptied
    (:func:`fresh_program_cache`), so no trace made before or under the patch is reused across
    it. JAX's own trace caches are keyed on the chunk program's function objects, made afresh for
    every program dpmcmc builds."""
    import sys

    from dpmcmc.kernels import mechanisms

    real = mechanisms.gaussian_mechanism

    def blind(key, value, sigma, *args, **kwargs):
        value = jnp.asarray(value)
        return mechanisms.noise_normal(key, value.shape, value.dtype)

    for module in list(sys.modules.values()):
        if (getattr(module, "__name__", "").startswith("dpmcmc.")
                and getattr(module, "gaussian_mechanism", None) is real):
            monkeypatch.setattr(module, "gaussian_mechanism", blind)
    fresh_program_cache(monkeypatch)


def count_secure_draws(monkeypatch: Any) -> "collections.Counter":
    """Count the secure normal draws executed at run time, per run secret (the secret's first
    word): ``sum(counts.values())`` is the total. Call ``jax.effects_barrier()`` before reading
    the counts. Empties the program cache, since a program cached before would not count."""
    from dpmcmc.kernels import mechanisms

    counts: collections.Counter = collections.Counter()
    lock = threading.Lock()  # runs in threads count into the same Counter
    real = mechanisms._secure_standard_normal

    def bump(word, _key_words):
        with lock:
            counts[int(word)] += 1

    def counting(secret, key, shape, dtype, *rest):
        z = real(secret, key, shape, dtype, *rest)
        # The release's JAX key (one per chain) makes the callback run once per chain under vmap.
        key_words = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
        jax.debug.callback(bump, jnp.asarray(secret)[0], key_words, ordered=False)
        return z

    monkeypatch.setattr(mechanisms, "_secure_standard_normal", counting)
    fresh_program_cache(monkeypatch)
    return counts


def reset_compile_cache_settings() -> None:
    """Forget what :func:`dpmcmc.set_compile_cache` set in this process (back to: on unless the
    environment says off, no directory chosen, none set by dpmcmc). JAX's own configuration is
    the caller's to restore."""
    from dpmcmc.runtime import compile_cache

    compile_cache._switch = None
    compile_cache._directory = None
    compile_cache._ours = None


def clear_correction_cache() -> None:
    """Empty DP Barker's per-``C`` cache of correction fits (its warning is issued once per ``C``
    and fit, so a test that expects it starts here)."""
    from dpmcmc.kernels import barker_correction

    barker_correction._cached_mixture.cache_clear()


def driver_programs(build: Any, data: Any, theta0: Any, secure: bool, length: int = 4):
    """The initialisation and chunk programs :func:`dpmcmc.samplers.run_chains` compiles for
    ``build`` (a ``Kernel`` or a builder ``build(noise) -> Kernel``), traced: returns ``(init
    jaxpr, chunk jaxpr)``. ``theta0`` is ``(chains, dim)``; the chunk program is the one the
    driver's program cache holds, of static length ``length``."""
    from dpmcmc.runtime import driver

    build = driver._builder(build)
    with jax.enable_x64(True):
        theta0 = jnp.asarray(theta0)
        chains = theta0.shape[0]
        init = lambda d, th: jax.vmap(build(None).init, in_axes=(0, None))(th, d)  # noqa: E731
        state = jax.eval_shape(init, data, theta0)
        keys = jax.random.split(jax.random.key(1), chains)
        run, _ = driver._make_chunk_runner(build, length, state, keys, secure, data)
        args = (state, keys, jnp.uint32(0), jnp.uint32(length), jnp.zeros(8, jnp.uint32), data)
        return jax.make_jaxpr(init)(data, theta0), run.trace(*args).jaxpr
