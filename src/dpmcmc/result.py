"""What a run returns: the private draws with their privacy report, and — kept apart and
labelled — the data-dependent run statistics that are NOT covered by the guarantee."""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .accounting import PrivacyReport

__all__ = ["Result", "NonPrivateDiagnostics", "import_arviz"]

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
    diagnostics : NonPrivateDiagnostics
        Data-dependent statistics NOT covered by the guarantee (see its docstring).
    algorithm : str
    params : dict
        The sampler parameters used (data-independent: chosen by the user or defaults).
    model_name : str
    """

    samples: np.ndarray
    privacy: Optional[PrivacyReport]
    diagnostics: NonPrivateDiagnostics = field(repr=False)
    algorithm: str
    params: dict
    model_name: str = "custom"

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
        return idata

    def __repr__(self) -> str:
        eps = "not private" if self.privacy is None else f"ε={self.privacy.epsilon:.4g}, δ={self.privacy.delta:.3g}"
        return (
            f"Result(algorithm={self.algorithm!r}, model={self.model_name!r}, chains={self.num_chains}, "
            f"draws={self.num_draws}, dim={self.samples.shape[2]}, {eps})"
        )


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
