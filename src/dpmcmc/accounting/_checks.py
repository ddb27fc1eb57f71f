"""Argument validation: the one set of validators of dpmcmc.

Every public function validates before computing, and every error names the argument, so a
caller can tell which of its inputs was rejected. The accounting functions, the algorithm
specs' parameter preparation (``dpmcmc.samplers``) and the run functions all use these; they
live here because accounting is the bottom layer (NumPy only, no JAX).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "check_positive",
    "check_nonnegative",
    "check_probability",
    "check_int",
    "check_choice",
    "check_n0",
    "check_batch_size",
    "check_per_dim",
    "check_bool",
    "check_param_names",
]


def _as_real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            value = float(value)  # numpy scalars, 0-d arrays
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a real number, got {type(value).__name__}") from None
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN")
    return value


def check_positive(name: str, value, *, finite: bool = True, strict: bool = False) -> float:
    """Return ``value`` as float; raise ``ValueError`` naming ``name`` unless 0 < value (< inf).

    ``strict`` accepts Python and NumPy real scalars only (``TypeError`` otherwise): the
    parameters of an algorithm, where a string or an array is a mistake; the accounting
    functions also convert 0-d arrays and numeric strings.
    """
    if strict and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
        raise TypeError(f"{name} must be a positive real number, got {value!r}")
    v = _as_real(name, value)
    if not v > 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if finite and math.isinf(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def check_nonnegative(name: str, value, *, finite: bool = True) -> float:
    """Return ``value`` as float; raise ``ValueError`` naming ``name`` unless 0 <= value (< inf)."""
    v = _as_real(name, value)
    if not v >= 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    if finite and math.isinf(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def check_probability(name: str, value) -> float:
    """Return ``value`` as float; raise ``ValueError`` naming ``name`` unless 0 < value < 1."""
    v = _as_real(name, value)
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie in the open interval (0, 1), got {value!r}")
    return v


def check_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None,
              strict: bool = False) -> int:
    """Return ``value`` as int; raise ``TypeError``/``ValueError`` naming ``name`` if it is not an
    integer in [minimum, maximum].

    ``strict`` refuses integral floats such as ``100.0`` (a sampler parameter given as a float
    is more likely a mistake than a count; the accounting functions accept them).
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got bool")
    if isinstance(value, numbers.Integral):
        v = int(value)
    elif not strict and isinstance(value, numbers.Real) and float(value).is_integer():
        v = int(value)
    else:
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {v}")
    return v


def check_choice(name: str, value, choices) -> str:
    """Raise ``ValueError`` naming ``name`` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_n0(n0, n: int) -> float:
    """DP Barker's tempering size: ``0 < n0 <= n`` (T = n0/n <= 1), the rule ``dpmcmc.sample``
    applies; raise ``ValueError`` naming ``n0`` otherwise (same message in both places)."""
    v = check_positive("n0", n0)
    if v > n:
        raise ValueError(f"n0 must satisfy 0 < n0 <= n = {n}, got {n0!r}")
    return v


def check_batch_size(batch_size, n: int, minimum: int = 1) -> int:
    """A fixed batch size ``minimum ≤ batch_size ≤ n``, as an int.

    Raises
    ------
    TypeError
        ``batch_size`` is not an integer (an integral float such as ``100.0`` is refused too).
    ValueError
        ``batch_size`` is outside ``[minimum, n]``.
    """
    b = check_int("batch_size", batch_size, minimum=1, strict=True)
    if not minimum <= b <= n:
        raise ValueError(f"batch_size must satisfy {minimum} <= batch_size <= n = {n}, got {b}")
    return b


def check_per_dim(name: str, value, dim: int) -> tuple[float, ...]:
    """A positive scalar (broadcast) or ``dim`` positive numbers, as a tuple of ``dim`` floats."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a positive number or a sequence of {dim} positive "
                        f"numbers, got {value!r}") from None
    if isinstance(value, bool) or np.asarray(value).dtype == bool:
        raise TypeError(f"{name} must be numeric, got {value!r}")
    if arr.ndim == 0:
        arr = np.full(dim, float(arr))
    elif arr.shape != (dim,):
        raise ValueError(f"{name} must be a scalar or have length dim={dim}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValueError(f"{name} must be finite and > 0 in every dimension, got {value!r}")
    return tuple(float(a) for a in arr)


def check_bool(name: str, value) -> bool:
    """``value`` as a bool; ``TypeError`` naming ``name`` unless it is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_param_names(owner: str, params, allowed, required, *, error: type = ValueError) -> None:
    """Refuse unknown and missing entries of a parameter dict, naming them.

    Parameters
    ----------
    owner : str
        The algorithm the parameters are for (named in the messages).
    params : dict
    allowed : collection of str
    required : sequence of str
        Names that must be present and not None.
    error : exception class
        Raised for an unknown or missing name: ``ValueError`` for the parameters of a run
        (``dpmcmc.sample``), ``TypeError`` for keyword arguments (``max_iterations``), as
        Python does for a bad call.
    """
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict, got {type(params).__name__}")
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise error(f"unknown parameter(s) {unknown} for algorithm {owner!r}; "
                    f"allowed: {sorted(allowed)}")
    missing = [r for r in required if params.get(r) is None]
    if missing:
        raise error(f"algorithm {owner!r} requires parameter {missing[0]!r}")
