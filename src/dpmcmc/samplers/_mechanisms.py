"""The one place where privacy noise is drawn, and the one definition of its scale.

Convention (both papers' reference code, and ``dpmcmc.accounting``): a released statistic is a
sum over the n records of terms each bounded in norm by ``bound`` (a log-likelihood ratio clipped
to ``[-b‖θ−θ'‖, b‖θ−θ'‖]``, or a gradient clipped to norm ``b_g``). Under the substitute
relation its sensitivity is ``2 * bound``, and Gaussian noise of standard deviation

    σ = 2 τ √n · bound

makes one release cost ``μ = sensitivity² / (2 σ²) = 1 / (2 τ² n)`` in the Gaussian (PLD / GDP
style) composition of 000 Thm 2.4 and 001 Thms 6, 12. ``τ`` is the thesis' parametrisation (001
§4.2); the paper's τ (000 §3) equals ours times √n.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator

import jax
import jax.numpy as jnp

Array = Any

__all__ = ["noise_std", "sensitivity", "release_mu", "gaussian_mechanism", "noise_normal",
           "noise_uniform", "noise_permutation"]


def sensitivity(bound: Array) -> Array:
    """L2 sensitivity, under the substitute relation, of a sum of terms each of norm ≤ ``bound``.

    Parameters
    ----------
    bound : float or array
        Per-term bound (``b‖θ−θ'‖`` for log-likelihood ratios, ``b_g`` for gradients).

    Returns
    -------
    float or array
        ``2 * bound``.
    """
    return 2.0 * bound


def noise_std(tau: float, n: int, bound: Array) -> Array:
    """Standard deviation of the Gaussian noise for one release: ``σ = 2 τ √n · bound``.

    The single source of truth for the noise scale of DP penalty and DP-HMC.

    Parameters
    ----------
    tau : float
        Noise parameter τ > 0 (thesis convention: one release costs ``μ = 1/(2 τ² n)``).
    n : int
        Number of records in the data set.
    bound : float or array
        Per-term bound of the released sum (see :func:`sensitivity`).

    Returns
    -------
    float or array
        The noise standard deviation (not the variance).
    """
    return 2.0 * tau * math.sqrt(n) * bound


def release_mu(tau: float, n: int) -> float:
    """The μ charged per release: ``sensitivity(bound)² / (2 noise_std(tau, n, bound)²)``.

    Independent of ``bound``; equals ``1 / (2 τ² n)``.

    Parameters
    ----------
    tau : float
        Noise parameter τ > 0.
    n : int
        Number of records.

    Returns
    -------
    float
        μ of one Gaussian release.
    """
    return 1.0 / (2.0 * tau * tau * n)


def gaussian_mechanism(key: Array, value: Array, sigma: Array) -> Array:
    """Release ``value + N(0, sigma² I)``.

    Parameters
    ----------
    key : PRNG key
        Fresh key for this release (never reused).
    value : array
        The (clipped) statistic to release; its shape and floating dtype are kept.
    sigma : float or array
        Noise standard deviation, broadcast against ``value``; from :func:`noise_std`.

    Returns
    -------
    array
        The noisy statistic.

    Notes
    -----
    The standard normal noise comes from :func:`noise_normal`: ``jax.random.normal(key)`` by
    default, ChaCha20 keyed by a secret 256-bit key in secure mode (see
    :func:`_secure_standard_normal`).
    """
    value = jnp.asarray(value)
    noise = noise_normal(key, value.shape, value.dtype)
    # 1.0 except inside the testing-only _miscalibrate; read at trace time.
    scale = _MISCALIBRATION["noise_scale"]
    if scale != 1.0:
        noise = scale * noise
    return value + jnp.asarray(sigma, dtype=value.dtype) * noise


# ---------------------------------------------------------------- testing-only miscalibration

# Read (at trace time) by gaussian_mechanism and by the clipping rules in _clip. Only
# _miscalibrate changes it; no public function, option or CLI flag reaches it.
_MISCALIBRATION = {"noise_scale": 1.0, "sensitivity_factor": 1.0}


@contextlib.contextmanager
def _miscalibrate(noise_scale: float = 1.0, sensitivity_factor: float = 1.0) -> Iterator[None]:
    """TESTING ONLY: make every private sampler traced inside the block deliberately wrong.

    Exists so that the empirical privacy audit (:mod:`dpmcmc.audit`) can show it has power: a
    sampler built and run inside the block must be flagged. Never use it in a real run.

    Parameters
    ----------
    noise_scale : float, default 1.0
        Multiplies the Gaussian noise that :func:`gaussian_mechanism` draws, while the σ that
        callers report (penalty correction, accountant) stays the claimed one.
    sensitivity_factor : float, default 1.0
        The fraction of the true sensitivity the noise accounts for: clipping (in
        :mod:`dpmcmc.samplers._clip`) uses ``bound / sensitivity_factor`` while the noise is
        still calibrated to ``bound``. ``0.5`` under-counts the sensitivity by a factor 2.

    Notes
    -----
    The settings are Python constants read while JAX traces, so they are baked into whatever is
    compiled inside the block. JAX's compilation caches are cleared on entry and on exit, so no
    function compiled inside leaks the setting out, and none compiled before leaks it in.
    """
    for name, value in (("noise_scale", noise_scale), ("sensitivity_factor", sensitivity_factor)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    saved = dict(_MISCALIBRATION)
    jax.clear_caches()
    _MISCALIBRATION.update(noise_scale=float(noise_scale), sensitivity_factor=float(sensitivity_factor))
    try:
        yield
    finally:
        _MISCALIBRATION.clear()
        _MISCALIBRATION.update(saved)
        jax.clear_caches()


# ---------------------------------------------------------------- privacy-noise generator

def noise_normal(key: Array, shape: tuple = (), dtype: Any = None) -> Array:
    """Standard normal privacy noise of ``shape``: the one generator every mechanism draws from.

    Default mode: ``jax.random.normal(key, shape, dtype)``. Secure mode (``dpmcmc.sample(...,
    secure=True)``, installed at trace time by the driver): ChaCha20 output keyed by the run's
    secret 256-bit key, with ``key`` only as a public input (:func:`_secure_standard_normal`).
    A sampler whose privacy noise is not a single Gaussian (e.g. a correction distribution)
    should build it from this function and :func:`noise_uniform` so that secure mode covers it.

    Parameters
    ----------
    key : PRNG key
        Fresh JAX key for this draw (never reused).
    shape : tuple of int
    dtype : floating dtype, optional
        Default: the canonical float (float64 under x64).

    Returns
    -------
    array of ``shape`` and ``dtype``
    """
    dtype = jnp.dtype(jnp.result_type(float) if dtype is None else dtype)
    secret = _SECURE["secret"]
    if secret is not None:
        return _secure_standard_normal(secret, key, tuple(shape), dtype)
    return jax.random.normal(key, tuple(shape), dtype=dtype)


def noise_uniform(key: Array, shape: tuple = (), dtype: Any = None) -> Array:
    """Uniform privacy noise on [0, 1), secure in secure mode like :func:`noise_normal`.

    Parameters
    ----------
    key : PRNG key
    shape : tuple of int
    dtype : floating dtype, optional

    Returns
    -------
    array of ``shape`` and ``dtype``
    """
    dtype = jnp.dtype(jnp.result_type(float) if dtype is None else dtype)
    secret = _SECURE["secret"]
    if secret is not None:
        from dpmcmc.secure import secure_uniform

        draw_dtype = dtype if dtype in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)) else jnp.float32
        return secure_uniform(_release_key(secret, key), tuple(shape), draw_dtype).astype(dtype)
    return jax.random.uniform(key, tuple(shape), dtype=dtype)


def noise_permutation(key: Array, n: int) -> Array:
    """A uniformly random permutation of ``0..n-1`` that secure mode keeps secret.

    For secret minibatch selection (privacy amplification by subsampling assumes the adversary
    cannot tell which records were used): ``jax.random.permutation(key, n)`` by default,
    :func:`dpmcmc.secure.secure_permutation` under the run's secret in secure mode.

    Parameters
    ----------
    key : PRNG key
    n : int
        Static length.

    Returns
    -------
    int array (n,)
    """
    secret = _SECURE["secret"]
    if secret is not None:
        from dpmcmc.secure import secure_permutation

        return secure_permutation(_release_key(secret, key), int(n))
    return jax.random.permutation(key, int(n))


# ---------------------------------------------------------------- secure mode

# Trace-time state of secure mode, set only by the chain driver (``run_chains(...,
# secure_secret=...)``) while it traces a run: the run's secret ChaCha20 key (uint32[8], a
# tracer of an argument of the compiled run, so the secret is never baked into a compiled
# program) and the chain index and iteration the traced step belongs to.
_SECURE: dict = {"secret": None, "chain": None, "iteration": None}

# Domain-separation tag of the per-(chain, iteration) key derivation: ASCII "dpnz".
_NOISE_TAG = int.from_bytes(b"dpnz", "little")


@contextlib.contextmanager
def _secure_noise(secret: Array) -> Iterator[None]:
    """Trace-time: every privacy-noise draw traced inside the block uses ChaCha20 keyed by ``secret``.

    Parameters
    ----------
    secret : uint32 array of shape (8,)
        The run's 256-bit key (concrete or traced).
    """
    secret = jnp.asarray(secret)
    if secret.shape != (8,) or secret.dtype != jnp.uint32:
        raise ValueError(f"secret must be uint32[8] (256 bits), got {secret.dtype}{list(secret.shape)}")
    saved = dict(_SECURE)
    _SECURE.update(secret=secret, chain=None, iteration=None)
    try:
        yield
    finally:
        _SECURE.clear()
        _SECURE.update(saved)


@contextlib.contextmanager
def _noise_position(chain: Array, iteration: Array) -> Iterator[None]:
    """Trace-time: the noise traced inside belongs to ``(chain, iteration)`` (uint32 scalars)."""
    saved = dict(_SECURE)
    _SECURE.update(chain=chain, iteration=iteration)
    try:
        yield
    finally:
        _SECURE.clear()
        _SECURE.update(saved)


def _key_words(key: Array) -> Array:
    """The raw uint32 words of a JAX key (typed or legacy), flattened."""
    key = jnp.asarray(key) if not hasattr(key, "dtype") else key
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return jnp.asarray(key).astype(jnp.uint32).reshape(-1)


def _release_key(secret: Array, key: Array):
    """The per-release ChaCha20 key: a PRF of public inputs under the secret run key.

    Two evaluations of ChaCha20 (RFC 8439 block function, first eight output words as the next
    key):

    1. ``k1 = ChaCha20(secret; counter = iteration, nonce = ("dpnz", chain, 0))``: one key per
       (chain, iteration) of the run; (0, 0) outside the driver.
    2. ``k2 = ChaCha20(k1; counter = g, nonce = words 3g..3g+2 of the JAX key)`` for each group
       ``g`` of three raw words of ``key`` (one group for the default threefry key of two words;
       missing words are zero).

    The noise is then drawn from ``k2``'s stream (:func:`dpmcmc.secure.secure_normal`).

    Notes
    -----
    Security. ChaCha20 under a secret uniformly random key is a pseudorandom function of
    (counter, nonce), so each k2 is indistinguishable from an independent uniform key for anyone
    who knows every public input — the JAX run key included. Leaking the JAX key (a published
    seed) therefore reveals the proposals and accept/reject uniforms but not the privacy noise.

    Collisions. Distinct (chain, iteration) pairs give distinct inputs to step 1. Two releases of
    the same chain and iteration get the same noise only if their JAX keys have the same raw
    bits: the samplers derive them by ``split``/``fold_in`` from the iteration key, so for ``r``
    releases in one iteration (``r = L + 2`` for DP-HMC) the probability is at most
    ``r(r-1)/2 · 2^-64`` per iteration, and ``C k r² / 2^65`` over ``C`` chains of ``k``
    iterations (about 1.6e-11 for C = 4, k = 10⁶, L = 10). The default (non-secure) mode has the
    same failure probability for its own noise, since equal JAX keys give equal
    ``jax.random.normal`` output; secure mode adds no further collision. A sampler that reuses a
    key deliberately gets equal noise in both modes — that is a sampler bug either way.
    """
    from dpmcmc._chacha import chacha20_block
    from dpmcmc.secure import SecureKey

    chain = _SECURE["chain"]
    iteration = _SECURE["iteration"]
    chain = jnp.uint32(0) if chain is None else jnp.asarray(chain).astype(jnp.uint32)
    iteration = jnp.uint32(0) if iteration is None else jnp.asarray(iteration).astype(jnp.uint32)
    nonce = jnp.stack([jnp.uint32(_NOISE_TAG), chain, jnp.uint32(0)])
    k = chacha20_block(secret, iteration, nonce)[:8]
    words = _key_words(key)
    pad = (-words.shape[0]) % 3
    words = jnp.concatenate([words, jnp.zeros((pad,), jnp.uint32)])
    for g in range(words.shape[0] // 3):
        k = chacha20_block(k, jnp.uint32(g), words[3 * g:3 * g + 3])[:8]
    return SecureKey(k)


def _secure_standard_normal(secret: Array, key: Array, shape: tuple, dtype: Any) -> Array:
    """Standard normals from ChaCha20 keyed by ``secret``, with ``key`` as public PRF input.

    Drawn by inversion on an open grid (:func:`dpmcmc.secure.secure_normal`) from the stream of
    the per-release key of :func:`_release_key`; float32 for narrower dtypes, then cast.
    """
    from dpmcmc.secure import secure_normal

    dtype = jnp.dtype(dtype)
    draw_dtype = dtype if dtype in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)) else jnp.dtype(jnp.float32)
    return secure_normal(_release_key(secret, key), shape, draw_dtype).astype(dtype)
