"""What a run returns: the private draws with their privacy report, and — kept apart and
labelled — the data-dependent run statistics that are NOT covered by the guarantee."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .accounting import PrivacyReport

__all__ = ["Result", "NonPrivateDiagnostics", "ResultFileError", "load", "import_arviz"]

# Marks a netCDF file written by Result.save, and the version of its layout.
_FORMAT = "dpmcmc-result"
_FORMAT_VERSION = 1
# Suffix of the optional sidecar that holds the NON-private diagnostics.
NOT_PRIVATE_SUFFIX = ".NOT_PRIVATE.json"


class ResultFileError(ValueError):
    """A saved result cannot be loaded: missing, truncated, corrupted or not a dpmcmc result."""

_NOT_PRIVATE = (
    "NOT PRIVATE: computed from the data without noise; for the data holder's own tuning only, "
    "do not publish or feed back into a private run"
)


def import_arviz():
    """Import ArviZ without its refactor announcement, which says nothing about our use."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


@dataclass(frozen=True, repr=False)
class NonPrivateDiagnostics:
    """Per-chain run statistics that depend on the data WITHOUT privacy noise.

    Acceptance rates, clip fractions and divergence counts are computed from the raw data and
    are not covered by the differential-privacy guarantee. They help the data holder check a
    run; releasing them leaks information about individuals.

    Attributes
    ----------
    acceptance_rate : ndarray (chains,)
        Fraction of accepted proposals per chain.
    clip_fraction : ndarray (chains,)
        Mean fraction of per-example terms clipped per iteration, per chain.
    divergences : ndarray (chains,)
        Number of iterations per chain where a non-finite value was met and the proposal was
        rejected.
    """

    acceptance_rate: np.ndarray
    clip_fraction: np.ndarray
    divergences: np.ndarray
    private: bool = field(default=False, init=False)
    warning: str = field(default=_NOT_PRIVATE, init=False)

    def __repr__(self) -> str:
        def fmt(a):
            return np.array2string(np.asarray(a), precision=3, separator=", ")

        return (
            f"NonPrivateDiagnostics[{_NOT_PRIVATE}](acceptance_rate={fmt(self.acceptance_rate)}, "
            f"clip_fraction={fmt(self.clip_fraction)}, divergences={fmt(self.divergences)})"
        )

    __str__ = __repr__

    def to_dict(self) -> dict:
        return {
            "NOT_PRIVATE": _NOT_PRIVATE,
            "acceptance_rate": np.asarray(self.acceptance_rate).tolist(),
            "clip_fraction": np.asarray(self.clip_fraction).tolist(),
            "divergences": np.asarray(self.divergences).tolist(),
        }


@dataclass(frozen=True)
class Result:
    """The outcome of :func:`dpmcmc.sample`.

    Attributes
    ----------
    samples : ndarray (chains, draws, dim)
        Every iteration's state of every chain: the private output.
    privacy : PrivacyReport or None
        The (ε, δ) spent by all chains together; ``None`` for the non-private baselines.
    diagnostics : NonPrivateDiagnostics or None
        Data-dependent statistics NOT covered by the guarantee (see its docstring). ``None`` for
        a result loaded without them (see :meth:`save`).
    algorithm : str
    params : dict
        The sampler parameters used (data-independent: chosen by the user or defaults).
    model_name : str
    secure : bool
        Whether the privacy noise came from the ChaCha20 generator (``secure=True``).
    """

    samples: np.ndarray
    privacy: Optional[PrivacyReport]
    diagnostics: Optional[NonPrivateDiagnostics] = field(repr=False)
    algorithm: str
    params: dict
    model_name: str = "custom"
    secure: bool = False

    @property
    def num_chains(self) -> int:
        return int(self.samples.shape[0])

    @property
    def num_draws(self) -> int:
        return int(self.samples.shape[1])

    def to_inference_data(self, burn_in: int = 0):
        """The draws as an ArviZ ``InferenceData`` with a posterior group only.

        No data, no per-example log-likelihoods and no non-private diagnostics are included,
        so the object is safe to publish alongside the privacy report (stored in the posterior
        group's ``attrs["privacy_report"]`` as JSON).

        Parameters
        ----------
        burn_in : int, default 0
            Number of initial draws per chain to drop.
        """
        az = import_arviz()
        if not 0 <= burn_in < self.num_draws:
            raise ValueError(f"burn_in must lie in [0, {self.num_draws}), got {burn_in}")
        idata = az.from_dict(
            posterior={"theta": np.asarray(self.samples[:, burn_in:, :])},
            dims={"theta": ["theta_dim"]},
        )
        idata.posterior.attrs["algorithm"] = self.algorithm
        idata.posterior.attrs["model"] = self.model_name
        idata.posterior.attrs["params"] = json.dumps(_jsonable(self.params))
        idata.posterior.attrs["privacy_report"] = (
            self.privacy.to_json() if self.privacy is not None else "null"
        )
        idata.posterior.attrs["secure_noise"] = int(bool(self.secure))
        return idata

    def save(self, path: str | os.PathLike, *, diagnostics: bool = False) -> str:
        """Save the draws and the privacy report to a netCDF file (no data needed to reload).

        The file is :meth:`to_inference_data` written by ArviZ (HDF5-based netCDF4, engine
        h5netcdf): the posterior group holds every draw (no burn-in removed) and its attributes
        hold the privacy report as JSON (``privacy_report``), the algorithm, the sampler
        parameters, the model name, whether secure noise was used, a format marker and a SHA-256
        of the draws that :func:`load` checks. Everything in it is covered by the privacy
        guarantee, so it can be published together with the report.

        The non-private diagnostics are NOT written into that file. With ``diagnostics=True``
        they go to a separate sidecar ``<path>.NOT_PRIVATE.json`` (labelled NOT PRIVATE, mode
        0o600), which :func:`load` reads back when present; never publish the sidecar.

        Parameters
        ----------
        path : path-like
            Destination, conventionally ``*.nc``. Written atomically (temporary file + rename).
        diagnostics : bool, default False
            Also write the NON-private diagnostics sidecar.

        Returns
        -------
        str
            The path written.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a file path, got {type(path).__name__}")
        path = os.fspath(path)
        if not isinstance(diagnostics, (bool, np.bool_)):
            raise TypeError(f"diagnostics must be True or False, got {diagnostics!r}")
        if diagnostics and self.diagnostics is None:
            raise ValueError("diagnostics=True but this result has no diagnostics (loaded without them)")
        idata = self.to_inference_data()
        attrs = idata.posterior.attrs
        attrs["dpmcmc_format"] = _FORMAT
        attrs["dpmcmc_format_version"] = _FORMAT_VERSION
        attrs["samples_sha256"] = _digest(np.asarray(self.samples, dtype=np.float64))
        from . import __version__

        attrs["dpmcmc_version"] = __version__
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".dpmcmc-result-", suffix=".nc", dir=directory)
        os.close(fd)
        try:
            idata.to_netcdf(tmp)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        sidecar = path + NOT_PRIVATE_SUFFIX
        if diagnostics:
            _write_private_json(sidecar, self.diagnostics.to_dict())
        elif os.path.exists(sidecar):
            # A stale sidecar from an earlier save would be read back as this result's.
            os.unlink(sidecar)
        return path

    def __repr__(self) -> str:
        eps = "not private" if self.privacy is None else f"ε={self.privacy.epsilon:.4g}, δ={self.privacy.delta:.3g}"
        return (
            f"Result(algorithm={self.algorithm!r}, model={self.model_name!r}, chains={self.num_chains}, "
            f"draws={self.num_draws}, dim={self.samples.shape[2]}, {eps})"
        )


def load(path: str | os.PathLike) -> Result:
    """Load a result written by :meth:`Result.save`.

    Parameters
    ----------
    path : path-like
        The netCDF file. If ``<path>.NOT_PRIVATE.json`` exists beside it, the non-private
        diagnostics are read from it; otherwise ``Result.diagnostics`` is ``None``.

    Returns
    -------
    Result

    Raises
    ------
    ResultFileError
        (a ValueError) If the file is missing, truncated, corrupted, not written by dpmcmc, or
        inconsistent with its privacy report; the message names the path.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path, got {type(path).__name__}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ResultFileError(f"no saved result at {path!r}")
    az = import_arviz()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            idata = az.from_netcdf(path)
        posterior = idata.posterior
        theta = np.asarray(posterior["theta"].values, dtype=np.float64)
        attrs = dict(posterior.attrs)
    except Exception as exc:  # h5py/h5netcdf/xarray raise many types for a damaged file
        raise ResultFileError(f"{path!r} is truncated, corrupted or not a netCDF file "
                              f"({type(exc).__name__}: {exc})") from None
    if attrs.get("dpmcmc_format") != _FORMAT:
        raise ResultFileError(f"{path!r} is not a result saved by dpmcmc (no format marker)")
    if int(attrs.get("dpmcmc_format_version", -1)) != _FORMAT_VERSION:
        raise ResultFileError(f"{path!r} has result format version "
                              f"{attrs.get('dpmcmc_format_version')!r}; this dpmcmc reads {_FORMAT_VERSION}")
    if theta.ndim != 3:
        raise ResultFileError(f"{path!r}: draws have shape {theta.shape}, expected (chains, draws, dim)")
    if attrs.get("samples_sha256") != _digest(theta):
        raise ResultFileError(f"{path!r} is corrupted: the draws do not match their checksum")
    try:
        report_json = attrs["privacy_report"]
        privacy = None if report_json == "null" else PrivacyReport.from_json(report_json)
        params = json.loads(attrs["params"])
        algorithm = str(attrs["algorithm"])
        model_name = str(attrs["model"])
        secure = bool(int(attrs.get("secure_noise", 0)))
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultFileError(f"{path!r} has a missing or corrupted attribute "
                              f"({type(exc).__name__}: {exc})") from None
    if privacy is not None and (privacy.chains != theta.shape[0] or privacy.iterations != theta.shape[1]):
        raise ResultFileError(
            f"{path!r}: the privacy report covers {privacy.chains} chain(s) of {privacy.iterations} "
            f"iterations but the file holds {theta.shape[0]} of {theta.shape[1]}"
        )
    diagnostics = None
    sidecar = path + NOT_PRIVATE_SUFFIX
    if os.path.exists(sidecar):
        try:
            with open(sidecar) as f:
                d = json.load(f)
            diagnostics = NonPrivateDiagnostics(
                acceptance_rate=np.asarray(d["acceptance_rate"], dtype=float),
                clip_fraction=np.asarray(d["clip_fraction"], dtype=float),
                divergences=np.asarray(d["divergences"], dtype=int),
            )
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise ResultFileError(f"{sidecar!r} (non-private diagnostics) is corrupted "
                                  f"({type(exc).__name__}: {exc})") from None
        if diagnostics.acceptance_rate.shape != (theta.shape[0],):
            raise ResultFileError(f"{sidecar!r} does not match {path!r}: wrong number of chains")
    return Result(samples=theta, privacy=privacy, diagnostics=diagnostics, algorithm=algorithm,
                  params=params, model_name=model_name, secure=secure)


def _digest(arr: np.ndarray) -> str:
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    return hashlib.sha256(f"{arr.shape}|".encode() + arr.tobytes()).hexdigest()


def _write_private_json(path: str, payload: dict) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".dpmcmc-np-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _jsonable(obj: Any):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return repr(obj)
