"""`dpmcmc audit noise-aware-glm`: the audit of the table path's default algorithm.

The calibration of its mechanisms is guarded in the default suite by
tests/samplers/test_noise_aware_glm.py::test_audit_transcript_privacy_profile_with_the_knorm_round (the
empirical privacy profile of 2000 transcripts against the charged composition, with power);
the full audit runs here are `slow`.
"""
import jax
import pytest

from dpmcmc.audit import audit


@pytest.mark.slow
def test_calibrated_glm_passes_and_the_audit_has_power():
    ok = audit("noise-aware-glm", 3.0, 1e-5, trials=40_000, key=jax.random.key(3))
    assert not ok.flagged and ok.epsilon_lower <= ok.epsilon_claimed
    assert ok.epsilon_lower > 0.2 * ok.epsilon_claimed  # the design separates D from D'
    bad = audit("noise-aware-glm", 3.0, 1e-5, trials=40_000, key=jax.random.key(3),
                _miscalibration={"noise_scale": 0.3})
    assert bad.flagged


@pytest.mark.parametrize("kwargs, name", [
    ({"iterations": 3}, "iterations"),
    ({"_miscalibration": {"sensitivity_factor": 2.0}}, "noise_scale"),
    ({"epsilon": -1.0}, "epsilon"),
])
def test_glm_audit_arguments_are_named(kwargs, name):
    args = {"epsilon": 3.0, "delta": 1e-5, "trials": 1000, "key": jax.random.key(0), **kwargs}
    with pytest.raises(ValueError, match=name):
        audit("noise-aware-glm", **args)
