"""Calibration of the default table path on tables simulated from the model (issue 32 §1).

The small grid of the default suite; the full grid is benchmarks/calibration.py
(docs/calibration.md). Each case fixes its seed. False-alarm rate: each case runs
2 levels × (d + 2) one-sided tests of "coverage ≥ nominal" at ALPHA = 1e-3 each, so a calibrated
method fails a case with probability ≤ 2 (d + 2) · 1e-3 (Bonferroni): ≤ 1 % for d = 3
coefficients.
"""
import jax
import numpy as np
import pytest

from dpmcmc.tabular import calibration as cal

ALPHA = 1e-3


def _check(case, reps, seed, draws=150):
    res = cal.run_case(jax.random.key(seed), case, reps, draws=draws)
    cv = cal.coverage(res["theta"], res["draws"], alpha=ALPHA)
    detail = {c: (v["pooled"], v["joint"], v["per_coef"].tolist())
              for c, v in cv["levels"].items()}
    assert cv["passed"], detail
    return cv


def test_linear_residual_sd_inferred_is_calibrated():
    """Linear regression with the residual sd inferred from the released Σ y² (no declared
    noise sd): the intervals cover the true coefficients at the nominal rates, and they are
    informative (90 % width well below the prior's, ≈ 33 on the scaled design)."""
    cv = _check(cal.Case("linear", 1000, 2, 4.0), reps=60, seed=11)
    assert np.median(cv["width"]) < 1.0


# slow: tests/suite_budget.py (SLOW_CASES_B3) names its guards.
def test_poisson_under_its_cap_is_calibrated():
    """Poisson counts under a declared cap they almost never reach (C = 10, rates ≤ 4.1:
    calibration.COUNT_CAPS), fitted at points projected onto log rates ≤ log(C + 1): the
    intervals cover the true coefficients at the nominal rates, and they are informative (90 %
    width well below the prior's, ≈ 33 on the scaled design; 400 tables of this point:
    coverage 0.92 pooled and jointly at 90 %, median width 0.09, docs/calibration.md)."""
    cv = _check(cal.Case("poisson", 3000, 2, 4.0), reps=60, seed=15, draws=100)
    assert np.median(cv["width"]) < 0.5


@pytest.mark.slow
@pytest.mark.parametrize("case", [cal.Case("logistic", 1000, 2, 1.0),
                                  cal.Case("logistic-rare", 10000, 2, 4.0),
                                  cal.Case("linear", 300, 5, 1.0),
                                  cal.Case("poisson", 10000, 5, 4.0),
                                  cal.Case("poisson", 1000, 2, 4.0)],
                         ids=lambda c: c.label())
def test_calibrated_on_more_cases(case):
    _check(case, reps=100, seed=12)


# slow: guard in default: test_coverage_detects_an_overconfident_posterior (the checker fails a
# shifted posterior) and test_linear_residual_sd_inferred_is_calibrated (the same pipeline and
# fit; the Poisson fit under its cap, test_poisson_under_its_cap_is_calibrated, is slow too)
@pytest.mark.slow
def test_a_count_cap_that_bites_is_not_calibrated_for_the_uncapped_model():
    """What the cap does (docs/calibration.md): with C = 3 under rates of 1.5 to 4 (about a
    tenth of the counts clipped) the fit estimates the capped counts' log-linear mean, below the
    Poisson rate, so at n = 10⁴ its intervals miss the true intercept: the calibration check
    says so. A cap must be declared above the counts the model should describe."""
    case = cal.Case("poisson-capped", 10000, 2, 4.0)
    res = cal.run_case(jax.random.key(14), case, 60, draws=150)
    cv = cal.coverage(res["theta"], res["draws"], alpha=ALPHA)
    assert not cv["passed"]
    assert cv["levels"][0.9]["per_coef"][0] < 0.5


def test_coverage_detects_an_overconfident_posterior():
    """The checker can fail: draws of sd 1 centred on the truth plus a N(0, 1.5²) shift cover
    it at 90 % only ~73 % of the time, which the tests reject (200 replicates); draws whose
    centre is off by N(0, 1) are calibrated and pass."""
    rng = np.random.default_rng(0)
    reps, s, d = 200, 400, 3
    theta = rng.normal(size=(reps, d))
    centre = theta + rng.normal(size=(reps, d)) * 1.5
    draws = centre[:, None, :] + rng.normal(size=(reps, s, d))
    assert not cal.coverage(theta, draws, alpha=ALPHA)["passed"]
    good = theta + rng.normal(size=(reps, d))
    draws = good[:, None, :] + rng.normal(size=(reps, s, d))
    assert cal.coverage(theta, draws, alpha=ALPHA)["passed"]


def test_calibration_report_keeps_the_hand_written_sections(tmp_path):
    """benchmarks/calibration.py rewrites the grid's table and method in docs/calibration.md
    and keeps every hand-written section (a follow-up's measurements above them, the Poisson
    family's below) where it stands; nothing is left of the old generated text."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import calibration as bench

    rows = bench.load()[:2]
    page = tmp_path / "calibration.md"
    page.write_text("# old title\n\nold intro\n\n## Hand above\n\nkept 1\n\n"
                    "## The method in one paragraph\n\nSTALE\n\n## Beyond the grid\n\nSTALE\n\n"
                    "## Hand below\n\nkept 2\n")
    bench.report(rows, "CMD", page)
    text = page.read_text()
    heads = [ln[3:] for ln in text.splitlines() if ln.startswith("## ")]
    assert heads == ["Hand above", *bench.GENERATED_SECTIONS, "Hand below"]
    assert "kept 1" in text and "kept 2" in text and "STALE" not in text and "old intro" not in text
    assert "Commands: CMD" in text and text.count("| logistic") + text.count("| linear") >= 2
    bench.report(rows, "CMD", page)  # a second run changes nothing
    assert page.read_text() == text
