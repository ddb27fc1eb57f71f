"""dpmcmc.Ledger: runs on one data set compose (basic composition) and over-spending is refused first."""
import json
import multiprocessing as mp
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import dpmcmc
from dpmcmc.cli import app
from dpmcmc.ledger import Ledger, LedgerError

from children.ledger_race import race_two


def _model():
    return dpmcmc.Model(log_likelihood=lambda t, x: -0.5 * jnp.sum((x - t) ** 2),
                        log_prior=lambda t: -0.5 * jnp.sum(t ** 2) / 100.0, dim=1, name="normal-mean")


# 32 iterations: the compiled chunk length of a run without a progress bar (runtime.driver.chunk_length),
# so a run checkpointed every 32 iterations runs the same chain program.
RUN = dict(iterations=32, delta=1e-6, chains=2, progress=False, tau=1.0, clip=1.0, proposal_std=0.05)  # ε ≈ 2.6
DATA = np.random.default_rng(0).normal(size=(200, 1))


def test_runs_compose_and_an_overspending_run_is_refused_before_any_noise(tmp_path):
    path = tmp_path / "d.ledger.json"
    first = dpmcmc.sample(_model(), DATA, "dp-penalty", ledger=Ledger(path, 6.0, 1e-5), **RUN)
    eps = first.privacy.epsilon
    second = dpmcmc.sample(_model(), DATA, "dp-penalty", ledger=str(path), **RUN)
    led = Ledger(path)
    assert len(led.runs) == 2
    assert led.spent == pytest.approx((eps + second.privacy.epsilon, 2e-6))
    # A third, longer run does not fit in what is left of ε = 6.
    big = dict(RUN, iterations=RUN["iterations"] * 20)
    need = dpmcmc.plan(_model(), len(DATA), "dp-penalty", **{k: v for k, v in big.items() if k != "progress"})
    assert need.epsilon_spent > 6.0 - led.spent[0]
    before = path.read_bytes()
    chunks = []
    with pytest.raises(LedgerError, match="refuses"):
        dpmcmc.sample(_model(), DATA, "dp-penalty", ledger=str(path), _on_chunk=chunks.append, **big)
    assert chunks == [] and path.read_bytes() == before  # nothing ran, nothing recorded


def test_a_run_that_exactly_fills_the_budget_is_accepted_and_the_next_refused(tmp_path):
    led = Ledger(tmp_path / "l.json", total_epsilon=1.0, total_delta=3e-6)
    for _ in range(3):
        led.charge(epsilon=1 / 3, delta=1e-6)
    assert led.remaining[0] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(LedgerError):
        led.check(1e-3, 1e-9)
    with pytest.raises(LedgerError, match="δ"):
        Ledger(tmp_path / "m.json", 10.0, 1e-6).charge(epsilon=0.1, delta=2e-6)


def test_file_round_trip_and_declared_totals_are_fixed(tmp_path):
    path = tmp_path / "l.json"
    Ledger(path, 4.0, 1e-5).charge(epsilon=1.5, delta=1e-6, label="first")
    again = Ledger(path)
    assert again.total == (4.0, 1e-5) and again.spent == (1.5, 1e-6) and again.runs[0]["label"] == "first"
    with pytest.raises(LedgerError, match="total_epsilon"):
        Ledger(path, total_epsilon=8.0)
    with pytest.raises(LedgerError, match="does not exist"):
        Ledger(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text(json.dumps({"format": "dpmcmc-ledger", "version": 1,
                                                   "total": {"epsilon": 1.0, "delta": 1e-6},
                                                   "runs": [{"epsilon": -1, "delta": 0}]}))
    with pytest.raises(LedgerError, match="corrupted"):
        Ledger(tmp_path / "bad.json")


@pytest.mark.parametrize("kwargs, name", [
    (dict(total_epsilon=0.0, total_delta=1e-6), "total_epsilon"),
    (dict(total_epsilon=1.0, total_delta=1.0), "total_delta"),
])
def test_bad_totals_are_named(tmp_path, kwargs, name):
    with pytest.raises(ValueError, match=name):
        Ledger(tmp_path / "x.json", **kwargs)


def test_ledger_argument_is_checked_before_data(tmp_path):
    bad = np.full((10, 1), np.nan)  # would fail the data check if it were reached
    with pytest.raises(TypeError, match="ledger"):
        dpmcmc.sample(_model(), bad, "dp-penalty", ledger=3, **RUN)
    with pytest.raises(LedgerError, match="ledger"):
        dpmcmc.sample(_model(), bad, "dp-penalty", ledger=tmp_path / "none.json", **RUN)
    with pytest.raises(ValueError, match="not private"):
        dpmcmc.sample(_model(), bad, "rwmh", iterations=5, proposal_std=0.1,
                      ledger=Ledger(tmp_path / "l.json", 1.0, 1e-6))


def test_two_processes_cannot_both_take_the_last_of_the_budget(tmp_path):
    path = str(tmp_path / "l.json")
    Ledger(path, 1.0, 1e-6)
    # Two processes race (forked by one spawned child: tests/children/ledger_race.py).
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=race_two, args=(path, out))
    child.start()
    results = out.get(timeout=120)
    child.join(60)
    assert results == [False, True]
    assert len(Ledger(path).runs) == 1


def test_a_resumed_checkpoint_is_not_charged_twice(tmp_path):
    path = tmp_path / "l.json"
    led = Ledger(path, 10.0, 1e-5)
    # A key of the kind OS entropy gives ("rbg") and one chunk of RUN's 32 iterations: the chain
    # program of test_runs_compose_and_an_overspending_run_is_refused_before_any_noise.
    kw = dict(RUN, key=jax.random.key(0, impl="rbg"), checkpoint=tmp_path / "run.ckpt",
              checkpoint_every=RUN["iterations"], ledger=led)
    a = dpmcmc.sample(_model(), DATA, "dp-penalty", **kw)
    b = dpmcmc.sample(_model(), DATA, "dp-penalty", **kw)  # finished checkpoint: returned again
    np.testing.assert_array_equal(a.samples, b.samples)
    assert len(Ledger(path).runs) == 1


def test_glm_and_cli_charge_the_ledger(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 10, 1000)
    y = rng.uniform(size=1000) < 1 / (1 + np.exp(-(x - 5)))
    df = pd.DataFrame({"x": x, "y": np.where(y, "yes", "no")})
    csv = tmp_path / "t.csv"
    df.to_csv(csv, index=False)
    bounds = tmp_path / "b.json"
    bounds.write_text(json.dumps({"x": [0, 10], "y": {"categories": ["no", "yes"]}}))
    led_path = tmp_path / "t.ledger.json"
    runner = CliRunner()
    init = runner.invoke(app, ["ledger", "init", str(led_path), "--epsilon", "5", "--delta", "1e-5"])
    assert init.exit_code == 0, init.output
    # The CLI's defaults (4 chains x 1000 draws): the CLI run below reuses this run's programs.
    res = dpmcmc.glm(df, "logistic", target="y", bounds=json.loads(bounds.read_text()), epsilon=2.0,
                     delta=1e-6, ledger=str(led_path))
    assert Ledger(led_path).spent == pytest.approx((res.privacy.epsilon, 1e-6))
    args = ["sample", str(csv), "--model", "logistic", "--target", "y", "--bounds", str(bounds), "--epsilon",
            "2", "--delta", "1e-6", "--out", str(tmp_path / "r.nc"), "--ledger", str(led_path)]
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    # No --algorithm: the command runs the noise-aware GLM, prints its plan and its report's
    # releases, and saves its draws (the CLI's defaults: 4 chains x 1000 draws).
    assert "Plan: noise-aware-glm" in ok.stdout and "ObjPert point" in ok.stdout
    saved = dpmcmc.load(tmp_path / "r.nc")
    assert saved.algorithm == "noise-aware-glm" and saved.samples.shape == (4, 1000, 2)
    refused = runner.invoke(app, args[:-4] + ["--out", str(tmp_path / "r2.nc"), "--ledger", str(led_path)])
    assert refused.exit_code == 2 and "refuses" in refused.output
    assert not os.path.exists(tmp_path / "r2.nc")
    shown = json.loads(runner.invoke(app, ["ledger", "show", str(led_path), "--json"]).stdout)
    assert len(shown["runs"]) == 2 and shown["spent"][0] == pytest.approx(2 * res.privacy.epsilon)


# ----------------------------------------------------------------------- keys and the ledger

def _tiny_table(n=1000, seed=0):
    """A table of test_glm_and_cli_charge_the_ledger's shape and bounds (n = 1000, one covariate
    in [0, 10]), fitted below at its ε = 2 and δ = 1e-6 and the default 4 x 1000 draws, as
    tests/samplers/test_glm_card.py's fit: the fits run the programs those runs compiled, or,
    for another kind of key or secure mode, compile them once for all."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 10, n)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(x - 5) / 2))).astype(int)
    return pd.DataFrame({"x": x, "y": np.where(y == 1, "yes", "no")})


_TINY_BOUNDS = {"x": [0, 10], "y": {"categories": ["no", "yes"]}}


def test_a_key_the_ledger_has_charged_is_refused_before_any_noise(tmp_path, monkeypatch):
    # Issue 33: the same key at another ε gives the same underlying noise, rescaled; 2·run₂ −
    # run₁ cancels it. The ledger keeps a keyed hash of every key it charged and refuses a
    # repeat before any noise, on the table path and the sampler path alike.
    from dpmcmc.samplers import noise_aware_glm

    ledger = dpmcmc.Ledger(tmp_path / "l.json", total_epsilon=100.0, total_delta=1e-3)
    df = _tiny_table()
    kw = dict(target="y", bounds=_TINY_BOUNDS, delta=1e-6, ledger=ledger)
    dpmcmc.glm(df, "logistic", epsilon=2.0, key=jax.random.key(5), **kw)
    fits = []
    monkeypatch.setattr(noise_aware_glm, "fit", lambda *a, **k: fits.append(1))
    with pytest.raises(dpmcmc.LedgerError, match="key .or seed. was used"):
        dpmcmc.glm(df, "logistic", epsilon=1.0, key=jax.random.key(5), **kw)
    with pytest.raises(dpmcmc.LedgerError, match="key .or seed. was used"):
        dpmcmc.glm(df, "logistic", epsilon=1.0, key=5, **kw)   # the same seed as an int
    assert fits == [] and len(ledger.runs) == 1                # refused: no noise, no charge
    # The file stores hashes, never the key.
    text = (tmp_path / "l.json").read_text()
    words = np.asarray(jax.random.key_data(jax.random.key(5))).tolist()
    assert str(words) not in text and len(json.loads(text)["keys"]) == 1
    # A fresh key, or none, is accepted.
    monkeypatch.undo()
    dpmcmc.glm(df, "logistic", epsilon=2.0, key=jax.random.key(6), **kw)
    dpmcmc.glm(df, "logistic", epsilon=2.0, **kw)
    assert len(ledger.runs) == 3 and len(json.loads((tmp_path / "l.json").read_text())["keys"]) == 2


def test_a_user_key_without_a_ledger_warns_in_plain_words(tmp_path):
    df = _tiny_table()
    kw = dict(target="y", bounds=_TINY_BOUNDS, epsilon=2.0, delta=1e-6)
    with pytest.warns(dpmcmc.KeyReuseWarning, match="repeats that noise.*voids the privacy guarantee"):
        dpmcmc.glm(df, "logistic", key=jax.random.key(1), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpmcmc.KeyReuseWarning)
        dpmcmc.glm(df, "logistic", **kw)                                   # OS entropy
        dpmcmc.glm(df, "logistic", secure=True, key=jax.random.key(1), **kw)  # noise from a fresh secret
        ledger = dpmcmc.Ledger(tmp_path / "l.json", total_epsilon=10.0, total_delta=1e-3)
        dpmcmc.glm(df, "logistic", key=jax.random.key(2), ledger=ledger, **kw)  # the ledger guards


def test_secure_mode_reaches_the_default_algorithm():
    df = _tiny_table()
    kw = dict(target="y", bounds=_TINY_BOUNDS, epsilon=2.0, delta=1e-6)
    # A key with secure=True (the noise from a fresh OS secret): the secure program of
    # test_a_user_key_without_a_ledger_warns_in_plain_words's run, not one for a default key.
    res = dpmcmc.glm(df, "logistic", secure=True, key=jax.random.key(3), **kw)
    assert res.secure and res.algorithm == "noise-aware-glm"
    # The noise comes from the secret, not the key: one key, two secrets, two outcomes.
    from dpmcmc.secure import secure_key

    a = dpmcmc.glm(df, "logistic", secure=secure_key(1), key=jax.random.key(3), **kw)
    b = dpmcmc.glm(df, "logistic", secure=secure_key(2), key=jax.random.key(3), **kw)
    assert not np.array_equal(a.samples, b.samples)


def test_sampler_path_refuses_a_charged_key(tmp_path):
    ledger = dpmcmc.Ledger(tmp_path / "s.json", total_epsilon=1e6, total_delta=0.5)
    # RUN's model, data and chains, and a key of the kind OS entropy gives ("rbg"): the chain
    # program of test_runs_compose_and_an_overspending_run_is_refused_before_any_noise.
    key = jax.random.key(9, impl="rbg")
    kw = dict(RUN, ledger=ledger)
    dpmcmc.sample(_model(), DATA, "dp-penalty", key=key, **kw)
    with pytest.raises(dpmcmc.LedgerError, match="key .or seed. was used"):
        dpmcmc.sample(_model(), DATA, "dp-penalty", key=key, **dict(kw, iterations=3))
    assert len(ledger.runs) == 1
