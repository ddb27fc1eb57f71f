"""dpmcmc.plan / dpmcmc plan: a run's plan from public inputs, its warnings before any noise."""
import json
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtr
from typer.testing import CliRunner

import dpmcmc
from dpmcmc.cli import app

# The DP-HMC example the README once carried (docs/plan.md: the plan refuses it).
README_HMC = dict(tau_l=0.1, tau_g=0.55, clip=1.0, grad_clip=1.0, step_size=0.01, leapfrog_steps=25)


def _flat_model(dim=1):
    # Log-likelihood ratios are exactly 0 and the prior is flat: the penalty test then accepts
    # with probability 2Φ(−σ/2) for a move whose released ratio has noise sd σ. Named
    # parameters: test_plan_does_not_depend_on_the_data reads them from its result.
    return dpmcmc.Model(log_likelihood=lambda theta, x: 0.0 * jnp.sum(theta) * x[0],
                        log_prior=lambda theta: 0.0 * jnp.sum(theta), dim=dim, name="flat",
                        param_names=tuple(f"theta_{i}" for i in range(dim)))


def test_readme_example_at_small_budget_warns_in_plain_words():
    p = dpmcmc.plan(2, 10_000, "dp-hmc", epsilon=1.0, delta=1e-6, chains=1, **README_HMC)
    # theta0=None: a private start takes 10 % of μ; the iterations get the rest.
    assert p.start.startswith("private")
    assert p.iterations == dpmcmc.accounting.max_iterations(
        "dp-hmc", 1.0, 1e-6, 10_000, chains=1, tau_l=0.1, tau_g=0.55, leapfrog_steps=25,
        init_mu=0.1 * dpmcmc.accounting.gaussian_mu(1.0, 1e-6))
    assert p.iterations < 10 and not p.ok
    assert any("cannot move" in w for w in p.warnings)
    assert "WARNING" in str(p) and f"iterations per chain: {p.iterations}" in str(p)
    # A configuration that can move raises nothing.
    good = dpmcmc.plan(2, 100_000, "dp-penalty", epsilon=4.0, delta=1e-6, tau=0.1, clip=1.0,
                       proposal_std=0.005)
    assert good.ok and good.iterations >= 100 and good.noise[0].ratio > 0.5


def test_penalty_noise_figure_is_the_mechanism_s():
    # The plan's σ per unit of move length is the mechanism's closed form 2τ√n·C (n = 100,
    # τ = 0.5, C = 1): the released ratio's noise sd for a move of length |Δθ| is 2τ√n·C·|Δθ|,
    # which tests/audit/test_audit.py::test_audit_tap_leaves_the_chain_unchanged[dp-penalty]
    # reads off the sampler's own release, bit for bit. That a chain's measured acceptance
    # agrees is checked on test_plan_does_not_depend_on_the_data's run (this model and these
    # settings: one chain program serves both).
    n, ps, tau = 100, 0.3, 0.5
    p = dpmcmc.plan(_flat_model(), n, "dp-penalty", iterations=2000, delta=1e-6, tau=tau, clip=1.0,
                    proposal_std=ps)
    assert p.noise[0].noise_sd / ps == pytest.approx(2 * tau * math.sqrt(n) * 1.0, rel=1e-12)


def test_sample_refuses_a_plan_that_cannot_move_unless_forced():
    model = _flat_model(2)
    data = np.zeros((10_000, 1))
    called = []
    with pytest.raises(dpmcmc.PlanRefused, match="cannot move.*force=True"):
        dpmcmc.sample(model, data, "dp-hmc", epsilon=1.0, delta=1e-6, chains=1, progress=False,
                      _on_chunk=called.append, **README_HMC)
    assert called == []  # refused before the first chunk ran
    with warnings.catch_warnings():
        warnings.simplefilter("error", dpmcmc.PlanWarning)
        with pytest.raises(dpmcmc.PlanWarning, match="cannot move"):
            dpmcmc.sample(model, data, "dp-hmc", epsilon=1.0, delta=1e-6, chains=1, progress=False,
                          force=True, _on_chunk=called.append, **README_HMC)
    assert called == []  # the warning came before the first chunk ran
    forced = dpmcmc.plan(model, 10_000, "dp-hmc", epsilon=1.0, delta=1e-6, chains=1, force=True,
                         **README_HMC)
    assert forced.blocking and set(forced.blocking) <= set(forced.warnings)


# slow (suite budget, ~2 CPU-s: a private start and a DP-HMC chain on 10⁴ rows): the forced run
# itself. In the default run, sample's plan is dpmcmc.plan's in every mode, forced included
# (test_plan_and_sample_share_one_planner_in_every_mode: a forced plan is said so by a
# PlanWarning), and a run does its plan's iterations whatever warnings the plan gives
# (tests/test_api.py::test_result_parts_and_report: ε = 30, warned, runs the iterations it bought).
@pytest.mark.slow
def test_a_forced_plan_that_cannot_move_runs_as_planned():
    model = _flat_model(2)
    data = np.zeros((10_000, 1))
    with pytest.warns(dpmcmc.PlanWarning):
        res = dpmcmc.sample(model, data, "dp-hmc", epsilon=1.0, delta=1e-6, chains=1, progress=False,
                            force=True, **README_HMC)
    assert res.plan.to_dict() == dpmcmc.plan(model, 10_000, "dp-hmc", epsilon=1.0, delta=1e-6, chains=1,
                                             force=True, **README_HMC).to_dict()
    assert res.plan.blocking and set(res.plan.blocking) <= set(res.plan.warnings)
    assert res.samples.shape[1] == res.plan.iterations == res.privacy.iterations


def test_delta_of_at_least_one_over_n_is_refused_unless_forced():
    kw = dict(tau=0.1, clip=1.0, proposal_std=0.01, iterations=5)
    with pytest.raises(ValueError, match="delta=0.001 is at least 1/n"):
        dpmcmc.plan(1, 1000, "dp-penalty", delta=1e-3, **kw)
    assert dpmcmc.plan(1, 1000, "dp-penalty", delta=1e-3, force=True, **kw).delta == 1e-3
    assert dpmcmc.plan(1, 1000, "dp-penalty", delta=0.999e-3, **kw).delta == 0.999e-3


def test_large_epsilon_warns():
    p = dpmcmc.plan(1, 100_000, "dp-penalty", epsilon=50.0, delta=1e-6, tau=0.1, clip=1.0,
                    proposal_std=0.001)
    assert any("above 10" in w for w in p.warnings) and not p.blocking
    assert not any("above 10" in w for w in dpmcmc.plan(
        1, 100_000, "dp-penalty", epsilon=10.0, delta=1e-6, tau=0.1, clip=1.0,
        proposal_std=0.001).warnings)


def test_a_run_length_the_user_fixed_is_not_warned_about():
    # "The budget buys only k iterations" is a warning about what (ε, δ) bought; a user who
    # fixed `iterations` (with δ only, or for a non-private sampler) asked for exactly that many.
    model = _flat_model(1)
    short = dpmcmc.plan(model, 1000, "dp-penalty", iterations=3, delta=1e-6, chains=1, tau=0.1,
                        clip=1.0, proposal_std=0.01)
    assert not any("buys only" in w for w in short.warnings)
    assert not any("buys only" in w for w in dpmcmc.plan(model, 1000, "rwmh", iterations=3,
                                                         proposal_std=0.1).warnings)
    bought = dpmcmc.plan(_flat_model(2), 10_000, "dp-hmc", epsilon=1.0, delta=1e-6, chains=1, **README_HMC)
    assert bought.iterations < 10 and any("buys only" in w for w in bought.warnings)


def test_plan_does_not_depend_on_the_data():
    # test_penalty_noise_figure_is_the_mechanism_s's model, sizes and parameters (n = 100,
    # τ = 0.5, C = 1, s = 0.3): both runs are one chain program, the data its argument.
    n, ps, tau = 100, 0.3, 0.5
    model = _flat_model(1)
    kw = dict(iterations=1900, delta=1e-6, chains=4, progress=False, tau=tau, clip=1.0,
              proposal_std=ps, key=jax.random.key(4))
    a = dpmcmc.sample(model, np.zeros((n, 1)), "dp-penalty", **kw)
    b = dpmcmc.sample(model, np.random.default_rng(1).normal(size=(n, 1)) * 100, "dp-penalty", **kw)
    assert a.plan.to_dict() == b.plan.to_dict() and a.plan.ok
    # The plan's σ per unit of move length is the sampler's: on this flat target the measured
    # acceptance equals E_z[2Φ(−σ₁·s|z|/2)] with σ₁ = σ_plan / s (dim 1, z ~ N(0,1)).
    # 4 × 1900 flags: binomial sd ≤ 0.0058; tolerance 5 sd (false alarm < 1e-6). A σ off by
    # 25 % moves the expectation by more than 0.04.
    sigma1 = a.plan.noise[0].noise_sd / ps
    assert sigma1 == pytest.approx(2 * tau * math.sqrt(n) * 1.0)
    z = np.random.default_rng(0).standard_normal(400_000)
    expected = float(np.mean(2 * ndtr(-sigma1 * ps * np.abs(z) / 2)))
    flags = np.asarray(a.released.accepted)
    assert flags.size == 4 * 1900
    rate = float(np.mean(flags))
    assert abs(rate - expected) < 5 * math.sqrt(expected * (1 - expected) / flags.size), (rate, expected)
    # A short run gets advice, not a warning (the plan sample makes is dpmcmc.plan's:
    # test_plan_and_sample_share_one_planner_in_every_mode).
    short = dpmcmc.plan(model, 100, "dp-penalty", iterations=20, delta=1e-6, chains=4, tau=0.5,
                        clip=1.0, proposal_std=0.3)
    assert short.ok and short.notes and not short.warnings
    # Model(param_names=...) names the posterior variables of dpmcmc.sample's result (an unnamed
    # model's result has none: tests/test_api.py::test_result_parts_and_report).
    assert a.param_names == model.param_names == ("theta_0",)
    assert sorted(a.to_inference_data().posterior.data_vars) == ["theta_0"]


@pytest.mark.parametrize("kwargs, exc, name", [
    (dict(model="two"), TypeError, "model"),
    (dict(n=0), ValueError, "n"),
    (dict(epsilon=0.0), ValueError, "epsilon"),
    (dict(delta=1.5), ValueError, "delta"),
    (dict(chains=0), ValueError, "chains"),
    (dict(algorithm="dp-nuts"), ValueError, "algorithm"),
    (dict(tau=-1.0), ValueError, "tau"),
    (dict(epsilon=1e-4), ValueError, "budget too small"),
])
def test_bad_input_is_named(kwargs, exc, name):
    call = dict(model=2, n=1000, algorithm="dp-penalty", epsilon=1.0, delta=1e-6, tau=0.1, clip=1.0,
                proposal_std=0.1)
    call.update(kwargs)
    with pytest.raises(exc, match=name):
        dpmcmc.plan(call.pop("model"), call.pop("n"), call.pop("algorithm"), **call)


def test_sgld_noise_ratio_and_its_warning():
    # (η/2)(n/b)σC per coordinate against the Langevin noise √η. Both plans share σ, b and ε, so
    # the accountant's search runs once (its compositions are cached); at q = 1e-3 and σ = 1 the
    # same search cost ~5 CPU-s. The ratio does not depend on ε: at ε = 0.5 the search stops at
    # 87 iterations (~0.3 CPU-s; ~2.7 at ε = 4, 4039 iterations).
    p = dpmcmc.plan(2, 100_000, "dp-sgld", epsilon=0.5, delta=1e-6, noise_multiplier=4.0, batch_size=1000,
                    grad_clip=1.0, step_size=1e-4)
    line = p.noise[0]
    assert line.noise_sd == pytest.approx(0.5 * 1e-4 * 100 * 4.0)
    assert line.ratio == pytest.approx(line.noise_sd / math.sqrt(1e-4))
    assert line.ratio == pytest.approx(2.0)
    assert any("too wide" in w for w in p.warnings)
    small = dpmcmc.plan(2, 100_000, "dp-sgld", epsilon=0.5, delta=1e-6, noise_multiplier=4.0,
                        batch_size=1000, grad_clip=1.0, step_size=1e-6)
    assert small.noise[0].ratio < 1 and not any("too wide" in w for w in small.warnings)


def test_cli_plan_prints_the_python_plan():
    args = ["plan", "-a", "dp-hmc", "--n", "10000", "--dim", "2", "--epsilon", "1", "--delta", "1e-6",
            "--chains", "1"] + sum((["-p", f"{k}={v}"] for k, v in README_HMC.items()), [])
    out = CliRunner().invoke(app, args + ["--json"])
    assert out.exit_code == 0, out.output
    want = dpmcmc.plan(2, 10_000, "dp-hmc", epsilon=1.0, delta=1e-6, chains=1, **README_HMC).to_dict()
    assert json.loads(out.stdout) == json.loads(json.dumps(want))
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0 and "WARNING" in text.stdout
    bad = CliRunner().invoke(app, ["plan", "-a", "dp-penalty", "--n", "100", "--dim", "1", "--epsilon",
                                   "1", "--delta", "1e-6", "-p", "tau"])
    assert bad.exit_code == 2 and "--param" in bad.output


def test_glm_result_carries_its_plan():
    # The shape, budget and draws of tests/test_ledger.py::test_glm_and_cli_charge_the_ledger's
    # run (n = 1000, one covariate, ε = 2, δ = 1e-6, the default 4 x 1000 draws): one of the two
    # runs compiles the programs both use, whichever runs first.
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, 1000)
    y = (rng.uniform(size=1000) < 1 / (1 + np.exp(-(x - 5) / 2))).astype(int)
    df = pd.DataFrame({"x": x, "y": np.where(y == 1, "yes", "no")})
    res = dpmcmc.glm(df, "logistic", target="y", bounds={"x": [0, 10], "y": {"categories": ["no", "yes"]}},
                     epsilon=2.0, delta=1e-6)
    p = res.plan
    # One set of releases (the report's one "iteration"), then draws per chain.
    assert res.privacy.iterations == 1 and p.iterations == res.samples.shape[1] == 1000
    assert p.report.params["steps"] == res.params["steps"]
    from dpmcmc.samplers import noise_aware_glm as nag

    last = nag.plan_releases(p.n, p.report.params).gradients[-1]  # what the fit released last
    assert p.noise[0].noise_sd == pytest.approx(last.noise_sd)
    assert p.noise[0].ratio == pytest.approx(last.noise_sd ** 2)
    assert p.epsilon_spent == pytest.approx(res.privacy.epsilon)


@pytest.mark.parametrize("secure", [False, True])
def test_plan_and_sample_share_one_planner_in_every_mode(secure):
    # Issue 33/34: at n = 10⁵, ε = 4 the plan promised a private start while sample(secure=True)
    # ran from prior draws with more iterations. One planner: what dpmcmc.plan says is what
    # sample runs, secure or not (the start's noise then comes from the run's secret).
    from dpmcmc import api

    model = _flat_model(2)
    data = np.zeros((100_000, 1))
    kw = dict(epsilon=4.0, delta=1e-6, chains=4, secure=secure, **README_HMC)
    planned = dpmcmc.plan(model, 100_000, "dp-hmc", **kw)
    with pytest.warns(dpmcmc.PlanWarning, match="almost never move"):  # forced, and said so
        run = api.plan_run(model, data, "dp-hmc", progress=False, force=True, **kw)
    forced = dpmcmc.plan(model, 100_000, "dp-hmc", force=True, **kw)
    assert run.plan.to_dict() == forced.to_dict()
    assert {k: v for k, v in planned.to_dict().items()} == forced.to_dict()
    assert planned.start.startswith("private") and planned.secure == secure
    assert run.iterations == planned.iterations and run.private_start == planned.private_start
    assert run.report == planned.report
    # theta0 given, and iterations given: no private start, in both modes alike.
    given = dpmcmc.plan(model, 100_000, "dp-hmc", theta0=np.zeros(2), **kw)
    assert given.private_start is None and given.iterations > planned.iterations
