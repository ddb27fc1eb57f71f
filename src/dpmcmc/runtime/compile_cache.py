"""Compile once: an in-process cache of compiled chain programs and JAX's persistent cache.

A ``dpmcmc.sample`` call used to trace and compile its chain program afresh every time (7–16 s
for DP-HMC on the banana, where sampling took 1–6 s). Two caches remove that cost.

In-process
----------
:func:`dpmcmc.runtime.driver.run_chains` keeps the jitted chunk and initialisation functions
of a run given a ``cache_key`` in :data:`PROGRAMS`, keyed on what the traced program depends on:
the ``cache_key`` (for ``dpmcmc.sample``, :func:`kernel_cache_key`: the algorithm, the model
(by :func:`model_key`: what its functions compute, so that a model built again by the same
constructor with the same hyperparameters reuses the program) and the sampler's prepared
parameters (by value: they are public)), the chains, the chunk length, secure mode, and the
shapes, dtypes, shardings and static layout of the state, the keys and the data — never the
data's values, never ``id()`` of an array. The data are an argument of the kernel's step and
of the compiled program, so a second call with the same model and parameters on new data of
the same shape runs the program already compiled.

Persistent
----------
When dpmcmc starts sampling, :func:`ensure_persistent_cache` points JAX's persistent compilation
cache (``jax_compilation_cache_dir``) at a user cache directory, ``$XDG_CACHE_HOME/dpmcmc/jax``
or ``~/.cache/dpmcmc/jax``, and lowers ``jax_persistent_cache_min_compile_time_secs`` from JAX's
default 1 s to 0.5 s so the chain programs are written. A new process then loads the executable
instead of compiling it. This is done at the first sampling call, not at import, and only when
the user has not configured the cache: a ``jax_compilation_cache_dir`` the user set, or
``jax_enable_compilation_cache=False``, is left alone (and so is a minimum compile time the user
changed from JAX's default). Opt out with the environment variable
``DPMCMC_NO_COMPILE_CACHE=1`` or with :func:`set_compile_cache` (``dpmcmc.set_compile_cache``).

The cache is JAX's, and JAX's cache is process-wide: once dpmcmc has turned it on, every program
the process compiles afterwards for longer than the minimum time is written there, the user's
own programs included. A program that closes over a concrete array holds that array as a
constant, so a user who jits a function closing over sensitive data writes the data to the cache
directory; pass the data as an argument, or opt out. dpmcmc's own sampling programs take the
data, the keys and the secure-mode secret as arguments and hold none of them
(``tests/runtime/test_compile_cache.py`` reads the cache files back and looks for the data's values).
The directory is created with permissions 0o700: JAX loads and runs what it finds there, so a
cache directory others can write to lets them run code in your process.
"""
from __future__ import annotations

import collections
import os
import threading
from typing import Any, Hashable, Optional

import numpy as np

__all__ = ["set_compile_cache", "persistent_cache_dir", "ensure_persistent_cache", "PROGRAMS",
           "kernel_cache_key", "model_key", "signature", "Identity", "CHECKED"]

#: JAX's persistent cache writes programs that took at least this long to compile (JAX's own
#: default, 1 s, leaves out the smaller chain programs).
MIN_COMPILE_TIME_SECS = 0.5
_JAX_DEFAULT_MIN_COMPILE_TIME = 1.0

_LOCK = threading.Lock()
_switch: Optional[bool] = None      # set_compile_cache(...); None: not set, on unless the env says off
_directory: Optional[str] = None    # set_compile_cache(directory=...)
_ours: Optional[str] = None         # the directory dpmcmc set as jax_compilation_cache_dir, if any


def set_compile_cache(enabled: bool = True, directory: Optional[str] = None) -> None:
    """Turn dpmcmc's use of JAX's persistent compilation cache on or off for this process.

    Parameters
    ----------
    enabled : bool, default True
        ``False`` keeps dpmcmc from turning the persistent cache on (and turns it off again if
        dpmcmc turned it on earlier in this process); it overrides ``DPMCMC_NO_COMPILE_CACHE``
        either way. Compiled programs are still reused within the process.
    directory : str, optional
        Where to keep the cache instead of ``$XDG_CACHE_HOME/dpmcmc/jax`` (``~/.cache/dpmcmc/jax``).

    Notes
    -----
    Takes effect at the next sampling call. A cache directory the user configured in JAX itself
    (``jax_compilation_cache_dir``) is never changed.
    """
    global _switch, _directory
    if not isinstance(enabled, (bool, np.bool_)):
        raise TypeError(f"enabled must be True or False, got {enabled!r}")
    if directory is not None:
        if not isinstance(directory, (str, os.PathLike)) or not os.fspath(directory):
            raise TypeError(f"directory must be a non-empty path, got {directory!r}")
        directory = os.path.abspath(os.fspath(directory))
    with _LOCK:
        _switch = bool(enabled)
        _directory = directory
        if not enabled:
            _turn_off()


def persistent_cache_dir() -> str:
    """The persistent cache directory dpmcmc uses: ``$XDG_CACHE_HOME/dpmcmc/jax``, else
    ``~/.cache/dpmcmc/jax`` (or the directory given to :func:`set_compile_cache`)."""
    if _directory is not None:
        return _directory
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not base or not os.path.isabs(base):  # the XDG spec: a relative path is to be ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dpmcmc", "jax")


def _wanted() -> bool:
    if _switch is not None:
        return _switch
    return os.environ.get("DPMCMC_NO_COMPILE_CACHE", "").strip().lower() in ("", "0", "false", "no")


def ensure_persistent_cache() -> Optional[str]:
    """Point JAX's persistent cache at dpmcmc's directory unless opted out or user-configured.

    Called by the chain driver when a :func:`dpmcmc.sample` run starts. Returns the cache
    directory in use (dpmcmc's or the user's), or None when the persistent cache is off.
    """
    import jax

    with _LOCK:
        current = jax.config.jax_compilation_cache_dir
        if current is not None and current != _ours:
            return current  # the user's own cache: theirs to manage
        if not jax.config.jax_enable_compilation_cache:
            return None     # the user turned JAX's cache off
        if not _wanted():
            _turn_off()
            return None
        path = persistent_cache_dir()
        if current == path:
            return path
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            return None     # an unwritable home: run without the persistent cache
        _set(path)
        if jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_COMPILE_TIME:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME_SECS)
        return path


def _set(path: Optional[str]) -> None:
    global _ours
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    jax.config.update("jax_compilation_cache_dir", path)
    # JAX decides once per process, at its first compilation, whether the cache is used; by
    # now something has usually been compiled (a key split, say), so that decision is made
    # again with the new directory.
    compilation_cache.reset_cache()
    _ours = path


def _turn_off() -> None:
    import jax

    if _ours is not None and jax.config.jax_compilation_cache_dir == _ours:
        _set(None)


# ------------------------------------------------------------------------------ in-process cache

class Identity:
    """Hashes and compares by object identity, and keeps the object alive while it is a key
    (so its ``id`` cannot be taken by another object)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Identity) and other.obj is self.obj

    def __repr__(self) -> str:
        return f"Identity({type(self.obj).__name__})"


def kernel_cache_key(algorithm: str, build: Any, model: Any, prepared: dict) -> Optional[Hashable]:
    """The part of a run's cache key that fixes its kernel, or None when it cannot be keyed.

    ``prepared`` are the sampler's parameters after defaults (public values, keyed by value the
    way :func:`model_key` keys a model's constants); the model by :func:`model_key`, the spec's
    ``build`` by identity. None (no caching: the run compiles as before) if no key can be made.
    """
    try:
        return ("kernel", algorithm, Identity(build), model_key(model), _value_key(prepared, 0))
    except TypeError:
        return None


# An array larger than this is keyed by identity, not by its bytes: a model closing over (or a
# parameter holding) a large array is rare, and hashing it on every call is not free.
_MAX_KEYED_ARRAY_BYTES = 16 << 20
# Likewise a list, tuple or dict over this many entries (a module-level table a function reads).
_MAX_KEYED_ITEMS = 4096
_MAX_DEPTH = 6


def model_key(model: Any) -> Hashable:
    """A key of what a :class:`~dpmcmc.models.Model` traces to, equal for two models whose
    programs are the same.

    Two models built by the same constructor with the same hyperparameters hold distinct
    function objects (closures) that compute the same thing; keyed by identity, every
    ``banana(...)`` call would compile its chain programs again. The key is the model's type,
    its fields (``metadata`` excepted: never used in a run) and, for each function, the code
    object (by identity) and the values its closure cells, defaults and the module-level names
    it reads hold (numbers by type and value, arrays by dtype, shape and bytes, nested
    functions and models the same way, modules by identity) — what a trace bakes in. Whatever
    has no value key (an object without value equality, an array over 16 MiB, a container of
    over 4096 entries, a jitted function, nesting over six levels) is keyed by identity, so a
    key may miss a shared program but never shares a program between models that compute
    differently. Floats are keyed by their bits (``-0.0`` is not ``0.0``, NaN equals itself).
    """
    return _value_key(model, 0)


def _function_key(f: Any, depth: int) -> Hashable:
    import functools
    import types

    if isinstance(f, types.FunctionType):
        cells = []
        for cell in f.__closure__ or ():
            try:
                cells.append(_value_key(cell.cell_contents, depth + 1))
            except ValueError:  # an empty cell (a name assigned after the function was made)
                cells.append(("empty-cell",))
        kwdefaults = f.__kwdefaults__ or {}
        # The module-level names the code reads, by value: a constant changed between two
        # constructions must not share a program (modules by identity; builtins are not
        # globals).
        names = []
        for name in f.__code__.co_names:
            if name in f.__globals__:
                v = f.__globals__[name]
                names.append((name, ("module", Identity(v)) if isinstance(v, types.ModuleType)
                              else _value_key(v, depth + 1)))
        return ("function", Identity(f.__code__), Identity(f.__globals__), tuple(cells),
                tuple(names), _value_key(f.__defaults__, depth + 1),
                tuple(sorted((k, _value_key(v, depth + 1)) for k, v in kwdefaults.items())))
    if isinstance(f, functools.partial):
        return ("partial", _value_key(f.func, depth + 1), _value_key(f.args, depth + 1),
                tuple(sorted((k, _value_key(v, depth + 1)) for k, v in f.keywords.items())))
    if isinstance(f, types.MethodType):
        return ("method", _value_key(f.__func__, depth + 1), _value_key(f.__self__, depth + 1))
    return ("callable", Identity(f))


def _value_key(value: Any, depth: int) -> Hashable:
    import dataclasses

    if depth > _MAX_DEPTH:
        return ("object", Identity(value))
    if isinstance(value, float):
        return ("float", value.hex())  # tells -0.0 from 0.0, and NaN equals itself
    if value is None or isinstance(value, (bool, int, complex, str, bytes)):
        return (type(value).__name__, value)
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, value.item())
    if isinstance(value, (list, tuple, dict)) and len(value) > _MAX_KEYED_ITEMS:
        return ("object", Identity(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_value_key(v, depth + 1) for v in value))
    if isinstance(value, dict):
        try:
            items = sorted(value.items())
        except TypeError:
            return ("object", Identity(value))
        return ("dict", tuple((_value_key(k, depth + 1), _value_key(v, depth + 1))
                              for k, v in items))
    if isinstance(value, np.ndarray) or (hasattr(value, "__array__") and hasattr(value, "dtype")
                                         and hasattr(value, "shape")):
        if getattr(value, "nbytes", _MAX_KEYED_ARRAY_BYTES + 1) > _MAX_KEYED_ARRAY_BYTES:
            return ("object", Identity(value))
        try:
            arr = np.asarray(value)
        except Exception:  # a tracer, a deleted buffer: no value to key on
            return ("object", Identity(value))
        if arr.dtype == object:
            return ("object", Identity(value))
        return ("array", type(value).__name__, arr.dtype.str, arr.shape, arr.tobytes())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        params = getattr(type(value), "__dataclass_params__", None)
        if params is None or not params.frozen:
            return ("object", Identity(value))  # mutable: its fields may change under the key
        fields = tuple((f.name, _value_key(getattr(value, f.name), depth + 1))
                       for f in dataclasses.fields(value) if f.compare)
        return ("dataclass", type(value), fields)
    if callable(value) and not isinstance(value, type):
        return _function_key(value, depth)
    if isinstance(value, type) or type(value).__hash__ is object.__hash__:
        return ("object", Identity(value))
    try:
        hash(value)
    except TypeError:
        return ("object", Identity(value))
    return ("hashable", type(value), value)


def signature(tree: Any) -> Hashable:
    """Static structure, shapes, dtypes and shardings of a pytree: what the trace sees, not
    the values."""
    import jax

    leaves, treedef = jax.tree.flatten(tree)
    sig = []
    for leaf in leaves:
        shape = tuple(getattr(leaf, "shape", np.shape(leaf)))
        dtype = getattr(leaf, "dtype", None)
        sharding = getattr(leaf, "sharding", None)
        try:
            hash(sharding)
        except TypeError:
            sharding = None
        sig.append((type(leaf).__name__, shape, str(dtype), bool(getattr(leaf, "weak_type", False)),
                    sharding))
    return (treedef, tuple(sig))


class _LRU:
    """A small, thread-safe least-recently-used map of compiled programs."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._data: "collections.OrderedDict[Hashable, Any]" = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        with self._lock:
            if key not in self._data:
                return None
            self._data.move_to_end(key)
            return self._data[key]

    def put(self, key: Hashable, value: Any) -> Any:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


#: Jitted chunk, initialisation and start-check functions of recent runs. Bounded: an entry
#: holds a model and its compiled executables, which hold no data.
PROGRAMS = _LRU(maxsize=64)
#: Model contract checks passed in this process (``dpmcmc.models.check_model``), keyed by
#: :func:`model_key` and the public shapes and dtypes checked; each entry holds only ``True``.
CHECKED = _LRU(maxsize=256)
