"""The privacy report attached to every private run and printed by ``dpmcmc budget``."""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["PrivacyReport"]

_LEGACY_RELATION = "substitute-legacy"
_LEGACY_WARNING = (
    "WARNING: relation 'substitute-legacy' uses the papers' subsampled-Gaussian pair "
    "(1-q)N(0,s^2)+qN(±1,s^2), which is NOT a dominating pair for fixed-size batches drawn "
    "without replacement: this bound may understate δ, so it is not a valid privacy guarantee. "
    "Use relation 'substitute' for one."
)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


@dataclass(frozen=True)
class PrivacyReport:
    """(ε, δ) spent by a run and what it was spent on.

    Attributes
    ----------
    epsilon : float
        ε of the (ε, δ)-DP guarantee of all chains together.
    delta : float
        δ of the guarantee.
    relation : str
        Neighbouring relation the bound was computed for: ``"substitute"`` (replace one
        record), or ``"substitute-legacy"``, the papers' symmetric pair for subsampled Gaussian
        releases, which is not a dominating pair for fixed-size batches (δ may be understated;
        see :mod:`dpmcmc.accounting.pld`).
    accountant : str
        ``"pld"``, ``"rdp"``, ``"zcdp"`` or ``"rdp-direct"`` (DP Barker).
    algorithm : str
        Algorithm name, e.g. ``"dp-hmc"``.
    iterations : int
        Iterations per chain.
    chains : int
        Number of chains; every chain reads the data, so their costs compose.
    n : int
        Number of records in the data set.
    mechanisms : list of dict
        One entry per accounted release type: ``name``, ``kind`` (``"gaussian"``,
        ``"subsampled-gaussian"`` or ``"barker"``), ``per_iteration``, ``count`` (releases over
        all chains and iterations) and the per-release parameters (``mu`` and ``total_mu`` for
        Gaussian releases; ``sigma``, ``q``, ``batch_size`` … for subsampled ones).
    params : dict
        The algorithm's privacy parameters (e.g. ``tau``, ``batch_size``).
    details : dict
        Accountant-specific values, e.g. ``total_mu`` (Gaussian composition) or ``rdp_order``
        (the Rényi order that attains ε).
    """

    epsilon: float
    delta: float
    relation: str
    accountant: str
    algorithm: str
    iterations: int
    chains: int
    n: int
    mechanisms: list[dict] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain-Python dictionary (JSON-serialisable); inverse of :meth:`from_dict`."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "PrivacyReport":
        """Rebuild a report from :meth:`to_dict` output.

        Raises
        ------
        TypeError
            If ``data`` is not a mapping.
        ValueError
            If keys are missing or unknown, naming them.
        """
        if not isinstance(data, dict):
            raise TypeError(f"data must be a dict, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.name not in ("mechanisms", "params", "details")}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"data has unknown PrivacyReport fields: {unknown}")
        missing = sorted(required - set(data))
        if missing:
            raise ValueError(f"data lacks PrivacyReport fields: {missing}")
        kwargs = dict(data)
        kwargs["epsilon"] = float(kwargs["epsilon"])
        kwargs["delta"] = float(kwargs["delta"])
        for key in ("iterations", "chains", "n"):
            kwargs[key] = int(kwargs[key])
        kwargs["mechanisms"] = [dict(m) for m in kwargs.get("mechanisms", [])]
        kwargs["params"] = dict(kwargs.get("params", {}))
        kwargs["details"] = dict(kwargs.get("details", {}))
        return cls(**kwargs)

    def to_json(self, indent: int | None = None) -> str:
        """JSON text of :meth:`to_dict`; floats keep every digit."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> "PrivacyReport":
        """Inverse of :meth:`to_json`."""
        if not isinstance(text, (str, bytes, bytearray)):
            raise TypeError(f"text must be a JSON string, got {type(text).__name__}")
        return cls.from_dict(json.loads(text))

    def __str__(self) -> str:
        head = (
            f"(ε = {self.epsilon:.6g}, δ = {self.delta:.3g})-DP under the {self.relation} "
            f"neighbouring relation ({self.accountant} accountant)"
        )
        run = (
            f"{self.algorithm}: {self.chains} chain{'s' if self.chains != 1 else ''} × "
            f"{self.iterations} iterations, n = {self.n}"
        )
        lines = [head, run]
        if self.relation == _LEGACY_RELATION:
            lines.append(_LEGACY_WARNING)
        if self.params:
            lines.append("parameters: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in self.params.items()))
        if self.mechanisms:
            lines.append("releases (all chains):")
            for mech in self.mechanisms:
                extra = {
                    k: v
                    for k, v in mech.items()
                    if k not in ("name", "kind", "count", "per_iteration") and v is not None
                }
                # sigma is the noise std per unit of the released sum's per-example bound (for a
                # log-likelihood ratio that bound is b‖θ−θ'‖, so the drawn σ varies with the step).
                desc = ", ".join(
                    f"{'sigma/bound' if k == 'sigma' else k} = {_fmt(v)}" for k, v in extra.items()
                )
                lines.append(
                    f"  {mech['name']} ({mech['kind']}): {mech['count']} releases"
                    + (" (once, before the chains)" if mech["per_iteration"] == 0
                       else f" ({mech['per_iteration']} per iteration)")
                    + ("; " + desc if desc else "")
                )
        for key, value in self.details.items():
            lines.append(f"{key.replace('_', ' ')}: {_fmt(value)}")
        return "\n".join(lines)

    def __post_init__(self) -> None:
        if not (isinstance(self.epsilon, (int, float)) and math.isfinite(self.epsilon)):
            raise ValueError(f"epsilon must be a finite number, got {self.epsilon!r}")
        if not (isinstance(self.delta, (int, float)) and 0.0 < self.delta < 1.0):
            raise ValueError(f"delta must lie in (0, 1), got {self.delta!r}")
