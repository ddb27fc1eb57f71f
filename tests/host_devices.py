"""Run the child functions of ``tests/children/`` in fresh Python processes.

``XLA_FLAGS=--xla_force_host_platform_device_count`` takes effect only before JAX starts, so the
multi-device tests run their code in a subprocess: a function of a module in ``tests/children/``
that returns a JSON-serialisable dict, which a test module names ``"module:function"`` in its
``HOST_DEVICE_CHILD`` attribute (:mod:`children` says more). Starting Python, JAX and dpmcmc
costs several CPU-seconds, so these functions share ONE child per test session, with 4 forced
host devices and ``JAX_ENABLE_X64=1`` (as the suite): see :func:`run_children` and the
``host_device_results`` fixture in ``conftest.py``. The functions that need ``jax_enable_x64``
off from the start (``X64_OFF_CHILD``) share another child the same way (``devices=None``, the
``x64_off_results`` fixture). A child module run on its own, in a process of its own (the
compile-cache phases, the import checks), goes through :func:`run_module`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))


def _child_env(env: dict | None) -> dict:
    """The parent's environment, ``env`` added, and ``tests/`` first on ``PYTHONPATH`` (where
    the ``children`` package is found)."""
    env = dict(os.environ, **(env or {}))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (TESTS, env.get("PYTHONPATH", "")) if p)
    return env


def run_children(names: dict, devices: int | None = 4, timeout: float = 1200,
                 env: dict | None = None) -> dict:
    """Run every child function of ``names`` (tag -> ``"module:function"``) in one child process,
    in order; return tag -> result.

    A device count in the parent's ``XLA_FLAGS`` is dropped so the child's own applies
    (``devices=None``: the default single host device); the parent's other XLA flags are kept,
    and ``env`` is added to the parent's environment. A result is the dict the function returned,
    or ``{"error": traceback}`` if it raised or the child died first; for the multi-device
    functions each dict must report ``"devices"``, which :func:`check` compares with ``devices``.
    """
    env = _child_env(env)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags)
    args = [] if devices is None else ["--devices", str(devices)]
    proc = subprocess.run([sys.executable, "-m", "children.runner", *args],
                          input=json.dumps(names), capture_output=True, text=True, env=env,
                          timeout=timeout)
    out, tag = {}, None
    for ln in proc.stdout.splitlines():
        if ln.startswith("SCRIPT"):
            tag = ln[len("SCRIPT"):]
            out[tag] = {"error": "no RESULT line"}
        elif ln.startswith("RESULT") and tag is not None:
            out[tag] = json.loads(ln[len("RESULT"):])
        elif ln.startswith("ERROR") and tag is not None:
            out[tag] = {"error": json.loads(ln[len("ERROR"):])}
    for t in names:
        out.setdefault(t, {"error": f"child exited with {proc.returncode}: {proc.stderr[-4000:]}"})
    return out


def check(out: dict, devices: int = 4) -> dict:
    """Assert that a child function's result is not an error and saw ``devices`` devices; return
    it."""
    assert "error" not in out, out["error"]
    assert out["devices"] == devices
    return out


def run_module(module: str, *args: str, env: dict | None = None, drop: tuple = (),
               timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m children.<module> ARGS`` in a child process with the parent's environment,
    ``env`` added and the variables ``drop`` removed; its completed process (stdout and stderr
    captured as text)."""
    env = _child_env(env)
    for name in drop:
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "children." + module, *args], env=env,
                          capture_output=True, text=True, timeout=timeout)
