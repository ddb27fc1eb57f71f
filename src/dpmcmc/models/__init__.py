"""Models: the :class:`Model` abstraction, built-in models, presets and exact posteriors.

Built-in factories (each returns a :class:`Model` with vectorised ``log_likelihood_batch`` and
``grad_log_likelihood_batch``, a ``sample_prior`` and, where known, an ``exact_posterior``):

- :func:`banana` — the Bayesian banana of 001 Thm 13 / 000 §4, any d, with tempering.
- :func:`gaussian` — Gaussian with known covariance (001 §5.1, 000 §4); see
  :func:`random_covariance` (000 §4) and :func:`correlated_covariance` (001 §5.4).
- :func:`circle` — the circle model of 001 §5.3 (exact posterior derived in its docstring).
- :func:`gaussian_mixture` — the 2-d mixture of 002 §4 (no exact posterior).
- :func:`logistic_regression` — Bayesian logistic regression (no exact posterior).

Each built-in model declares ``record_shape`` (the shape of one person's row); the contract of a
model against a data shape is checked by :func:`check_model` (``dpmcmc.sample`` calls it first).

Data: :func:`generate_data` ``(model, key, n, theta=None)`` draws synthetic data for a built-in
model. Presets: :func:`preset`, :func:`preset_settings` and :data:`PRESETS` (see
:mod:`dpmcmc.models.presets` for the list with the source table rows).
"""
from __future__ import annotations

from typing import Any, Optional

from .banana import banana, banana_forward, banana_inverse, banana_posterior_params
from .base import Model, check_model
from .circle import circle
from .gaussian import correlated_covariance, gaussian, gaussian_posterior_params, random_covariance
from .logistic import logistic_regression
from .mixture import gaussian_mixture
from .presets import DATA_SEEDS, PRESETS, Preset, preset, preset_settings

__all__ = [
    "Model",
    "check_model",
    "banana",
    "banana_forward",
    "banana_inverse",
    "banana_posterior_params",
    "gaussian",
    "gaussian_posterior_params",
    "random_covariance",
    "correlated_covariance",
    "circle",
    "gaussian_mixture",
    "logistic_regression",
    "generate_data",
    "preset",
    "preset_settings",
    "Preset",
    "PRESETS",
    "DATA_SEEDS",
]


def generate_data(model: Model, key: Any, n: int, theta: Optional[Any] = None):
    """Synthetic data for a built-in model.

    Parameters
    ----------
    model : Model
        A model from one of this package's factories.
    key : JAX PRNG key
    n : int
        Number of records.
    theta : array (dim,), optional
        Generating parameter; default the model's ``metadata["theta_true"]`` (the seeds' true
        values). Ignored by the circle model, whose data do not depend on theta.

    Returns
    -------
    array (n, record width)
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a dpmcmc.Model, got {type(model).__name__}")
    gen = model.metadata.get("generate_data")
    if gen is None:
        raise ValueError("model has no data generator (only built-in models carry one)")
    return gen(key, n, theta)
