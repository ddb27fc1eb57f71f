"""The algorithm registry: parameter validation, defaults, kernel construction, accounting.

Parameters of each algorithm (``prepare`` fills the defaults shown; "required" ones must be given):

``"rwmh"`` (non-private)
    ``proposal_std`` (required; scalar or one per dimension, > 0), ``clip`` (None: no clipping;
    else b > 0), ``block_size`` (None).
``"hmc"`` (non-private)
    ``step_size`` (required, > 0), ``leapfrog_steps`` (10), ``mass`` (1.0; scalar or per
    dimension, > 0), ``clip`` (None), ``jitter`` (True: randomised-Halton step sizes),
    ``block_size`` (None).
``"dp-penalty"``
    ``tau`` (required, > 0), ``clip`` (required, b > 0), ``proposal_std`` (required), ``mode``
    ("random-walk"; or "one-component", "guided-walk"), ``block_size`` (None).
``"dp-hmc"``
    ``tau_l``, ``tau_g``, ``clip`` (b_l), ``grad_clip`` (b_g), ``step_size`` (all required,
    > 0), ``leapfrog_steps`` (10), ``mass`` (1.0), ``jitter`` (True), ``grad_method`` ("auto";
    or "reverse", "forward", "vmap"), ``grad_dtype`` ("float32": dtype of the per-example
    gradient passes; or "float64"), ``block_size`` (None).

``"dp-barker"``
    ``batch_size`` (required, 11 ≤ b ≤ n), ``proposal_std`` (required), ``n0`` (None:
    ``model.temperature * n``; tempering T = n0/n, clip bound √b/n0), ``mode`` ("random-walk").
``"minibatch-penalty"``
    ``tau``, ``batch_size`` (1 ≤ b ≤ n), ``clip`` (L), ``proposal_std`` (all required), ``mode``
    ("random-walk").

``"dp-sgld"``
    ``step_size`` (η), ``batch_size`` (1 ≤ b ≤ n), ``noise_multiplier``, ``grad_clip`` (all
    required, > 0), ``grad_method`` ("auto"), ``block_size`` (None).
``"dp-sgnht"``
    As ``"dp-sgld"``, plus ``friction`` (A of Ding et al., 1.0).

``block_size`` scans the data in blocks of that many rows in every per-example pass (bounds
memory for large n); it does not change the result beyond float rounding. ``None`` picks
``dpmcmc.samplers._layout.auto_block_size`` (4096 rows on CPU for n > 8192, one pass on
accelerators).
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, NamedTuple

import jax.numpy as jnp
import numpy as np

from dpmcmc.accounting._checks import check_n0
from dpmcmc.samplers._layout import GRAD_DTYPES, PreparedData
from dpmcmc.samplers._passes import GRAD_METHODS
from dpmcmc.samplers._types import Kernel
from dpmcmc.samplers.dp_hmc import build_dp_hmc
from dpmcmc.samplers.barker import MIN_BATCH_SIZE as _BARKER_MIN_BATCH
from dpmcmc.samplers.barker import build_dp_barker
from dpmcmc.samplers.dp_penalty import MODES, build_dp_penalty
from dpmcmc.samplers.dp_sgld import build_dp_sgld
from dpmcmc.samplers.dp_sgnht import build_dp_sgnht
from dpmcmc.samplers.hmc import build_hmc
from dpmcmc.samplers.minibatch_penalty import build_minibatch_penalty
from dpmcmc.samplers.rwmh import build_rwmh

__all__ = ["AlgorithmSpec", "ALGORITHMS"]

DEFAULT_LEAPFROG_STEPS = 10


class AlgorithmSpec(NamedTuple):
    """One registered algorithm.

    Attributes
    ----------
    name : str
    private : bool
        Whether the algorithm is differentially private (its data accesses are accounted).
    prepare : callable
        ``prepare(params: dict, model, n) -> dict``: validate (ValueError/TypeError naming the
        argument) and fill defaults. Touches no data.
    build : callable
        ``build(model, data, params) -> Kernel`` from prepared params; the private algorithms'
        also take ``noise=`` (a :class:`~dpmcmc.samplers._mechanisms.NoiseSource`, the kernel's
        privacy-noise source; default ``jax.random``).
    accounting_params : callable
        ``accounting_params(params) -> dict``: the keyword arguments for
        ``dpmcmc.accounting.max_iterations/spent`` (empty for non-private algorithms).
    """

    name: str
    private: bool
    prepare: Callable[[dict, Any, int], dict]
    build: Callable[[Any, Any, dict], Kernel]
    accounting_params: Callable[[dict], dict]


# ---------------------------------------------------------------- validation helpers

def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive real number, got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer, got {value!r}")
    if int(value) < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _per_dim(name: str, value: Any, dim: int) -> tuple:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a positive number or a sequence of {dim} positive "
                        f"numbers, got {value!r}") from None
    if isinstance(value, bool) or arr.dtype == bool:
        raise TypeError(f"{name} must be numeric, got {value!r}")
    if arr.ndim == 0:
        arr = np.full(dim, float(arr))
    elif arr.shape != (dim,):
        raise ValueError(f"{name} must be a scalar or have length dim={dim}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr) & (arr > 0)):
        raise ValueError(f"{name} must be finite and > 0 in every dimension, got {value!r}")
    return tuple(float(a) for a in arr)


def _optional_positive(name: str, value: Any):
    return None if value is None else _positive(name, value)


def _optional_block(value: Any):
    return None if value is None else _positive_int("block_size", value)


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _choice(name: str, value: Any, choices: tuple) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def _common_checks(algorithm: str, params: dict, allowed: set, required: tuple, model, n) -> None:
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict, got {type(params).__name__}")
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for algorithm {algorithm!r}; "
                         f"allowed: {sorted(allowed)}")
    missing = [r for r in required if params.get(r) is None]
    if missing:
        raise ValueError(f"algorithm {algorithm!r} requires parameter {missing[0]!r}")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not hasattr(model, "dim"):
        raise TypeError("model must be a dpmcmc Model")


def _data(data):
    if isinstance(data, PreparedData):  # already laid out (and possibly sharded) by the caller
        return data
    data = jnp.asarray(data)
    if data.ndim < 1 or data.shape[0] < 1:
        raise ValueError(f"data must have at least one row, got shape {data.shape}")
    return data


# ---------------------------------------------------------------- rwmh

_RWMH_KEYS = {"proposal_std", "clip", "block_size"}


def _prepare_rwmh(params, model, n):
    _common_checks("rwmh", params, _RWMH_KEYS, ("proposal_std",), model, n)
    return {
        "proposal_std": _per_dim("proposal_std", params["proposal_std"], model.dim),
        "clip": _optional_positive("clip", params.get("clip")),
        "block_size": _optional_block(params.get("block_size")),
    }


def _build_rwmh(model, data, p):
    return build_rwmh(model, _data(data), p["proposal_std"], p["clip"], block_size=p["block_size"])


# ---------------------------------------------------------------- hmc

_HMC_KEYS = {"step_size", "leapfrog_steps", "mass", "clip", "jitter", "block_size"}


def _prepare_hmc(params, model, n):
    _common_checks("hmc", params, _HMC_KEYS, ("step_size",), model, n)
    return {
        "step_size": _positive("step_size", params["step_size"]),
        "leapfrog_steps": _positive_int("leapfrog_steps",
                                        params.get("leapfrog_steps", DEFAULT_LEAPFROG_STEPS)),
        "mass": _per_dim("mass", params.get("mass", 1.0), model.dim),
        "clip": _optional_positive("clip", params.get("clip")),
        "jitter": _bool("jitter", params.get("jitter", True)),
        "block_size": _optional_block(params.get("block_size")),
    }


def _build_hmc(model, data, p):
    return build_hmc(model, _data(data), p["step_size"], p["leapfrog_steps"], p["mass"], p["clip"],
                     jitter=p["jitter"], block_size=p["block_size"])


# ---------------------------------------------------------------- dp-penalty

_PENALTY_KEYS = {"tau", "clip", "proposal_std", "mode", "block_size"}


def _prepare_dp_penalty(params, model, n):
    _common_checks("dp-penalty", params, _PENALTY_KEYS, ("tau", "clip", "proposal_std"), model, n)
    return {
        "tau": _positive("tau", params["tau"]),
        "clip": _positive("clip", params["clip"]),
        "proposal_std": _per_dim("proposal_std", params["proposal_std"], model.dim),
        "mode": _choice("mode", params.get("mode", "random-walk"), MODES),
        "block_size": _optional_block(params.get("block_size")),
    }


def _build_dp_penalty(model, data, p, noise=None):
    return build_dp_penalty(model, _data(data), p["tau"], p["clip"], p["proposal_std"], p["mode"],
                            block_size=p["block_size"], noise=noise)


def _accounting_dp_penalty(p):
    return {"tau": p["tau"]}


# ---------------------------------------------------------------- dp-hmc

_DPHMC_KEYS = {"tau_l", "tau_g", "clip", "grad_clip", "step_size", "leapfrog_steps", "mass",
               "jitter", "grad_method", "grad_dtype", "block_size"}


def _prepare_dp_hmc(params, model, n):
    _common_checks("dp-hmc", params, _DPHMC_KEYS,
                   ("tau_l", "tau_g", "clip", "grad_clip", "step_size"), model, n)
    return {
        "tau_l": _positive("tau_l", params["tau_l"]),
        "tau_g": _positive("tau_g", params["tau_g"]),
        "clip": _positive("clip", params["clip"]),
        "grad_clip": _positive("grad_clip", params["grad_clip"]),
        "step_size": _positive("step_size", params["step_size"]),
        "leapfrog_steps": _positive_int("leapfrog_steps",
                                        params.get("leapfrog_steps", DEFAULT_LEAPFROG_STEPS)),
        "mass": _per_dim("mass", params.get("mass", 1.0), model.dim),
        "jitter": _bool("jitter", params.get("jitter", True)),
        "grad_method": _choice("grad_method", params.get("grad_method", "auto"), GRAD_METHODS),
        "grad_dtype": _choice("grad_dtype", params.get("grad_dtype", "float32"), GRAD_DTYPES),
        "block_size": _optional_block(params.get("block_size")),
    }


def _build_dp_hmc(model, data, p, noise=None):
    return build_dp_hmc(model, _data(data), p["tau_l"], p["tau_g"], p["clip"], p["grad_clip"],
                        p["step_size"], p["leapfrog_steps"], p["mass"], jitter=p["jitter"],
                        grad_method=p["grad_method"], block_size=p["block_size"],
                        grad_dtype=p["grad_dtype"], noise=noise)


def _accounting_dp_hmc(p):
    return {"tau_l": p["tau_l"], "tau_g": p["tau_g"], "leapfrog_steps": p["leapfrog_steps"]}


def _no_accounting(p):
    return {}


# ---------------------------------------------------------------- dp-barker

_BARKER_KEYS = {"batch_size", "n0", "proposal_std", "mode"}


def _batch_size(value, n, minimum=1):
    b = _positive_int("batch_size", value)
    if not minimum <= b <= n:
        raise ValueError(f"batch_size must satisfy {minimum} <= batch_size <= n = {n}, got {b}")
    return b


def _prepare_dp_barker(params, model, n):
    _common_checks("dp-barker", params, _BARKER_KEYS, ("batch_size", "proposal_std"), model, n)
    # 002 Thm 2 needs an order 2 <= alpha < b/5, i.e. b > 10.
    b = _batch_size(params["batch_size"], n, _BARKER_MIN_BATCH)
    temperature = float(model.temperature)
    if params.get("n0") is None:
        n0 = temperature * n
    else:
        n0 = _positive("n0", params["n0"])
        check_n0(params["n0"], n)  # the accounting validator's rule and message
        # The tempering T = n0/n is the model's own unless the model is untempered.
        if temperature != 1.0 and not math.isclose(n0, temperature * n, rel_tol=1e-9):
            raise ValueError(f"n0={params['n0']!r} disagrees with model.temperature * n = "
                             f"{temperature * n:g}; omit n0 or use an untempered model")
    return {
        "batch_size": b,
        "n0": n0,
        "proposal_std": _per_dim("proposal_std", params["proposal_std"], model.dim),
        "mode": _choice("mode", params.get("mode", "random-walk"), MODES),
    }


def _build_dp_barker(model, data, p, noise=None):
    return build_dp_barker(model, _data(data), p["batch_size"], p["n0"], p["proposal_std"], p["mode"],
                           noise=noise)


def _accounting_dp_barker(p):
    return {"batch_size": p["batch_size"], "n0": p["n0"]}


# ---------------------------------------------------------------- minibatch-penalty

_MB_PENALTY_KEYS = {"tau", "batch_size", "clip", "proposal_std", "mode"}


def _prepare_minibatch_penalty(params, model, n):
    _common_checks("minibatch-penalty", params, _MB_PENALTY_KEYS,
                   ("tau", "batch_size", "clip", "proposal_std"), model, n)
    return {
        "tau": _positive("tau", params["tau"]),
        "batch_size": _batch_size(params["batch_size"], n),
        "clip": _positive("clip", params["clip"]),
        "proposal_std": _per_dim("proposal_std", params["proposal_std"], model.dim),
        "mode": _choice("mode", params.get("mode", "random-walk"), MODES),
    }


def _build_minibatch_penalty(model, data, p, noise=None):
    return build_minibatch_penalty(model, _data(data), p["tau"], p["batch_size"], p["clip"],
                                   p["proposal_std"], p["mode"], noise=noise)


def _accounting_minibatch_penalty(p):
    return {"tau": p["tau"], "batch_size": p["batch_size"]}


# ---------------------------------------------------------------- dp-sgld, dp-sgnht

_SGLD_KEYS = {"step_size", "batch_size", "noise_multiplier", "grad_clip", "grad_method",
              "block_size"}
_SGNHT_KEYS = _SGLD_KEYS | {"friction"}
_SGLD_REQUIRED = ("step_size", "batch_size", "noise_multiplier", "grad_clip")
DEFAULT_SGNHT_FRICTION = 1.0


def _prepare_sgld_common(algorithm, params, keys, model, n):
    _common_checks(algorithm, params, keys, _SGLD_REQUIRED, model, n)
    return {
        "step_size": _positive("step_size", params["step_size"]),
        "batch_size": _batch_size(params["batch_size"], n),
        "noise_multiplier": _positive("noise_multiplier", params["noise_multiplier"]),
        "grad_clip": _positive("grad_clip", params["grad_clip"]),
        "grad_method": _choice("grad_method", params.get("grad_method", "auto"), GRAD_METHODS),
        "block_size": _optional_block(params.get("block_size")),
    }


def _prepare_dp_sgld(params, model, n):
    return _prepare_sgld_common("dp-sgld", params, _SGLD_KEYS, model, n)


def _prepare_dp_sgnht(params, model, n):
    p = _prepare_sgld_common("dp-sgnht", params, _SGNHT_KEYS, model, n)
    p["friction"] = _positive("friction", params.get("friction", DEFAULT_SGNHT_FRICTION))
    return p


def _build_dp_sgld(model, data, p, noise=None):
    return build_dp_sgld(model, _data(data), p["step_size"], p["batch_size"],
                         p["noise_multiplier"], p["grad_clip"], grad_method=p["grad_method"],
                         block_size=p["block_size"], noise=noise)


def _build_dp_sgnht(model, data, p, noise=None):
    return build_dp_sgnht(model, _data(data), p["step_size"], p["batch_size"],
                          p["noise_multiplier"], p["grad_clip"], p["friction"],
                          grad_method=p["grad_method"], block_size=p["block_size"], noise=noise)


def _accounting_sgld(p):
    return {"noise_multiplier": p["noise_multiplier"], "batch_size": p["batch_size"]}


ALGORITHMS: dict[str, AlgorithmSpec] = {
    "rwmh": AlgorithmSpec("rwmh", False, _prepare_rwmh, _build_rwmh, _no_accounting),
    "hmc": AlgorithmSpec("hmc", False, _prepare_hmc, _build_hmc, _no_accounting),
    "dp-penalty": AlgorithmSpec("dp-penalty", True, _prepare_dp_penalty, _build_dp_penalty,
                                _accounting_dp_penalty),
    "dp-hmc": AlgorithmSpec("dp-hmc", True, _prepare_dp_hmc, _build_dp_hmc, _accounting_dp_hmc),
    "dp-barker": AlgorithmSpec("dp-barker", True, _prepare_dp_barker, _build_dp_barker,
                               _accounting_dp_barker),
    "minibatch-penalty": AlgorithmSpec("minibatch-penalty", True, _prepare_minibatch_penalty,
                                       _build_minibatch_penalty, _accounting_minibatch_penalty),
    "dp-sgld": AlgorithmSpec("dp-sgld", True, _prepare_dp_sgld, _build_dp_sgld, _accounting_sgld),
    "dp-sgnht": AlgorithmSpec("dp-sgnht", True, _prepare_dp_sgnht, _build_dp_sgnht,
                              _accounting_sgld),
}
