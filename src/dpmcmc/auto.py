"""``algorithm="auto"``: a private posterior for a user's own model with no hand tuning.

The user declares the model and a per-record gradient bound (``grad_clip``, or ``clip``: a
log-likelihood-ratio bound b‖θ′ − θ‖ is a gradient bound b); every other setting follows from
public inputs — n, the dimension, (ε, δ), the number of chains — by the rules below, which
:func:`auto_config` applies before any data value is read (``dpmcmc.plan(model, n, "auto",
...)`` prints them).

What runs (docs/auto.md)
------------------------
1. **The private Newton start** (:mod:`dpmcmc.samplers.private_newton`): Fisher-scoring rounds
   on released, clipped, whitened per-record gradient sums and outer products, the clip of each
   round set by a released histogram of the whitened gradient norms, ending in the Gaussian
   approximation ``N(θ̂, Σ̂)`` of the posterior, widened by the noise of its last gradient
   release (noise-aware).
2. **A chain** (``mode == "chain"``): DP-SGLD in the coordinates ``z`` whitened by the
   approximation (``θ = θ̂ + L z``, ``L Lᵀ = Σ̂``; :func:`dpmcmc.models.reparam.affine`), each
   chain started from an independent draw of the approximation. In ``z`` the posterior has about
   unit covariance and a per-record gradient about ``1/√n`` per coordinate, so the sampler's
   settings follow from n, d and the budget alone (:func:`chain_settings`); its gradient clip is
   ``KAPPA · C/√n`` with C the start's last clip of the whitened gradients (post-processing: in
   θ units a clip in the metric of the released curvature). The start's Gaussian releases and
   the subsampled releases compose in one PLD (:func:`dpmcmc.accounting.pld.gaussian_pld`).
   **Or, where the budget buys no chain that mixes** (``mode == "approximation"``: less than
   :func:`min_time` units of Langevin time), the approximation itself: independent draws of
   ``N(θ̂, Σ̂)``, the whole budget on the start, said in the plan and labelled in the result
   (``Result.params["mode"]``) — returned rather than refused, because at large n it is a good
   posterior in its own right and it carries the privacy noise (docs/auto.md).

The chain's rules (whitened units; :func:`chain_settings`)
----------------------------------------------------------
A DP-SGLD step ``z' = z + (η/2) ĝ + √(aη) ξ`` with batch b carries, besides the drawn Langevin
noise, the batch's sampling noise, variance ``(η/2)² n/b``, and the privacy noise,
``((η/2)(n/b) σ_m κC/√n)²`` per coordinate. η = :data:`STEP`; b holds the sampling noise at
:data:`SAMPLING_RATIO` η; σ_m holds the privacy noise at :data:`PRIVACY_RATIO` η; and the move
draws only the rest, ``a = 1 − both`` (DP-SGLD's ``langevin_noise``, computed after the start
from the actual clip C): the privacy noise is used as diffusion instead of heating the chain.
The subsampled Gaussian's cost per step, about ``4q²/σ_m²`` in μ-GDP² units, is then
``∝ κ²C² η / n`` whatever b: the budget buys a fixed Langevin time ``T·η``, of which
:func:`min_time` is what ``auto`` asks of a chain (and at most :data:`MAX_TIME_FACTOR` times
that is spent).

Privacy
-------
The start's releases are full-data Gaussian mechanisms whose σ comes from their release events
(:func:`dpmcmc.accounting.events.gaussian_release_mu`); the chain's are DP-SGLD's. Every later
value (whitening, clip, centre, the approximation, the starts) is post-processing. The report
composes both (one PLD), the ledger is charged before the first release, and the run length is
fixed by the plan before any data value is read.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

__all__ = ["AUTO", "AutoConfig", "auto_config", "chain_settings", "check_request", "config_of",
           "expected_clip", "min_time", "MIN_TIME", "KAPPA", "STEP",
           "SAMPLING_RATIO", "PRIVACY_RATIO", "START_SHARE", "MAX_BATCH", "APPROXIMATION_DRAWS",
           "APPROXIMATION"]

#: Fewest units of whitened Langevin time (iterations × η) for which ``auto`` runs a chain, for
#: d = 1 (:func:`min_time`): the Langevin diffusion's autocorrelation time is 4 units, and on a
#: simulated whitened posterior 4 chains of 150 units (second halves kept) gave a worst-coordinate
#: R-hat of 1.07 (median over 10 runs, d = 2; 1.17 at 50 units, 1.09 at 100).
MIN_TIME: float = 100.0
#: The chain runs at most this many times :func:`min_time` (the rest of the budget unspent).
MAX_TIME_FACTOR: float = 4.0
#: The chain's gradient clip, in multiples of the start's last whitened clip C (per √n).
KAPPA: float = 1.5
#: The whitened step size η (the posterior's relaxation time is about 2/η steps).
STEP: float = 0.02
#: The batch-sampling noise per step as a ratio of the Langevin noise's variance η (sets the
#: batch: b = η n / (4 · SAMPLING_RATIO), within [MIN_BATCH, MAX_BATCH]).
SAMPLING_RATIO: float = 0.1
MIN_BATCH, MAX_BATCH = 100, 10_000
#: The privacy noise per step as a ratio of the Langevin noise's variance η: the move draws only
#: the rest of the diffusion (``langevin_noise`` of DP-SGLD: 1 − the two ratios).
PRIVACY_RATIO: float = 0.85
#: The least share of η the move draws itself.
MIN_LANGEVIN = 0.05
#: Share of μ spent on the start when a chain runs.
START_SHARE: float = 0.3
#: Draws per chain returned in the approximation mode.
APPROXIMATION_DRAWS = 1000
#: The privacy report's algorithm name of the approximation mode (its draws are post-processing
#: of the start's releases: the report counts releases, not draws).
APPROXIMATION = "auto-approximation"


def expected_clip(dim: int) -> float:
    """The whitened clip C the start is expected to end with: ``CLIP_FACTOR`` times the
    ``QUANTILE``-quantile of ‖u‖ for unit-covariance Gaussian gradients (χ_d), rounded up to
    the histogram's bin edge (half a bin, e^0.1, on average)."""
    from .samplers.private_newton import CLIP_FACTOR, DEFAULT_QUANTILE, chi2_ppf

    return CLIP_FACTOR * 1.105 * math.sqrt(chi2_ppf(DEFAULT_QUANTILE, dim))


def min_time(dim: int) -> float:
    """:data:`MIN_TIME` × (1 + log₂(d)/2): more coordinates, a higher worst R-hat at a length."""
    return MIN_TIME * (1.0 + 0.5 * math.log2(dim))


def chain_settings(n: int, dim: int) -> dict:
    """DP-SGLD's settings in the whitened coordinates (module docstring), public inputs only:
    ``batch_size``, ``step_size`` η and ``noise_multiplier`` σ_m."""
    # SAMPLING_RATIO = (η/2)² (n/b) / η  →  b = η n / (4 · SAMPLING_RATIO)
    b = int(min(MAX_BATCH, max(MIN_BATCH, round(STEP * n / (4.0 * SAMPLING_RATIO))), n))
    eta = STEP
    c = KAPPA * expected_clip(dim)
    # PRIVACY_RATIO = ((η/2)(n/b) σ_m c/√n)² / η
    sigma = math.sqrt(PRIVACY_RATIO * eta * n) * 2.0 * b / (eta * n * c)
    return {"batch_size": b, "step_size": eta, "noise_multiplier": sigma}


@dataclass(frozen=True)
class AutoConfig:
    """What ``auto`` will do, from public inputs only (:func:`auto_config`).

    Attributes
    ----------
    n, dim, chains : int
    epsilon, delta : float
    scale : float
        The declared per-record gradient bound (the unit of the start's first histogram).
    mode : {"approximation", "chain"}
    start : NewtonPlan
        The start's releases.
    mu_total : float
        μ = gaussian_mu(ε, δ) of the budget.
    sampler : dict
        DP-SGLD's settings in the whitened coordinates (:func:`chain_settings`); its
        ``grad_clip`` (κC/√n) is set after the start.
    iterations : int
        Iterations per chain the budget buys after the start (0: none).
    time : float
        ``iterations × step_size``: whitened Langevin time per chain.
    reasons : tuple of str
        The rule's outcome in words (printed by the plan).
    """

    n: int
    dim: int
    chains: int
    epsilon: float
    delta: float
    scale: float
    mode: str
    start: Any
    mu_total: float
    sampler: dict
    iterations: int
    time: float
    reasons: tuple

    def report(self):
        """The run's :class:`~dpmcmc.accounting.PrivacyReport` (what the ledger is charged)."""
        from . import accounting

        steps = len(self.start.releases())
        if self.mode == "chain":
            return accounting.spent(AUTO_CARD, self.iterations, self.delta, self.n,
                                    chains=self.chains, init_mu=self.start.mu_total,
                                    init_steps=steps,
                                    noise_multiplier=self.sampler["noise_multiplier"],
                                    batch_size=self.sampler["batch_size"])
        from .accounting.report import PrivacyReport

        mu = self.start.mu_total
        return PrivacyReport(
            epsilon=float(accounting.gaussian_epsilon(mu, self.delta)), delta=self.delta,
            relation="substitute", accountant="pld", algorithm=APPROXIMATION, iterations=steps,
            chains=1, n=self.n,
            mechanisms=[dict(r.to_dict(), count=1, total_mu=r.mu) for r in self.start.releases()],
            params={"rounds": self.start.steps, "scale": self.scale},
            details={"total_mu": mu,
                     "draws": "independent draws of the noise-aware Gaussian approximation "
                              "(post-processing of the releases; they cost no privacy)"})

    def params(self) -> dict:
        out = {"mode": self.mode, "scale": self.scale, "rounds": self.start.steps,
               "mu_start": self.start.mu_total, "langevin_time": self.time}
        if self.mode == "chain":
            out.update(sampler="dp-sgld (whitened)", kappa=KAPPA, **self.sampler)
        return out



@functools.lru_cache(maxsize=32)  # the plan and its run ask twice; AutoConfig is immutable
def auto_config(n: int, dim: int, epsilon: float, delta: float, clip: Optional[float] = None,
                grad_clip: Optional[float] = None, chains: int = 4, *,
                chain: Optional[bool] = None) -> AutoConfig:
    """The settings of ``algorithm="auto"`` from public inputs only.

    Parameters
    ----------
    n, dim : int
        Records and parameters.
    epsilon, delta : float
        The budget.
    clip, grad_clip : float, optional
        The declared per-record bounds; one is required (``grad_clip`` preferred). It sets the
        unit of the start's first histogram of gradient norms: later clips follow the released
        histograms (:mod:`dpmcmc.samplers.private_newton`).
    chains : int
        Chains (chain mode) or groups of draws (approximation mode).
    chain : bool, optional
        ``None`` (default): the rule of the module docstring; ``True``/``False`` force a chain or
        the approximation.

    Returns
    -------
    AutoConfig

    Raises
    ------
    ValueError
        Naming the argument; :class:`~dpmcmc.accounting.BudgetTooSmall` when a forced chain
        cannot be paid.
    """
    from . import accounting
    from .accounting._checks import check_int, check_positive, check_probability
    from .samplers.private_newton import newton_plan

    n = check_int("n", n, minimum=1)
    dim = check_int("dim", dim, minimum=1)
    chains = check_int("chains", chains, minimum=1)
    epsilon = check_positive("epsilon", epsilon, strict=True)
    delta = check_probability("delta", delta)
    bound = grad_clip if grad_clip is not None else clip
    if bound is None:
        raise ValueError("grad_clip: algorithm 'auto' needs a declared per-record gradient bound "
                         "(grad_clip, or clip)")
    bound = check_positive("grad_clip" if grad_clip is not None else "clip", bound, strict=True)
    if chain is not None and not isinstance(chain, bool):
        raise TypeError(f"chain must be None, True or False, got {chain!r}")
    mu_total = accounting.gaussian_mu(epsilon, delta)
    sampler = chain_settings(n, dim)
    k = 0
    if chain is not False:
        try:
            k = accounting.max_iterations(AUTO_CARD, epsilon, delta, n, chains=chains,
                                          init_mu=START_SHARE * mu_total,
                                          noise_multiplier=sampler["noise_multiplier"],
                                          batch_size=sampler["batch_size"])
        except accounting.BudgetTooSmall:
            pass  # k = 0: the approximation, or refused below if a chain is forced
    # A budget beyond MAX_TIME_FACTOR × what mixing needs is left unspent (bounded compute).
    k = min(k, int(math.ceil(MAX_TIME_FACTOR * min_time(dim) / sampler["step_size"])))
    time = k * sampler["step_size"]
    run_chain = time >= min_time(dim) if chain is None else chain
    if run_chain and not k:
        raise accounting.BudgetTooSmall(
            f"epsilon={epsilon:g}: budget too small for the start and one iteration of {chains} "
            "chain(s); use chain=False (the approximation)")
    if run_chain:
        mode, mu_start = "chain", START_SHARE * mu_total
        reasons = (f"chain: {chains} chain(s) × {k} iterations of DP-SGLD in the coordinates "
                   f"whitened by the private start (Langevin time {time:.3g} per chain; batch "
                   f"{sampler['batch_size']}, step {sampler['step_size']:g}, noise multiplier "
                   f"{sampler['noise_multiplier']:.3g}, gradient clip {KAPPA:g} × the start's "
                   "last clip ÷ √n), each chain from an independent draw of the start's "
                   "approximation",)
    else:
        mode, mu_start, k = "approximation", mu_total, 0
        why = ("forced" if chain is False else
               f"after the start the budget buys a chain only {time:.3g} < {min_time(dim):.3g} "
               "units of Langevin time long, too short to mix")
        reasons = (f"approximate posterior: the whole budget on the private Newton start; the draws "
                   f"are its noise-aware Gaussian approximation N(θ̂, Σ̂), NOT MCMC ({why})",)
    start = newton_plan(n, dim, mu_start, bound)
    return AutoConfig(n, dim, chains, float(epsilon), float(delta), float(bound), mode, start,
                      float(mu_total), sampler, int(k), float(k * sampler["step_size"]), reasons)


#: The name of the rule (``dpmcmc.sample(model, data, AUTO, ...)``).
AUTO = "auto"
#: The card of the chain ``auto`` runs (``Request.spec``; its accountant entry is the report's).
AUTO_CARD = "dp-sgld"
#: The parameters ``auto`` takes besides :func:`dpmcmc.sample`'s options.
PARAMS = ("clip", "grad_clip", "chain", "draws")
#: The options of :func:`dpmcmc.sample` that ``auto`` plans itself, with their defaults: given
#: any other value, they are refused by name (:func:`check_request`).
_PLANNED = {"iterations": None, "accountant": None, "relation": "substitute", "theta0": None,
            "checkpoint": None, "checkpoint_every": None, "mesh": None, "warmup": 0,
            "init_share": 0.1, "init_steps": 30}


def check_request(options: dict, params: dict) -> None:
    """Refuse, naming the argument, what ``algorithm="auto"`` does not take.

    Called by :meth:`dpmcmc.request.Request.create` before anything else: ``options`` are the
    :data:`_PLANNED` options as given, ``params`` the algorithm parameters.
    """
    from .accounting._checks import check_int

    for name, default in _PLANNED.items():
        value = options.get(name, default)
        same = value is default or (isinstance(value, (int, float, str))
                                    and not isinstance(value, bool) and value == default)
        if not same:
            raise ValueError(f"{name}: algorithm 'auto' plans its own run and does not take it")
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise ValueError(f"{unknown[0]}: not a parameter of algorithm 'auto' (it takes "
                         f"{', '.join(PARAMS)})")
    chain = params.get("chain")
    if chain is not None and not isinstance(chain, (bool, np.bool_)):
        raise TypeError(f"chain must be None, True or False, got {chain!r}")
    if "draws" in params:
        check_int("draws", params["draws"], minimum=1)


def config_of(request, n: int, dim: int) -> AutoConfig:
    """:func:`auto_config` of a validated ``auto`` request (public inputs only)."""
    if request.epsilon is None:
        raise ValueError("epsilon: algorithm 'auto' spends a budget; give epsilon > 0")
    if request.delta is None:
        raise ValueError("delta is required for the private algorithm 'auto'")
    from .accounting._checks import check_positive

    p = request.params
    bounds = {name: None if p.get(name) is None else check_positive(name, p[name], strict=True)
              for name in ("clip", "grad_clip")}
    chain = p.get("chain")
    return auto_config(n, dim, float(request.epsilon), float(request.delta), bounds["clip"],
                       bounds["grad_clip"], request.chains,
                       chain=None if chain is None else bool(chain))
