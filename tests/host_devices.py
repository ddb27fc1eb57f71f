"""Run scripts in one child Python process with several forced host (CPU) devices.

``XLA_FLAGS=--xla_force_host_platform_device_count`` takes effect only before JAX starts, so the
multi-device tests run their scripts in a subprocess. Each script sets the flag itself and prints
one line ``RESULT<json>``. Starting Python, JAX and dpmcmc costs several CPU-seconds, so the
test modules' scripts (their ``HOST_DEVICE_CHILD``) share ONE child per test session: see
:func:`run_children` and the ``host_device_results`` fixture in ``conftest.py``. The scripts that
need ``jax_enable_x64`` off from the start (their ``X64_OFF_CHILD``) share another child the same
way (``devices=None``, the ``x64_off_results`` fixture).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

# Runs each script in its own namespace, in order, and tags its RESULT line (or its error) with
# the script's name, so that one failing script fails only its own tests.
_RUNNER = r"""
import json, os, sys, traceback
if %d:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=%d").strip()
# Start the backend here, with the parent's other XLA flags kept (conftest's compile-time
# settings): a script's own ``XLA_FLAGS = ...`` line, there for running it alone, comes too late
# to drop them.
import jax
jax.devices()
scripts = json.loads(sys.stdin.read())
for name, src in scripts.items():
    print("SCRIPT" + name, flush=True)
    try:
        exec(compile(src, "<" + name + ">", "exec"), {"__name__": "__host_device_child__"})
    except BaseException:
        print("ERROR" + json.dumps(traceback.format_exc()), flush=True)
"""


def run_children(scripts: dict, devices: int | None = 4, timeout: float = 1200,
                 env: dict | None = None) -> dict:
    """Run every script of ``scripts`` (name -> source) in one child; return name -> result.

    A device count in the parent's ``XLA_FLAGS`` is dropped so the child's own applies
    (``devices=None``: the default single host device); the parent's other XLA flags are kept,
    and ``env`` is added to the parent's environment. A result is the script's last ``RESULT``
    JSON object, or ``{"error": traceback}`` if it raised or printed none; for the multi-device
    scripts each object must report ``"devices"``, which :func:`check` compares with ``devices``.
    """
    env = dict(os.environ, **(env or {}))
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags)
    runner = _RUNNER % (devices is not None, devices or 0)
    proc = subprocess.run([sys.executable, "-c", runner], input=json.dumps(scripts),
                          capture_output=True, text=True, env=env, timeout=timeout)
    out, name = {}, None
    for ln in proc.stdout.splitlines():
        if ln.startswith("SCRIPT"):
            name = ln[len("SCRIPT"):]
            out[name] = {"error": "no RESULT line"}
        elif ln.startswith("RESULT") and name is not None:
            out[name] = json.loads(ln[len("RESULT"):])
        elif ln.startswith("ERROR") and name is not None:
            out[name] = {"error": json.loads(ln[len("ERROR"):])}
    for n in scripts:
        out.setdefault(n, {"error": f"child exited with {proc.returncode}: {proc.stderr[-4000:]}"})
    return out


def check(out: dict, devices: int = 4) -> dict:
    """Assert that a script's result is not an error and saw ``devices`` devices; return it."""
    assert "error" not in out, out["error"]
    assert out["devices"] == devices
    return out


def run_child(script: str, devices: int = 4, timeout: float = 600) -> dict:
    """Run one ``script`` alone in a child and return its checked ``RESULT`` object."""
    return check(run_children({"script": script}, devices, timeout)["script"], devices)
