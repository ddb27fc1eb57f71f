"""PRNG keys for privacy runs.

A privacy guarantee assumes the noise is unpredictable to an adversary. A fixed default seed
would make every run's noise public knowledge, so ``key=None`` draws fresh entropy from the
operating system. A key passed by the user is honoured (for reproducible research), and it is
the user's responsibility not to publish it: a published key voids the guarantee.
"""
from __future__ import annotations

import enum
import secrets
import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["resolve_key", "as_typed_key", "os_entropy_key", "OSEntropy", "OS_ENTROPY",
           "KeyReuseWarning", "key_material", "warn_reusable_key", "run_secrets"]


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


class OSEntropy(enum.Enum):
    """Sentinel: a key still to be drawn from OS entropy when the run starts.

    ``dpmcmc.sample(secure=True)`` asks for a secret ChaCha20 key drawn from the OS CSPRNG for
    this run alone (never derived from ``key``); until the run's plan draws it, the request is
    :data:`OS_ENTROPY`, an enum member rather than a string so that no user value can be
    mistaken for it.
    """

    KEY = "os entropy"


#: The one :class:`OSEntropy` value.
OS_ENTROPY = OSEntropy.KEY


def as_typed_key(key: Any, name: str = "key") -> jax.Array:
    """A single typed PRNG key from a typed key or a legacy ``uint32[2]`` key, or raise naming ``name``.

    ``None`` is refused: where a default exists (``resolve_key``) the caller handles it first.
    The one place that decides which keys are accepted, for ``dpmcmc.sample`` and the models'
    synthetic-data helpers alike.

    Raises
    ------
    TypeError
        If ``key`` is ``None``, an int (a seed is not a key), or neither accepted form.
    """
    if key is None:
        raise TypeError(f"{name} must be a JAX PRNG key, got None")
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        raise TypeError(
            f"{name} must be a JAX PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), "
            "not an int: pass jax.random.key(seed) explicitly if you want a reproducible run"
        )
    if not hasattr(key, "dtype") or not hasattr(key, "shape"):
        raise TypeError(f"{name} must be a JAX PRNG key, got {type(key).__name__}")
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise TypeError(f"{name} must be a single PRNG key, got a batch of shape {key.shape}")
        return key
    arr = jnp.asarray(key)
    if arr.dtype == jnp.uint32 and arr.shape == (2,):
        return jax.random.wrap_key_data(arr)
    raise TypeError(
        f"{name} must be a JAX PRNG key (typed, or legacy uint32[2]), got dtype {arr.dtype} "
        f"and shape {arr.shape}"
    )


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
    return as_typed_key(key)


class KeyReuseWarning(UserWarning):
    """A private run whose privacy noise is fixed by a key or seed the user chose.

    The same key on the same (or an overlapping) table gives the same underlying noise in every
    run, only rescaled: two such runs can be combined to cancel it (``2·run₂ − run₁``), so the
    guarantee of each run no longer holds, whatever the ledger adds up. Pass a ledger
    (``ledger=``, ``--ledger``), which refuses a key it has charged before, or no key at all.
    """


def key_material(key: jax.Array) -> bytes:
    """The bytes that fix a typed key's stream: its implementation and raw words (for the
    ledger's keyed hash of the keys it has charged; never stored in the clear)."""
    impl = str(jax.random.key_impl(key))
    data = np.asarray(jax.random.key_data(key), dtype=np.uint32)
    return impl.encode() + b"\0" + data.tobytes()


def warn_reusable_key(what: str, stacklevel: int = 3, ledger: Optional[Any] = None) -> None:
    """Warn that a user-chosen key or seed fixes a private run's noise (unless a ledger guards).

    ``what`` names the argument (``"key"``, ``"--seed"``, ``"secure"``).
    """
    if ledger is not None:
        return
    warnings.warn(KeyReuseWarning(
        f"{what} fixes this run's privacy noise: running again with the same {what} on the same "
        "or overlapping data repeats that noise, which lets the two results be combined to "
        "cancel it and voids the privacy guarantee of both. Use each key or seed once, pass a "
        "ledger (it refuses a key it has charged before), or omit it (fresh OS entropy)."),
        stacklevel=stacklevel)


def run_secrets(key: Any, secure: Any) -> tuple:
    """``(run key, secure-mode secret or None, noise keys)`` of a new run.

    ``key`` is the user's typed key or ``None`` (fresh OS entropy); ``secure`` is ``None``
    (off), :data:`OS_ENTROPY` (a secret drawn from OS entropy for this run alone, never from
    ``key``) or the user's ``SecureKey``. The noise keys are what fixes the run's privacy noise
    when the user chose it — the key's raw words, or the secret the user gave — for the ledger
    to refuse a repeat (and for :func:`warn_reusable_key`); empty when the noise comes from
    fresh OS entropy.
    """
    run_key = resolve_key(key)
    if secure is OS_ENTROPY:
        from .secure import secure_key_from_os

        return run_key, secure_key_from_os().words, ()
    if secure is not None:
        secret = secure.words
        return run_key, secret, (np.asarray(secret, dtype=np.uint32).tobytes(),)
    return run_key, None, (() if key is None else (key_material(run_key),))
