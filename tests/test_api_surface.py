"""The public surface says what it does: docstrings from the registry, errors that name the argument."""
import jax.numpy as jnp
import numpy as np
import pytest

import dpmcmc
from dpmcmc.samplers import ALGORITHMS


def test_sample_docstring_lists_every_registered_algorithm():
    doc = dpmcmc.sample.__doc__
    assert "@ALGORITHM_LIST@" not in doc
    for name, spec in ALGORITHMS.items():
        line = next(ln for ln in doc.splitlines() if f'``"{name}"``' in ln)
        assert ("NON-private" in line) == (not spec.private), line


def test_string_labels_are_refused_naming_data_with_a_way_out():
    model = dpmcmc.Model(log_likelihood=lambda t, x: -0.5 * jnp.sum((x - t) ** 2),
                         log_prior=lambda t: 0.0 * jnp.sum(t), dim=2)
    labels = np.array([["Yes", "No"]] * 10)
    with pytest.raises(TypeError, match=r"data must be a real numeric array.*categories"):
        dpmcmc.sample(model, labels, "dp-penalty", iterations=3, delta=1e-6, tau=1.0, clip=1.0,
                      proposal_std=0.1)
    with pytest.raises(ValueError, match=r"^data: .*shape \(10, 3\)"):
        dpmcmc.sample(model, np.zeros((10, 3)), "dp-penalty", iterations=3, delta=1e-6, tau=1.0,
                      clip=1.0, proposal_std=0.1)


def test_every_lazy_name_and_subpackage_resolves():
    """``dpmcmc/__init__`` imports its names and subpackages on first use: each one exists."""
    import importlib

    for name in dpmcmc.__all__:
        assert getattr(dpmcmc, name) is not None, name
    for name in ("models", "samplers", "diagnostics", "experiments", "audit", "secure", "tabular",
                 "ledger"):
        assert getattr(dpmcmc, name) is importlib.import_module(f"dpmcmc.{name}")
    with pytest.raises(AttributeError, match="no attribute"):
        dpmcmc.not_a_name  # noqa: B018
