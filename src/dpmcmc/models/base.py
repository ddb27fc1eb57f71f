"""The model abstraction: a per-example log-likelihood and a log-prior in JAX."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

Array = Any
LogLikelihood = Callable[[Array, Array], Array]
LogPrior = Callable[[Array], Array]

__all__ = ["Model"]


@dataclass(frozen=True)
class Model:
    """A Bayesian model defined by a per-example log-likelihood and a log-prior.

    Parameters
    ----------
    log_likelihood : callable
        ``log_likelihood(theta, x) -> scalar``: the log-likelihood of ONE record ``x`` (one row
        of the data array) at the flat parameter vector ``theta`` of shape ``(dim,)``. Written in
        JAX; it is differentiated and vectorised by the samplers. It must not include the
        tempering factor: samplers apply ``temperature`` themselves.
    log_prior : callable
        ``log_prior(theta) -> scalar``. Data-independent.
    dim : int
        Length of ``theta``.
    temperature : float, default 1.0
        Tempering factor T in (0, 1]: the posterior is ``prior(θ) · Π_i p(x_i | θ)^T``
        (the papers use T = n0 / n).
    name : str
        A label used in reports and plots.
    sample_prior : callable, optional
        ``sample_prior(key, shape) -> array (*shape, dim)``: draws from the prior; used for the
        data-independent default starting point of the chains.
    exact_posterior : callable, optional
        ``exact_posterior(key, data, num_draws) -> array (num_draws, dim)``: exact draws from the
        (tempered) posterior given ``data``, where one is known. Evaluation only: never used inside
        a private run.
    log_likelihood_batch : callable, optional
        ``log_likelihood_batch(theta, data) -> (n,)``: a vectorised version of
        ``log_likelihood`` over all rows, for speed. Must agree with
        ``vmap(log_likelihood, (None, 0))``; used only when given.
    grad_log_likelihood_batch : callable, optional
        ``grad_log_likelihood_batch(theta, data) -> (n, dim)``: vectorised per-example gradients
        of ``log_likelihood`` with respect to ``theta``; used only when given.
    """

    log_likelihood: LogLikelihood
    log_prior: LogPrior
    dim: int
    temperature: float = 1.0
    name: str = "custom"
    sample_prior: Optional[Callable[[Array, tuple], Array]] = None
    exact_posterior: Optional[Callable[[Array, Array, int], Array]] = None
    log_likelihood_batch: Optional[Callable[[Array, Array], Array]] = None
    grad_log_likelihood_batch: Optional[Callable[[Array, Array], Array]] = None
    metadata: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if not callable(self.log_likelihood):
            raise TypeError("log_likelihood must be callable: log_likelihood(theta, x) -> scalar")
        if not callable(self.log_prior):
            raise TypeError("log_prior must be callable: log_prior(theta) -> scalar")
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"dim must be a positive integer, got {self.dim!r}")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (0.0 < float(t) <= 1.0):
            raise ValueError(f"temperature must lie in (0, 1], got {t!r}")

    # Vectorised views used by the samplers. They fall back to autodiff + vmap when the model
    # supplies nothing, so a user model needs only the per-example function.
    def loglik_per_example(self, theta: Array, data: Array) -> Array:
        """Per-example log-likelihoods ``(n,)`` at ``theta`` (untempered)."""
        if self.log_likelihood_batch is not None:
            return self.log_likelihood_batch(theta, data)
        return jax.vmap(self.log_likelihood, in_axes=(None, 0))(theta, data)

    def grad_per_example(self, theta: Array, data: Array) -> Array:
        """Per-example gradients ``(n, dim)`` of the untempered log-likelihood at ``theta``."""
        if self.grad_log_likelihood_batch is not None:
            return self.grad_log_likelihood_batch(theta, data)
        return jax.vmap(jax.grad(self.log_likelihood), in_axes=(None, 0))(theta, data)

    def log_posterior(self, theta: Array, data: Array) -> Array:
        """Unnormalised (tempered) log-posterior; non-private, for baselines and tests."""
        return self.log_prior(theta) + self.temperature * jnp.sum(self.loglik_per_example(theta, data))
