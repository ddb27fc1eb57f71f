"""`dpmcmc audit noise-aware-glm`: the audit of the table path's default algorithm.

The audit runs the fit's own releases on its card's worst-case pair (a linear fit whose whole
budget is in K-norm releases, both at full sensitivity: dpmcmc.samplers.noise_aware_glm, "the
audit"). The mechanisms' transcript privacy profile,
tests/samplers/test_noise_aware_glm.py::test_audit_transcript_privacy_profile_with_the_knorm_round,
runs under ``-m slow`` (suite budget); by default this file's calibrated audit and that file's
per-record bound and charge checks stand for it.
"""
import json

import jax
import pytest

from _audit_cli import check_flagged, cli_audit
from dpmcmc.audit import audit


def test_calibrated_glm_passes_and_the_audit_has_power():
    # Issue 33 §5: the audit's pair and statistic reach at least 0.6 of the claim (measured:
    # 0.82 at ε = 2, 0.71 at ε = 0.5 with 2·10⁴ runs, key 3), and the calibrated fit is not
    # flagged (its lower bound stays below the claim: a false flag has probability
    # ≤ 1 − confidence). Through the CLI (`--family linear`, the default design named; `--seed 3`
    # is key 3), which prints the AuditResult of dpmcmc.audit.audit as JSON (the default run's
    # check of the audit command's JSON: DP Barker's and dp-sgld's are slow, suite budget).
    obj, ok = cli_audit("noise-aware-glm", "--epsilon", "2", "--delta", "1e-6", "--trials",
                        "20000", "--seed", "3", "--family", "linear")
    assert obj == json.loads(ok.to_json())
    assert obj["algorithm"] == "noise-aware-glm" and obj["trials"] == 20_000 and obj["delta"] == 1e-6
    assert obj["params"]["family"] == "linear" and obj["epsilon_lower"] == ok.epsilon_lower
    assert not ok.flagged and obj["flagged"] is False and ok.epsilon_lower <= ok.epsilon_claimed
    assert ok.epsilon_lower >= 0.6 * ok.epsilon_claimed


# slow: tests/suite_budget.py (SLOW_CASES_B3) names its guards.
def test_miscalibrated_glm_is_flagged():
    # Noise at 0.3 of its scale: ε_lower 5.2 against the claimed 2 (2·10⁴ runs, key 3).
    bad = audit("noise-aware-glm", 2.0, 1e-6, trials=20_000, key=jax.random.key(3),
                _miscalibration={"noise_scale": 0.3})
    check_flagged(bad)


@pytest.mark.slow  # ~70 CPU-s (two audits per family); the argument is
# checked in the default run (test_glm_audit_arguments_are_named), the audit's pipeline by the
# linear family's test above, and each family's transcript privacy profile by
# tests/samplers/test_noise_aware_glm.py.
@pytest.mark.parametrize("family, share", [("logistic", 0.45), ("poisson", 0.35)])
def test_each_family_s_rounds_pass_and_the_audit_has_power(family, share):
    """``family=``: the logistic family's ObjPert point and Hessian, the Poisson family's six
    K-norm Newton rounds, each on its steep pair (docs/audit.md). Measured (2·10⁴ runs, key 3):
    lower bounds 1.06 (logistic) and 0.82 (Poisson) of the claimed 2, not flagged; noise at 0.3
    of its scale flagged (2.77, 2.42)."""
    ok = audit("noise-aware-glm", 2.0, 1e-6, trials=20_000, key=jax.random.key(3), family=family)
    assert ok.params["family"] == family
    assert ok.params["steps"] == (1 if family == "logistic" else 6)
    assert not ok.flagged and share * ok.epsilon_claimed <= ok.epsilon_lower <= ok.epsilon_claimed
    bad = audit("noise-aware-glm", 2.0, 1e-6, trials=20_000, key=jax.random.key(3), family=family,
                _miscalibration={"noise_scale": 0.3})
    assert bad.flagged


@pytest.mark.parametrize("kwargs, name", [
    ({"family": "probit"}, "family"),
    ({"iterations": 3}, "iterations"),
    ({"_miscalibration": {"sensitivity_factor": 2.0}}, "noise_scale"),
    ({"epsilon": -1.0}, "epsilon"),
])
def test_glm_audit_arguments_are_named(kwargs, name):
    args = {"epsilon": 3.0, "delta": 1e-5, "trials": 1000, "key": jax.random.key(0), **kwargs}
    with pytest.raises(ValueError, match=name):
        audit("noise-aware-glm", **args)


def test_only_the_glm_audit_takes_a_family():
    with pytest.raises(ValueError, match="family: dp-hmc has one audit design"):
        audit("dp-hmc", 3.0, 1e-5, trials=1000, key=jax.random.key(0), family="linear")
