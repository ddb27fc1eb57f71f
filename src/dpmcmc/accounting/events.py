"""Release events: what an algorithm's iteration releases, in the accountants' units.

An algorithm declares its releases once (a :class:`ReleaseSpec`, held by its spec in
``dpmcmc.samplers``); the accountants of :mod:`dpmcmc.accounting.budget` compose the events,
and the samplers' mechanisms draw their noise from the same events
(:meth:`ReleaseEvent.noise_std`), so the σ drawn and the μ charged come from one constructor.

Units: a released statistic is a sum of terms each bounded in norm by a per-example ``bound``;
under the substitute relation its sensitivity is ``2 * bound``. ``ReleaseEvent.sigma`` is the noise
standard deviation divided by ``bound``, and ``ReleaseEvent.mu = Δ²/(2σ²) = 2/sigma²``.

* :func:`gaussian_release`: a full-data Gaussian mechanism with noise parameter τ (thesis
  convention, 001 §4.2): σ = 2 τ √n · bound, hence μ = 1/(2 τ² n).
* :func:`gaussian_release_mu`: a full-data Gaussian mechanism of a given cost μ (the private
  Newton start's releases, whose budget is split by μ): σ = √(2/μ) · bound.
* :func:`subsampled_gaussian_release`: a Gaussian mechanism on a batch of ``batch_size`` of the
  ``n`` records drawn without replacement, σ given in the units above.
* :func:`barker_release`: the DP Barker test (002 Thm 2): fixed total noise variance
  :data:`BARKER_NOISE_VARIANCE`, per-example log-likelihood ratios clipped to √b/n₀.
* :func:`pure_release`: a pure ε-DP release (a K-norm or Laplace mechanism calibrated to the
  statistic's substitute sensitivity set). The PLD accountant composes it with Gaussian
  releases exactly (:mod:`.pure`), the RDP accountants through min(ε, αε²/2), zCDP through
  ρ = ε²/2 (Bun & Steinke 2016, Prop. 3.3).
* :func:`mu_release`: a full-data Gaussian release given by its μ (the noise-aware GLM splits
  its budget into μ shares, not into τ).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ._checks import check_n0
from .rdp import barker_direct_rdp, barker_orders, barker_rdp, gaussian_rdp, subsampled_rdp

__all__ = [
    "GAUSSIAN",
    "SUBSAMPLED_GAUSSIAN",
    "BARKER",
    "BARKER_NOISE_VARIANCE",
    "PURE",
    "ReleaseEvent",
    "ReleaseSpec",
    "gaussian_release",
    "gaussian_release_mu",
    "subsampled_gaussian_release",
    "barker_release",
    "pure_release",
    "mu_release",
]

GAUSSIAN = "gaussian"
SUBSAMPLED_GAUSSIAN = "subsampled-gaussian"
BARKER = "barker"
PURE = "pure"

#: Noise variance C of the DP Barker test (002 §3.2, 001 Thm 7).
BARKER_NOISE_VARIANCE = 2.0


@dataclass(frozen=True)
class ReleaseEvent:
    """One kind of accounted release made in every iteration of an algorithm.

    Attributes
    ----------
    name : str
        What is released, e.g. ``"log-likelihood ratio"`` or ``"gradient"``.
    kind : str
        ``"gaussian"`` (full-data Gaussian mechanism), ``"subsampled-gaussian"`` (Gaussian
        mechanism on a minibatch drawn without replacement), ``"barker"`` (DP Barker test) or
        ``"pure"`` (a pure ε-DP mechanism on the full data).
    per_iteration : int
        Releases of this kind per iteration of one chain.
    sigma : float or None
        Noise standard deviation divided by the per-example bound of the released sum (its
        substitute sensitivity is twice that bound). ``None`` for ``"barker"``.
    mu : float or None
        Δ²/(2σ²) = 2/sigma² of one release (Gaussian kinds); the cost of one full-data release
        in the Gaussian composition.
    q : float or None
        Sampling ratio batch_size/n (subsampled kinds).
    batch_size : int or None
        Minibatch size (subsampled kinds).
    noise_variance : float or None
        Total noise variance C of the Barker test.
    clip_bound : float or None
        Barker: the bound √b/n₀ on each per-example log-likelihood ratio that the RDP bound
        assumes.
    epsilon : float or None
        ``"pure"``: the ε of one release (its mechanism is ε-DP under replace-one, for either
        order of the pair).
    source : (str, value) or None
        The parameter that set the noise and its value (named when the accountant refuses the
        release); not part of the event's identity.
    """

    name: str
    kind: str
    per_iteration: int
    sigma: float | None = None
    mu: float | None = None
    q: float | None = None
    batch_size: int | None = None
    noise_variance: float | None = None
    clip_bound: float | None = None
    epsilon: float | None = None
    source: tuple | None = field(default=None, compare=False, repr=False)

    def noise_std(self, bound):
        """Noise standard deviation for a released sum whose terms are bounded by ``bound``.

        What the mechanism draws: ``sigma * bound``. ``bound`` may be a float or an array
        (a JAX array inside a kernel: the result is then an array of its dtype).

        Parameters
        ----------
        bound : float or array, ≥ 0
            Per-example bound (b‖θ−θ'‖ for log-likelihood ratios, b_g for gradients); the
            substitute sensitivity is ``2 * bound``.
        """
        if self.sigma is None:
            raise ValueError(f"a {self.kind!r} release has no per-example noise scale")
        return self.sigma * bound

    def rdp(self, orders, direct: bool = False) -> np.ndarray:
        """RDP curve ε(α) of one release at integer ``orders`` (amplified if subsampled).

        ``direct`` selects, for a ``"barker"`` release, :func:`barker_direct_rdp` instead of 002
        Thm 2 (:func:`barker_rdp`); other kinds have one curve.
        """
        if self.kind == GAUSSIAN:
            return gaussian_rdp(orders, self.mu)
        if self.kind == PURE:
            # ε-DP gives D_α ≤ ε (Mironov 2017, Prop. 3) and ≤ αε²/2 (Bun & Steinke 2016).
            orders = np.asarray(orders, dtype=np.float64)
            return np.minimum(self.epsilon, 0.5 * orders * self.epsilon * self.epsilon)
        if self.kind == SUBSAMPLED_GAUSSIAN:
            mu = self.mu
            return subsampled_rdp(orders, self.q, lambda js: gaussian_rdp(js, mu))
        b = self.batch_size
        base = barker_direct_rdp if direct else barker_rdp
        return subsampled_rdp(orders, self.q, lambda js: base(js, b))

    def to_dict(self) -> dict:
        """The non-empty fields as a plain dictionary."""
        out = {"name": self.name, "kind": self.kind, "per_iteration": self.per_iteration}
        for key in ("sigma", "mu", "q", "batch_size", "noise_variance", "clip_bound", "epsilon"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class ReleaseSpec:
    """An algorithm's release declaration: what one iteration releases, given n and its params.

    Attributes
    ----------
    kind : str
        The kind of every release the algorithm makes (it selects the accountants).
    required : tuple of str
        Privacy parameter names the declaration needs.
    optional : tuple of str
        Privacy parameter names it may take.
    build : callable
        ``build(n, params) -> tuple[ReleaseEvent, ...]`` from validated parameters (only the names
        above, the optional ones possibly absent).
    validate : callable, optional
        ``validate(n, params) -> dict``: checks the parameters (errors naming them) and returns
        them, for a declaration whose parameters are its own (the noise-aware GLM's budget
        split); ``None``: the accountant's shared vocabulary (τ, batch size, ...).
    """

    kind: str
    required: tuple[str, ...]
    build: Callable[[int, dict], tuple[ReleaseEvent, ...]]
    optional: tuple[str, ...] = ()
    validate: Callable[[int, dict], dict] | None = None


def gaussian_release(name: str, per_iteration: int, tau: float, n: int,
                     param: str = "tau") -> ReleaseEvent:
    """A full-data Gaussian release with noise parameter τ: σ = 2 τ √n per unit bound.

    σ = 2 τ √n × bound and sensitivity 2 × bound give μ = 1/(2 τ² n) per release; μ is divided
    step by step so that an extreme τ gives inf/0 (refused by the accountant, naming ``param``)
    rather than raising here.
    """
    try:
        mu = 0.5 / n / tau / tau
    except ZeroDivisionError:  # τ = 0: no noise, refused by the accountant (kernels may test it)
        mu = math.inf
    return ReleaseEvent(name, GAUSSIAN, per_iteration, sigma=2.0 * tau * math.sqrt(n), mu=mu,
                   source=(param, tau))


def gaussian_release_mu(name: str, mu: float, param: str = "init_share") -> ReleaseEvent:
    """A full-data Gaussian release that costs ``mu``: σ = √(2/μ) per unit bound.

    Sensitivity 2 × bound and noise sd √(2/μ) × bound give Δ²/(2σ²) = μ exactly; ``param``
    names the argument that set the budget (named if the accountant refuses it).
    """
    try:
        sigma = math.sqrt(2.0 / mu)
    except ZeroDivisionError:  # μ = 0: infinite noise, refused by the accountant
        sigma = math.inf
    return ReleaseEvent(name, GAUSSIAN, 1, sigma=sigma, mu=float(mu), source=(param, mu))


def subsampled_gaussian_release(name: str, sigma: float, batch_size: int, n: int, param: str,
                                value) -> ReleaseEvent:
    """A Gaussian release on a batch of ``batch_size`` of ``n`` records, σ per unit bound.

    ``param``/``value``: the parameter that set σ (named if the accountant refuses it).
    """
    try:
        mu = 2.0 / sigma / sigma
    except ZeroDivisionError:  # σ = 0: no noise, refused by the accountant
        mu = math.inf
    return ReleaseEvent(name, SUBSAMPLED_GAUSSIAN, 1, sigma=sigma, mu=mu, q=batch_size / n,
                   batch_size=batch_size, source=(param, value))


def barker_release(batch_size: int, n: int, n0: float | None = None) -> ReleaseEvent:
    """One DP Barker test on a batch of ``batch_size`` (002 Thm 2), tempering size ``n0``.

    Raises ``ValueError`` naming ``batch_size`` if no RDP order applies (b ≤ 10) and naming
    ``n0`` unless 0 < n0 ≤ n (the rule ``dpmcmc.sample`` applies).
    """
    barker_orders(batch_size)  # raises ValueError naming batch_size if b <= 10
    n0 = float(n) if n0 is None else check_n0(n0, n)
    return ReleaseEvent("barker acceptance test", BARKER, 1, q=batch_size / n, batch_size=batch_size,
                   noise_variance=BARKER_NOISE_VARIANCE, clip_bound=math.sqrt(batch_size) / n0)


def pure_release(name: str, epsilon: float, per_iteration: int = 1) -> ReleaseEvent:
    """A pure ``epsilon``-DP release on the full data (a K-norm or Laplace mechanism)."""
    return ReleaseEvent(name, PURE, per_iteration, epsilon=float(epsilon),
                        source=("epsilon", epsilon))


def mu_release(name: str, mu: float, per_iteration: int = 1) -> ReleaseEvent:
    """A full-data Gaussian release of cost ``mu`` = Δ²/(2σ²): σ = √(2/μ) per unit bound
    (sensitivity twice the bound), the one formula :meth:`ReleaseEvent.noise_std` applies."""
    return ReleaseEvent(name, GAUSSIAN, per_iteration, sigma=math.sqrt(2.0 / mu), mu=float(mu),
                        source=("mu", mu))
