"""Cryptographically secure randomness for privacy noise (``secure=True``).

JAX's own generators (threefry2x32, rbg, unsafe_rbg) are built for statistical quality and
speed, not to resist an adversary: none has a security analysis as a CSPRNG, and a JAX key holds
only 64 bits, a search space within reach of a well-resourced attacker. A differential-privacy
guarantee assumes the noise is unpredictable, so secure mode draws it from ChaCha20
(RFC 8439) keyed with 256 bits, computed inside the compiled program by :mod:`dpmcmc._chacha`.

Keys
----
A :class:`SecureKey` is a pytree holding a 256-bit ChaCha20 key as ``uint32[..., 8]``. Like a
JAX key it is consumed once: draw from it *or* split it, never both, and never draw twice from the
same key (the same key gives the same numbers). Every derivation runs ChaCha20 itself with a
domain-separated nonce, so no other generator ever touches the key material:

===============================  =========================  ==============================
use                              nonce (3 words)            block counter
===============================  =========================  ==============================
draws (bits/uniform/normal/...)  ``("draw", 0, 0)``         0, 1, 2, ... (block index)
``secure_split(key, num)``       ``("splt", 0, 0)``         child index ``i``
``secure_fold_in(key, data)``    ``("fold", lo, hi)``       0
===============================  =========================  ==============================

(``"draw"`` etc. are the four ASCII bytes read as a little-endian word; ``lo``/``hi`` the low and
high 32 bits of ``data``.) A child key is the first eight words of its block. Because ChaCha20
keyed by a secret key is a pseudorandom function of (counter, nonce), distinct inputs give
outputs that are indistinguishable from independent uniform bits, so draws, split children and
folded keys are mutually independent for any efficient observer.

``key=None`` means 256 fresh bits from the operating system (:func:`secure_key_from_os`). A key
given by the user (:func:`secure_key`) makes a run reproducible; whoever knows it can recompute
the noise, so a published key voids the privacy guarantee.

Backend-neutral helpers
-----------------------
:func:`split`, :func:`fold_in`, :func:`uniform`, :func:`normal` and :func:`permutation` take
either a :class:`SecureKey` or a JAX key and dispatch at trace time (a Python ``isinstance``; no
run-time cost), so a kernel written against them runs in both modes unchanged.

Floating point
--------------
Secure bits do not make floating-point noise exact; see ``docs/secure_randomness.md`` for the
least-significant-bit caveat (Mironov 2012) and what this library does and does not do about it.
"""
from __future__ import annotations

import secrets
from functools import partial
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import ndtri

from ._chacha import chacha20_block, chacha20_words

__all__ = [
    "SecureKey",
    "secure_key_from_os",
    "secure_key",
    "resolve_secure_key",
    "secure_split",
    "secure_fold_in",
    "secure_bits",
    "secure_uniform",
    "secure_normal",
    "secure_permutation",
    "split",
    "fold_in",
    "uniform",
    "normal",
    "permutation",
]


def _tag(name: bytes) -> int:
    return int.from_bytes(name, "little")


_DRAW = _tag(b"draw")
_SPLIT = _tag(b"splt")
_FOLD = _tag(b"fold")


@jax.tree_util.register_pytree_node_class
class SecureKey:
    """A 256-bit ChaCha20 key (or a batch of them) for secure-mode randomness.

    Construct with :func:`secure_key_from_os` (fresh OS entropy), :func:`secure_key` (from a
    user seed, reproducible) or :func:`secure_split`. A ``SecureKey`` is a pytree whose one leaf
    ``words`` has shape ``batch_shape + (8,)`` and dtype uint32, so it passes through ``jit``,
    ``vmap`` (mapped along a batch axis) and ``lax.scan`` (as carry or as ``xs``) like an array.

    The ``repr`` does not show the key words: printing or logging a key should not leak it.

    Attributes
    ----------
    words : uint32 array of shape ``(..., 8)``
        The key words, little-endian as in RFC 8439.
    """

    __slots__ = ("words",)

    def __init__(self, words: Any):
        # No validation here: JAX rebuilds pytrees with tracers and placeholder leaves; the
        # public constructors and every consumer check shape and dtype instead.
        self.words = words

    def tree_flatten(self):
        return (self.words,), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        obj = object.__new__(cls)
        obj.words = children[0]
        return obj

    @property
    def shape(self) -> tuple[int, ...]:
        """The batch shape (``words.shape`` without the trailing 8)."""
        return tuple(self.words.shape[:-1])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a single SecureKey")
        return self.shape[0]

    def __iter__(self):
        # Explicit, because the fallback __getitem__ protocol never stops: JAX clamps
        # out-of-range integer indices instead of raising IndexError.
        return (self[i] for i in range(len(self)))

    def __getitem__(self, index: Any) -> "SecureKey":
        if not self.shape:
            raise TypeError("a single SecureKey cannot be indexed")
        if not isinstance(index, tuple):
            index = (index,)
        if any(i is Ellipsis for i in index):
            raise TypeError("SecureKey indexing does not support Ellipsis")
        if len(index) > self.ndim:
            raise IndexError(f"too many indices for a SecureKey batch of shape {self.shape}")
        return SecureKey(self.words[index])

    def __repr__(self) -> str:
        return f"SecureKey(shape={self.shape})"


def _words_from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype="<u4").astype(np.uint32)


def secure_key_from_os() -> SecureKey:
    """A fresh :class:`SecureKey` with 256 bits from the OS CSPRNG (``secrets.token_bytes``).

    This is what ``key=None`` means in secure mode. The key is never derived from a JAX key or
    any fixed seed.

    Returns
    -------
    SecureKey
        A single key (``shape == ()``).
    """
    return SecureKey(jnp.asarray(_words_from_bytes(secrets.token_bytes(32))))


def secure_key(seed: int | bytes) -> SecureKey:
    """A :class:`SecureKey` from a user-chosen seed, for reproducible runs.

    Anyone who knows the seed can regenerate every noise draw of the run, so a published seed
    voids the privacy guarantee. Use a seed with 256 bits of entropy (e.g. kept from
    ``secrets.randbits(256)``) if the guarantee should hold; a small integer is fine for tests.

    Parameters
    ----------
    seed : int in [0, 2^256) or bytes of length 32
        An integer is encoded as 32 little-endian bytes; bytes are used as the RFC 8439 key.

    Returns
    -------
    SecureKey

    Raises
    ------
    TypeError
        If ``seed`` is neither an int nor bytes.
    ValueError
        If an integer seed is out of range or the bytes are not 32 long.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer, bytes, bytearray)):
        raise TypeError(f"seed must be an int or 32 bytes, got {type(seed).__name__}")
    if isinstance(seed, (bytes, bytearray)):
        if len(seed) != 32:
            raise ValueError(f"seed must be exactly 32 bytes (256 bits), got {len(seed)}")
        data = bytes(seed)
    else:
        seed = int(seed)
        if not 0 <= seed < 2**256:
            raise ValueError(f"seed must be an integer in [0, 2**256), got {seed}")
        data = seed.to_bytes(32, "little")
    return SecureKey(jnp.asarray(_words_from_bytes(data)))


def _check_key(key: Any, name: str = "key") -> jax.Array:
    if not isinstance(key, SecureKey):
        raise TypeError(f"{name} must be a SecureKey, got {type(key).__name__}")
    words = key.words
    if not hasattr(words, "shape") or tuple(words.shape) != (8,):
        shape = getattr(words, "shape", None)
        raise TypeError(
            f"{name} must be a single SecureKey (words of shape (8,)), got words of shape {shape}; "
            "index a batch or vmap over it"
        )
    if jnp.dtype(words.dtype) != jnp.uint32:
        raise TypeError(f"{name}.words must be uint32, got {words.dtype}")
    return words


def resolve_secure_key(key: Any) -> SecureKey:
    """The key to use for a secure-mode run.

    Parameters
    ----------
    key : None or SecureKey
        ``None`` draws a fresh key from OS entropy. A single :class:`SecureKey` is used as is.

    Returns
    -------
    SecureKey

    Raises
    ------
    TypeError
        If ``key`` is a JAX key, an integer or anything else: a JAX key carries only 64 bits
        and would silently weaken secure mode, so it is refused rather than converted.
    """
    if key is None:
        return secure_key_from_os()
    if isinstance(key, SecureKey):
        _check_key(key)
        return key
    raise TypeError(
        f"key must be None or a dpmcmc.secure.SecureKey in secure mode, got {type(key).__name__}; "
        "use dpmcmc.secure.secure_key(seed) for a reproducible run (a JAX key holds only 64 bits "
        "and is not accepted)"
    )


def _nonce(tag: int, w1: Any = 0, w2: Any = 0) -> jax.Array:
    return jnp.stack([jnp.uint32(tag), jnp.asarray(w1, jnp.uint32), jnp.asarray(w2, jnp.uint32)])


def secure_split(key: SecureKey, num: int = 2) -> SecureKey:
    """Derive ``num`` independent keys from ``key`` with ChaCha20.

    Child ``i`` is the first eight words of block ``i`` of the ``"splt"`` stream of ``key``.

    Parameters
    ----------
    key : SecureKey
        A single key; it must not be used again after splitting.
    num : int
        Static number of children, ``1 <= num <= 2**32``.

    Returns
    -------
    SecureKey
        A batch of shape ``(num,)``.

    Raises
    ------
    TypeError
        If ``key`` is not a single SecureKey.
    ValueError
        If ``num`` is out of range.
    """
    words = _check_key(key)
    num = _static_int(num, "num")
    if not 1 <= num <= 2**32:
        raise ValueError(f"num must be in [1, 2**32], got {num}")
    counters = jnp.arange(num, dtype=jnp.uint32)
    return SecureKey(chacha20_block(words, counters, _nonce(_SPLIT))[:, :8])


def secure_fold_in(key: SecureKey, data: Any) -> SecureKey:
    """Derive a key from ``key`` and an integer label ``data`` with ChaCha20.

    The label goes into the nonce (``("fold", low 32 bits, high 32 bits)``), so labels that
    differ modulo 2^64 give independent keys.

    Parameters
    ----------
    key : SecureKey
        A single key.
    data : int or integer scalar array (may be traced)
        A Python or NumPy integer must lie in [0, 2^64); a JAX array is taken modulo 2^64 (two's
        complement for signed types), as ``jax.random.fold_in`` takes its data modulo 2^32.

    Returns
    -------
    SecureKey
        A single key.

    Raises
    ------
    TypeError
        If ``key`` is not a single SecureKey or ``data`` is not an integer scalar.
    ValueError
        If a Python int ``data`` is out of range.
    """
    words = _check_key(key)
    if isinstance(data, bool):
        raise TypeError("data must be an integer, got bool")
    if isinstance(data, (int, np.integer)):
        data = int(data)
        if not 0 <= data < 2**64:
            raise ValueError(f"data must be an integer in [0, 2**64), got {data}")
        lo, hi = data & 0xFFFFFFFF, data >> 32
    else:
        arr = jnp.asarray(data)
        if arr.shape != () or not jnp.issubdtype(arr.dtype, jnp.integer):
            raise TypeError(f"data must be an integer scalar, got dtype {arr.dtype} shape {arr.shape}")
        if arr.dtype.itemsize == 8:
            u64 = lax.bitcast_convert_type(arr, jnp.uint64) if arr.dtype != jnp.uint64 else arr
            lo = (u64 & jnp.uint64(0xFFFFFFFF)).astype(jnp.uint32)
            hi = (u64 >> jnp.uint64(32)).astype(jnp.uint32)
        elif jnp.issubdtype(arr.dtype, jnp.signedinteger):
            # Sign-extend so that -1 as int32 and -1 as int64 name the same label (2^64 - 1).
            v = arr.astype(jnp.int32)
            lo = lax.bitcast_convert_type(v, jnp.uint32)
            hi = jnp.where(v < 0, jnp.uint32(0xFFFFFFFF), jnp.uint32(0))
        else:
            lo, hi = arr.astype(jnp.uint32), jnp.uint32(0)
    block = chacha20_block(words, jnp.uint32(0), _nonce(_FOLD, lo, hi))
    return SecureKey(block[:8])


def _static_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a (static) integer, got {type(value).__name__}")
    return int(value)


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(_static_int(d, "shape") for d in shape)
    except TypeError:
        raise TypeError(f"shape must be a tuple of non-negative ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"shape must have non-negative entries, got {dims}")
    return dims


def _float_dtype(dtype: Any) -> np.dtype:
    x64 = jax.dtypes.canonicalize_dtype(np.float64) == np.float64
    if dtype is None:
        return np.dtype(np.float64 if x64 else np.float32)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dt}")
    if dt == np.float64 and not x64:
        raise ValueError(
            "dtype=float64 needs jax.config.update('jax_enable_x64', True); refusing to return "
            "float32 silently"
        )
    return dt


def secure_bits(key: SecureKey, shape: Sequence[int] | int = ()) -> jax.Array:
    """Uniform random uint32 words: the raw ChaCha20 keystream of ``key``'s draw stream.

    Parameters
    ----------
    key : SecureKey
        A single key.
    shape : tuple of int
        Static output shape.

    Returns
    -------
    uint32 array of shape ``shape``
        Words 0, 1, 2, ... of the keystream (blocks 0, 1, ... of nonce ``("draw", 0, 0)``) in
        C order.
    """
    shape = _shape(shape)
    return _bits_core(_check_key(key), shape)


@partial(jax.jit, static_argnums=1)
def _bits_core(words: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    return chacha20_words(words, _nonce(_DRAW), int(np.prod(shape, dtype=np.int64))).reshape(shape)


def _uniform_from_words(words: jax.Array, size: int, dt: np.dtype) -> jax.Array:
    if dt == np.float64:
        pairs = words.reshape(size, 2)
        hi = lax.shift_right_logical(pairs[:, 0], jnp.uint32(5)).astype(jnp.float64)  # 27 bits
        lo = lax.shift_right_logical(pairs[:, 1], jnp.uint32(6)).astype(jnp.float64)  # 26 bits
        # hi * 2^26 + lo < 2^53 is an exact float64 integer; scaling by 2^-53 is exact too.
        return (hi * 67108864.0 + lo) * (2.0**-53)
    top = lax.shift_right_logical(words, jnp.uint32(8)).astype(jnp.float32)  # 24 bits
    return top * jnp.float32(2.0**-24)


def secure_uniform(key: SecureKey, shape: Sequence[int] | int = (), dtype: Any = None) -> jax.Array:
    """Uniform draws on the grid ``{k / 2^p : 0 <= k < 2^p}`` in [0, 1), exactly.

    Construction: float64 (``p = 53``) uses two keystream words ``(a, b)`` per draw,
    ``u = ((a >> 5) * 2^26 + (b >> 6)) / 2^53``; float32 (``p = 24``) uses one word,
    ``u = (a >> 8) / 2^24``. Every step is exact in the target precision, so each grid point has
    probability exactly ``2^-p`` (given uniform keystream bits) and 1.0 is never returned.

    Parameters
    ----------
    key : SecureKey
        A single key; do not reuse it.
    shape : tuple of int
        Static output shape.
    dtype : float32, float64 or None
        ``None`` means float64 when x64 is enabled, else float32.

    Returns
    -------
    array of shape ``shape`` and dtype ``dtype``

    Raises
    ------
    TypeError
        For a bad key, shape or dtype.
    ValueError
        For float64 without x64, or a request beyond 2^32 ChaCha20 blocks.
    """
    shape = _shape(shape)
    dt = _float_dtype(dtype)
    return _uniform_core(_check_key(key), shape, dt)


# The cores are jitted so that eager calls compile one program per shape instead of dispatching
# (and compiling) each of ChaCha's ~1000 uint32 ops separately; under an outer jit they inline.
def _draw_stream(words: jax.Array, shape: tuple[int, ...], dt: np.dtype) -> tuple[jax.Array, int]:
    # The keystream behind ``size`` draws: two words per float64 draw, one per float32 draw.
    size = int(np.prod(shape, dtype=np.int64))
    per = 2 if dt == np.float64 else 1
    return chacha20_words(words, _nonce(_DRAW), per * size), size


@partial(jax.jit, static_argnums=(1, 2))
def _uniform_core(words: jax.Array, shape: tuple[int, ...], dt: np.dtype) -> jax.Array:
    stream, size = _draw_stream(words, shape, dt)
    return _uniform_from_words(stream, size, dt).reshape(shape)


def _open_uniform_from_words(words: jax.Array, size: int, dt: np.dtype) -> jax.Array:
    # Midpoints (k + 1/2) / 2^p of a 2^p grid: strictly inside (0, 1), exactly representable
    # (k + 1/2 has p + 1 significant bits), and symmetric under u -> 1 - u, so ndtri sees neither
    # 0 nor 1 and the resulting normal law is exactly symmetric.
    if dt == np.float64:
        pairs = words.reshape(size, 2)
        hi = lax.shift_right_logical(pairs[:, 0], jnp.uint32(6)).astype(jnp.float64)  # 26 bits
        lo = lax.shift_right_logical(pairs[:, 1], jnp.uint32(6)).astype(jnp.float64)  # 26 bits
        return (hi * 67108864.0 + lo + 0.5) * (2.0**-52)
    top = lax.shift_right_logical(words, jnp.uint32(9)).astype(jnp.float32)  # 23 bits
    return (top + jnp.float32(0.5)) * jnp.float32(2.0**-23)


def secure_normal(key: SecureKey, shape: Sequence[int] | int = (), dtype: Any = None) -> jax.Array:
    """Standard normal draws by inversion: ``z = ndtri(u)`` on an open uniform grid.

    Construction: ``u = (k + 1/2) / 2^p`` with ``k`` uniform on ``[0, 2^p)``, ``p = 52`` for
    float64 (26 bits from each of two keystream words) and ``p = 23`` for float32 (one word), then
    ``z = jax.scipy.special.ndtri(u)``. Inversion (rather than Box–Muller) uses one uniform per
    draw, never evaluates ``log(0)`` and is monotone, so the tails are those of the uniform grid:
    ``|z| <= -ndtri(2^-(p+1))``, about 8.21 in float64 and 5.29 in float32. The normal mass
    beyond that bound (about 2e-16 and 1e-7 per draw) is put on the extreme grid points; this is
    the same order of tail truncation as ``jax.random.normal``.

    Parameters
    ----------
    key : SecureKey
        A single key; do not reuse it.
    shape : tuple of int
        Static output shape.
    dtype : float32, float64 or None
        ``None`` means float64 when x64 is enabled, else float32.

    Returns
    -------
    array of shape ``shape`` and dtype ``dtype``

    Raises
    ------
    TypeError
        For a bad key, shape or dtype.
    ValueError
        For float64 without x64, or a request beyond 2^32 ChaCha20 blocks.
    """
    shape = _shape(shape)
    dt = _float_dtype(dtype)
    return _normal_core(_check_key(key), shape, dt)


@partial(jax.jit, static_argnums=(1, 2))
def _normal_core(words: jax.Array, shape: tuple[int, ...], dt: np.dtype) -> jax.Array:
    stream, size = _draw_stream(words, shape, dt)
    return ndtri(_open_uniform_from_words(stream, size, dt)).reshape(shape)


def secure_permutation(key: SecureKey, n: int) -> jax.Array:
    """A uniformly random permutation of ``0..n-1`` (e.g. for secret minibatch selection).

    Each index gets a 64-bit ChaCha20 sort key (two words) and the indices are sorted by it.
    Ties, which would favour the original order, have probability below ``n^2 / 2^65``
    (3e-10 for n = 10^5). Take the first ``m`` entries for a uniform subset of size ``m``
    without replacement: privacy amplification by subsampling assumes the adversary cannot
    predict that subset, so in secure mode it must come from here, not from ``jax.random``.

    Parameters
    ----------
    key : SecureKey
        A single key; do not reuse it.
    n : int
        Static length, ``n >= 0``.

    Returns
    -------
    int32 array of shape (n,)
    """
    n = _static_int(n, "n")
    if n < 0:
        raise ValueError(f"n must be non-negative, got {n}")
    return _permutation_core(_check_key(key), n)


@partial(jax.jit, static_argnums=1)
def _permutation_core(words: jax.Array, n: int) -> jax.Array:
    sort_keys = chacha20_words(words, _nonce(_DRAW), 2 * n).reshape(n, 2)
    idx = jnp.arange(n, dtype=jnp.int32)
    return lax.sort((sort_keys[:, 0], sort_keys[:, 1], idx), num_keys=2)[2]


# Backend-neutral helpers: the sampler code calls these and works with either key kind.

def split(key: Any, num: int = 2) -> Any:
    """``secure_split`` for a :class:`SecureKey`, ``jax.random.split`` for a JAX key."""
    if isinstance(key, SecureKey):
        return secure_split(key, num)
    return jax.random.split(key, num)


def fold_in(key: Any, data: Any) -> Any:
    """``secure_fold_in`` for a :class:`SecureKey`, ``jax.random.fold_in`` for a JAX key."""
    if isinstance(key, SecureKey):
        return secure_fold_in(key, data)
    return jax.random.fold_in(key, data)


def uniform(key: Any, shape: Sequence[int] | int = (), dtype: Any = None) -> jax.Array:
    """Uniforms in [0, 1): ``secure_uniform`` or ``jax.random.uniform`` by key kind."""
    if isinstance(key, SecureKey):
        return secure_uniform(key, shape, dtype)
    return jax.random.uniform(key, _shape(shape), _float_dtype(dtype))


def normal(key: Any, shape: Sequence[int] | int = (), dtype: Any = None) -> jax.Array:
    """Standard normals: ``secure_normal`` or ``jax.random.normal`` by key kind."""
    if isinstance(key, SecureKey):
        return secure_normal(key, shape, dtype)
    return jax.random.normal(key, _shape(shape), _float_dtype(dtype))


def permutation(key: Any, n: int) -> jax.Array:
    """A random permutation of ``0..n-1``: ``secure_permutation`` or ``jax.random.permutation``."""
    if isinstance(key, SecureKey):
        return secure_permutation(key, n)
    return jax.random.permutation(key, _static_int(n, "n"))
