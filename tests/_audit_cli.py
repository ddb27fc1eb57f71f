"""Pieces the audit tests share: ``dpmcmc audit ... --json`` run in-process, for the audit tests
that share one audit between their calibrated check and their CLI check (one compiled audit
program instead of two), and the check that a miscalibrated sampler's audit flags it."""
from __future__ import annotations

import json
import sys

import pytest


def cli_audit(*args):
    """``dpmcmc audit ARGS --json`` run in-process: (the JSON object it printed, the AuditResult
    that its call of dpmcmc.audit.audit returned)."""
    from typer.testing import CliRunner

    from dpmcmc.cli import app

    module = sys.modules["dpmcmc.audit"]
    real, got = module.audit, []

    def spy(*a, **kw):
        got.append(real(*a, **kw))
        return got[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(module, "audit", spy)
        out = CliRunner().invoke(app, ["audit", *args, "--json"])
    assert out.exit_code == 0, out.output
    assert len(got) == 1
    return json.loads(out.stdout), got[0]


def check_flagged(res) -> None:
    """A miscalibrated run's audit: flagged, its lower bound above the claim, the variant on
    record, and no process-global miscalibration setting anywhere (the variant reaches the
    kernel through its noise source)."""
    from dpmcmc.kernels import mechanisms

    assert res.flagged
    assert res.epsilon_lower > res.epsilon_claimed
    assert res.miscalibration is not None
    assert not hasattr(mechanisms, "_MISCALIBRATION")  # no process-global setting exists
