"""``dpmcmc audit ... --json`` run in-process, for the audit tests that share one audit between
their calibrated check and their CLI check (one compiled audit program instead of two)."""
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
