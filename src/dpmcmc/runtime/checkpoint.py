"""Checkpoint files of :func:`dpmcmc.sample` (``checkpoint=path``).

A checkpoint holds everything needed to finish a run exactly as if it had never stopped: the
chain states after the last completed chunk, the draws and per-iteration diagnostics so far, the
iteration count, the planned number of iterations, the run's PRNG key (and, in secure mode, its
secret ChaCha20 key), the privacy report the run was accounted for, and a fingerprint of the
inputs (algorithm, parameters, budget, a SHA-256 of the data, ...) that a resumed call must match.

The file is a NumPy ``.npz`` archive (no pickles) with the metadata as one JSON string. It is
written atomically — a temporary file in the same directory, flushed and ``fsync``-ed, then
renamed over the old one — so an interruption at any moment leaves either the previous complete
checkpoint or the new one. It is created with permissions 0o600: it contains the PRNG key, which
is as secret as the data (anyone holding it can regenerate the noise), and the non-private
diagnostics.

Besides the file format, this module holds what ``dpmcmc.sample`` does with checkpoints: the
fingerprint of a call (:func:`fingerprint`), reading a checkpoint back for a resumed call
(:func:`load`, :func:`same_secret`) and writing one during a run (:class:`CheckpointWriter`).
JAX is imported inside the functions that need it: ``dpmcmc.load`` (``result.py``) uses
:func:`jsonable` from here and stays JAX-free.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from typing import Any, NamedTuple, Optional

import numpy as np

__all__ = ["CheckpointError", "write_checkpoint", "read_checkpoint", "data_digest", "jsonable",
           "validate_path", "fingerprint", "SavedRun", "load", "same_secret", "CheckpointWriter"]

FORMAT = "dpmcmc-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint file is unreadable, corrupted, or belongs to a different run."""


def data_digest(arr: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and bytes (C order)."""
    arr = np.ascontiguousarray(arr)
    h = hashlib.sha256()
    h.update(f"{arr.dtype.str}|{arr.shape}|".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def write_checkpoint(path: str | os.PathLike, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write ``meta`` (JSON-able) and ``arrays`` to ``path`` atomically with mode 0o600.

    Parameters
    ----------
    path : path-like
        Destination; its directory must exist.
    meta : dict
        JSON-serialisable metadata.
    arrays : dict of str to ndarray
        Numeric arrays (no object dtype).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    payload = dict(arrays)
    payload["__meta__"] = np.array(json.dumps({"format": FORMAT, "version": VERSION, **meta}))
    digest = hashlib.sha256()
    for name in sorted(arrays):
        digest.update(name.encode())
        digest.update(data_digest(np.asarray(arrays[name])).encode())
    payload["__digest__"] = np.array(digest.hexdigest())
    # mkstemp creates the file with mode 0o600 (owner read/write only) from the start, so the
    # key is never readable by others, even briefly.
    fd, tmp = tempfile.mkstemp(prefix=".dpmcmc-ckpt-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable where the platform allows it
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def read_checkpoint(path: str | os.PathLike) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a checkpoint written by :func:`write_checkpoint`.

    Returns
    -------
    meta : dict
    arrays : dict of str to ndarray

    Raises
    ------
    CheckpointError
        If the file is not a complete, intact dpmcmc checkpoint (the message names the path).
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            files = {name: np.asarray(z[name]) for name in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise CheckpointError(f"checkpoint {path!r} is truncated or corrupted and cannot be read "
                              f"({type(exc).__name__}: {exc}); delete it to start a new run") from None
    if "__meta__" not in files or "__digest__" not in files:
        raise CheckpointError(f"{path!r} is not a dpmcmc checkpoint (no metadata)")
    try:
        meta = json.loads(str(files.pop("__meta__")))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"checkpoint {path!r} has corrupted metadata: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{path!r} is not a dpmcmc checkpoint")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"checkpoint {path!r} has format version {meta.get('version')!r}; "
                              f"this dpmcmc reads version {VERSION}")
    stored = str(files.pop("__digest__"))
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode())
        digest.update(data_digest(files[name]).encode())
    if digest.hexdigest() != stored:
        raise CheckpointError(f"checkpoint {path!r} is corrupted: its arrays do not match their "
                              "checksum")
    return meta, files


def jsonable(obj: Any):
    """``obj`` with tuples/arrays turned into lists, for JSON and for comparisons."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return repr(obj)


def validate_path(checkpoint: Any) -> Optional[str]:
    """``checkpoint`` as a file path whose directory exists (``None`` stays ``None``)."""
    if checkpoint is None:
        return None
    if not isinstance(checkpoint, (str, os.PathLike)):
        raise TypeError(f"checkpoint must be a file path, got {type(checkpoint).__name__}")
    path = os.fspath(checkpoint)
    if not isinstance(path, str) or not path:
        raise ValueError(f"checkpoint must be a non-empty file path, got {checkpoint!r}")
    if os.path.isdir(path):
        raise ValueError(f"checkpoint must be a file path, got the directory {path!r}")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ValueError(f"checkpoint: directory {directory!r} does not exist")
    return path


def fingerprint(*, model, data: np.ndarray, algorithm: str, params: dict, chains: int, epsilon,
                delta, iterations, accountant, relation, theta0, secure: bool) -> dict:
    """What a resumed call must repeat, as JSON-able values (the data as a SHA-256 digest).

    The arguments are the caller's as given (before the accountant fills in defaults), so a
    resumed call is compared with the first one on exactly what the user controls. ``theta0``
    is ``None``, the string ``"private"``, or the starting points (stored as their digest).
    """
    return jsonable({
        "algorithm": algorithm,
        "params": params,
        "chains": chains,
        "data": data_digest(data),
        "data_shape": list(data.shape),
        "model_name": model.name,
        "model_dim": model.dim,
        "temperature": float(model.temperature),
        "epsilon": epsilon,
        "delta": delta,
        "iterations": iterations,
        "accountant": accountant,
        "relation": relation,
        "theta0": None if theta0 is None else (
            theta0 if isinstance(theta0, str) else data_digest(np.asarray(theta0, np.float64))),
        "secure": bool(secure),
    })


class SavedRun(NamedTuple):
    """What a resumed run takes from its checkpoint.

    Attributes
    ----------
    key : jax PRNG key
        The run's key (as secret as the data).
    secret : jax uint32 array (8,) or None
        The secure-mode ChaCha20 key, if the run is in secure mode.
    theta0 : ndarray (chains, dim)
    planned : int
        Iterations per chain the run was planned for.
    report : PrivacyReport or None
        The report the run was accounted for (``None`` for a non-private algorithm).
    progress : dpmcmc.runtime.driver.RunProgress
        Where the run stood when the checkpoint was written.
    """

    key: Any
    secret: Any
    theta0: np.ndarray
    planned: int
    report: Any
    progress: Any


def load(path: str, expected: dict, dim: int, chains: int) -> SavedRun:
    """Read ``path`` and check it belongs to the call whose :func:`fingerprint` is ``expected``.

    Raises
    ------
    CheckpointError
        If the file is unreadable or corrupted, or was written by a different call (the message
        names the arguments that differ).
    """
    import jax
    import jax.numpy as jnp

    from ..accounting import PrivacyReport
    from .driver import RunProgress

    meta, arrays = read_checkpoint(path)
    try:
        stored = meta["fingerprint"]
        diff = sorted(k for k in set(stored) | set(expected) if stored.get(k) != expected.get(k))
        if diff:
            raise CheckpointError(
                f"checkpoint {path!r} belongs to a different run: {', '.join(diff)} differ from the "
                "call that wrote it; repeat that call's arguments to resume, or use another path"
            )
        n_state, n_info, done, planned = (int(meta[k]) for k in ("n_state", "n_info", "done", "planned"))
        key = jax.random.wrap_key_data(jnp.asarray(arrays["key"]), impl=meta["key_impl"])
        report = None if meta["report"] is None else PrivacyReport.from_json(meta["report"])
        theta0 = np.asarray(arrays["theta0"])
        if theta0.shape != (chains, dim) or not 0 <= done <= planned:
            raise ValueError("inconsistent shapes or counts")
        progress = RunProgress([arrays[f"state_{i}"] for i in range(n_state)], arrays["positions"],
                               [arrays[f"info_{i}"] for i in range(n_info)], done)
        secret = jnp.asarray(arrays["secret"]) if "secret" in arrays else None
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path!r} is corrupted or incomplete ({type(exc).__name__}: "
                              f"{exc})") from None
    return SavedRun(key=key, secret=secret, theta0=theta0, planned=planned, report=report,
                    progress=progress)


def same_secret(name: str, given: Any, stored: Any, path: str):
    """The stored key, after checking that a key given again is the same one.

    ``name`` is ``"key"`` (JAX keys) or ``"secure"`` (``given`` a SecureKey, ``stored`` its
    words); ``given=None`` reuses the stored key.
    """
    import jax

    if stored is None:
        raise CheckpointError(f"checkpoint {path!r} holds no {name} key")
    if given is None:
        return stored
    given_words = np.asarray(jax.random.key_data(given) if name == "key" else given.words)
    stored_words = np.asarray(jax.random.key_data(stored) if name == "key" else stored)
    if given_words.shape != stored_words.shape or not np.array_equal(given_words, stored_words):
        raise CheckpointError(
            f"checkpoint {path!r} belongs to a different run: {name} differs from the key it was "
            f"started with (pass the same {name}, or {'None' if name == 'key' else 'True'} to reuse "
            "the stored one)"
        )
    return stored


class CheckpointWriter:
    """Writes a run's checkpoint (atomic, 0o600) at the start and after every chunk.

    Parameters
    ----------
    path : str
    fingerprint : dict
        The call's :func:`fingerprint`.
    key, secret
        The run's PRNG key and secure-mode secret (or ``None``).
    theta0 : ndarray (chains, dim)
    planned : int
        Iterations per chain.
    report : PrivacyReport or None
    """

    def __init__(self, path: str, fingerprint: dict, key, secret, theta0: np.ndarray, planned: int,
                 report):
        import jax

        self.path = path
        self.meta = {
            "fingerprint": fingerprint,
            "planned": int(planned),
            "key_impl": str(jax.random.key_impl(key)),
            "report": None if report is None else report.to_json(),
        }
        self.fixed = {"key": np.asarray(jax.random.key_data(key)), "theta0": np.asarray(theta0)}
        if secret is not None:
            self.fixed["secret"] = np.asarray(secret)

    def write_start(self, state, theta0: np.ndarray) -> None:
        """Write the run before its first noise draw (iteration 0): ``state`` the initial kernel
        states (``dpmcmc.samplers.init_states``), ``theta0`` the starting points."""
        from .driver import RunProgress

        # The infos' structure is known only after a step; an empty checkpoint stores none and
        # the driver rebuilds empty infos from the kernel when it resumes at iteration 0.
        self.write(RunProgress(state, np.zeros((theta0.shape[0], 0, theta0.shape[1])), None, 0))

    def write(self, prog) -> None:
        """Write the run as it stands after a chunk (a ``RunProgress``)."""
        import jax

        state = [np.asarray(a) for a in jax.tree.leaves(prog.state)]
        infos = [] if prog.infos is None else [np.asarray(a) for a in jax.tree.leaves(prog.infos)]
        arrays = dict(self.fixed)
        arrays["positions"] = np.asarray(prog.positions)
        arrays.update({f"state_{i}": a for i, a in enumerate(state)})
        arrays.update({f"info_{i}": a for i, a in enumerate(infos)})
        meta = dict(self.meta, done=int(prog.done), n_state=len(state), n_info=len(infos))
        write_checkpoint(self.path, meta, arrays)
