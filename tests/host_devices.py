"""Run a script in a child Python process with several forced host (CPU) devices.

``XLA_FLAGS=--xla_force_host_platform_device_count`` takes effect only before JAX starts, so the
multi-device tests run their script in a subprocess. The script sets the flag itself and prints
one line ``RESULT<json>``; this helper returns that JSON object.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys


def run_child(script: str, devices: int = 4, timeout: float = 600) -> dict:
    """Run ``script`` with ``python -c`` and return its last ``RESULT`` JSON object.

    The parent's ``XLA_FLAGS`` are dropped so the child's own device count applies; the child
    must report ``"devices"``, which is checked against ``devices``.
    """
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    out = json.loads(line[len("RESULT"):])
    assert out["devices"] == devices
    return out
