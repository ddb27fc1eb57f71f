"""dpmcmc: differentially private Bayesian inference with MCMC in JAX.

Quick start::

    import dpmcmc
    pre = dpmcmc.models.preset("banana-2d")
    res = dpmcmc.sample(pre.model, pre.data, "dp-hmc", epsilon=4.0, delta=0.1 / len(pre.data),
                        tau_l=0.1, tau_g=0.55, clip=..., grad_clip=..., step_size=..., leapfrog_steps=25)
    print(res.privacy)

``dpmcmc.accounting`` is importable on its own (NumPy/SciPy only, no JAX). The other
subpackages and modules are imported on first use: ``models``, ``samplers``, ``diagnostics``,
``audit`` (empirical privacy audits), ``secure``, ``tabular``, ``ledger`` and ``experiments``
(the reproductions of the papers' experiments behind ``dpmcmc reproduce``; its Snakemake sweep
needs the ``experiments`` extra, the module itself does not). The papers are listed in README.md.
"""
from __future__ import annotations

__version__ = "0.1.0"

from . import accounting  # noqa: F401  (no JAX import)

_LAZY = {
    "sample": ("dpmcmc.api", "sample"),
    "glm": ("dpmcmc.tabular", "glm"),
    "plan": ("dpmcmc._plan", "plan"),
    "Plan": ("dpmcmc._plan", "Plan"),
    "PlanWarning": ("dpmcmc._plan", "PlanWarning"),
    "PlanRefused": ("dpmcmc._plan", "PlanRefused"),
    "Request": ("dpmcmc.request", "Request"),
    "KeyReuseWarning": ("dpmcmc._keys", "KeyReuseWarning"),
    "Ledger": ("dpmcmc.ledger", "Ledger"),
    "LedgerError": ("dpmcmc.ledger", "LedgerError"),
    "load": ("dpmcmc.result", "load"),
    "ResultFileError": ("dpmcmc.result", "ResultFileError"),
    "CheckpointError": ("dpmcmc.runtime.checkpoint", "CheckpointError"),
    "Model": ("dpmcmc.models.base", "Model"),
    "Result": ("dpmcmc.result", "Result"),
    "NonPrivateDiagnostics": ("dpmcmc.result", "NonPrivateDiagnostics"),
    "ReleasedStatistics": ("dpmcmc.result", "ReleasedStatistics"),
    "PrivacyReport": ("dpmcmc.accounting", "PrivacyReport"),
    "set_compile_cache": ("dpmcmc.runtime.compile_cache", "set_compile_cache"),
}

__all__ = ["accounting", "models", "samplers", "diagnostics", *_LAZY]


def __getattr__(name: str):
    # JAX is imported only when a sampler-side name is first used, so `dpmcmc budget` and the
    # accounting module start fast.
    import importlib

    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    if name in ("models", "samplers", "diagnostics", "experiments", "audit", "secure", "tabular", "ledger"):
        return importlib.import_module(f"dpmcmc.{name}")
    raise AttributeError(f"module 'dpmcmc' has no attribute {name!r}")
