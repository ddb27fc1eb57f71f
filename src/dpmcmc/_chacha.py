"""The ChaCha20 block function (RFC 8439, Section 2.3) in pure ``jax.numpy`` uint32 arithmetic.

This module is the cryptographic core of :mod:`dpmcmc.secure`. It only knows about 32-bit words:
a 256-bit key as ``uint32[8]``, a 96-bit nonce as ``uint32[3]`` and a 32-bit block counter, each
word little-endian as in the RFC. Everything is built from wrapping addition, xor and rotation of
uint32 arrays, so it compiles under ``jit``, maps under ``vmap`` and runs inside ``lax.scan``
on any backend, with no host round-trip.

The block function is vectorised over the counter: ``chacha20_block(key, counters, nonce)`` with
``counters`` of shape ``(m,)`` computes ``m`` independent blocks at once, the state held as four
``(4, m)`` rows and the ten double rounds run as a rolled ``lax.fori_loop`` of elementwise uint32
ops. That is how :mod:`dpmcmc.secure` produces 10⁶ words without a loop over blocks, and why it
compiles in a fraction of a second.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["CHACHA_CONSTANTS", "chacha20_block", "chacha20_words"]

# "expand 32-byte k" as four little-endian words (RFC 8439, Section 2.3).
CHACHA_CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)

WORDS_PER_BLOCK = 16


def _rotl(x: jnp.ndarray, n: int) -> jnp.ndarray:
    # uint32 shifts are logical, so this is the RFC's "<<<" (rotate left) on 32-bit words.
    return lax.shift_left(x, jnp.uint32(n)) | lax.shift_right_logical(x, jnp.uint32(32 - n))


def _quarter_round(a: jnp.ndarray, b: jnp.ndarray, c: jnp.ndarray, d: jnp.ndarray):
    """RFC 8439 Section 2.1 on uint32 arrays (elementwise); addition wraps modulo 2^32."""
    a = a + b
    d = _rotl(d ^ a, 16)
    c = c + d
    b = _rotl(b ^ c, 12)
    a = a + b
    d = _rotl(d ^ a, 8)
    c = c + d
    b = _rotl(b ^ c, 7)
    return a, b, c, d


def _double_round(rows: tuple) -> tuple:
    # The state is held as four rows a = words 0-3, b = 4-7, c = 8-11, d = 12-15, each of shape
    # (4,) + batch. One quarter round on the rows is the RFC's four column rounds at once.
    # Rotating row b by 1, c by 2 and d by 3 lines up the diagonals (0,5,10,15), (1,6,11,12),
    # (2,7,8,13), (3,4,9,14) in the columns, so the same call does the four diagonal rounds.
    a, b, c, d = _quarter_round(*rows)
    b, c, d = jnp.roll(b, -1, axis=0), jnp.roll(c, -2, axis=0), jnp.roll(d, -3, axis=0)
    a, b, c, d = _quarter_round(a, b, c, d)
    b, c, d = jnp.roll(b, 1, axis=0), jnp.roll(c, 2, axis=0), jnp.roll(d, 3, axis=0)
    return a, b, c, d


def chacha20_block(key: jnp.ndarray, counter: jnp.ndarray, nonce: jnp.ndarray) -> jnp.ndarray:
    """ChaCha20 block function of RFC 8439, Section 2.3, vectorised over the counter.

    Parameters
    ----------
    key : uint32 array of shape (8,)
        The 256-bit key as eight little-endian words.
    counter : uint32 array of any shape
        32-bit block counters; one block is computed per element.
    nonce : uint32 array of shape (3,)
        The 96-bit nonce as three little-endian words.

    Returns
    -------
    uint32 array of shape ``counter.shape + (16,)``
        The output state words (initial state added to the permuted state). Serialising each
        row little-endian gives the RFC's 64-byte keystream block.

    Raises
    ------
    ValueError
        If ``key`` or ``nonce`` has the wrong shape.
    """
    key = jnp.asarray(key, dtype=jnp.uint32)
    nonce = jnp.asarray(nonce, dtype=jnp.uint32)
    counter = jnp.asarray(counter, dtype=jnp.uint32)
    if key.shape != (8,):
        raise ValueError(f"key must have shape (8,) (256 bits as uint32 words), got {key.shape}")
    if nonce.shape != (3,):
        raise ValueError(f"nonce must have shape (3,) (96 bits as uint32 words), got {nonce.shape}")
    return _block(key, counter, nonce)


@jax.jit
def _block(key: jnp.ndarray, counter: jnp.ndarray, nonce: jnp.ndarray) -> jnp.ndarray:
    # Compiled as one program even when called eagerly: op-by-op dispatch would compile each of
    # the ~1000 uint32 ops separately for every new counter shape. Inside an outer jit this is
    # inlined.
    shape = counter.shape
    lead = (4,) + (1,) * len(shape)

    def rows(words4):
        return jnp.broadcast_to(words4.reshape(lead), (4,) + shape)

    init = (
        rows(jnp.array(CHACHA_CONSTANTS, dtype=jnp.uint32)),
        rows(key[:4]),
        rows(key[4:]),
        jnp.concatenate(
            [counter[None], jnp.broadcast_to(nonce.reshape((3,) + lead[1:]), (3,) + shape)], axis=0
        ),
    )
    # A rolled loop over the ten double rounds: XLA compiles it in well under a second, whereas
    # fully unrolling the 80 quarter rounds took 5-14 s to compile on CPU and ran slower.
    state = lax.fori_loop(0, 10, lambda _, st: _double_round(st), init)
    out = jnp.concatenate([s + s0 for s, s0 in zip(state, init)], axis=0)  # (16,) + shape
    return jnp.moveaxis(out, 0, -1)


def chacha20_words(key: jnp.ndarray, nonce: jnp.ndarray, num_words: int,
                   first_counter: int = 0) -> jnp.ndarray:
    """The first ``num_words`` keystream words for (key, nonce) from block ``first_counter`` on.

    Parameters
    ----------
    key : uint32 array of shape (8,)
    nonce : uint32 array of shape (3,)
    num_words : int
        Static number of 32-bit words wanted.
    first_counter : int
        Static block counter of the first block.

    Returns
    -------
    uint32 array of shape (num_words,)
        Keystream words in order: block ``first_counter`` words 0..15, then the next block.

    Raises
    ------
    ValueError
        If the request would run the 32-bit block counter past 2^32 - 1 (RFC 8439 forbids
        wrapping the counter: the keystream would repeat).
    """
    num_words = int(num_words)
    if num_words < 0:
        raise ValueError(f"num_words must be non-negative, got {num_words}")
    num_blocks = -(-num_words // WORDS_PER_BLOCK)
    if first_counter < 0 or first_counter + num_blocks > 2**32:
        raise ValueError(
            f"num_words={num_words} from block {first_counter} exceeds the 2^32-block ChaCha20 "
            "stream of one key; split the key and draw in pieces"
        )
    counters = jnp.arange(num_blocks, dtype=jnp.uint32) + jnp.uint32(first_counter)
    return chacha20_block(key, counters, nonce).reshape(-1)[:num_words]
