"""The propose-then-test samplers' shared parts: proposals, state, and the step skeleton.

DP penalty, minibatch DP penalty and DP Barker differ only in how they release the data term of
the log acceptance ratio and in the test applied to it. Everything else is here, once:

- the data-independent symmetric proposals (001 §3.1):

  - ``"random-walk"``: ``θ' = θ + s ⊙ z``, ``z ~ N(0, I)``;
  - ``"one-component"``: pick ``i`` uniformly, ``θ'_i = θ_i + s_i z``: a smaller ‖θ−θ'‖, hence
    less noise;
  - ``"guided-walk"``: as one-component, but ``θ'_i = θ_i + d_i s_i |z|`` with a direction
    ``d_i ∈ {−1, +1}`` per component kept in the state; ``d_i`` is kept after an acceptance and
    reversed after a rejection (Gustafson's guided walk: a reversible move on (θ, d) followed by
    a direction flip, so π(θ) × uniform(d) is invariant). Directions start at +1.

- the state :class:`ProposalState` and :func:`init_state`;
- :func:`proposal_transition`, the step skeleton propose → release → prior → accept → finish,
  parameterised by the release and the accept test.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from dpmcmc.kernels.types import Info

Array = Any

__all__ = ["MODES", "ProposalState", "propose", "update_direction", "init_state", "finish_move",
           "check_mode", "proposal_transition", "plain_transition"]

MODES = ("random-walk", "one-component", "guided-walk")


class ProposalState(NamedTuple):
    """``position`` (dim,) and the guided-walk ``direction`` (dim,) of ±1 (unused otherwise)."""

    position: Array
    direction: Array


def check_mode(mode: str) -> None:
    """Raise ``ValueError`` unless ``mode`` is one of :data:`MODES` (checked when a kernel is built)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def propose(key: Array, theta: Array, direction: Array, proposal_std: Array, mode: str
            ) -> tuple[Array, Array]:
    """Data-independent symmetric proposal (the modes of the module docstring).

    Returns
    -------
    theta_new : array (dim,)
    component : int
        The updated component (one-component / guided-walk); −1 for random-walk.
    """
    k_comp, k_z = jax.random.split(key)
    s = proposal_std.astype(theta.dtype)
    if mode == "random-walk":
        z = jax.random.normal(k_z, theta.shape, dtype=theta.dtype)
        return theta + s * z, jnp.asarray(-1, jnp.int32)
    i = jax.random.randint(k_comp, (), 0, theta.shape[0], dtype=jnp.int32)
    z = jax.random.normal(k_z, (), dtype=theta.dtype)
    if mode == "one-component":
        move = s[i] * z
    elif mode == "guided-walk":
        move = direction[i] * s[i] * jnp.abs(z)
    else:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return theta.at[i].add(move), i


def update_direction(direction: Array, component: Array, accepted: Array, mode: str) -> Array:
    """Guided walk: keep ``direction[component]`` after an acceptance, reverse it after a rejection.

    The identity for the other modes.
    """
    if mode != "guided-walk":
        return direction
    flip = jnp.where(accepted, 1.0, -1.0).astype(direction.dtype)
    return direction.at[component].multiply(flip)


def init_state(theta: Array, data: Any = None) -> ProposalState:
    """Initial state of a proposal-then-test kernel: ``theta`` with every direction +1 (the
    data are not read)."""
    theta = jnp.asarray(theta)
    return ProposalState(theta, jnp.ones_like(theta))


def finish_move(state: ProposalState, theta_new: Array, component: Array, accepted: Array,
                nan: Array, clip_fraction: Array, mode: str) -> tuple[ProposalState, Info]:
    """The end of every proposal-then-test step.

    A NaN test statistic or a non-finite proposal is a divergence: the move is rejected and
    counted. Returns the new state and the (non-private) :class:`Info`.
    """
    theta = state.position
    diverged = nan | ~jnp.all(jnp.isfinite(theta_new))
    accepted = accepted & ~diverged
    direction = update_direction(state.direction, component, accepted, mode)
    new_state = ProposalState(jnp.where(accepted, theta_new, theta), direction)
    return new_state, Info(accepted, clip_fraction.astype(theta.dtype), diverged)


#: ``release(keys, theta, theta_new, data, cache) -> (data_term, noise_sd, clip_fraction, taps,
#: rows)``.
ReleaseFn = Callable[[Any, Array, Array, Any, Any], tuple]
#: ``accept(key, noisy_log_ratio, noise_sd) -> (accepted, nan)``.
Accept = Callable[[Array, Array, Array], tuple]


def proposal_transition(model, proposal_std: Array, mode: str, release_keys: int,
                        release: ReleaseFn, accept: Accept
                        ) -> Callable[[Array, ProposalState, Any, Any], tuple]:
    """The step skeleton of the propose-then-test samplers: propose → release → prior → accept.

    Parameters
    ----------
    model : Model
        Only ``log_prior`` is read here (the data are read by ``release`` alone).
    proposal_std : array (dim,)
    mode : {"random-walk", "one-component", "guided-walk"}
    release_keys : int
        Number of keys ``release`` takes. The iteration key is split once into
        ``2 + release_keys`` keys, in the order proposal, release keys, accept test (the order
        fixes the draws of a key, so it must not change).
    release : callable
        ``release(keys, theta, theta_new, data, cache) -> (data_term, noise_sd, clip_fraction,
        taps, rows)``: the algorithm's only data access (an accounted mechanism).
        ``data_term`` is its released (tempered) contribution to the log acceptance ratio,
        ``noise_sd`` what ``accept`` needs of its noise, ``clip_fraction`` the NON-private clip
        fraction for :class:`Info`, ``taps`` a dict of released values for the audit. ``cache``
        is the chunk-local per-record cache at θ (:class:`~dpmcmc.kernels.types.ChunkCache`)
        or ``None``; ``rows`` the same values at θ' (``None`` without a cache).
    accept : callable
        ``accept(key, noisy_log_ratio, noise_sd) -> (accepted, nan)``, applied to
        ``data_term + ln p(θ') − ln p(θ)`` (every proposal here is symmetric).

    Returns
    -------
    callable
        ``transition(key, state, cache, data) -> (state, cache, info, taps)``: with ``cache=None``
        the plain transition (the returned cache is ``None``); otherwise the cache follows the
        chain (θ' 's rows after an acceptance, the old ones after a rejection). ``taps`` is
        ``release``'s dict with ``"theta"`` and ``"theta_new"`` added (the query the release
        answered).
    """
    def transition(key, state, cache, data):
        k_prop, *k_release, k_acc = jax.random.split(key, 2 + release_keys)
        theta = state.position
        theta_new, i = propose(k_prop, theta, state.direction, proposal_std, mode)
        data_term, noise_sd, clip_fraction, taps, rows = release(k_release, theta, theta_new,
                                                                 data, cache)
        noisy_log_ratio = data_term + model.log_prior(theta_new) - model.log_prior(theta)
        accepted, nan = accept(k_acc, noisy_log_ratio, noise_sd)
        new_state, info = finish_move(state, theta_new, i, accepted, nan, clip_fraction, mode)
        if cache is not None:
            cache = jax.tree.map(lambda new, old: jnp.where(info.accepted, new, old), rows, cache)
        return new_state, cache, info, {**taps, "theta": theta, "theta_new": theta_new}

    return transition


def plain_transition(transition: Callable) -> Callable[[Array, ProposalState, Any], tuple]:
    """``transition(key, state, data) -> (state, info, taps)`` of a :func:`proposal_transition`
    run without a cache."""
    def plain(key, state, data):
        new_state, _, info, taps = transition(key, state, None, data)
        return new_state, info, taps

    return plain
