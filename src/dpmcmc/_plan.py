"""``dpmcmc.plan``: what a run will do, from public inputs only, before any data are touched.

A plan answers the questions a data holder has before spending budget: how many iterations
per chain (ε, δ) buys, whether there is a warm-up, how large the privacy noise is next to the
moves the sampler proposes, and — in plain words — whether the configuration can move at all.
Everything here is computed from n, the model's dimension, (ε, δ), the number of chains and
the sampler's parameters (clip bounds, τ, step sizes): never from data values. ``dpmcmc.sample``
builds the same plan from the same numbers, emits its warnings (:class:`PlanWarning`) before
the first noise draw and attaches it to ``Result.plan``; ``dpmcmc plan`` prints it.

The rules behind the figures (docs/plan.md):

- Full-data penalty tests (``dp-penalty``, and the final test of ``dp-hmc``) release the
  log-likelihood ratio of a move of length s with Gaussian noise of sd σ = 2τ√n·b·s (b the
  per-record Lipschitz clip) and subtract the penalty σ²/2. On a flat target the acceptance
  probability is then exactly 2Φ(−σ/2); on a real target it is lower. s is the typical
  proposal length: ‖proposal_std‖ for a random walk, the rms component for one-component
  moves, step_size·L·‖M^(−1/2)‖ (free motion) for DP-HMC.
- DP-HMC's gradient releases carry noise 2τ_g√n·b_g per coordinate; over one trajectory of L
  leapfrog steps the momentum receives ε·√L times that, compared with its own sd √m.
- DP-SGLD / DP-SGNHT add (η/2)(n/b)·σ·C of privacy noise per coordinate and step, next to the
  Langevin noise √η; their ratio (√η/2)(n/b)σC above 1 means the chain samples a posterior
  widened by about √(1 + ratio²).
- Minibatch penalty: the same ceiling with its σ = √τ·(2kc₀ + 2k²c₀²(b−1)/b), k = nT/b,
  c₀ = L·s. DP Barker: the plan reports the tempering n0/n and the clip √b/n0 (its test noise
  is fixed); its acceptance depends on the batch and is not predicted.
"""
from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

from .samplers._spec import NoiseLine

__all__ = ["Plan", "PlanWarning", "NoiseLine", "plan"]

#: Fewer iterations per chain than this: the chains cannot move away from their start.
MIN_MOVING_ITERATIONS = 10
#: Fewer iterations per chain than this: too few to judge convergence (R-hat, ESS).
MIN_DIAGNOSABLE_ITERATIONS = 100
#: Acceptance ceiling below which a penalty test is reported as stuck.
MIN_ACCEPTANCE = 0.05


class PlanWarning(UserWarning):
    """A run whose plan says it cannot give a usable posterior (emitted before any noise)."""


@dataclass(frozen=True)
class Plan:
    """What a run will do, computed from public inputs only.

    Attributes
    ----------
    algorithm : str
    n, dim, chains : int
    epsilon, delta : float or None
        The budget (``None`` for non-private algorithms, or ε when ``iterations`` was given
        without it: then ``epsilon_spent`` says what the run costs).
    accountant, relation : str or None
    iterations : int
        Iterations per chain.
    start : str
        Where the chains start: the private initialisation, data-independent draws, or the
        user's points.
    warmup : int
        Iterations per chain that adapt the sampler and are not returned as draws (included in
        ``iterations``; ``dpmcmc.sample(warmup=...)``, 0 by default and in :func:`dpmcmc.plan`).
    epsilon_spent : float or None
        ε at ``delta`` the run spends (≤ ε when ε was given).
    params : dict
        The sampler's parameters with defaults filled.
    noise : tuple of NoiseLine
    warnings : tuple of str
        Plain-words reasons why the configuration cannot give a usable posterior (emitted by
        ``dpmcmc.sample`` as a :class:`PlanWarning`).
    notes : tuple of str
        Advice that does not stop a run (e.g. too few iterations to judge convergence).
    """

    algorithm: str
    n: int
    dim: int
    chains: int
    epsilon: Optional[float]
    delta: Optional[float]
    accountant: Optional[str]
    relation: Optional[str]
    iterations: int
    warmup: int
    epsilon_spent: Optional[float]
    params: dict = field(repr=False)
    noise: tuple = ()
    warnings: tuple = ()
    notes: tuple = ()
    start: str = "data-independent"

    @property
    def ok(self) -> bool:
        """Whether the plan raised no warning."""
        return not self.warnings

    def to_dict(self) -> dict:
        """The plan as plain JSON-able data."""
        out = {k: getattr(self, k) for k in ("algorithm", "n", "dim", "chains", "epsilon", "delta",
                                             "accountant", "relation", "iterations", "warmup",
                                             "epsilon_spent", "start")}
        out["params"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()}
        out["noise"] = [vars(line).copy() for line in self.noise]
        out["warnings"] = list(self.warnings)
        out["notes"] = list(self.notes)
        return out

    def __str__(self) -> str:
        lines = [f"Plan: {self.algorithm} on n = {self.n} records, dim = {self.dim}, {self.chains} chain(s)"]
        if self.epsilon is not None or self.delta is not None:
            budget = f"ε = {self.epsilon:g}, " if self.epsilon is not None else ""
            lines.append(f"  budget: {budget}δ = {self.delta:g} ({self.accountant}, {self.relation})")
        spent = "" if self.epsilon_spent is None else f" (spends ε = {self.epsilon_spent:.4g})"
        lines.append(f"  iterations per chain: {self.iterations}{spent}; warm-up: {self.warmup}")
        lines.append(f"  start: {self.start}")
        for line in self.noise:
            lines.append(f"  noise on the {line.name}: sd {line.noise_sd:.3g}; {line.reference}: {line.ratio:.3g}")
        for text in self.warnings:
            lines.append(f"  WARNING: {text}")
        for text in self.notes:
            lines.append(f"  note: {text}")
        return "\n".join(lines)


class _PublicShape:
    """Stand-in for a model when only its dimension is known (what ``prepare`` reads)."""

    temperature = 1.0

    def __init__(self, dim: int):
        self.dim = dim


def _noise_lines(spec, p: dict, n: int, dim: int, temperature: float = 1.0) -> tuple:
    return () if spec.noise_lines is None else spec.noise_lines(p, n, dim, temperature)


def _warnings(algorithm: str, iterations: int, noise: tuple, chains: int, from_budget: bool
              ) -> tuple[str, ...]:
    out = []
    # Only a run length the budget chose is worth a warning: a user who fixed `iterations`
    # (or runs a non-private sampler) asked for exactly that many.
    if from_budget and iterations < MIN_MOVING_ITERATIONS:
        out.append(f"the budget buys only {iterations} iteration(s) per chain ({chains} chain(s)): the "
                   "chains cannot move away from their start, and the result is little more than the "
                   "start. Raise ε, use fewer chains, a larger τ (more noise per release), or "
                   "--algorithm auto for a GLM.")
    for line in noise:
        if line.caps_acceptance and line.ratio < MIN_ACCEPTANCE:
            out.append(f"the privacy noise on the {line.name} (sd {line.noise_sd:.3g}) caps the acceptance "
                       f"rate at {line.ratio:.2g}: the chain will almost never move. Use a shorter "
                       "proposal/trajectory, a smaller τ or clip, or more records.")
        if line.reference.startswith("over the Langevin noise") and line.ratio > 1.0:
            out.append(f"the privacy noise per step is {line.ratio:.3g}× the Langevin noise: the chain "
                       f"samples a posterior about {math.sqrt(1 + line.ratio ** 2):.3g}× too wide. Use a "
                       "smaller step size or a larger batch.")
        if line.name == "gradient" and line.ratio > 3.0:
            out.append(f"the gradient noise moves the momentum by {line.ratio:.3g} momentum sds per "
                       "trajectory: trajectories are driven by noise. Use a smaller τ_g, step size or "
                       "grad_clip.")
    return tuple(out)


def _build(algorithm: str, prepared: dict, n: int, dim: int, chains: int, iterations: int,
           epsilon, delta, report, temperature: float = 1.0, warmup: int = 0,
           start: str = "data-independent") -> Plan:
    from .samplers import ALGORITHMS

    spec = ALGORITHMS[algorithm]
    noise = _noise_lines(spec, prepared, n, dim, float(temperature)) if report is not None else ()
    return Plan(
        algorithm=algorithm, n=n, dim=dim, chains=chains,
        epsilon=None if epsilon is None else float(epsilon),
        delta=None if delta is None else float(delta),
        accountant=None if report is None else report.accountant,
        relation=None if report is None else report.relation,
        iterations=int(iterations), warmup=int(warmup),
        epsilon_spent=None if report is None else float(report.epsilon),
        params=dict(prepared), noise=noise,
        warnings=_warnings(algorithm, int(iterations), noise, chains, from_budget=epsilon is not None),
        start=start,
        notes=_notes(int(iterations)),
    )


def _notes(iterations: int) -> tuple[str, ...]:
    if MIN_MOVING_ITERATIONS <= iterations < MIN_DIAGNOSABLE_ITERATIONS:
        return (f"only {iterations} iterations per chain: too few to judge convergence (R-hat, ESS).",)
    return ()


def plan(
    model: Any,
    n: int,
    algorithm: str = "dp-hmc",
    *,
    epsilon: Optional[float] = None,
    delta: Optional[float] = None,
    chains: int = 4,
    iterations: Optional[int] = None,
    accountant: Optional[str] = None,
    relation: str = "substitute",
    theta0: Any = None,
    init_share: float = 0.1,
    init_steps: int = 30,
    **params: Any,
) -> Plan:
    """Plan a run of ``dpmcmc.sample`` from public inputs, touching no data.

    Parameters
    ----------
    model : Model or int
        The model, or just its dimension.
    n : int
        Number of records (public under the replace-one relation).
    algorithm, epsilon, delta, chains, iterations, accountant, relation, **params
        As in :func:`dpmcmc.sample`.
    theta0, init_share, init_steps
        As in :func:`dpmcmc.sample`: whether the run starts privately (``"private"``, or ``None``
        where that is the default, :func:`default_private_start`) matters here, since the
        start's share of the budget is not available to the iterations; any other value stands
        for starting points the user gives.

    Returns
    -------
    Plan
        Iterations per chain, the accountant, the noise next to the moves, and warnings.
        ``print(plan)`` gives a readable block.

    Raises
    ------
    ValueError, TypeError
        For an invalid argument (named) or a budget too small for one iteration.

    Examples
    --------
    >>> import dpmcmc
    >>> p = dpmcmc.plan(2, 10_000, "dp-penalty", epsilon=1.0, delta=1e-6, tau=0.1, clip=1.0,
    ...                 proposal_std=0.01)
    >>> p.iterations > 0
    True
    """
    from .accounting._checks import check_int, check_positive
    from .models.base import Model
    from .samplers import ALGORITHMS

    if isinstance(model, Model):
        shape = model
    elif isinstance(model, numbers.Integral) and not isinstance(model, bool) and model >= 1:
        shape = _PublicShape(int(model))
    else:
        raise TypeError(f"model must be a dpmcmc.Model or a positive int (the dimension), got {model!r}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
    n = check_int("n", n, minimum=1)
    chains = check_int("chains", chains, minimum=1)
    spec = ALGORITHMS[algorithm]
    prepared = spec.prepare(dict(params), shape, n)
    if iterations is not None:
        iterations = check_int("iterations", iterations, minimum=1)
    if epsilon is not None:
        epsilon = check_positive("epsilon", epsilon)
    report = None
    if spec.private:
        if theta0 is not None and not (isinstance(theta0, str) and theta0 == "private"):
            theta0 = "given"  # a start the user passes: no private initialisation
        private, iterations, report = account_start(algorithm, spec, prepared, n, chains, epsilon, delta,
                                                    iterations, accountant, relation,
                                                    None if theta0 is None else theta0, False, init_share,
                                                    init_steps)
        start = start_label(private, theta0, init_share, init_steps)
    else:
        if epsilon is not None or delta is not None:
            raise ValueError(f"algorithm {algorithm!r} is not private: it takes no epsilon/delta")
        if iterations is None:
            raise ValueError(f"iterations is required for the non-private algorithm {algorithm!r}")
        start = start_label(False, theta0, init_share, init_steps)
    return _build(algorithm, prepared, n, shape.dim, chains, iterations, epsilon, delta, report,
                  shape.temperature, start=start)


def account(algorithm: str, spec, prepared: dict, n: int, chains: int, epsilon, delta, iterations,
            accountant, relation: str, init_share=None, init_steps: int = 1):
    """(iterations per chain, PrivacyReport) of a private run, as ``dpmcmc.sample`` accounts it.

    The run length is the largest the budget buys when ``iterations`` is None; otherwise the
    report states what the given length spends, which must fit ``epsilon`` when given. With
    ``init_share`` (``theta0="private"``) that share of gaussian_mu(ε, δ) goes to the start.
    """
    from . import accounting
    from .accounting._checks import check_positive

    if delta is None:
        raise ValueError(f"delta is required for the private algorithm {algorithm!r}")
    acct = spec.accounting_params(prepared)
    steps_kw = {}
    if init_share is not None:
        acct = dict(acct, init_mu=init_share * accounting.gaussian_mu(epsilon, delta))
        steps_kw = {"init_steps": init_steps}
    if iterations is None:
        if epsilon is None:
            raise ValueError("give epsilon (the budget sets the run length) or iterations")
        epsilon = check_positive("epsilon", epsilon)
        iterations = accounting.max_iterations(algorithm, epsilon, delta, n, chains=chains,
                                               accountant=accountant, relation=relation, **acct)
    report = accounting.spent(algorithm, iterations, delta, n, chains=chains, accountant=accountant,
                              relation=relation, **acct, **steps_kw)
    if epsilon is not None and report.epsilon > epsilon * (1 + 1e-12):
        raise ValueError(
            f"iterations={iterations} per chain with chains={chains} spends ε={report.epsilon:.6g} "
            f"at δ={delta:g}, more than epsilon={epsilon:g}; lower iterations or omit it")
    return iterations, report


def start_label(private: bool, theta0, init_share: float, init_steps: int) -> str:
    """The plan's one-line description of where the chains start."""
    if private:
        return (f"private initialisation ({init_share:g} of the budget's μ on {init_steps} noisy clipped "
                "gradient steps)")
    if theta0 is None:
        return "data-independent (prior draws, or zeros without a prior sampler)"
    return "given by the user"


def check_private_init(spec, prepared: dict, epsilon, secure_key, share, steps) -> float:
    """Arguments of ``theta0="private"``, checked before any data value is read; the clip bound.

    Shared by :func:`dpmcmc.sample` and :func:`plan` (the same errors from both).
    """
    from .accounting._checks import check_int
    if not spec.private:
        raise ValueError(f"theta0='private' applies to the private algorithms, not {spec.name!r}")
    if epsilon is None:
        raise ValueError("theta0='private' spends a share of epsilon: give epsilon")
    if secure_key is not None:
        raise ValueError("theta0='private' with secure=True is not supported yet: pass theta0")
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share < 1.0:
        raise ValueError(f"init_share must lie in (0, 1), got {share!r}")
    check_int("init_steps", steps, minimum=1)
    bound = prepared.get("grad_clip", prepared.get("clip"))
    if bound is None:
        raise ValueError(f"theta0='private' needs a per-record gradient bound (grad_clip or clip); "
                         f"{spec.name!r} has none: pass theta0")
    return float(bound)


def default_private_start(spec, prepared: dict, epsilon, iterations, accountant, secure: bool) -> bool:
    """Whether ``theta0=None`` means a private start (public inputs only).

    Yes when the budget sets the run length (``epsilon`` given, ``iterations`` not), the sampler
    is private with a per-record gradient bound (``grad_clip`` or ``clip``), it is not DP Barker,
    the run is not in secure mode, and the accountant composes a fixed Gaussian start with the
    sampler's releases: always for the full-data samplers (Gaussian releases), under
    ``accountant="rdp"``/``"zcdp"`` for the subsampled ones (their PLD does not compose it).
    Everywhere else ``theta0=None`` keeps its data-independent default, prior draws.
    """
    from . import accounting

    if not spec.private or epsilon is None or iterations is not None or secure:
        return False
    if prepared.get("grad_clip", prepared.get("clip")) is None:  # DP Barker has no bound
        return False
    acc = accountant or accounting.supported_accountants(spec.name)[0]
    kinds = {r.kind for r in accounting.releases(spec.name, 10**6, **spec.accounting_params(prepared))}
    return kinds == {accounting.GAUSSIAN} or acc in ("rdp", "rdp-direct", "zcdp")


def account_start(algorithm: str, spec, prepared: dict, n: int, chains: int, epsilon, delta,
                  iterations, accountant, relation: str, theta0, secure: bool, init_share: float,
                  init_steps: int):
    """``(private_start, iterations, report)``: the run's accounting with its start decided.

    ``theta0="private"`` asks for the private start (refused, naming the argument, where it does
    not apply); ``theta0=None`` gets it by :func:`default_private_start`, unless the budget is
    too small to pay for both the start and one iteration, where the run falls back to prior
    draws (a decision from public inputs). Shared by :func:`dpmcmc.sample` and :func:`plan`.
    """
    explicit = isinstance(theta0, str) and theta0 == "private"
    private = explicit or (theta0 is None and default_private_start(spec, prepared, epsilon, iterations,
                                                                    accountant, secure))
    if private:
        check_private_init(spec, prepared, epsilon, "secure" if secure else None, init_share, init_steps)
        try:
            iterations_, report = account(algorithm, spec, prepared, n, chains, epsilon, delta, iterations,
                                          accountant, relation, init_share, init_steps)
            return True, iterations_, report
        except ValueError as err:
            if explicit or "budget too small" not in str(err):
                raise
    iterations, report = account(algorithm, spec, prepared, n, chains, epsilon, delta, iterations,
                                 accountant, relation)
    return False, iterations, report


def warn(p: Plan, stacklevel: int = 3) -> None:
    """Emit the plan's warnings as one :class:`PlanWarning` (nothing if the plan is fine)."""
    if p.warnings:
        warnings.warn(PlanWarning(f"{p.algorithm}: " + " ".join(p.warnings)), stacklevel=stacklevel)
