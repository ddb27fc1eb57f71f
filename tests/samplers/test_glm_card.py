"""The noise-aware GLM as an ordinary card: its releases are accounting events composed by the
one accountant, the one planner plans it, ``dpmcmc.sample`` runs it on a GLM model, the CLI's
``budget`` and ``plan`` name it, and its audit is an entry like any other."""
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from typer.testing import CliRunner

import dpmcmc
from dpmcmc import accounting, models
from dpmcmc.accounting.events import mu_release, pure_release
from dpmcmc.accounting.pure import composed_epsilon
from dpmcmc.audit import AUDITS
from dpmcmc.cli import app
from dpmcmc.samplers import ALGORITHMS, SAMPLERS
from dpmcmc.samplers import noise_aware_glm as nag

NAME = "noise-aware-glm"


def test_pure_events_compose_in_each_accountant():
    # The fit's releases at n = 1000, d = 3, split for (ε, δ) = (2, 1e-6): Gaussian rounds (μ)
    # and a last round of pure releases (ε_i), composed by each accountant.
    split = dict(family="logistic", dim=3, split_epsilon=2.0, split_delta=1e-6)
    rels = accounting.releases(NAME, 1000, **split)
    mu = sum(r.mu for r in rels if r.kind == "gaussian")
    pure = [r.epsilon for r in rels if r.kind == "pure"]
    assert mu > 0 and len(pure) == 2

    def spent(accountant):
        return accounting.spent(NAME, 1, 1e-6, 1000, chains=1, accountant=accountant,
                                **split).epsilon

    assert spent("pld") == pytest.approx(composed_epsilon(1e-6, mu=mu, pure=pure), rel=1e-12)
    assert spent("pld") == pytest.approx(2.0, rel=1e-9)  # the split spends the budget
    # zCDP: ρ = μ + Σ ε_i²/2 (Bun & Steinke 2016, Prop. 3.3), then ε = ρ + 2√(ρ log(1/δ)).
    rho = mu + sum(0.5 * e * e for e in pure)
    assert spent("zcdp") == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e6)), rel=1e-9)
    # RDP of a pure release: min(ε, αε²/2).
    orders = np.array([2.0, 3.0, 50.0])
    assert np.allclose(pure_release("k", 1.0).rdp(orders), [1.0, 1.0, 1.0])
    assert np.allclose(pure_release("k", 0.1).rdp(orders), [0.01, 0.015, 0.1])
    assert spent("pld") < spent("rdp") and spent("pld") < spent("zcdp")
    assert mu_release("g", 0.5).noise_std(1.0) == pytest.approx(2.0)  # σ = √(2/μ) per unit bound


def test_the_card_is_registered_and_its_releases_spend_the_budget():
    spec = ALGORITHMS[NAME]
    assert spec.one_shot and spec.build is None and NAME not in SAMPLERS
    assert NAME in accounting.ALGORITHMS and AUDITS[NAME] is spec.audit
    for family, d, eps in (("logistic", 4, 1.0), ("linear", 3, 4.0)):
        p = dpmcmc.plan(d, 1000, NAME, epsilon=eps, delta=1e-6, family=family)
        rp = nag.release_plan(family, 1000, d, eps, 1e-6)
        # The accountant composes the card's events to the budget the release plan split.
        assert p.epsilon_spent == pytest.approx(eps, rel=1e-9)
        assert p.epsilon_spent == pytest.approx(rp.epsilon_spent(), rel=1e-12)
        # One event per release, of the release's kind (a K-norm release is pure ε-DP).
        kinds = [m["kind"] for m in p.report.to_dict()["mechanisms"]]
        assert kinds == ["pure" if r.kind == nag.KNORM else "gaussian" for r in rp.releases()]
        assert "pure" in kinds
        assert p.private_start is None and p.warmup == 0


def test_plan_refuses_what_a_one_shot_fit_does_not_take():
    with pytest.raises(ValueError, match="iterations"):
        dpmcmc.plan(3, 1000, NAME, epsilon=1.0, delta=1e-6, family="logistic", iterations=10)
    with pytest.raises(ValueError, match="epsilon"):
        dpmcmc.plan(3, 1000, NAME, delta=1e-6, family="logistic")
    with pytest.raises(ValueError, match="family"):
        dpmcmc.plan(3, 1000, NAME, epsilon=1.0, delta=1e-6)
    # The split is made for the tight accountant: a looser one would report more than ε.
    with pytest.raises(ValueError, match="accountant"):
        dpmcmc.plan(3, 1000, NAME, epsilon=1.0, delta=1e-6, family="logistic", accountant="zcdp")
    with pytest.raises(ValueError, match="model"):  # not a GLM: never fitted as one
        dpmcmc.sample(models.banana(2), np.zeros((10, 2)), NAME, epsilon=1.0, delta=1e-3)


def _rows(n=1000, seed=0):
    """Rows (1, x, y) of tests/test_ledger.py's tables' design (n = 1000, one covariate), fitted
    below at their ε = 2, δ = 1e-6 and 4 x 1000 draws: the fit compiles the programs the
    ledger's keyed fits run."""
    rng = np.random.default_rng(seed)
    X = np.c_[np.ones(n), rng.uniform(-1, 1, (n, 1))]
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ [0.5, 1.0])))).astype(float)
    return np.c_[X, y]


def test_sample_runs_the_card_and_clips_rows_into_the_box():
    model = models.logistic_regression(2)
    data = _rows()
    kw = dict(epsilon=2.0, delta=1e-6, key=jax.random.key(0), progress=False)
    res = dpmcmc.sample(model, data, NAME, **kw)
    assert res.samples.shape == (4, 1000, 2) and res.privacy.epsilon == pytest.approx(2.0)
    assert res.plan.algorithm == NAME and res.released is None
    # A record's non-finite or out-of-box values are clipped into the box the bounds assume,
    # inside the fit: no refusal, finite draws, and exactly the draws of the clipped records.
    bad, clipped = data.copy(), data.copy()
    bad[3], bad[4] = [1.0, np.nan, np.inf], [1.0, 7.0, 0.0]
    clipped[3], clipped[4] = [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]
    a = dpmcmc.sample(model, bad, NAME, **kw).samples
    b = dpmcmc.sample(model, clipped, NAME, **kw).samples
    assert np.all(np.isfinite(a))
    np.testing.assert_array_equal(a, b)


def test_cli_budget_and_plan_name_the_card():
    runner = CliRunner()
    out = runner.invoke(app, ["budget", "-a", NAME, "--n", "1000", "--epsilon", "1", "--delta",
                              "1e-6", "--family", "linear", "--dim", "4", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)["report"]
    assert report["algorithm"] == NAME and report["epsilon"] == pytest.approx(1.0)
    out = runner.invoke(app, ["plan", "-a", NAME, "--n", "1000", "--dim", "4", "--epsilon", "1",
                              "--delta", "1e-6", "-p", "family=logistic", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["epsilon_spent"] == pytest.approx(1.0)
    out = runner.invoke(app, ["budget", "-a", NAME, "--n", "1000", "--epsilon", "1", "--delta",
                              "1e-6"])
    assert out.exit_code != 0 and "--family" in out.output


def test_poisson_card_takes_its_cap_from_the_model():
    """The Poisson family is planned like the others: its cap is an accounting parameter (the
    releases' bounds are C + 1), read from the model dpmcmc.glm builds or given to the plan;
    the plan spends the budget; a missing or conflicting cap is refused, naming count_cap, as
    the CLI's budget does without --count-cap."""
    from dpmcmc.tabular import design_layout

    p = dpmcmc.plan(3, 1000, NAME, epsilon=2.0, delta=1e-6, family="poisson", count_cap=10)
    assert p.epsilon_spent == pytest.approx(2.0, rel=1e-9)
    assert p.report.params["count_cap"] == 10
    assert nag.plan_releases(1000, p.report.params).gradients[-1].bound == 11.0
    with pytest.raises(ValueError, match="count_cap"):
        dpmcmc.plan(3, 1000, NAME, epsilon=2.0, delta=1e-6, family="poisson")
    with pytest.raises(ValueError, match="count_cap"):
        dpmcmc.plan(3, 1000, NAME, epsilon=2.0, delta=1e-6, family="logistic", count_cap=10)
    # A Poisson GLM model (as dpmcmc.glm builds it) carries the cap its target declares.
    layout = design_layout(["y", "x"], "poisson", "y", ["x"], {"y": [0, 7], "x": [0, 1]})
    model = dpmcmc.Model(log_likelihood=lambda t, x: x[-1] * (x[:-1] @ t) - jnp.exp(x[:-1] @ t),
                         log_prior=lambda t: -0.5 * t @ t, dim=2,
                         metadata={"family": "poisson_regression",
                                   "count_cap": layout.count_cap})
    mp = dpmcmc.plan(model, 500, NAME, epsilon=1.0, delta=1e-6)
    assert mp.params["family"] == "poisson" and mp.params["count_cap"] == 7
    with pytest.raises(ValueError, match="count_cap"):
        dpmcmc.plan(model, 500, NAME, epsilon=1.0, delta=1e-6, count_cap=9)
    runner = CliRunner()
    out = runner.invoke(app, ["budget", "-a", NAME, "--n", "1000", "--epsilon", "1", "--delta",
                              "1e-6", "--family", "poisson", "--dim", "3", "--count-cap", "20",
                              "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["report"]["params"]["count_cap"] == 20
    out = runner.invoke(app, ["budget", "-a", NAME, "--n", "1000", "--epsilon", "1", "--delta",
                              "1e-6", "--family", "poisson", "--dim", "3"])
    assert out.exit_code != 0 and "count_cap" in out.output
    out = runner.invoke(app, ["plan", "-a", NAME, "--n", "1000", "--dim", "3", "--epsilon", "1",
                              "--delta", "1e-6", "-p", "family=poisson", "-p", "count_cap=20"])
    assert out.exit_code == 0, out.output
    assert "Hessian sum (last round" in out.output
