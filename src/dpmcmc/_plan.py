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
from typing import Any, NamedTuple, Optional

from .samplers.spec import NoiseLine

__all__ = ["Plan", "PlanWarning", "PlanRefused", "PrivateStart", "NoiseLine", "plan", "make_plan",
           "LARGE_EPSILON"]

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
    blocking : tuple of str
        The warnings that say the chains cannot move at all: ``dpmcmc.sample`` refuses such a
        plan before spending anything (:class:`PlanRefused`) unless ``force=True``.
    secure : bool
        Secure mode (the privacy noise from ChaCha20 under a secret drawn for the run).
    private_start : PrivateStart or None
        The private initialisation the run makes before its iterations (its share of μ, the
        per-record bound, the number of releases); ``None``: none.
    report : PrivacyReport or None
        What the run spends, as the accountant composes it (``None`` for a non-private
        algorithm).
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
    blocking: tuple = ()
    secure: bool = False
    private_start: Optional["PrivateStart"] = None
    report: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the plan raised no warning."""
        return not self.warnings

    def to_dict(self) -> dict:
        """The plan as plain JSON-able data."""
        out = {k: getattr(self, k) for k in ("algorithm", "n", "dim", "chains", "epsilon", "delta",
                                             "accountant", "relation", "iterations", "warmup",
                                             "epsilon_spent", "start", "secure")}
        out["params"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()}
        out["noise"] = [vars(line).copy() for line in self.noise]
        out["warnings"] = list(self.warnings)
        out["blocking"] = list(self.blocking)
        out["notes"] = list(self.notes)
        out["private_start"] = None if self.private_start is None else self.private_start._asdict()
        return out

    def __str__(self) -> str:
        lines = [f"Plan: {self.algorithm} on n = {self.n} records, dim = {self.dim}, {self.chains} chain(s)"]
        if self.epsilon is not None or self.delta is not None:
            budget = f"ε = {self.epsilon:g}, " if self.epsilon is not None else ""
            lines.append(f"  budget: {budget}δ = {self.delta:g} ({self.accountant}, {self.relation})")
        spent = "" if self.epsilon_spent is None else f" (spends ε = {self.epsilon_spent:.4g})"
        lines.append(f"  iterations per chain: {self.iterations}{spent}; warm-up: {self.warmup}")
        lines.append(f"  start: {self.start}" + ("; secure mode (ChaCha20 noise)" if self.secure else ""))
        for line in self.noise:
            lines.append(f"  noise on the {line.name}: sd {line.noise_sd:.3g}; {line.reference}: {line.ratio:.3g}")
        for text in self.warnings:
            lines.append(f"  {'REFUSED (force=True to run)' if text in self.blocking else 'WARNING'}: {text}")
        for text in self.notes:
            lines.append(f"  note: {text}")
        return "\n".join(lines)


class PlanRefused(ValueError):
    """``dpmcmc.sample`` refused a plan that says the chains cannot move (before any noise or
    budget): raise the budget or change the configuration, or pass ``force=True``."""


class PrivateStart(NamedTuple):
    """The private initialisation a plan makes before the iterations (public inputs only).

    ``share`` of the budget's μ = gaussian_mu(ε, δ), i.e. ``mu``, spent on ``steps`` releases
    with per-record bound ``bound``: clipped gradient sums (``method="gradient"``,
    :mod:`dpmcmc.samplers.private_init`), or the private Newton start of ``algorithm="auto"``
    (``method="newton"``, :mod:`dpmcmc.samplers.private_newton`: ``bound`` is the unit of its
    first histogram, later clips follow released histograms).
    """

    share: float
    mu: float
    bound: float
    steps: int
    method: str = "gradient"


#: ε above which a plan warns that the guarantee protects little: an adversary's odds about a
#: record may grow by e^ε, ×22 000 at ε = 10 (docs/plan.md).
LARGE_EPSILON = 10.0


class _PublicShape:
    """Stand-in for a model when only its dimension is known (what ``prepare`` reads)."""

    temperature = 1.0

    def __init__(self, dim: int):
        self.dim = dim


def _warnings(iterations: int, noise: tuple, chains: int, from_budget: bool, epsilon
              ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(warnings, blocking): plain-words reasons a configuration cannot give a usable posterior;
    ``blocking`` are those that say the chains cannot move at all."""
    out, blocking = [], []
    # Only a run length the budget chose is worth a warning: a user who fixed `iterations`
    # (or runs a non-private sampler) asked for exactly that many.
    if from_budget and iterations < MIN_MOVING_ITERATIONS:
        blocking.append(f"the budget buys only {iterations} iteration(s) per chain ({chains} chain(s)): "
                        "the chains cannot move away from their start, and the result is little more "
                        "than the start. Raise ε, use fewer chains, a larger τ (more noise per "
                        "release), or --algorithm auto for a GLM.")
    for line in noise:
        if line.caps_acceptance and line.ratio < MIN_ACCEPTANCE:
            blocking.append(f"the privacy noise on the {line.name} (sd {line.noise_sd:.3g}) caps the "
                            f"acceptance rate at {line.ratio:.2g}: the chain will almost never move. Use "
                            "a shorter proposal/trajectory, a smaller τ or clip, more records, a larger ε "
                            "or fewer chains, or --algorithm auto for a GLM.")
        if line.reference.startswith("over the Langevin noise") and line.ratio > 1.0:
            out.append(f"the privacy noise per step is {line.ratio:.3g}× the Langevin noise: the chain "
                       f"samples a posterior about {math.sqrt(1 + line.ratio ** 2):.3g}× too wide. Use a "
                       "smaller step size or a larger batch.")
        if line.name == "gradient" and line.ratio > 3.0:
            out.append(f"the gradient noise moves the momentum by {line.ratio:.3g} momentum sds per "
                       "trajectory: trajectories are driven by noise. Use a smaller τ_g, step size or "
                       "grad_clip.")
    if epsilon is not None and epsilon > LARGE_EPSILON:
        out.append(f"ε = {epsilon:g} is above {LARGE_EPSILON:g}: the guarantee lets an adversary's odds "
                   f"about any one record grow by up to e^ε ≈ {math.exp(min(epsilon, 700)):.3g}×, which "
                   "protects little. Choose a smaller ε if the records are sensitive.")
    return tuple(blocking + out), tuple(blocking)


def _notes(iterations: int) -> tuple[str, ...]:
    if MIN_MOVING_ITERATIONS <= iterations < MIN_DIAGNOSABLE_ITERATIONS:
        return (f"only {iterations} iterations per chain: too few to judge convergence (R-hat, ESS).",)
    return ()


def plan(model: Any, n: int, algorithm: str = "dp-hmc", **options: Any) -> Plan:
    """Plan a run of ``dpmcmc.sample`` from public inputs, touching no data.

    Parameters
    ----------
    model : Model or int
        The model, or just its dimension.
    n : int
        Number of records (public under the replace-one relation).
    algorithm : str
    **options
        Every keyword argument of :func:`dpmcmc.sample` (``epsilon``, ``delta``, ``chains``,
        ``iterations``, ``accountant``, ``relation``, ``theta0``, ``init_share``,
        ``init_steps``, ``warmup``, ``secure``, ``force``, ...) and the sampler's parameters:
        the plan is the one ``sample`` makes for the same arguments (one planner,
        :func:`make_plan`), in every mode.

    Returns
    -------
    Plan
        Iterations per chain, the start, the noise next to the moves, and warnings
        (``blocking`` ones make ``sample`` refuse without ``force=True``). ``print(plan)`` gives
        a readable block.

    Raises
    ------
    ValueError, TypeError
        For an invalid argument (named); :class:`~dpmcmc.accounting.BudgetTooSmall` for a
        budget too small for one iteration.

    Examples
    --------
    >>> import dpmcmc
    >>> p = dpmcmc.plan(2, 10_000, "dp-penalty", epsilon=1.0, delta=1e-6, tau=0.1, clip=1.0,
    ...                 proposal_std=0.01)
    >>> p.iterations > 0
    True
    """
    from .models.base import Model
    from .request import Request

    if isinstance(model, Model):
        shape = model
    elif isinstance(model, numbers.Integral) and not isinstance(model, bool) and model >= 1:
        shape = _PublicShape(int(model))
    else:
        raise TypeError(f"model must be a dpmcmc.Model or a positive int (the dimension), got {model!r}")
    return make_plan(Request.create(algorithm, **options), n, shape)


def make_plan(request, n: int, model: Any, resume: Any = None) -> Plan:
    """The one planner: a :class:`~dpmcmc.request.Request`, n and the model (or its public
    shape) in, the :class:`Plan` out — what the run will do, from public inputs only.

    Used by :func:`plan`, ``dpmcmc plan``, :func:`dpmcmc.sample` and :func:`dpmcmc.glm`, so
    that what is planned is what runs, in every mode (secure included). ``resume`` (a
    checkpoint's ``SavedRun``) takes the run length and report the first run was accounted
    with: nothing is accounted, hence spent, again.

    Raises
    ------
    ValueError, TypeError
        Naming the argument: parameters, theta0's shape, δ ≥ 1/n without ``force``, an
        accountant or relation that does not apply.
    BudgetTooSmall
        The budget does not pay for one iteration.
    """
    from .accounting._checks import check_int
    from .auto import AUTO

    if request.algorithm == AUTO:
        # The rule of algorithm="auto" (dpmcmc.auto): a private Newton start and DP-SGLD's card
        # in the coordinates it whitens, or the start's approximation, from public inputs only.
        return _auto_plan(request, n, model)
    spec = request.spec
    n = check_int("n", n, minimum=1)
    prepared = spec.prepare(dict(request.params), model, n)
    if spec.one_shot:
        return _one_shot_plan(request, spec, prepared, n, model)
    if request.start_given:
        _check_theta0_shape(request.theta0, request.chains, model.dim)
    epsilon, delta = request.epsilon, request.delta
    private_start, report = None, None
    if spec.private:
        check_delta(delta, n, request.force)
        if resume is not None:
            iterations, report = int(resume.planned), resume.report
        else:
            private_start, iterations, report = _account_start(request, spec, prepared, n)
    else:
        if epsilon is not None or delta is not None:
            raise ValueError(f"algorithm {request.algorithm!r} is not private: it takes no "
                             "epsilon/delta (use a dp-* algorithm)")
        if request.iterations is None:
            raise ValueError(f"iterations is required for the non-private algorithm "
                             f"{request.algorithm!r}")
        if request.private_start_asked:
            raise ValueError(f"theta0='private' applies to the private algorithms, not "
                             f"{request.algorithm!r}")
        iterations = request.iterations if resume is None else int(resume.planned)
    warmup = _resolve_warmup(request.warmup, spec, iterations)
    noise = ()
    if report is not None and spec.noise_lines is not None:
        noise = spec.noise_lines(prepared, n, model.dim, float(model.temperature))
    warns, blocking = _warnings(int(iterations), noise, request.chains,
                                from_budget=epsilon is not None and request.iterations is None,
                                epsilon=epsilon)
    return Plan(
        algorithm=request.algorithm, n=n, dim=model.dim, chains=request.chains,
        epsilon=None if epsilon is None else float(epsilon),
        delta=None if delta is None else float(delta),
        accountant=None if report is None else report.accountant,
        relation=None if report is None else report.relation,
        iterations=int(iterations), warmup=int(warmup),
        epsilon_spent=None if report is None else float(report.epsilon),
        params=dict(prepared), noise=noise, warnings=warns, blocking=blocking,
        notes=_notes(int(iterations)),
        start=_start_label(private_start, request) if resume is None else
        "resumed from a checkpoint (the first run drew its start)",
        secure=request.secure is not None, private_start=private_start, report=report)


def _one_shot_plan(request, spec, prepared: dict, n: int, model: Any) -> Plan:
    """The plan of a one-shot algorithm (the noise-aware GLM): one fixed set of releases that
    splits the whole budget, composed by the same accountant as a sampler's iterations, and
    independent draws from a posterior that includes their noise (post-processing: the
    chains cost nothing more)."""
    from . import accounting

    name = request.algorithm
    for given, what in ((request.iterations is not None, "iterations"),
                        (request.theta0 is not None, "theta0"), (request.warmup != 0, "warmup"),
                        (request.checkpoint is not None, "checkpoint"),
                        (request.mesh is not None, "mesh")):
        if given:
            raise ValueError(f"{what}: algorithm {name!r} runs no chain (one set of releases, "
                             "then independent draws)")
    if request.epsilon is None:
        raise ValueError(f"epsilon: algorithm {name!r} splits a budget over its releases; give "
                         "epsilon > 0")
    if request.delta is None:
        raise ValueError(f"delta is required for the private algorithm {name!r}")
    check_delta(request.delta, n, request.force)
    split = spec.split(prepared, model.dim, request.epsilon, request.delta)
    report = accounting.spent(name, 1, request.delta, n, chains=1, accountant=request.accountant,
                              relation=request.relation, **split)
    if report.epsilon > request.epsilon * (1 + 1e-9):
        raise ValueError(f"accountant: the releases split (ε = {request.epsilon:g}, δ = "
                         f"{request.delta:g}) under the tight pld composition; the "
                         f"{report.accountant} accountant bounds them only by ε = "
                         f"{report.epsilon:.4g}: use accountant='pld' (the default)")
    noise = spec.noise_lines(dict(prepared, **split), n, model.dim, 1.0)
    notes = () if spec.notes is None else spec.notes(dict(prepared, **split), n, model.dim)
    warns, blocking = _warnings(1, (), request.chains, from_budget=False, epsilon=request.epsilon)
    return Plan(algorithm=name, n=n, dim=model.dim, chains=request.chains,
                epsilon=float(request.epsilon), delta=float(request.delta),
                accountant=report.accountant, relation=report.relation,
                iterations=int(prepared.get("draws", 1)), warmup=0,
                epsilon_spent=float(report.epsilon),
                # What the split resolved from the budget (the finder and its rounds, the early
                # rounds' mechanism) replaces the prepared "auto"/None.
                params={**prepared, **{k: v for k, v in split.items() if k in prepared}},
                noise=noise,
                warnings=warns, blocking=blocking, notes=tuple(notes),
                start="none: one set of releases, then independent draws",
                secure=request.secure is not None, private_start=None, report=report)


def _auto_plan(request, n: int, model: Any) -> Plan:
    """The plan of ``algorithm="auto"`` (:mod:`dpmcmc.auto`'s rule, public inputs only): the
    checks every private plan makes, then the rule's start, chain (or approximation) and
    report."""
    from .accounting._checks import check_int
    from .auto import AUTO, config_of

    n = check_int("n", n, minimum=1)
    check_delta(request.delta, n, request.force)
    cfg = config_of(request, n, model.dim)
    report = cfg.report()
    start = (f"private Newton start ({cfg.start.steps} rounds of released whitened gradient "
             f"statistics, μ = {cfg.start.mu_total:.3g} of {cfg.mu_total:.3g})")
    private_start = PrivateStart(cfg.start.mu_total / cfg.mu_total, cfg.start.mu_total,
                                 cfg.scale, len(cfg.start.releases()), method="newton")
    # No noise line: the chain's privacy noise is part of its diffusion by construction
    # (dpmcmc.auto's docstring); only the plan-wide warnings (a large ε) apply.
    warns, blocking = _warnings(cfg.iterations, (), cfg.chains, from_budget=False,
                                epsilon=cfg.epsilon)
    return Plan(algorithm=AUTO, n=cfg.n, dim=cfg.dim, chains=cfg.chains, epsilon=cfg.epsilon,
                delta=cfg.delta, accountant=report.accountant, relation=report.relation,
                iterations=cfg.iterations, warmup=0, epsilon_spent=float(report.epsilon),
                params=cfg.params(), noise=(), warnings=warns, blocking=blocking,
                notes=cfg.reasons, start=start, secure=request.secure is not None,
                private_start=private_start, report=report)


def check_delta(delta: Optional[float], n: int, force: bool) -> None:
    """Refuse δ ≥ 1/n unless ``force``: a mechanism that publishes one random record outright
    meets (ε, δ) with δ = 1/n, so such a δ protects no one."""
    if delta is not None and delta >= 1.0 / n and not force:
        raise ValueError(
            f"delta={delta:g} is at least 1/n = {1.0 / n:.3g}: a mechanism that publishes one "
            "random record outright meets (ε, δ) with δ = 1/n, so such a δ protects no one. "
            "Use δ well below 1/n (e.g. 0.1/n), or force=True")


def _check_theta0_shape(theta0, chains: int, dim: int) -> None:
    if theta0.shape not in ((dim,), (chains, dim)):
        raise ValueError(f"theta0 must have shape ({dim},) or ({chains}, {dim}) for dim={dim} and "
                         f"chains={chains}, got {theta0.shape}")


def _resolve_warmup(warmup, spec, iterations: int) -> int:
    from .kernels.warmup import MIN_DIAGONAL_WARMUP

    if warmup == "auto":
        warmup = iterations // 2
        if spec.adaptation.target is None and warmup < MIN_DIAGONAL_WARMUP:
            warmup = 0  # too few draws for a preconditioner: nothing to adapt
    if warmup >= iterations:
        raise ValueError(f"warmup={warmup} must be less than the run's {iterations} iterations per "
                         "chain (warm-up included)")
    return int(warmup)


def _start_label(private_start: Optional[PrivateStart], request) -> str:
    """The plan's one-line description of where the chains start."""
    if private_start is not None:
        return (f"private initialisation ({private_start.share:g} of the budget's μ on "
                f"{private_start.steps} noisy clipped gradient steps)")
    if request.start_given:
        return "given by the user"
    return "data-independent (prior draws, or zeros without a prior sampler)"


def _start_bound(spec, prepared: dict) -> Optional[float]:
    """The private start's per-record gradient bound: the sampler's ``grad_clip``, else its
    ``clip`` (a log-likelihood-ratio bound b‖θ′ − θ‖ is a gradient bound b); None: neither."""
    bound = prepared.get("grad_clip", prepared.get("clip"))
    return None if bound is None else float(bound)


def _composes_start(spec, prepared: dict) -> bool:
    """Whether the accountant composes a Gaussian start with the sampler's releases: every
    accountant of the samplers with Gaussian releases does — μ-additively for the full-data
    ones, through the Gaussian's PLD for the subsampled ones
    (:func:`dpmcmc.accounting.pld.gaussian_pld`), as one more curve under RDP. Not DP Barker
    (its test is not a Gaussian release; it has no per-record gradient bound either)."""
    from .accounting import BARKER

    return all(r.kind != BARKER for r in spec.events(10**6, prepared))


def _account_start(request, spec, prepared: dict, n: int):
    """``(private_start or None, iterations, report)``: the run's accounting, start decided.

    ``theta0="private"`` asks for the private start (refused, naming the argument, where it does
    not apply). ``theta0=None`` gets it where it applies — the budget sets the run length
    (``epsilon`` given, ``iterations`` not), the sampler has a per-record gradient bound and the
    accountant composes a Gaussian start — unless the budget cannot pay for both the start and
    one iteration, where the run starts from prior draws (a decision from public inputs).
    """
    from .accounting import BudgetTooSmall

    bound = _start_bound(spec, prepared)
    asked = request.private_start_asked
    if asked:
        if request.epsilon is None:
            raise ValueError("theta0='private' spends a share of epsilon: give epsilon")
        if bound is None:
            raise ValueError(f"theta0='private' needs a per-record gradient bound (grad_clip or "
                             f"clip); {spec.name!r} has none: pass theta0")
    default = (request.theta0 is None and request.epsilon is not None and request.iterations is None
               and bound is not None and _composes_start(spec, prepared))
    if asked or default:
        from .accounting import gaussian_mu

        start = PrivateStart(request.init_share,
                             request.init_share * gaussian_mu(request.epsilon, request.delta),
                             bound, request.init_steps)
        try:
            return (start, *_account(request, spec, prepared, n, start))
        except BudgetTooSmall:
            if asked:
                raise
    return (None, *_account(request, spec, prepared, n, None))


def _account(request, spec, prepared: dict, n: int, start: Optional[PrivateStart]):
    """(iterations per chain, PrivacyReport): the run length is the largest the budget buys when
    ``iterations`` is None; otherwise the report states what the given length spends, which must
    fit ``epsilon`` when given. The spec's own release declaration is composed (through the
    accountant's functions, by the algorithm's name)."""
    from . import accounting

    if request.delta is None:
        raise ValueError(f"delta is required for the private algorithm {request.algorithm!r}")
    acct = spec.accounting_params(prepared)
    common = dict(chains=request.chains, accountant=request.accountant, relation=request.relation,
                  **acct)
    if start is not None:
        common["init_mu"] = start.mu
    iterations = request.iterations
    if iterations is None:
        if request.epsilon is None:
            raise ValueError("give epsilon (the budget sets the run length) or iterations")
        iterations = accounting.max_iterations(spec.name, request.epsilon, request.delta, n,
                                               **common)
    report = accounting.spent(spec.name, iterations, request.delta, n,
                              init_steps=1 if start is None else start.steps, **common)
    if request.epsilon is not None and report.epsilon > request.epsilon * (1 + 1e-12):
        raise ValueError(
            f"iterations={iterations} per chain with chains={request.chains} spends "
            f"ε={report.epsilon:.6g} at δ={request.delta:g}, more than epsilon={request.epsilon:g}; "
            "lower iterations or omit it")
    return iterations, report


def refuse_if_blocked(p: Plan, force: bool) -> None:
    """Raise :class:`PlanRefused` for a plan whose chains cannot move, unless ``force``."""
    if p.blocking and not force:
        raise PlanRefused(f"{p.algorithm}: refused before any noise is drawn or budget spent: "
                          + " ".join(p.blocking) + " Pass force=True (--force) to run anyway.")


def warn(p: Plan, stacklevel: int = 3) -> None:
    """Emit the plan's warnings as one :class:`PlanWarning` (nothing if the plan is fine)."""
    if p.warnings:
        warnings.warn(PlanWarning(f"{p.algorithm}: " + " ".join(p.warnings)), stacklevel=stacklevel)
