"""Run child functions (``"module:function"`` names of modules in this package) in this process.

``python -m children.runner [--devices N] [NAME ...]`` (with ``tests/`` on ``PYTHONPATH``):
with ``--devices N``, N forced host (CPU) devices are added to ``XLA_FLAGS`` before JAX starts;
the other JAX settings come from the environment (``JAX_ENABLE_X64``). The names to run are the
arguments, or, without any, a JSON object ``tag -> name`` read from standard input (how
:func:`host_devices.run_children` calls it). For each name, in order, it prints ``SCRIPT<tag>``,
then ``RESULT<json>`` with the dict the function returned, or ``ERROR<json traceback>`` if it
raised, so that one failing function fails only its own tests.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import traceback


def call(name: str) -> dict:
    """Import ``children.<module>`` and return what its ``function`` returns."""
    module, function = name.split(":")
    return getattr(importlib.import_module("children." + module), function)()


def main(argv: list[str]) -> None:
    if argv[:1] == ["--devices"]:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + f" --xla_force_host_platform_device_count={int(argv[1])}"
                                   ).strip()
        argv = argv[2:]
    names = {name: name for name in argv} if argv else json.loads(sys.stdin.read())
    # Start the backend here, before any child module is imported, with the environment's other
    # XLA flags kept (conftest's compile-time settings).
    import jax

    jax.devices()
    for tag, name in names.items():
        print("SCRIPT" + tag, flush=True)
        try:
            result = call(name)
        except BaseException:
            print("ERROR" + json.dumps(traceback.format_exc()), flush=True)
        else:
            print("RESULT" + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
