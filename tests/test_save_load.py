"""Result.save / dpmcmc.load: netCDF through ArviZ with the privacy report in its attributes,
non-private diagnostics only in an opt-in sidecar, and clear errors for damaged files."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import dpmcmc
from dpmcmc import accounting
from dpmcmc.result import (NOT_PRIVATE_SUFFIX, NonPrivateDiagnostics, ReleasedStatistics, Result,
                           ResultFileError, load)


def make_result(private=True, chains=2, draws=30, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    report = (accounting.spent("dp-hmc", draws, 1e-5, 500, chains=chains, tau_l=0.5, tau_g=0.6,
                               leapfrog_steps=4) if private else None)
    if private:
        # Accept/divergence flags are released (post-processing); only clipping is not private.
        released = ReleasedStatistics(accepted=rng.uniform(size=(chains, draws)) < 0.6,
                                      diverged=rng.uniform(size=(chains, draws)) < 0.1)
        diagnostics = NonPrivateDiagnostics(clip_fraction=rng.uniform(size=chains))
    else:
        released = None
        diagnostics = NonPrivateDiagnostics(acceptance_rate=rng.uniform(size=chains),
                                            clip_fraction=rng.uniform(size=chains),
                                            divergences=rng.integers(0, 5, size=chains))
    return Result(
        samples=rng.normal(size=(chains, draws, dim)),
        privacy=report,
        diagnostics=diagnostics,
        released=released,
        algorithm="dp-hmc" if private else "hmc",
        params={"tau_l": 0.5, "tau_g": 0.6, "mass": (1.0, 2.0, 3.0), "leapfrog_steps": 4},
        model_name="toy",
        secure=private,
    )


@pytest.mark.parametrize("private", [True, False])
def test_round_trip_is_exact_and_needs_no_data(tmp_path, private):
    res = make_result(private)
    path = res.save(tmp_path / "run.nc")
    back = dpmcmc.load(path)
    np.testing.assert_array_equal(back.samples, res.samples)  # bit for bit
    assert back.privacy == res.privacy
    assert back.algorithm == res.algorithm and back.model_name == "toy" and back.secure == res.secure
    assert back.params == {"tau_l": 0.5, "tau_g": 0.6, "mass": [1.0, 2.0, 3.0], "leapfrog_steps": 4}
    # Diagnostics are not saved unless asked for, and nothing NOT_PRIVATE is in the file.
    assert back.diagnostics is None
    assert not os.path.exists(str(path) + NOT_PRIVATE_SUFFIX)
    raw = open(path, "rb").read()
    assert b"acceptance_rate" not in raw and b"NOT PRIVATE" not in raw
    assert b"clip_fraction" not in raw
    # The released flags of a private run are in the published file, bit for bit.
    if private:
        np.testing.assert_array_equal(back.released.accepted, res.released.accepted)
        np.testing.assert_array_equal(back.released.diverged, res.released.diverged)
    else:
        assert back.released is None and b"accepted" not in raw


def test_privacy_report_is_json_in_the_posterior_attributes(tmp_path):
    res = make_result()
    res.save(tmp_path / "run.nc")
    from dpmcmc.result import import_arviz

    idata = import_arviz().from_netcdf(tmp_path / "run.nc")
    assert list(idata.groups()) == ["posterior", "sample_stats"]  # sample_stats: released flags
    report = json.loads(idata.posterior.attrs["privacy_report"])
    assert report["epsilon"] == res.privacy.epsilon and report["chains"] == 2


@pytest.mark.parametrize("private", [True, False])
def test_diagnostics_sidecar_is_separate_and_labelled(tmp_path, private):
    res = make_result(private)
    path = res.save(tmp_path / "run.nc", diagnostics=True)
    sidecar = str(path) + NOT_PRIVATE_SUFFIX
    with open(sidecar) as f:
        payload = json.load(f)
    assert payload["NOT_PRIVATE"].startswith("NOT PRIVATE")
    back = load(path)
    np.testing.assert_allclose(back.diagnostics.clip_fraction, res.diagnostics.clip_fraction)
    if private:
        # Acceptance and divergences of a private run are released, not in the sidecar.
        assert set(payload) == {"NOT_PRIVATE", "clip_fraction"}
        np.testing.assert_array_equal(back.released.accepted, res.released.accepted)
    else:
        np.testing.assert_allclose(back.diagnostics.acceptance_rate, res.diagnostics.acceptance_rate)
        np.testing.assert_array_equal(back.diagnostics.divergences, res.diagnostics.divergences)
    # The published file itself still has no diagnostics; and its InferenceData neither.
    assert "acceptance_rate" not in str(back.to_inference_data().posterior.attrs)
    # Saving again without diagnostics removes the stale sidecar.
    res.save(path)
    assert not os.path.exists(sidecar) and load(path).diagnostics is None


def check_error(path, fragment=""):
    with pytest.raises(ResultFileError) as info:
        load(path)
    assert isinstance(info.value, ValueError)
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


@pytest.fixture(scope="module")
def saved_bytes(tmp_path_factory):
    """The bytes of one saved result, written once for the truncation cases."""
    return open(make_result().save(tmp_path_factory.mktemp("saved") / "run.nc"), "rb").read()


@pytest.mark.parametrize("keep", [0.0, 0.1, 0.5, 0.9])
def test_truncated_file(tmp_path, keep, saved_bytes):
    path, raw = tmp_path / "run.nc", saved_bytes
    with open(path, "wb") as f:
        f.write(raw[: int(len(raw) * keep)])
    check_error(path)


def test_corrupted_draws_fail_the_checksum(tmp_path):
    res = make_result()
    res.save(tmp_path / "run.nc")
    # Rewrite one draw through xarray, keeping every attribute: only the checksum can tell.
    from dpmcmc.result import import_arviz

    az = import_arviz()
    idata = az.from_netcdf(tmp_path / "run.nc")
    idata.posterior["theta"].values[0, 0, 0] += 1.0
    idata.to_netcdf(str(tmp_path / "tampered.nc"))
    check_error(tmp_path / "tampered.nc", "checksum")


def test_report_inconsistent_with_draws(tmp_path):
    res = make_result()
    other = accounting.spent("dp-hmc", 31, 1e-5, 500, chains=2, tau_l=0.5, tau_g=0.6, leapfrog_steps=4)
    Result(res.samples, other, res.diagnostics, res.algorithm, res.params,
           released=res.released).save(tmp_path / "bad.nc")
    check_error(tmp_path / "bad.nc", "privacy report")


def test_not_a_dpmcmc_file(tmp_path):
    from dpmcmc.result import import_arviz

    az = import_arviz()
    az.from_dict(posterior={"theta": np.zeros((1, 3, 2))}).to_netcdf(str(tmp_path / "plain.nc"))
    check_error(tmp_path / "plain.nc", "not a result saved by dpmcmc")
    (tmp_path / "text.nc").write_text("hello")
    check_error(tmp_path / "text.nc")
    check_error(tmp_path / "missing.nc", "no saved result")


def test_corrupted_sidecar(tmp_path):
    path = make_result().save(tmp_path / "run.nc", diagnostics=True)
    with open(str(path) + NOT_PRIVATE_SUFFIX, "w") as f:
        f.write("{not json")
    with pytest.raises(ResultFileError, match="NOT_PRIVATE"):
        load(path)


def test_argument_errors(tmp_path):
    with pytest.raises(TypeError, match="path"):
        make_result().save(3)
    with pytest.raises(TypeError, match="diagnostics"):
        make_result().save(tmp_path / "x.nc", diagnostics="yes")
    with pytest.raises(TypeError, match="path"):
        load(None)
