"""PRNG keys for privacy runs.

A privacy guarantee assumes the noise is unpredictable to an adversary. A fixed default seed
would make every run's noise public knowledge, so ``key=None`` draws fresh entropy from the
operating system. A key passed by the user is honoured (for reproducible research), and it is
the user's responsibility not to publish it: a published key voids the guarantee.
"""
from __future__ import annotations

import secrets
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["resolve_key", "os_entropy_key"]


# Bits of OS entropy in a default key. A threefry key holds only 64 (an adversary could search
# them), so the default key uses JAX's "rbg" implementation, whose key is four uint32 words.
DEFAULT_KEY_BITS = 128
DEFAULT_KEY_IMPL = "rbg"


def os_entropy_key() -> jax.Array:
    """A typed JAX key of 128 bits from the OS CSPRNG (``secrets``), implementation ``"rbg"``.

    Every word of the key is drawn from ``secrets``. The key is as usable as a threefry key
    (``split``, ``fold_in``, the samplers' draws); only its stream differs, which matters to no
    one since the key is fresh for each run. A key the user passes is used as is.
    """
    words = np.array([secrets.randbits(32) for _ in range(DEFAULT_KEY_BITS // 32)],
                     dtype=np.uint32)
    return jax.random.wrap_key_data(jnp.asarray(words), impl=DEFAULT_KEY_IMPL)


def resolve_key(key: Any) -> jax.Array:
    """Return a typed PRNG key.

    Parameters
    ----------
    key : None, typed key, or legacy ``uint32[2]`` key
        ``None`` draws a key from OS entropy. A typed key (``jax.random.key``) is used as is; a
        legacy raw key (``jax.random.PRNGKey``) is wrapped.

    Raises
    ------
    TypeError
        If ``key`` is neither of the accepted forms.
    """
    if key is None:
        return os_entropy_key()
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        raise TypeError(
            "key must be a JAX PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)) or None, "
            "not an int: pass jax.random.key(seed) explicitly if you want a reproducible run"
        )
    if not hasattr(key, "dtype") or not hasattr(key, "shape"):
        raise TypeError(f"key must be a JAX PRNG key or None, got {type(key).__name__}")
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise TypeError(f"key must be a single PRNG key, got a batch of shape {key.shape}")
        return key
    arr = jnp.asarray(key)
    if arr.dtype == jnp.uint32 and arr.shape == (2,):
        return jax.random.wrap_key_data(arr)
    raise TypeError(
        f"key must be a JAX PRNG key (typed, or legacy uint32[2]) or None, got dtype {arr.dtype} "
        f"and shape {arr.shape}"
    )
