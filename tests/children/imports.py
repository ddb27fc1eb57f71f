"""``python -m children.imports MODULE``: import MODULE in a fresh process, check that it did
not import JAX, and print ``ok`` (test_cli_budget.py, test_samplers_registry.py: the CLI and the
accountant start without JAX)."""
from __future__ import annotations

import importlib
import sys


def imports_no_jax(module: str) -> None:
    """Import ``module``; raise AssertionError if JAX came with it."""
    importlib.import_module(module)
    assert "jax" not in sys.modules, f"{module} imported jax"


if __name__ == "__main__":
    imports_no_jax(sys.argv[1])
    print("ok")
