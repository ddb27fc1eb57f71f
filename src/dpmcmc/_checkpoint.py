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
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from typing import Any

import numpy as np

__all__ = ["CheckpointError", "write_checkpoint", "read_checkpoint", "data_digest"]

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
