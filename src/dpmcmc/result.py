"""What a run returns: the private draws with their privacy report, the run statistics that are
post-processing of the private releases (covered by the guarantee), and — kept apart and
labelled — the data-dependent run statistics that are NOT covered by the guarantee.

Which statistic is which, per sampler, and why, is argued once in ``docs/post_processing.md``.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .runtime.checkpoint import jsonable
from .accounting import PrivacyReport

__all__ = ["Result", "ReleasedStatistics", "NonPrivateDiagnostics", "ResultFileError", "load",
           "import_arviz"]

# Marks a netCDF file written by Result.save, and the version of its layout. The sample_stats
# group (released statistics) is an optional addition: files without it still read as version 1.
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

_COVERED = (
    "covered by the privacy guarantee: functions of the accounted noisy releases and of "
    "data-independent randomness only (post-processing); see docs/post_processing.md"
)


#: Algorithms whose draws are independent post-processing draws from a posterior built on a
#: fixed set of releases: their PrivacyReport's ``iterations`` counts release rounds.
POST_PROCESSING_DRAWS = frozenset({"noise-aware-glm", "auto-approximation"})


def import_arviz():
    """Import ArviZ without its refactor announcement, which says nothing about our use."""
    with warnings.catch_warnings():
        # ArviZ 0.23 announces its refactor once a day per user, on first import; only that
        # message is silenced, any other warning of the import still shows.
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing", category=FutureWarning)
        import arviz

    return arviz


def _fmt(a) -> str:
    return np.array2string(np.asarray(a), precision=3, separator=", ")


@dataclass(frozen=True, repr=False)
class ReleasedStatistics:
    """Per-draw accept and divergence flags of a private run: covered by the privacy guarantee.

    For every private algorithm the accept decision and the divergence flag of an iteration are
    functions of that iteration's accounted noisy releases, of data-independent randomness
    (proposal, momentum, accept uniform, Barker correction) and of the previous
    draw, which is itself released. Post-processing cannot weaken differential privacy, so these
    flags are covered by the run's ``PrivacyReport`` and may be published with the draws (the
    accept flags can in any case be read off the draws: a rejection repeats the previous draw).
    The argument, sampler by sampler, is in ``docs/post_processing.md``. The subsampled
    samplers' batches are not involved: the flags depend on a batch only through the noisy
    statistic released from it.

    This is what makes warm-up adaptation from acceptance rates free of privacy cost.

    Attributes
    ----------
    accepted : ndarray of bool (chains, draws)
        Whether iteration ``t`` of each chain accepted its proposal. Always True for the
        samplers without an accept step (dp-sgld, dp-sgnht).
    diverged : ndarray of bool (chains, draws)
        Whether iteration ``t`` met a non-finite value (proposal, leapfrog end point, noisy
        log-ratio or Langevin update) and was rejected because of it.
    covered_by_guarantee : bool
        Always True: the label of this object.
    note : str
        The same, in words.
    """

    accepted: np.ndarray
    diverged: np.ndarray
    covered_by_guarantee: bool = field(default=True, init=False)
    note: str = field(default=_COVERED, init=False)

    def __post_init__(self):
        accepted = np.asarray(self.accepted)
        diverged = np.asarray(self.diverged)
        for name, arr in (("accepted", accepted), ("diverged", diverged)):
            if arr.ndim != 2:
                raise ValueError(f"{name} must have shape (chains, draws), got {arr.shape}")
            if arr.dtype != np.bool_ and not np.all((arr == 0) | (arr == 1)):
                raise ValueError(f"{name} must hold booleans (or 0/1), got dtype {arr.dtype}")
        if accepted.shape != diverged.shape:
            raise ValueError(f"accepted {accepted.shape} and diverged {diverged.shape} must have "
                             "the same shape (chains, draws)")
        # Read-only copies: the object is frozen and may be shared by loaded results.
        for name, arr in (("accepted", accepted), ("diverged", diverged)):
            arr = arr.astype(bool, copy=True)
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)

    @property
    def acceptance_rate(self) -> np.ndarray:
        """Fraction of accepted proposals per chain, shape ``(chains,)``."""
        return np.mean(self.accepted, axis=1, dtype=np.float64)

    @property
    def divergences(self) -> np.ndarray:
        """Number of diverged iterations per chain, shape ``(chains,)``."""
        return np.sum(self.diverged, axis=1, dtype=np.int64)

    def __repr__(self) -> str:
        return (f"ReleasedStatistics[{_COVERED}](acceptance_rate={_fmt(self.acceptance_rate)}, "
                f"divergences={_fmt(self.divergences)})")

    __str__ = __repr__

    def to_dict(self) -> dict:
        """Per-chain summaries and the per-draw flags as JSON-ready lists, with the label."""
        return {
            "covered_by_guarantee": True,
            "note": _COVERED,
            "acceptance_rate": self.acceptance_rate.tolist(),
            "divergences": self.divergences.tolist(),
            "accepted": self.accepted.tolist(),
            "diverged": self.diverged.tolist(),
        }


_MOVED = ("{name} of a private algorithm is post-processing of its noisy releases and covered by "
          "the privacy guarantee: it is Result.released.{name} (see docs/post_processing.md)")


class NonPrivateDiagnostics:
    """Per-chain run statistics that depend on the data WITHOUT privacy noise.

    They are not covered by the differential-privacy guarantee: they help the data holder check
    a run, but releasing them leaks information about individuals. Do not publish them, and do
    not feed them back into a private run.

    Which statistics are here depends on the algorithm:

    * private algorithms: the clip fractions only. Their acceptance rates and divergence counts
      are post-processing of the noisy releases and live in :class:`ReleasedStatistics`
      (``Result.released``); reading them here raises an ``AttributeError`` that says so.
    * non-private algorithms (``rwmh``, ``hmc``): acceptance rates, clip fractions and
      divergence counts, all computed from the raw data.

    Parameters
    ----------
    acceptance_rate : array (chains,), optional
        Only for the non-private algorithms.
    clip_fraction : array (chains,)
        Mean fraction of per-example terms clipped per iteration, per chain.
    divergences : array (chains,), optional
        Only for the non-private algorithms: iterations per chain where a non-finite value was
        met and the proposal was rejected.

    Attributes
    ----------
    clip_fraction : ndarray (chains,)
    acceptance_rate, divergences : ndarray (chains,)
        See above.
    private : bool
        Always False.
    warning : str
        The NOT PRIVATE label.
    """

    private = False
    warning = _NOT_PRIVATE
    __slots__ = ("clip_fraction", "_acceptance_rate", "_divergences")

    def __init__(self, acceptance_rate: Optional[np.ndarray] = None,
                 clip_fraction: Optional[np.ndarray] = None,
                 divergences: Optional[np.ndarray] = None):
        if clip_fraction is None:
            raise TypeError("NonPrivateDiagnostics requires clip_fraction")
        if (acceptance_rate is None) != (divergences is None):
            raise TypeError("give acceptance_rate and divergences together (non-private "
                            "algorithms) or neither (private algorithms)")
        set_ = object.__setattr__
        set_(self, "clip_fraction", np.asarray(clip_fraction))
        set_(self, "_acceptance_rate", None if acceptance_rate is None else np.asarray(acceptance_rate))
        set_(self, "_divergences", None if divergences is None else np.asarray(divergences))

    def __setattr__(self, name, value):
        raise AttributeError(f"NonPrivateDiagnostics is immutable (cannot set {name!r})")

    def __reduce__(self):
        # Rebuilt through __init__: the default slot-state restore would go through __setattr__.
        return (NonPrivateDiagnostics, (self._acceptance_rate, self.clip_fraction, self._divergences))

    @property
    def acceptance_rate(self) -> np.ndarray:
        """Acceptance rate per chain: NON-private, for rwmh/hmc only (a private run's is
        ``Result.released.acceptance_rate``)."""
        if self._acceptance_rate is None:
            raise AttributeError(_MOVED.format(name="acceptance_rate"))
        return self._acceptance_rate

    @property
    def divergences(self) -> np.ndarray:
        """Divergences per chain: NON-private, for rwmh/hmc only (a private run's are
        ``Result.released.divergences``)."""
        if self._divergences is None:
            raise AttributeError(_MOVED.format(name="divergences"))
        return self._divergences

    def fields(self) -> dict:
        """The statistics this object holds itself (all NOT private), by name."""
        if self._acceptance_rate is None:
            return {"clip_fraction": self.clip_fraction}
        return {"acceptance_rate": self._acceptance_rate, "clip_fraction": self.clip_fraction,
                "divergences": self._divergences}

    def __repr__(self) -> str:
        parts = ", ".join(f"{name}={_fmt(value)}" for name, value in self.fields().items())
        if self._acceptance_rate is None:
            parts += ", acceptance_rate/divergences: see Result.released (covered by the guarantee)"
        return f"NonPrivateDiagnostics[{_NOT_PRIVATE}]({parts})"

    __str__ = __repr__

    def to_dict(self) -> dict:
        """The NOT-private statistics this object holds, with the label (the sidecar's content)."""
        out = {"NOT_PRIVATE": _NOT_PRIVATE}
        out.update({name: value.tolist() for name, value in self.fields().items()})
        return out


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
        Data-dependent statistics NOT covered by the guarantee (see its docstring): the clip
        fractions, and for the non-private algorithms also acceptance and divergences. ``None``
        for a result loaded without them (see :meth:`save`).
    algorithm : str
    params : dict
        The sampler parameters used (data-independent: chosen by the user or defaults).
    model_name : str
    secure : bool
        Whether the privacy noise came from the ChaCha20 generator (``secure=True``).
    released : ReleasedStatistics or None
        For a private algorithm: the per-draw accept and divergence flags, which are
        post-processing of the noisy releases and covered by the guarantee (see its docstring
        and ``docs/post_processing.md``). ``None`` for the non-private algorithms, whose
        acceptance and divergences stay in ``diagnostics``.
    param_names : tuple of str or None
        One name per parameter (see ``Model.param_names``). When given, :meth:`to_inference_data`
        and :meth:`save` write one posterior variable per name (each of shape (chain, draw))
        instead of one ``theta`` vector, and :func:`load` restores them.
    plan : dpmcmc.plan.Plan or None
        The run's plan (public inputs only: iterations, noise next to the moves, warnings), as
        :func:`dpmcmc.plan` gives it. Not saved to the file (recompute it from the report's
        parameters); ``None`` for a loaded result.
    adapted : dict or None
        After a warm-up (``dpmcmc.sample(warmup=...)``): the adapted parameters per chain
        (``proposal_std`` (chains, dim), or ``step_size`` (chains,) and ``mass`` (chains, dim)),
        post-processing of released values. Not saved to the file; ``None`` otherwise.
    warmup : int, default 0
        Warm-up iterations per chain that ran before the draws: paid for (the privacy report's
        ``iterations`` counts them) and dropped from ``samples``, which hold
        ``privacy.iterations − warmup`` draws per chain. Saved to the file, so that :func:`load`
        can check the draws against the report.
    """

    samples: np.ndarray
    privacy: Optional[PrivacyReport]
    diagnostics: Optional[NonPrivateDiagnostics] = field(repr=False)
    algorithm: str
    params: dict
    model_name: str = "custom"
    secure: bool = False
    released: Optional[ReleasedStatistics] = field(default=None, repr=False)
    param_names: Optional[tuple] = None
    plan: Any = field(default=None, repr=False, compare=False)
    adapted: Optional[dict] = field(default=None, repr=False, compare=False)
    warmup: int = 0

    def __post_init__(self):
        if (isinstance(self.warmup, (bool, np.bool_)) or not isinstance(self.warmup, (int, np.integer))
                or self.warmup < 0):
            raise ValueError(f"warmup must be a non-negative integer, got {self.warmup!r}")
        object.__setattr__(self, "warmup", int(self.warmup))
        if self.param_names is not None:
            from .models.base import check_param_names

            names = check_param_names(self.param_names, int(np.shape(self.samples)[2]))
            # ArviZ's dimensions and netCDF's path separator cannot be variable names.
            clash = [nm for nm in names if nm in ("chain", "draw") or "/" in nm]
            if clash:
                raise ValueError(f"param_names: {clash[0]!r} cannot name a posterior variable "
                                 "('chain' and 'draw' are dimensions; '/' separates netCDF groups)")
            object.__setattr__(self, "param_names", names)
        if self.released is not None:
            if not isinstance(self.released, ReleasedStatistics):
                raise TypeError("released must be a ReleasedStatistics or None, got "
                                f"{type(self.released).__name__}")
            if self.privacy is None:
                raise ValueError("released statistics belong to a private run, but privacy is None")
            draws = tuple(np.shape(self.samples)[:2])
            if self.released.accepted.shape != draws:
                raise ValueError(f"released flags have shape {self.released.accepted.shape}, the "
                                 f"draws (chains, draws) = {draws}")
        if self.diagnostics is not None and not isinstance(self.diagnostics, NonPrivateDiagnostics):
            raise TypeError("diagnostics must be a NonPrivateDiagnostics or None, got "
                            f"{type(self.diagnostics).__name__}")

    @property
    def num_chains(self) -> int:
        return int(self.samples.shape[0])

    @property
    def num_draws(self) -> int:
        return int(self.samples.shape[1])

    def to_inference_data(self, burn_in: int = 0):
        """The draws as an ArviZ ``InferenceData``: a posterior group, and for a private run a
        ``sample_stats`` group with the released flags.

        The ``sample_stats`` group (present when :attr:`released` is set) holds the per-draw
        booleans ``accepted`` and ``diverging`` (ArviZ's name for divergences), which are
        post-processing of the noisy releases; its attribute ``covered_by_guarantee`` is 1. No
        data, no per-example log-likelihoods and no non-private diagnostics (clip fractions, the
        non-private samplers' acceptance) are included, so the object is safe to publish
        alongside the privacy report (stored in the posterior group's
        ``attrs["privacy_report"]`` as JSON).

        Parameters
        ----------
        burn_in : int, default 0
            Number of initial draws per chain to drop.
        """
        az = import_arviz()
        if not 0 <= burn_in < self.num_draws:
            raise ValueError(f"burn_in must lie in [0, {self.num_draws}), got {burn_in}")
        stats = None
        if self.released is not None:
            stats = {"accepted": self.released.accepted[:, burn_in:],
                     "diverging": self.released.diverged[:, burn_in:]}
        draws = np.asarray(self.samples[:, burn_in:, :])
        if self.param_names is None:
            posterior, dims = {"theta": draws}, {"theta": ["theta_dim"]}
        else:
            posterior = {nm: draws[:, :, j] for j, nm in enumerate(self.param_names)}
            dims = None
        idata = az.from_dict(posterior=posterior, sample_stats=stats, dims=dims)
        if stats is not None:
            idata.sample_stats.attrs["covered_by_guarantee"] = 1
            idata.sample_stats.attrs["note"] = _COVERED
        idata.posterior.attrs["algorithm"] = self.algorithm
        idata.posterior.attrs["model"] = self.model_name
        idata.posterior.attrs["params"] = json.dumps(jsonable(self.params))
        idata.posterior.attrs["privacy_report"] = (
            self.privacy.to_json() if self.privacy is not None else "null"
        )
        idata.posterior.attrs["secure_noise"] = int(bool(self.secure))
        if self.param_names is not None:
            idata.posterior.attrs["param_names"] = json.dumps(list(self.param_names))
        return idata

    def save(self, path: str | os.PathLike, *, diagnostics: bool = False) -> str:
        """Save the draws and the privacy report to a netCDF file (no data needed to reload).

        The file is :meth:`to_inference_data` written by ArviZ (HDF5-based netCDF4, engine
        h5netcdf): the posterior group holds every draw (no burn-in removed) and its attributes
        hold the privacy report as JSON (``privacy_report``), the algorithm, the sampler
        parameters, the model name, whether secure noise was used, the warm-up iterations that
        preceded the draws (``warmup``), a format marker and a SHA-256 of the draws that
        :func:`load` checks. For a private run the ``sample_stats`` group
        holds the released per-draw ``accepted``/``diverging`` flags (with their own SHA-256,
        ``released_sha256``). Everything in it is covered by the privacy guarantee, so it can be
        published together with the report.

        The non-private diagnostics (clip fractions; for rwmh/hmc also acceptance and
        divergences) are NOT written into that file. With ``diagnostics=True``
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
        attrs["warmup"] = int(self.warmup)
        if self.released is not None:
            attrs["released_sha256"] = _flags_digest(self.released.accepted, self.released.diverged)
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
        The netCDF file. Its ``sample_stats`` group, when present, gives ``Result.released``.
        If ``<path>.NOT_PRIVATE.json`` exists beside it, the non-private diagnostics are read
        from it; otherwise ``Result.diagnostics`` is ``None``.

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
        attrs = dict(posterior.attrs)
        param_names = None
        if "param_names" in attrs:
            param_names = tuple(json.loads(attrs["param_names"]))
            theta = np.stack([np.asarray(posterior[nm].values, dtype=np.float64)
                              for nm in param_names], axis=-1)
        else:
            theta = np.asarray(posterior["theta"].values, dtype=np.float64)
        flags = None
        if "sample_stats" in idata.groups():
            stats = idata.sample_stats
            flags = (np.asarray(stats["accepted"].values), np.asarray(stats["diverging"].values))
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
        warmup = int(attrs.get("warmup", 0))
        if warmup < 0:
            raise ValueError(f"warmup {warmup} < 0")
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultFileError(f"{path!r} has a missing or corrupted attribute "
                              f"({type(exc).__name__}: {exc})") from None
    # For the algorithms whose draws are post-processing of a fixed set of releases (any number
    # of them, free), the report counts release rounds, not draws. A warm-up's iterations are in
    # the report and not in the draws.
    if (privacy is not None and privacy.algorithm not in POST_PROCESSING_DRAWS
            and (privacy.chains != theta.shape[0] or privacy.iterations != theta.shape[1] + warmup)):
        raise ResultFileError(
            f"{path!r}: the privacy report covers {privacy.chains} chain(s) of {privacy.iterations} "
            f"iterations but the file holds {theta.shape[0]} of {theta.shape[1]}"
            + (f" after a warm-up of {warmup}" if warmup else "")
        )
    released = None
    if flags is not None:
        if privacy is None:
            raise ResultFileError(f"{path!r} holds released statistics but no privacy report")
        if any(f.shape != theta.shape[:2] for f in flags):
            raise ResultFileError(f"{path!r}: the released flags do not have the draws' shape "
                                  f"(chains, draws) = {theta.shape[:2]}")
        if attrs.get("released_sha256") != _flags_digest(*flags):
            raise ResultFileError(f"{path!r} is corrupted: the released accept/divergence flags "
                                  "do not match their checksum")
        released = ReleasedStatistics(accepted=flags[0], diverged=flags[1])
    diagnostics = None
    sidecar = path + NOT_PRIVATE_SUFFIX
    if os.path.exists(sidecar):
        try:
            with open(sidecar) as f:
                d = json.load(f)
            # A private run's sidecar holds the clip fractions only (its acceptance and
            # divergences are in the file itself); a non-private run's, or one written before
            # they moved, holds all three.
            own = "acceptance_rate" in d
            diagnostics = NonPrivateDiagnostics(
                acceptance_rate=np.asarray(d["acceptance_rate"], dtype=float) if own else None,
                clip_fraction=np.asarray(d["clip_fraction"], dtype=float),
                divergences=np.asarray(d["divergences"], dtype=int) if own else None,
            )
        except (OSError, KeyError, TypeError, ValueError) as exc:
            raise ResultFileError(f"{sidecar!r} (non-private diagnostics) is corrupted "
                                  f"({type(exc).__name__}: {exc})") from None
        if any(np.shape(v) != (theta.shape[0],) for v in diagnostics.fields().values()):
            raise ResultFileError(f"{sidecar!r} does not match {path!r}: wrong number of chains")
    return Result(samples=theta, privacy=privacy, diagnostics=diagnostics, algorithm=algorithm,
                  params=params, model_name=model_name, secure=secure, released=released,
                  param_names=param_names, warmup=warmup)


def _digest(arr: np.ndarray) -> str:
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    return hashlib.sha256(f"{arr.shape}|".encode() + arr.tobytes()).hexdigest()


def _flags_digest(accepted: np.ndarray, diverged: np.ndarray) -> str:
    a = np.ascontiguousarray(accepted, dtype=np.uint8)
    d = np.ascontiguousarray(diverged, dtype=np.uint8)
    return hashlib.sha256(f"{a.shape}|".encode() + a.tobytes() + d.tobytes()).hexdigest()


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
