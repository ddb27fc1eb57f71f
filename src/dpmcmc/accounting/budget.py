"""The budget functions: release events composed under an accountant.

The core composes release events (:mod:`dpmcmc.accounting.events`) × iterations × chains
under one accountant (:class:`_Accounting`, :func:`_largest_feasible`) and knows no algorithm.
What one iteration of an algorithm releases is declared once, by the algorithm's spec in
``dpmcmc.samplers`` (its ``releases``, a :class:`~dpmcmc.accounting.events.ReleaseSpec`);
the name-based functions here (:func:`releases`, :func:`max_iterations`, :func:`spent`, ...)
look the declaration up by name at call time (:func:`_declaration`: the one upward edge of
this package, imported lazily so that ``import dpmcmc.accounting`` never imports JAX). The
samplers draw their noise from the same events.

Conventions of the declarations (each written with its algorithm's release declaration; summarised
here; substitute relation; ARCHITECTURE.md):

* ``dp-penalty`` (001 Thm 6): one clipped log-likelihood-ratio sum per iteration, noise
  standard deviation σ_l = 2 τ √n b ‖θ−θ'‖ for sensitivity 2 b ‖θ−θ'‖, so μ = 1/(2 τ² n).
* ``dp-hmc`` (000 Algorithm 1, Thm 3.5): per iteration one log-likelihood ratio
  (μ_l = 1/(2 τ_l² n)) and L + 1 clipped gradient sums (σ_g = 2 τ_g √n b_g,
  μ_g = 1/(2 τ_g² n)); k iterations release k log-likelihood ratios and k(L+1) gradients.
* ``minibatch-penalty`` (001 Thm 8): one release of λ − σ_b²/2 on a minibatch of size b drawn
  without replacement, sensitivity c(θ,θ') and noise variance τ c², i.e. per-release RDP
  α/(2τ). In the units of :mod:`dpmcmc.accounting.pld` (noise standard deviation over the
  per-example bound, neighbouring values differing by at most 2) the per-example bound is
  c/2, so σ = √τ c / (c/2) = 2√τ; its Gaussian μ = 2/σ² = 1/(2τ) matches Thm 8's α/(2τ).
  With ``accountant="pld"`` and the default relation the pair is (1−q)N(0,σ²) + qN(2,σ²) vs
  N(0,σ²) and its reverse, i.e. in units of c: (1−q)N(0,τ) + qN(1,τ) vs N(0,τ), the
  sensitivity-1 release with noise variance τ that 001 §4 describes, under the valid pair
  for fixed-size batches. ``relation="substitute-legacy"`` uses (1−q)N(0,σ²) + qN(±1,σ²) at
  σ = 2√τ; the thesis' own Fourier-accountant call (``get_delta_S`` with variance τ) is that
  legacy pair at σ/2 = √τ, which is not reproduced here.
* ``dp-barker`` (002 Thm 2 and Cor. 3, 001 Thm 7): one Barker test on a minibatch of size b
  with total noise variance C = 2 and per-example log-likelihood ratios clipped to √b/n₀
  (n₀ = n without tempering). Only RDP bounds exist: ``accountant="rdp-direct"`` (the
  default, :func:`dpmcmc.accounting.rdp.barker_direct_rdp`: the Rényi divergence of the two
  Gaussians a neighbouring pair of batches releases, bounded directly, converted to (ε, δ)
  with the improved conversion of Balle et al. 2020 Thm 21) and ``"rdp"`` (002 Thm 2 and the
  002 Prop. 3 conversion as published, looser; the held reference values). Both are amplified
  by WBK Thm 9.
* ``dp-sgld``, ``dp-sgnht``: one subsampled clipped-gradient sum per iteration with noise
  standard deviation ``noise_multiplier`` × clip bound (σ = noise_multiplier in pld units).

Running ``chains`` chains of k iterations composes chains·k iterations.

Neighbouring relation (``relation``): ``"substitute"`` (replace one record) everywhere. For
the subsampled Gaussian samplers (``minibatch-penalty``, ``dp-sgld``, ``dp-sgnht``) with
``accountant="pld"`` it is the dominating pair of :mod:`dpmcmc.accounting.pld` for fixed-size
batches drawn without replacement, (1−q)N(0,σ²) + qN(2,σ²) vs N(0,σ²) and its reverse. There
alone ``relation="substitute-legacy"`` selects the papers' pair (1−q)N(0,σ²) + qN(±1,σ²)
(Fourier accountant ``get_delta_S``, the held reference values), which is NOT an upper bound
for these batches: neighbouring data sets whose other records all contribute −C while the
replaced record moves from +C to −C attain the default pair, whose δ is larger (σ = 1,
q = 0.1, ε = 0.5: 0.033 against 0.0033). It exists to reproduce published numbers; the
report says so. ``"add-remove"`` is rejected: it is the relation of Poisson sampling, and the
samplers draw fixed-size batches. ``accountant="rdp"`` (WBK Thm 9: without replacement,
substitute) and the full-data accountants need no such pair.

Adaptive validity (issue 11; docs/neighbouring_relation.md): the PLD ``"substitute"`` path
composes one pair dominating both orders, so an adversary switching orders between iterations
is covered; RDP and zCDP curves hold for both orders of every step and compose adaptively;
the full-data Gaussian pair is symmetric and μ-GDP composes adaptively (Dong, Roth & Su 2022).
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from . import pld as _pld
from ._checks import check_choice, check_int, check_param_names, check_positive, check_probability
from .events import (
    BARKER,
    GAUSSIAN,
    PURE,
    SUBSAMPLED_GAUSSIAN,
    ReleaseEvent,
    ReleaseSpec,
)
from .gaussian import gaussian_epsilon, gaussian_mu, log_gaussian_delta
from .pure import composed_delta, composed_epsilon
from .rdp import (
    conversion_offset,
    barker_orders,
    default_orders,
    gaussian_rdp,
    rdp_to_epsilon,
)
from .report import PrivacyReport
from .zcdp import zcdp_epsilon, zcdp_rho

__all__ = [
    "ALGORITHMS",
    "BudgetTooSmall",
    "ACCOUNTANTS",
    "RELATION",
    "RELATIONS",
    "GAUSSIAN",
    "SUBSAMPLED_GAUSSIAN",
    "BARKER",
    "ReleaseEvent",
    "ReleaseSpec",
    "algorithm_params",
    "supported_accountants",
    "supported_relations",
    "releases",
    "max_iterations",
    "spent",
]

#: Default neighbouring relation (replace one record).
RELATION = "substitute"
#: Relations the budget functions accept; "substitute-legacy" only where
#: :func:`supported_relations` lists it.
RELATIONS = ("substitute", "substitute-legacy")
ACCOUNTANTS = ("pld", "rdp", "zcdp", "rdp-direct")
#: The accountants that compose RDP curves ("rdp-direct" only differs for DP Barker).
RDP_ACCOUNTANTS = ("rdp", "rdp-direct")

#: The accountants that bound each kind of release (the first is the tightest).
_ACCOUNTANTS_BY_KIND = {
    GAUSSIAN: ("pld", "rdp", "zcdp"),
    SUBSAMPLED_GAUSSIAN: ("pld", "rdp"),
    BARKER: ("rdp-direct", "rdp"),
    # Pure ε-DP releases, alone or with full-data Gaussian ones (the noise-aware GLM): the PLD
    # accountant composes them exactly (.pure), the others through their RDP/zCDP bounds.
    PURE: ("pld", "rdp", "zcdp"),
}


class BudgetTooSmall(ValueError):
    """The budget (ε, δ) does not pay for one iteration (or for the start and one iteration).

    A ``ValueError``, so callers that treat it as bad input still do; callers that fall back to
    something cheaper catch this type, never the message.
    """


#: Range of the per-release μ = Δ²/(2σ²) the accountants accept. Above: the noise is below
#: 1e-4 of the sensitivity, no budget affords one release and the curves overflow; below: the
#: release is so noisy that its μ underflows (no iteration count would be finite).
_MU_RANGE = (1e-300, 1e8)
#: Smallest sampling ratio batch_size/n the numerical PLD accountant accepts: below it the
#: per-release privacy loss is ~q wide and the budget allows ~1/q² iterations, beyond what the
#: FFT composition resolves (the RDP accountant still applies).
PLD_MIN_Q = 1e-6


def _declarations() -> dict[str, ReleaseSpec]:
    """The release declarations of the private algorithms, by name.

    The one upward edge of :mod:`dpmcmc.accounting` (ARCHITECTURE.md): the declarations live
    with their algorithms (``dpmcmc.samplers``, each algorithm's ``SPEC.releases``), imported
    here at call time so that importing the accounting package never imports JAX.
    """
    from dpmcmc.samplers.registry import ALGORITHMS as _SAMPLERS

    return {name: spec.releases for name, spec in _SAMPLERS.items() if spec.releases is not None}


def _declaration(algorithm: str) -> ReleaseSpec:
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a string, got {type(algorithm).__name__}")
    declarations = _declarations()
    return declarations[check_choice("algorithm", algorithm, declarations)]


def __getattr__(name: str):
    # ALGORITHMS (the names the accountant knows) is read from the sampler registry on first
    # use, for the reason given in _declarations.
    if name == "ALGORITHMS":
        return tuple(_declarations())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def algorithm_params(algorithm: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(required, optional) privacy parameter names of ``algorithm``."""
    spec = _declaration(algorithm)
    return spec.required, spec.optional


def _check_param(name: str, value, n: int):
    # The vocabulary of privacy parameters the release declarations use.
    if name in ("tau", "tau_l", "tau_g", "noise_multiplier", "n0"):
        return check_positive(name, value)
    if name == "leapfrog_steps":
        return check_int(name, value, minimum=1)
    if name == "batch_size":
        return check_int(name, value, minimum=1, maximum=n)
    raise AssertionError(name)  # every spec parameter is listed above


def _check_mu(release: ReleaseEvent) -> ReleaseEvent:
    lo, hi = _MU_RANGE
    mu = release.mu
    if mu is not None and not (math.isfinite(mu) and lo <= mu <= hi):
        name, value = release.source
        raise ValueError(
            f"{name}={value!r} gives a per-release mu = Δ²/(2σ²) of {mu:.3g}, outside the "
            f"accountable range [{lo:g}, {hi:g}] (noise far below the sensitivity, or so large "
            f"that its mu underflows); choose a {name} within it"
        )
    return release


def _validated(algorithm: str, n, params: dict) -> tuple[int, dict, tuple[ReleaseEvent, ...]]:
    spec = _declaration(algorithm)
    n = check_int("n", n, minimum=1)
    check_param_names(algorithm, params, spec.required + spec.optional, spec.required,
                      error=TypeError)
    clean = {name: params[name] for name in spec.required + spec.optional
             if params.get(name) is not None}
    if spec.validate is not None:
        clean = spec.validate(n, clean)
    else:
        clean = {name: _check_param(name, value, n) for name, value in clean.items()}
    return n, clean, tuple(_check_mu(r) for r in spec.build(n, clean))


def releases(algorithm: str, n: int, **params) -> tuple[ReleaseEvent, ...]:
    """What one iteration of ``algorithm`` releases, validated.

    Parameters
    ----------
    algorithm : str
        One of :data:`ALGORITHMS`.
    n : int
        Number of records.
    **params
        The algorithm's privacy parameters (see :func:`max_iterations`).

    Returns
    -------
    tuple of ReleaseEvent
    """
    return _validated(algorithm, n, params)[2]


def supported_accountants(algorithm: str) -> tuple[str, ...]:
    """Accountants that can bound ``algorithm`` (the first is the tightest)."""
    return _ACCOUNTANTS_BY_KIND[_declaration(algorithm).kind]


def _check_accountant(accountant, algorithm: str) -> str:
    if accountant is None:
        # One meaning of "no accountant given" across sample, max_iterations, spent and the CLI.
        return supported_accountants(algorithm)[0]
    accountant = check_choice("accountant", accountant, ACCOUNTANTS)
    allowed = list(supported_accountants(algorithm))
    if accountant not in allowed:
        raise ValueError(
            f"accountant {accountant!r} cannot bound algorithm {algorithm!r}; supported accountant(s): {allowed}"
        )
    return accountant


def supported_relations(algorithm: str, accountant: str = "pld") -> tuple[str, ...]:
    """Neighbouring relations :func:`max_iterations` and :func:`spent` accept (default first).

    ``"substitute-legacy"`` (the papers' non-dominating pair) is available only for the
    subsampled Gaussian samplers under ``accountant="pld"``.
    """
    spec = _declaration(algorithm)
    accountant = check_choice("accountant", accountant, ACCOUNTANTS)
    if spec.kind == SUBSAMPLED_GAUSSIAN and accountant == "pld":
        return RELATIONS
    return (RELATION,)


def _check_relation(relation, algorithm: str, accountant: str) -> str:
    if relation == "add-remove":
        raise ValueError(
            "relation 'add-remove' is not supported: it is the relation of Poisson sampling, and "
            f"{algorithm!r} draws fixed-size batches without replacement; use 'substitute'"
        )
    relation = check_choice("relation", relation, RELATIONS)
    allowed = supported_relations(algorithm, accountant)
    if relation not in allowed:
        raise ValueError(
            f"relation {relation!r} applies only to the subsampled Gaussian samplers with "
            f"accountant 'pld'; for {algorithm!r} with accountant {accountant!r} use {list(allowed)}"
        )
    return relation


class _Accounting:
    """(ε, δ) of `total` composed iterations of one algorithm under one accountant."""

    def __init__(self, rels: tuple[ReleaseEvent, ...], accountant: str, relation: str = RELATION,
                 init_mu: float = 0.0):
        self.rels = rels
        self.accountant = accountant
        self.relation = relation
        # A fixed-cost start (private initialisation): full-data Gaussian releases of total μ,
        # paid once for the whole run, composed with the iterations' releases.
        self.init_mu = float(init_mu)
        self.kinds = {r.kind for r in rels}
        self.gaussian = self.kinds == {GAUSSIAN}
        # Pure releases, possibly beside full-data Gaussian ones: ε of each per iteration.
        self.pure = PURE in self.kinds
        if self.pure:
            self.mu_iter = sum(r.per_iteration * r.mu for r in rels if r.kind == GAUSSIAN)
            self.pure_iter = tuple(r.epsilon for r in rels if r.kind == PURE
                                   for _ in range(r.per_iteration))
        self.is_rdp = accountant in RDP_ACCOUNTANTS
        if self.is_rdp:
            self.orders = (
                barker_orders(rels[0].batch_size) if BARKER in self.kinds else default_orders()
            )
            direct = accountant == "rdp-direct"
            self.curve = sum(r.per_iteration * r.rdp(self.orders, direct) for r in rels)
        if self.gaussian:
            self.mu_iter = sum(r.per_iteration * r.mu for r in rels)
        if self.kinds == {SUBSAMPLED_GAUSSIAN}:
            (self.sub,) = rels

    def total_mu(self, total: int) -> float:
        return total * self.mu_iter + self.init_mu

    def epsilon(self, total: int, delta: float) -> tuple[float, dict]:
        if self.is_rdp:
            curve = total * self.curve
            if self.init_mu:
                curve = curve + gaussian_rdp(self.orders, self.init_mu)
            eps, order = rdp_to_epsilon(self.orders, curve, delta,
                                        improved=self.accountant == "rdp-direct")
            return eps, {"rdp_order": order}
        if self.accountant == "zcdp":
            mu = self.total_mu(total)
            if self.pure:  # ε-DP is ε²/2-zCDP (Bun & Steinke 2016, Prop. 3.3)
                mu += total * sum(0.5 * e * e for e in self.pure_iter)
            return zcdp_epsilon(mu, delta), {"total_mu": mu}
        if self.pure:
            mu, pure = self.total_mu(total), self.pure_iter * total
            return composed_epsilon(delta, mu=mu, pure=pure), {
                "total_mu": mu, "pure_epsilon": list(pure),
                "composition": "Gaussian releases (total μ) with pure ε-DP releases: exact privacy "
                               "profile of G_μ ⊗ randomized response (valid adaptively)"}
        if self.gaussian:
            mu = self.total_mu(total)
            return gaussian_epsilon(mu, delta), {"total_mu": mu}
        s = self.sub
        eps = _pld.subsampled_gaussian_epsilon(s.sigma, s.q, total * s.per_iteration, delta,
                                               relation=self.relation, init_mu=self.init_mu)
        return float(eps), {}

    def excess(self, total: int, epsilon: float, delta: float) -> float:
        """≤ 0 iff `total` iterations meet (ε, δ); roughly linear in log(total)."""
        if self.accountant == "pld":
            if self.gaussian:
                return log_gaussian_delta(self.total_mu(total), epsilon) - math.log(delta)
            if self.pure:
                d = composed_delta(epsilon, mu=self.total_mu(total), pure=self.pure_iter * total)
                return (math.log(d) if d > 0 else -math.inf) - math.log(delta)
            s = self.sub
            d = float(_pld.subsampled_gaussian_delta(s.sigma, s.q, total * s.per_iteration, epsilon,
                                                     relation=self.relation, init_mu=self.init_mu))
            return (math.log(d) if d > 0 else -math.inf) - math.log(delta)
        eps, _ = self.epsilon(total, delta)
        return math.log(eps / epsilon)

    def guesses(self, epsilon: float, delta: float, chains: int) -> tuple[int, int | None]:
        """(guess, upper guess) for the largest feasible k per chain."""
        if self.is_rdp:
            return self._rdp_guess(epsilon, delta, chains), None
        if self.pure:  # a few releases at most (one-shot algorithms): search upwards from one
            return 1, None
        if self.accountant == "zcdp":
            return int((zcdp_rho(epsilon, delta) - self.init_mu) / (chains * self.mu_iter)), None
        if self.gaussian:
            return int((gaussian_mu(epsilon, delta) - self.init_mu) / (chains * self.mu_iter)), None
        # Subsampled Gaussian PLD: RDP (WBK Thm 9) is a valid but loose bound for the
        # substitute relation, and the legacy pair's delta is smaller still, so its answer is
        # a lower guess. The Gaussian CLT gives a second point near the answer, from which the
        # search extrapolates: for small q the loss variance per release is about q² χ²(P‖Q),
        # with χ² = e^{4/σ²} − 1 for the substitute pair (1−q)N(0)+qN(2) vs N(0) and
        # 4 sinh(1/σ²) for the legacy pair (1−q)N(0)+qN(±1); K releases are then μ-GDP with
        # μ_gdp² = K q² χ², and our μ = μ_gdp²/2.
        s = self.sub
        orders = default_orders()
        lower = self._rdp_guess(epsilon, delta, chains, orders, s.per_iteration * s.rdp(orders))
        mu_star = max(gaussian_mu(epsilon, delta) - self.init_mu, 1e-300)
        inv_s2 = min(1.0 / (s.sigma * s.sigma), 175.0)
        chi2 = 4.0 * math.sinh(inv_s2) if self.relation == "substitute-legacy" else math.expm1(4.0 * inv_s2)
        rate = s.q * s.q * chi2 / 2.0
        upper = int(mu_star / (rate * s.per_iteration * chains)) + 1
        return lower, max(upper, lower + 1)

    def _rdp_guess(self, epsilon, delta, chains, orders=None, curve=None) -> int:
        orders = self.orders if orders is None else orders
        curve = self.curve if curve is None else curve
        room = epsilon - conversion_offset(orders, delta, improved=self.accountant == "rdp-direct")
        if self.init_mu:
            room = room - gaussian_rdp(orders, self.init_mu)
        ks = np.floor(room / (chains * curve))
        best = float(np.max(ks))
        return int(best) if best >= 1 else 1


_MAX_TOTAL = 2**53


def _largest_feasible(f: Callable[[int], float], guess: int, upper: int | None, what: str) -> int:
    """Largest k ≥ 1 with f(k) ≤ 0 for f non-decreasing in k (raises if f(1) > 0).

    Brackets from the guesses, then narrows with an Illinois-type false position in log k,
    which needs only a handful of evaluations of a smooth f (each costs ~0.2 s for the
    numerical PLD)."""
    cache: dict[int, float] = {}

    def F(k: int) -> float:
        if k not in cache:
            cache[k] = f(k)
        return cache[k]

    guess = max(1, int(guess))
    if F(guess) <= 0:
        lo = guess
        hi = upper if upper is not None and upper > lo else lo + 1
        prev = None
        while F(hi) <= 0:
            prev, lo = lo, hi
            hi = 2 * lo
            f_prev, f_lo = F(prev), F(lo)
            if math.isfinite(f_prev) and f_lo > f_prev:
                # Secant extrapolation in log k, aimed 5% past the predicted root so that
                # the new end is infeasible; never more than doubling.
                slope = (f_lo - f_prev) / (math.log(lo) - math.log(prev))
                hi = min(hi, int(math.exp(math.log(lo) - f_lo / slope) * 1.05) + 1)
            hi = max(hi, lo + 1)
            if hi > _MAX_TOTAL:
                raise ValueError(f"the budget allows more than {_MAX_TOTAL} iterations: {what}")
    else:
        hi = guess
        lo = max(1, hi - 1)
        step = 1
        while F(lo) > 0:
            if lo == 1:
                raise BudgetTooSmall(f"budget too small for one iteration: {what}")
            hi, step = lo, 2 * step
            lo = max(1, hi - step)
    side = 0  # which end moved last: Illinois halves the stale end's weight
    weight_lo = weight_hi = 1.0
    while hi - lo > 1:
        flo, fhi = F(lo) * weight_lo, F(hi) * weight_hi
        if math.isfinite(flo) and math.isfinite(fhi) and fhi > flo:
            x_lo, x_hi = math.log(lo), math.log(hi)
            root = math.exp(x_lo + (x_hi - x_lo) * (-flo) / (fhi - flo))
            c = int(math.floor(root))
        else:
            c = int(math.sqrt(lo * hi))
        c = min(max(c, lo + 1), hi - 1)
        if F(c) <= 0:
            lo = c
            weight_lo = 1.0
            weight_hi = weight_hi * 0.5 if side == -1 else 1.0
            side = -1
        else:
            hi = c
            weight_hi = 1.0
            weight_lo = weight_lo * 0.5 if side == 1 else 1.0
            side = 1
    return lo


def _check_init_mu(init_mu, accountant: str, rels) -> float:
    if init_mu is None or (isinstance(init_mu, (int, float)) and not isinstance(init_mu, bool)
                           and init_mu == 0):
        return 0.0
    init_mu = check_positive("init_mu", init_mu)
    if any(r.kind == BARKER for r in rels):
        # The Barker test's RDP curve would compose with it; no start applies there (it has no
        # per-record gradient bound), so none is accounted.
        raise ValueError("init_mu: DP Barker takes no private initialisation")
    return init_mu


def _common_checks(epsilon_or_none, delta, chains, accountant, relation, algorithm, n, params):
    n, clean, rels = _validated(algorithm, n, params)
    delta = check_probability("delta", delta)
    chains = check_int("chains", chains, minimum=1)
    accountant = _check_accountant(accountant, algorithm)
    relation = _check_relation(relation, algorithm, accountant)
    if accountant == "pld":
        for r in rels:
            if r.kind == SUBSAMPLED_GAUSSIAN and r.q < PLD_MIN_Q:
                raise ValueError(
                    f"batch_size/n = {r.batch_size}/{n} = {r.q:.3g} is below {PLD_MIN_Q:g}, the "
                    "smallest sampling ratio the numerical PLD accountant resolves; use a larger "
                    "batch_size or accountant='rdp'"
                )
    eps = None if epsilon_or_none is None else check_positive("epsilon", epsilon_or_none)
    return eps, delta, chains, accountant, relation, n, clean, rels


def max_iterations(
    algorithm: str,
    epsilon: float,
    delta: float,
    n: int,
    chains: int = 4,
    accountant: str | None = None,
    *,
    relation: str = RELATION,
    init_mu: float = 0.0,
    **params,
) -> int:
    """Largest number of iterations per chain that keeps all chains within (ε, δ)-DP.

    Exact for the chosen accountant: k iterations per chain meet the budget and k + 1 do
    not (for ``"pld"``: δ(ε; k) ≤ δ < δ(ε; k+1); for the RDP accountants and ``"zcdp"``:
    ε(k) ≤ ε < ε(k+1)).

    Parameters
    ----------
    algorithm : str
        ``"dp-penalty"`` (params ``tau``), ``"dp-hmc"`` (``tau_l``, ``tau_g``,
        ``leapfrog_steps``), ``"minibatch-penalty"`` (``tau`` of 001 Thm 8 — noise variance
        τ c² — and ``batch_size``), ``"dp-barker"`` (``batch_size``, optional ``n0``),
        ``"dp-sgld"`` / ``"dp-sgnht"`` (``noise_multiplier``, ``batch_size``). Conventions in
        the module docstring.
    epsilon : float
        ε > 0 of the whole run (all chains).
    delta : float
        δ in (0, 1).
    n : int
        Number of records.
    chains : int, default 4
        Number of chains; they compose. The default is ``dpmcmc.sample``'s and ``dpmcmc
        budget``'s.
    accountant : {"pld", "rdp", "zcdp", "rdp-direct"}, optional
        ``None`` (default): the tightest accountant that applies to ``algorithm``, the first of
        :func:`supported_accountants` — what ``dpmcmc.sample`` uses. ``"pld"`` is tight: the Gaussian-composition bound for full-data samplers,
        the numerical PLD of :mod:`dpmcmc.accounting.pld` for subsampled Gaussian samplers.
        ``"zcdp"`` applies to full-data Gaussian samplers. DP Barker has only RDP bounds:
        ``"rdp-direct"`` (tighter, ours) and ``"rdp"`` (002 Thm 2 as published).
    relation : {"substitute", "substitute-legacy"}, optional
        Neighbouring relation, keyword only. ``"substitute"`` (default; replace one record)
        is valid for every algorithm and accountant. ``"substitute-legacy"`` is accepted only
        for ``minibatch-penalty``, ``dp-sgld`` and ``dp-sgnht`` with ``accountant="pld"``: it
        uses the papers' pair (1−q)N(0,σ²) + qN(±1,σ²), which reproduces published numbers but
        is not an upper bound for fixed-size batches and may understate δ. ``"add-remove"``
        (Poisson sampling) is rejected.
    init_mu : float, optional
        Keyword only. μ (= Δ²/(2σ²), summed) of full-data Gaussian releases made once before
        the chains start — the private initialisation of ``dpmcmc.sample`` — composed with the
        iterations by the same accountant: μ-additively for the full-data samplers, as one more
        curve under RDP, and under the subsampled samplers' PLD as the Gaussian's PLD convolved
        with theirs (:func:`dpmcmc.accounting.pld.gaussian_pld`). Not for DP Barker.
    **params
        The algorithm's privacy parameters.

    Returns
    -------
    int
        Iterations per chain, ≥ 1.

    Raises
    ------
    ValueError
        Invalid argument (named), unsupported accountant, or a budget too small for one
        iteration.
    TypeError
        Missing or unexpected parameters, or arguments of the wrong type.
    """
    eps, delta, chains, accountant, relation, n, clean, rels = _common_checks(
        epsilon, delta, chains, accountant, relation, algorithm, n, params
    )
    if eps is None:
        raise TypeError("epsilon is required")
    acc = _Accounting(rels, accountant, relation, _check_init_mu(init_mu, accountant, rels))
    guess, upper = acc.guesses(eps, delta, chains)
    what = (f"epsilon={eps:g}, delta={delta:g} with {chains} chain(s) of {algorithm} "
            f"({accountant}, {relation})")
    return _largest_feasible(lambda k: acc.excess(k * chains, eps, delta), guess, upper, what)


def spent(
    algorithm: str,
    iterations: int,
    delta: float,
    n: int,
    chains: int = 4,
    accountant: str | None = None,
    *,
    relation: str = RELATION,
    init_mu: float = 0.0,
    init_steps: int = 1,
    **params,
) -> PrivacyReport:
    """Privacy spent by ``chains`` chains of ``iterations`` iterations each.

    Parameters
    ----------
    algorithm : str
        As in :func:`max_iterations`.
    iterations : int
        Iterations per chain, ≥ 1.
    delta : float
        δ in (0, 1) at which ε is reported.
    n : int
        Number of records.
    chains : int, default 4
        Number of chains.
    accountant : {"pld", "rdp", "zcdp", "rdp-direct"}, optional
        As in :func:`max_iterations` (``None``: the tightest that applies).
    relation : {"substitute", "substitute-legacy"}, optional
        As in :func:`max_iterations` (keyword only); recorded in the report.
    init_mu : float, optional
        As in :func:`max_iterations`; the report lists the start as its own mechanism.
    init_steps : int, optional
        Number of releases the start made (recorded in the report).
    **params
        The algorithm's privacy parameters.

    Returns
    -------
    PrivacyReport
        ε at ``delta``, the relation, the accountant, and per-release counts and costs.
    """
    _, delta, chains, accountant, relation, n, clean, rels = _common_checks(
        None, delta, chains, accountant, relation, algorithm, n, params
    )
    iterations = check_int("iterations", iterations, minimum=1)
    total = iterations * chains
    init_mu = _check_init_mu(init_mu, accountant, rels)
    init_steps = check_int("init_steps", init_steps, minimum=1)
    acc = _Accounting(rels, accountant, relation, init_mu)
    eps, details = acc.epsilon(total, delta)
    mechanisms = []
    if init_mu:
        mechanisms.append({"name": "private initialisation (clipped gradient sums)", "kind": GAUSSIAN,
                           "count": init_steps, "per_iteration": 0, "total_mu": init_mu})
    for r in rels:
        entry = r.to_dict()
        entry["count"] = r.per_iteration * total
        if r.mu is not None and r.kind == GAUSSIAN:
            entry["total_mu"] = r.mu * r.per_iteration * total
        mechanisms.append(entry)
    return PrivacyReport(
        epsilon=float(eps),
        delta=delta,
        relation=relation,
        accountant=accountant,
        algorithm=algorithm,
        iterations=iterations,
        chains=chains,
        n=n,
        mechanisms=mechanisms,
        params=clean,
        details=details,
    )
