"""Checkpointing: an interrupted run resumes to exactly the uninterrupted draws, without
accounting (or spending) again; mismatches and damaged files are refused clearly."""
from __future__ import annotations

import os
import stat

import jax
import numpy as np
import pytest

import dpmcmc
from dpmcmc import accounting
from dpmcmc.runtime.checkpoint import CheckpointError, read_checkpoint
from dpmcmc.testing import forbid_chunk_runs, replace_run_chains

from api_params import gaussian_data, gaussian_model, valid_params

PARAMS = valid_params("dp-penalty")
ITERATIONS = 23


class Interrupt(Exception):
    pass


def call(path=None, **overrides):
    args = dict(model=gaussian_model(), data=gaussian_data(), algorithm="dp-penalty", delta=1e-3,
                iterations=ITERATIONS, chains=2, progress=False, force=True, **PARAMS)
    if path is not None:
        args.update(checkpoint=str(path), checkpoint_every=5)
    args.update(overrides)
    return dpmcmc.sample(args.pop("model"), args.pop("data"), args.pop("algorithm"), **args)


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A run with key=None interrupted after its second chunk (10 of 23 iterations)."""
    path = tmp_path_factory.mktemp("ckpt") / "run.ckpt"
    seen = []

    def hook(progress):
        seen.append(progress.done)
        if progress.done == 10:
            raise Interrupt

    with pytest.raises(Interrupt):
        call(path, _on_chunk=hook)
    assert seen == [5, 10]
    meta, arrays = read_checkpoint(path)
    return path, meta, arrays


def test_checkpoint_contents_and_permissions(interrupted):
    path, meta, arrays = interrupted
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # it holds the key
    assert meta["done"] == 10 and meta["planned"] == ITERATIONS
    assert arrays["positions"].shape == (2, 10, 2)
    assert arrays["key"].dtype == np.uint32
    assert accounting.PrivacyReport.from_json(meta["report"]).iterations == ITERATIONS
    # No temporary files left behind by the atomic writes.
    assert os.listdir(os.path.dirname(path)) == [os.path.basename(path)]


def test_resume_yields_the_uninterrupted_draws_without_accounting_again(interrupted, monkeypatch,
                                                                        tmp_path):
    path, meta, arrays = interrupted
    key = jax.random.wrap_key_data(arrays["key"], impl=meta["key_impl"])
    # Uninterrupted, same key, checkpointed in the same chunks of 5: the program the interrupted
    # run compiled (a run in one chunk is another program; that chunking changes no draw is
    # test_chunk_cache.py::test_the_cache_changes_no_draw_at_any_chunk_size's, for this sampler).
    full = call(tmp_path / "full.ckpt", key=key)
    np.testing.assert_array_equal(full.samples[:, :10], arrays["positions"])

    def no_accounting(*a, **k):
        raise AssertionError("accounting re-run on resume")

    monkeypatch.setattr(accounting, "max_iterations", no_accounting)
    monkeypatch.setattr(accounting, "spent", no_accounting)
    chunks = []
    resumed = call(path, _on_chunk=lambda p: chunks.append(p.done))  # key=None: the stored key
    assert chunks == [15, 20, 23]  # only the remaining iterations were run
    np.testing.assert_array_equal(resumed.samples, full.samples)
    assert resumed.privacy == full.privacy
    np.testing.assert_array_equal(resumed.diagnostics.clip_fraction, full.diagnostics.clip_fraction)
    for f in ("accepted", "diverged"):
        np.testing.assert_array_equal(getattr(resumed.released, f), getattr(full.released, f))
    # A finished checkpoint returns the same result again without running a single iteration.
    forbid_chunk_runs(monkeypatch, "a finished run was run again")
    again = call(path, _on_chunk=lambda p: chunks.append(("ran", p.done)))
    np.testing.assert_array_equal(again.samples, full.samples)
    assert chunks == [15, 20, 23]


@pytest.mark.parametrize("change,field", [
    (dict(data=gaussian_data(seed=1)), "data"),
    (dict(data=gaussian_data(n=61)), "data"),
    (dict(tau=0.6), "params"),
    (dict(chains=3), "chains"),
    (dict(delta=2e-3), "delta"),
    (dict(iterations=24), "iterations"),
    (dict(algorithm="minibatch-penalty", batch_size=20), "algorithm"),
    (dict(model=gaussian_model("other")), "model_name"),
    (dict(theta0=np.zeros(2)), "theta0"),
    (dict(key=jax.random.key(12345)), "key"),
])
def test_mismatch_is_refused_before_running(interrupted, monkeypatch, change, field):
    path, _, _ = interrupted

    def fail(*a, **k):
        raise AssertionError("ran despite a mismatched checkpoint")

    replace_run_chains(monkeypatch, fail)
    with pytest.raises(CheckpointError) as info:
        call(path, **change)
    assert isinstance(info.value, ValueError)
    assert field in str(info.value) and str(path) in str(info.value)


def test_secure_mode_must_match(interrupted, monkeypatch):
    path, _, _ = interrupted
    replace_run_chains(monkeypatch, lambda *a, **k: pytest.fail("ran"))
    with pytest.raises(CheckpointError, match="secure"):
        call(path, secure=True)


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_damaged_checkpoint(tmp_path, interrupted, damage):
    path, _, _ = interrupted
    raw = bytearray(open(path, "rb").read())
    bad = tmp_path / "bad.ckpt"
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "flip":
        # Flip a byte inside the stored positions; the archive stays readable, the checksum not.
        j = raw.find(b"\x93NUMPY", raw.find(b"positions.npy"))
        raw[j + 200] ^= 0xFF
    else:
        raw = bytearray(b"not a checkpoint at all")
    bad.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError) as info:
        call(bad)
    assert str(bad) in str(info.value)


def test_checkpoint_argument_errors(tmp_path):
    with pytest.raises(TypeError, match="checkpoint"):
        call(None, checkpoint=3)
    with pytest.raises(ValueError, match="checkpoint"):
        call(None, checkpoint=str(tmp_path))
    with pytest.raises(ValueError, match="checkpoint"):
        call(None, checkpoint=str(tmp_path / "no" / "such" / "dir" / "x.ckpt"))
    with pytest.raises(ValueError, match="checkpoint_every"):
        call(tmp_path / "a.ckpt", checkpoint_every=0)
    with pytest.raises(ValueError, match="checkpoint_every"):
        call(None, checkpoint_every=5)


@pytest.mark.slow
def test_secure_run_resumes_exactly(tmp_path):
    path = tmp_path / "secure.ckpt"

    def hook(progress):
        if progress.done == 5:
            raise Interrupt

    with pytest.raises(Interrupt):
        call(path, secure=True, _on_chunk=hook)
    meta, arrays = read_checkpoint(path)
    assert arrays["secret"].shape == (8,)
    resumed = call(path, secure=True)
    from dpmcmc.secure import SecureKey

    key = jax.random.wrap_key_data(arrays["key"], impl=meta["key_impl"])
    full = call(key=key, secure=SecureKey(arrays["secret"]))
    np.testing.assert_array_equal(resumed.samples, full.samples)


def test_interrupted_before_the_first_chunk_resumes_with_the_same_key(tmp_path, monkeypatch):
    """The checkpoint is written before any noise is drawn, so even an interruption inside the
    first chunk resumes the same run (same key and report) rather than starting a second one."""
    path = tmp_path / "early.ckpt"

    def interrupted(*args, **kwargs):
        raise Interrupt

    real = replace_run_chains(monkeypatch, interrupted)
    with pytest.raises(Interrupt):
        call(path, iterations=7)
    meta, arrays = read_checkpoint(path)
    assert meta["done"] == 0 and arrays["positions"].shape == (2, 0, 2)
    replace_run_chains(monkeypatch, real)
    resumed = call(path, iterations=7)
    key = jax.random.wrap_key_data(arrays["key"], impl=meta["key_impl"])
    # Against the same run uninterrupted (in the same chunks: one program for the file).
    full = call(tmp_path / "full.ckpt", key=key, iterations=7)
    np.testing.assert_array_equal(resumed.samples, full.samples)
