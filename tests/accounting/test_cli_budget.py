"""`dpmcmc budget` through typer's CliRunner."""
import json

import pytest
from typer.testing import CliRunner

from dpmcmc import accounting
from dpmcmc.cli import app

from host_devices import run_module

runner = CliRunner()
HMC_ARGS = ["budget", "--algorithm", "dp-hmc", "--epsilon", "4", "--delta", "1e-6", "--n", "100000",
            "--tau-l", "0.1", "--tau-g", "0.55", "--leapfrog-steps", "25", "--chains", "4"]
HMC = {"tau_l": 0.1, "tau_g": 0.55, "leapfrog_steps": 25}


def test_budget_prints_iterations_and_report():
    result = runner.invoke(app, HMC_ARGS)
    assert result.exit_code == 0, result.output
    k = accounting.max_iterations("dp-hmc", 4, 1e-6, 100000, chains=4, **HMC)
    assert f"Iterations per chain: {k}" in result.stdout
    assert "substitute" in result.stdout and "gradient" in result.stdout and "4 chains" in result.stdout


def test_budget_json_is_one_object():
    result = runner.invoke(app, HMC_ARGS + ["--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    k = accounting.max_iterations("dp-hmc", 4, 1e-6, 100000, chains=4, **HMC)
    assert out["iterations_per_chain"] == k
    report = accounting.PrivacyReport.from_dict(out["report"])
    assert report == accounting.spent("dp-hmc", k, 1e-6, 100000, chains=4, **HMC)
    assert report.epsilon <= 4.0


def test_budget_compare_table_and_json():
    result = runner.invoke(app, HMC_ARGS + ["--compare"])
    assert result.exit_code == 0, result.output
    for acc in ("pld", "rdp", "zcdp"):
        k = accounting.max_iterations("dp-hmc", 4, 1e-6, 100000, chains=4, accountant=acc, **HMC)
        assert any(line.split("│")[1:3] and acc in line and f" {k} " in line for line in result.stdout.splitlines())
    result = runner.invoke(app, HMC_ARGS + ["--compare", "--json"])
    rows = json.loads(result.stdout)["iterations_per_chain"]
    assert rows["pld"] > rows["zcdp"] and rows["pld"] > rows["rdp"]
    barker = runner.invoke(app, ["budget", "-a", "dp-barker", "--epsilon", "2", "--delta", "1e-6", "--n", "100000",
                                 "--batch-size", "1000", "--compare", "--json"])
    rows = json.loads(barker.stdout)["iterations_per_chain"]
    assert rows["pld"] is None and rows["zcdp"] is None and rows["rdp"] >= 1


def test_budget_iterations_reports_spent_epsilon():
    result = runner.invoke(app, ["budget", "-a", "dp-barker", "--iterations", "3000", "--delta", "1e-6",
                                 "--n", "100000", "--batch-size", "1000", "--accountant", "rdp", "--n0", "500",
                                 "--chains", "1", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["report"]["epsilon"] == pytest.approx(4.105996228552974, rel=1e-6)  # held value
    assert out["report"]["params"] == {"batch_size": 1000, "n0": 500.0}


SGLD_SPENT = ["budget", "-a", "dp-sgld", "--iterations", "500", "--delta", "1e-5", "--n", "10000",
              "--noise-multiplier", "1.5", "--batch-size", "100", "--chains", "1"]
SGLD = {"noise_multiplier": 1.5, "batch_size": 100}


def test_budget_relation_default_and_legacy():
    result = runner.invoke(app, SGLD_SPENT + ["--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["report"]
    assert report["relation"] == "substitute"
    assert report["epsilon"] == pytest.approx(accounting.spent("dp-sgld", 500, 1e-5, 10000, chains=1, **SGLD).epsilon,
                                              rel=1e-12)
    legacy = runner.invoke(app, SGLD_SPENT + ["--relation", "substitute-legacy", "--json"])
    assert legacy.exit_code == 0, legacy.output
    report_legacy = json.loads(legacy.stdout)["report"]
    assert report_legacy["relation"] == "substitute-legacy"
    assert report_legacy["epsilon"] == pytest.approx(
        accounting.spent("dp-sgld", 500, 1e-5, 10000, chains=1, relation="substitute-legacy", **SGLD).epsilon, rel=1e-12)
    assert report_legacy["epsilon"] < report["epsilon"]
    text = runner.invoke(app, SGLD_SPENT + ["--relation", "substitute-legacy"])
    assert text.exit_code == 0, text.output
    assert "substitute-legacy neighbouring relation" in text.stdout and "understate δ" in text.stdout
    plain = runner.invoke(app, SGLD_SPENT)
    assert "substitute neighbouring relation" in plain.stdout and "understate" not in plain.stdout


def test_budget_compare_with_legacy_relation():
    result = runner.invoke(app, SGLD_SPENT + ["--relation", "substitute-legacy", "--compare", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["relation"] == "substitute-legacy"
    # only the PLD accountant has the legacy pair
    assert out["epsilon"]["rdp"] is None and out["epsilon"]["zcdp"] is None
    assert out["epsilon"]["pld"] == pytest.approx(
        accounting.spent("dp-sgld", 500, 1e-5, 10000, chains=1, relation="substitute-legacy", **SGLD).epsilon, rel=1e-12)
    table = runner.invoke(app, SGLD_SPENT + ["--relation", "substitute-legacy", "--compare"])
    assert "not applicable" in table.stdout and "WARNING" in table.stdout


@pytest.mark.parametrize(
    "extra, message",
    [
        (["-a", "dp-barker", "--epsilon", "2", "--batch-size", "1000", "--accountant", "pld"], "accountant"),
        (["-a", "dp-penalty", "--epsilon", "2", "--tau", "0.1", "--batch-size", "10"], "--batch-size"),
        (["-a", "dp-penalty", "--epsilon", "2"], "--tau"),
        (["-a", "dp-nuts", "--epsilon", "2"], "--algorithm"),
        (["-a", "dp-penalty", "--tau", "0.1"], "--epsilon"),
        (["-a", "dp-penalty", "--epsilon", "0.001", "--tau", "0.1"], "budget too small"),
        (["-a", "dp-penalty", "--epsilon", "-1", "--tau", "0.1"], "epsilon"),
        (["-a", "dp-penalty", "--epsilon", "1", "--tau", "0.1", "--relation", "add-remove"], "--relation"),
        (["-a", "dp-penalty", "--epsilon", "1", "--tau", "0.1", "--relation", "substitute-legacy"], "relation"),
        (["-a", "dp-penalty", "--epsilon", "1", "--tau", "0.1", "--relation", "substitute-legacy", "--compare"],
         "--relation substitute-legacy"),
        (["-a", "dp-sgld", "--epsilon", "1", "--noise-multiplier", "2", "--batch-size", "10", "--accountant", "rdp",
          "--relation", "substitute-legacy"], "relation"),
    ],
)
def test_budget_errors_exit_2_with_message(extra, message):
    result = runner.invoke(app, ["budget", "--delta", "1e-6", "--n", "1000"] + extra)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_cli_import_does_not_import_jax():
    out = run_module("imports", "dpmcmc.cli", timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_default_accountant_is_the_tightest_that_applies():
    from typer.testing import CliRunner

    from dpmcmc.cli import app

    out = CliRunner().invoke(app, ["budget", "-a", "dp-barker", "--epsilon", "2", "--delta", "1e-6",
                                   "--n", "100000", "--batch-size", "1000", "--json"])
    assert out.exit_code == 0, out.output
    obj = json.loads(out.stdout)
    assert obj["report"]["accountant"] == "rdp-direct"
    # The CLI's defaults (chains, accountant) are the library's: the same call without them agrees.
    assert obj["report"]["chains"] == 4
    assert obj["iterations_per_chain"] == accounting.max_iterations(
        "dp-barker", 2.0, 1e-6, 100000, batch_size=1000)
    assert accounting.spent("dp-barker", 10, 1e-6, 100000, batch_size=1000).accountant == "rdp-direct"
