"""Sampler parameters from public inputs only: the shared pieces of every algorithm's default rule.

An algorithm's rule lives in its own module (``SPEC.defaults``); this module holds what the rules
share: the public facts they read (:class:`PublicScale`), the targets they aim at, and the budget
floor that raises a full-data sampler's τ's until (ε, δ) buys enough iterations. Nothing here
reads data: the inputs are n, the dimension, the per-record bounds (clip bounds derived from
declared bounds), the smallest posterior scale those bounds allow, the budget and the chains.
docs/tabular.md states the rules and the measurements behind them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from scipy.special import ndtri

__all__ = ["PublicScale", "TARGET_CEILING", "TARGET_KICK", "TARGET_SGLD_RATIO",
           "TARGET_SGLD_DISCRETISATION", "MIN_DEFAULT_ITERATIONS", "DEFAULT_INIT_SHARE",
           "TARGET_LANGEVIN_ITERATIONS", "MAX_NOISE_RAISE", "mu_per_iteration",
           "langevin_noise_multiplier"]

#: Acceptance ceiling 2Φ(−σ/2) a penalty test's noise allows for a typical move (σ = 1.349).
TARGET_CEILING = 0.5
#: Momentum noise of DP-HMC's gradient releases over one trajectory, in momentum sds.
TARGET_KICK = 1.0
#: DP-SGLD/SGNHT: privacy noise per step over the Langevin noise, and the step's discretisation
#: error ηλ/4 at the largest curvature the declared box allows.
TARGET_SGLD_RATIO = 0.5
TARGET_SGLD_DISCRETISATION = 0.025
#: Full-data samplers: the τ's are raised (more noise per release) until the budget buys at
#: least this many iterations per chain (:meth:`PublicScale.budget_split`).
MIN_DEFAULT_ITERATIONS = 20
#: Where the budget needs the τ's raised by f, the penalty test's noise on the typical move is
#: raised by at most this factor x and the move shortened by f/x: with the move length ℓ and the
#: noise sd x·σ (σ the target's 1.349), the squared jump a move is accepted for is at most
#: ℓ²·2Φ(−xσ/2) ∝ x²Φ(−xσ/2)/f², largest at x = 1.765 (ceiling 0.234). Raising the noise
#: further (the rule until stop 39) left runs whose ceiling fell under the plan's 5 % refusal
#: line, e.g. DP-HMC on 10,000 rows at ε = 2 (ceiling 4 %); this way the defaults never do.
MAX_NOISE_RAISE = 1.765
#: Share of the budget's μ the default private start spends (dpmcmc.sample's init_share).
DEFAULT_INIT_SHARE = 0.1
#: DP-SGLD/SGNHT: iterations per chain the default noise multiplier buys (RDP accountant).
TARGET_LANGEVIN_ITERATIONS = 1000


@dataclass(frozen=True)
class PublicScale:
    """The public facts a sampler's default parameters are derived from.

    Attributes
    ----------
    n : int
        Records (public under the replace-one relation).
    dim : int
        Parameters.
    clip, grad_clip : float
        Per-record Lipschitz bound of the log-likelihood and per-record gradient bound.
    scale : float
        ``s₀``: the smallest posterior sd of a coordinate the declared bounds allow (a record
        carries at most so much information), the length scale of the moves.
    epsilon, delta : float or None
        The budget (``None``: the run length is given instead).
    chains : int
    """

    n: int
    dim: int
    clip: float
    grad_clip: float
    scale: float
    epsilon: Optional[float] = None
    delta: Optional[float] = None
    chains: int = 4

    @property
    def sigma_target(self) -> float:
        """The penalty-test noise sd σ whose acceptance ceiling 2Φ(−σ/2) is TARGET_CEILING."""
        return -2.0 * float(ndtri(TARGET_CEILING / 2.0))

    def budget_split(self, mu_iteration: float) -> tuple[float, float]:
        """``(f, g)``: multiply a full-data sampler's τ's by ``f`` (:meth:`budget_floor`) and
        divide its move (proposal sd, leapfrog step) by ``g = max(1, f / MAX_NOISE_RAISE)``.

        Every τ carries its release's noise in units of the release's sensitivity, which is
        proportional to the move: the noise on the typical move's log-likelihood ratio, and
        DP-HMC's momentum kick, grow by ``f/g ≤ MAX_NOISE_RAISE`` over the rule's targets, while
        μ per iteration falls by ``f²`` whatever ``g`` is.
        """
        f = self.budget_floor(mu_iteration)
        return f, max(1.0, f / MAX_NOISE_RAISE)

    def budget_floor(self, mu_iteration: float) -> float:
        """Factor ≥ 1 on a full-data sampler's τ's so that the budget buys at least
        ``MIN_DEFAULT_ITERATIONS`` per chain (1 without a budget).

        Every release costs μ ∝ 1/τ², so multiplying all τ by c divides the per-iteration μ by
        c²; the budget's μ is ``gaussian_mu(ε, δ)`` less the private start's default share.
        The target has 5 % to spare: the plan's accountant (PLD) composes the start with the run
        a little less tightly than adding their μ does (19.8 of 20 iterations at ε = 1, which
        the plan rounds down to 19).
        """
        if self.epsilon is None or self.delta is None:
            return 1.0
        from dpmcmc.accounting.gaussian import gaussian_mu

        available = (1.0 - DEFAULT_INIT_SHARE) * gaussian_mu(self.epsilon, self.delta)
        need = 1.05 * MIN_DEFAULT_ITERATIONS * self.chains * mu_iteration
        return max(1.0, math.sqrt(need / available))


def mu_per_iteration(events_at_unit_tau) -> float:
    """μ of one iteration from ``(event at τ = 1, τ)`` pairs: one release costs μ(τ=1)/τ²."""
    return sum(e.mu * e.per_iteration / (tau * tau) for e, tau in events_at_unit_tau)


def langevin_noise_multiplier(releases, scale: PublicScale, batch: int) -> float:
    """The smallest noise multiplier (to 1 %) whose RDP accounting buys
    ``TARGET_LANGEVIN_ITERATIONS`` per chain.

    ``releases`` is the algorithm's release declaration (a
    :class:`~dpmcmc.accounting.events.ReleaseSpec`): its events are composed here by the RDP
    functions directly, so that a card's defaults never go back through the accountant's
    name-keyed entry point (which reads the registry: an import circle)."""
    from dpmcmc.accounting.rdp import default_orders, rdp_to_epsilon

    orders = default_orders()
    total = TARGET_LANGEVIN_ITERATIONS * scale.chains

    def buys(sigma: float) -> bool:
        events = releases.build(scale.n, {"noise_multiplier": sigma, "batch_size": batch})
        curve = total * sum(e.per_iteration * e.rdp(orders) for e in events)
        return rdp_to_epsilon(orders, curve, scale.delta)[0] <= scale.epsilon

    lo, hi = 0.5, 1.0
    while not buys(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            return hi
    while hi / lo > 1.01:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if buys(mid) else (mid, hi)
    return hi
