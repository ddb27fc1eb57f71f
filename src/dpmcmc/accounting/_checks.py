"""Argument validation shared by the accounting functions.

Every public accounting function validates before computing, and every error
names the argument, so a caller can tell which of its inputs was rejected.
"""
from __future__ import annotations

import math
import numbers

__all__ = [
    "check_positive",
    "check_nonnegative",
    "check_probability",
    "check_int",
    "check_choice",
    "check_n0",
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


def check_positive(name: str, value, *, finite: bool = True) -> float:
    """Return ``value`` as float; raise ``ValueError`` naming ``name`` unless 0 < value (< inf)."""
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


def check_int(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``value`` as int; raise ``TypeError``/``ValueError`` naming ``name`` if it is not an
    integer in [minimum, maximum]."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got bool")
    if isinstance(value, numbers.Integral):
        v = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
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
