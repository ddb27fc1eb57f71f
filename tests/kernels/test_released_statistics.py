"""Released statistics: the private samplers' accept and divergence flags are post-processing.

The claim (docs/post_processing.md): for every private algorithm, the accept decision and the
divergence flag of an iteration are functions of that iteration's accounted noisy releases, of
data-independent randomness and of the previous (released) draw. So if the releases are held
fixed, changing the data cannot change them; the clip fractions, counted on the raw data, do
change. Tested by replacing the one noise-adding function, ``gaussian_mechanism``, with one whose
output ignores the statistic it is given (pure noise from the release's key): the runs on two
different data sets then share every release, and must share every flag and every draw.
"""
from __future__ import annotations

import functools
import json
import os
import pickle
import warnings

import jax
import numpy as np
import pytest

import dpmcmc
from dpmcmc.result import NOT_PRIVATE_SUFFIX, NonPrivateDiagnostics, ReleasedStatistics, load
from dpmcmc.samplers import SAMPLERS
from dpmcmc import testing

from api_params import gaussian_data, gaussian_model, valid_params

PRIVATE = sorted(name for name, spec in SAMPLERS.items() if spec.private)
WITH_ACCEPT_STEP = ("dp-penalty", "dp-hmc", "minibatch-penalty", "dp-barker")
ITERATIONS = 40
# Each run compiles its sampler: one sampler by default, every one in the slow run.
FAST = ("dp-penalty",)


def fast_first(names):
    return [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in names]


def datasets():
    """Two data sets of the same size; the second shifted and spread out, so that many more
    per-example terms exceed their clip bounds than on the first."""
    return gaussian_data(seed=1), 6.0 * gaussian_data(seed=2) + 4.0


def run(algorithm, data, key=0, iterations=ITERATIONS, **extra):
    budget = dict(delta=1e-3) if SAMPLERS[algorithm].private else {}
    return dpmcmc.sample(gaussian_model(), data, algorithm, iterations=iterations, chains=2,
                         theta0=np.zeros(2), key=jax.random.key(key), progress=False, **budget,
                         **valid_params(algorithm), force=True, **extra)


@functools.lru_cache(maxsize=None)
def real_run(algorithm, which=0):
    """A run with the real mechanism on ``datasets()[which]`` (results are immutable: shared)."""
    return run(algorithm, datasets()[which])


@pytest.fixture
def data_blind_mechanism(monkeypatch):
    """Every privacy release becomes N(0, 1) noise from its own key, whatever the data
    (:func:`dpmcmc.testing.data_blind_mechanism`), so the releases of two runs with the same key
    are equal on any data. dpmcmc's program cache is emptied for the test, so no earlier trace is
    reused and no trace made here is reused later; a reused real-mechanism trace would make the
    flags differ and fail the test, not pass it.
    """
    testing.data_blind_mechanism(monkeypatch)
    yield


@pytest.mark.parametrize("algorithm", fast_first(PRIVATE))
def test_same_releases_on_different_data_give_the_same_flags(data_blind_mechanism, algorithm):
    data, other = datasets()
    a, b = run(algorithm, data), run(algorithm, other)
    # Same releases and same data-independent randomness: same flags, same draws.
    np.testing.assert_array_equal(a.released.accepted, b.released.accepted)
    np.testing.assert_array_equal(a.released.diverged, b.released.diverged)
    np.testing.assert_array_equal(a.samples, b.samples)
    # ...while the clip fractions, counted on the raw data, tell the data sets apart.
    assert not np.array_equal(a.diagnostics.clip_fraction, b.diagnostics.clip_fraction)
    assert np.all(b.diagnostics.clip_fraction > a.diagnostics.clip_fraction)
    if algorithm in WITH_ACCEPT_STEP:
        # Not a degenerate chain: both decisions occur.
        assert 0 < a.released.acceptance_rate.mean() < 1


@pytest.mark.parametrize("algorithm", fast_first(["dp-penalty", "minibatch-penalty"]))
def test_flags_do_depend_on_the_releases(algorithm):
    """Power check for the test above: with the real mechanism, different data give different
    releases, and then different accept decisions (so equal flags there were not a given)."""
    a, b = real_run(algorithm, 0), real_run(algorithm, 1)
    assert not np.array_equal(a.released.accepted, b.released.accepted)


@pytest.mark.parametrize("algorithm", fast_first(WITH_ACCEPT_STEP))
def test_accept_flags_can_be_read_off_the_draws(algorithm):
    """A rejection repeats the previous draw and an acceptance moves it (a proposal equals the
    current point with probability 0): the released flags add nothing to the draws."""
    res = real_run(algorithm)
    prev = np.concatenate([np.zeros((2, 1, 2)), res.samples[:, :-1]], axis=1)
    moved = np.any(res.samples != prev, axis=2)
    np.testing.assert_array_equal(moved, res.released.accepted)


# Both slow: the same assertions (every released flag accepted, none diverged, acceptance rate
# 1) on a dp-sgld run through dpmcmc.sample are in tests/samplers/test_sgld.py::test_sample_end_to_end,
# in the default run; each case here compiles a sampler of its own (~0.5 CPU-s).
@pytest.mark.parametrize("algorithm", [pytest.param("dp-sgld", marks=pytest.mark.slow),
                                       pytest.param("dp-sgnht", marks=pytest.mark.slow)])
def test_samplers_without_accept_step_accept_always(algorithm):
    res = real_run(algorithm)
    assert res.released.accepted.all() and not res.released.diverged.any()
    np.testing.assert_array_equal(res.released.acceptance_rate, 1.0)


@pytest.mark.parametrize("algorithm", ["rwmh", pytest.param("hmc", marks=pytest.mark.slow)])
def test_non_private_algorithms_keep_everything_non_private(algorithm):
    res = real_run(algorithm)
    assert res.released is None
    diag = res.diagnostics
    assert set(diag.fields()) == {"acceptance_rate", "clip_fraction", "divergences"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # owned here: no deprecation
        assert 0 < diag.acceptance_rate.mean() < 1 and diag.divergences.shape == (2,)
    assert list(res.to_inference_data().groups()) == ["posterior"]


def test_private_run_splits_released_from_non_private():
    res = real_run("dp-penalty")
    rel = res.released
    assert isinstance(rel, ReleasedStatistics) and rel.covered_by_guarantee is True
    assert rel.accepted.shape == rel.diverged.shape == (2, ITERATIONS)
    assert rel.accepted.dtype == bool
    np.testing.assert_array_equal(rel.acceptance_rate, rel.accepted.mean(axis=1))
    np.testing.assert_array_equal(rel.divergences, rel.diverged.sum(axis=1))
    assert "covered by the privacy guarantee" in repr(rel)
    # The non-private object keeps only the clip fractions...
    diag = res.diagnostics
    assert set(diag.fields()) == {"clip_fraction"} and diag.private is False
    assert "NOT PRIVATE" in repr(diag) and "acceptance_rate=" not in repr(diag)
    assert "acceptance_rate" not in diag.to_dict() and "divergences" not in diag.to_dict()
    # ...and asked for the released names, it points at released.
    with pytest.raises(AttributeError, match="Result.released.acceptance_rate"):
        diag.acceptance_rate
    with pytest.raises(AttributeError, match="Result.released.divergences"):
        diag.divergences
    # Immutable, like the rest of the result.
    with pytest.raises(AttributeError):
        diag.clip_fraction = np.zeros(2)
    with pytest.raises(AttributeError):
        rel.accepted = np.zeros((2, ITERATIONS), bool)
    with pytest.raises(ValueError, match="read-only"):
        rel.accepted[0, 0] = not rel.accepted[0, 0]
    # A result survives pickling (multiprocessing, caches) with its parts apart.
    back = pickle.loads(pickle.dumps(res))
    np.testing.assert_array_equal(back.released.accepted, rel.accepted)
    assert set(back.diagnostics.fields()) == {"clip_fraction"}


def test_inference_data_sample_stats_and_burn_in():
    res = real_run("dp-penalty")
    idata = res.to_inference_data(burn_in=10)
    assert list(idata.groups()) == ["posterior", "sample_stats"]
    stats = idata.sample_stats
    assert set(stats.data_vars) == {"accepted", "diverging"}
    np.testing.assert_array_equal(stats["accepted"].values, res.released.accepted[:, 10:])
    np.testing.assert_array_equal(stats["diverging"].values, res.released.diverged[:, 10:])
    assert stats.attrs["covered_by_guarantee"] == 1
    assert stats["accepted"].shape == idata.posterior["theta"].shape[:2]
    # Nothing non-private in it.
    assert "clip_fraction" not in str(idata.posterior.attrs) + str(stats.attrs)


def test_save_load_round_trip_keeps_released_out_of_the_sidecar(tmp_path):
    res = real_run("dp-penalty")
    path = res.save(tmp_path / "run.nc", diagnostics=True)
    back = load(path)
    np.testing.assert_array_equal(back.released.accepted, res.released.accepted)
    np.testing.assert_array_equal(back.released.diverged, res.released.diverged)
    np.testing.assert_array_equal(back.diagnostics.clip_fraction, res.diagnostics.clip_fraction)
    # The NOT_PRIVATE sidecar holds the clip fractions only: no acceptance, no divergences.
    with open(str(path) + NOT_PRIVATE_SUFFIX) as f:
        sidecar = json.load(f)
    assert set(sidecar) == {"NOT_PRIVATE", "clip_fraction"}
    # The published file alone carries the released flags.
    os.unlink(str(path) + NOT_PRIVATE_SUFFIX)
    alone = load(path)
    assert alone.diagnostics is None
    np.testing.assert_array_equal(alone.released.accepted, res.released.accepted)
    np.testing.assert_array_equal(back.released.acceptance_rate, res.released.acceptance_rate)


def test_tampered_released_flags_fail_their_checksum(tmp_path):
    res = real_run("dp-penalty")
    path = res.save(tmp_path / "run.nc")
    from dpmcmc.result import import_arviz

    idata = import_arviz().from_netcdf(path)
    flipped = idata.sample_stats["accepted"].values.copy()
    flipped[0, 0] = ~flipped[0, 0]
    idata.sample_stats["accepted"].values[:] = flipped
    idata.to_netcdf(str(tmp_path / "tampered.nc"))
    with pytest.raises(dpmcmc.ResultFileError, match="checksum"):
        load(tmp_path / "tampered.nc")


def test_bad_released_arguments_are_refused():
    with pytest.raises(ValueError, match="accepted"):
        ReleasedStatistics(accepted=np.ones(3, bool), diverged=np.zeros(3, bool))
    with pytest.raises(ValueError, match="same shape"):
        ReleasedStatistics(accepted=np.ones((2, 3), bool), diverged=np.zeros((2, 4), bool))
    with pytest.raises(TypeError, match="clip_fraction"):
        NonPrivateDiagnostics(acceptance_rate=np.ones(2), divergences=np.zeros(2))
    with pytest.raises(TypeError, match="together"):
        NonPrivateDiagnostics(acceptance_rate=np.ones(2), clip_fraction=np.zeros(2))
    res = real_run("dp-penalty")
    with pytest.raises(ValueError, match="released"):
        dpmcmc.Result(res.samples[:, :4], res.privacy, None, res.algorithm, res.params,
                      released=res.released)
