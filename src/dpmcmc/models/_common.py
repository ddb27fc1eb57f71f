"""Shared argument checks and small helpers for the built-in models."""
from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._keys import as_typed_key  # the one key check, shared with dpmcmc.sample

__all__ = [
    "check_positive",
    "check_real",
    "check_temperature",
    "check_dim",
    "check_n",
    "check_key",
    "check_data",
    "check_num_draws",
    "as_shape",
    "float_dtype",
    "as_vector",
    "positive_vector",
    "spd_matrix",
    "shift_scale",
]


def check_real(name: str, value: Any) -> float:
    """Return ``value`` as a finite float or raise naming the argument."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def check_positive(name: str, value: Any) -> float:
    """Return ``value`` as a finite float > 0 or raise naming the argument."""
    v = check_real(name, value)
    if v <= 0.0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return v


def check_temperature(value: Any) -> float:
    """Tempering factor T in (0, 1]."""
    v = check_real("temperature", value)
    if not 0.0 < v <= 1.0:
        raise ValueError(f"temperature must lie in (0, 1], got {value!r}")
    return v


def check_dim(value: Any, minimum: int = 1, name: str = "dim") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return int(value)


def check_n(value: Any, name: str = "n") -> int:
    return check_dim(value, 1, name)


def check_num_draws(value: Any) -> int:
    return check_dim(value, 1, "num_draws")


def check_key(key: Any, name: str = "key") -> jax.Array:
    """Accept a typed JAX key or a legacy ``uint32[2]`` key; no default (synthetic data only)."""
    return as_typed_key(key, name)


def check_data(data: Any, width: int, name: str = "data") -> jax.Array:
    """A 2-d float array with ``width`` columns and at least one row."""
    arr = jnp.asarray(data)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise ValueError(f"{name} must have shape (n, {width}), got {tuple(arr.shape)}")
    if arr.shape[0] < 1:
        raise ValueError(f"{name} must have at least one row")
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(float_dtype())
    return arr


def as_shape(shape: Any) -> tuple:
    """Normalise a ``sample_prior`` shape argument (int or tuple of ints)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError as exc:
        raise TypeError(f"shape must be an int or a tuple of ints, got {shape!r}") from exc
    if any(s < 0 for s in shape):
        raise ValueError(f"shape must be non-negative, got {shape!r}")
    return shape


def float_dtype():
    """float64 when JAX x64 is enabled, else float32."""
    return jnp.asarray(0.0).dtype


def as_vector(name: str, value: Any, length: int) -> np.ndarray:
    """A float64 NumPy vector of the given length (a scalar is broadcast)."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(length, float(arr))
    if arr.shape != (length,):
        raise ValueError(f"{name} must be a scalar or have shape ({length},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    return arr


def positive_vector(name: str, value: Any, length: int) -> np.ndarray:
    arr = as_vector(name, value, length)
    if np.any(arr <= 0):
        raise ValueError(f"{name} must be positive")
    return arr


def spd_matrix(name: str, value: Any, dim: int) -> np.ndarray:
    """A symmetric positive-definite float64 matrix (checked by Cholesky)."""
    mat = np.asarray(value, dtype=np.float64)
    if mat.shape != (dim, dim):
        raise ValueError(f"{name} must have shape ({dim}, {dim}), got {mat.shape}")
    if not np.all(np.isfinite(mat)):
        raise ValueError(f"{name} must be finite")
    if not np.allclose(mat, mat.T, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(mat).max())):
        raise ValueError(f"{name} must be symmetric")
    mat = 0.5 * (mat + mat.T)
    try:
        np.linalg.cholesky(mat)
    except np.linalg.LinAlgError as exc:
        raise ValueError(f"{name} must be positive definite") from exc
    return mat


def shift_scale(loc: Any, scale: Any, eps: Any) -> jax.Array:
    """``loc + scale * eps`` elementwise in ``eps``' dtype: the last step of the data generators.

    Traced (inside ``jax.jit``), in ``jnp`` as part of the caller's program. Eagerly, in NumPy:
    the same two correctly rounded IEEE operations, in the same order and dtype, as the two
    one-operation programs JAX would run there, so the same values bit for bit, without
    compiling those programs again for every new shape of the data (~0.05 CPU-s a shape).
    """
    if isinstance(eps, jax.core.Tracer):
        return jnp.asarray(loc, eps.dtype) + jnp.asarray(scale, eps.dtype) * eps
    e = np.asarray(eps)
    # jax.device_put, not jnp.asarray, which would compile a staging program per shape.
    return jax.device_put(np.asarray(loc, e.dtype) + np.asarray(scale, e.dtype) * e)
