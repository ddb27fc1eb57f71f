"""HMC: what is its own (exactness on the tempered Gaussian posterior).

Exactness design: tests/exactness.py."""
from exactness import ALPHA, CHAINS, ITERS, build, exactness_pvalue, run_from_stationarity
from exactness import tempered  # noqa: F401  (module fixture)


# slow (tests/suite_budget.py, SLOW_CASES_A3): a chain program of its own, ~1.2 CPU-s; the same
# exactness design runs by default on DP penalty, HMC's chain in test_samplers_nan.py.
def test_hmc_is_exact_tempered(tempered):
    kernel = build("hmc", tempered, step_size=0.8 * tempered.sd, leapfrog_steps=3)
    final, info = run_from_stationarity(kernel, tempered, CHAINS, ITERS // 2, key=2)
    p, _ = exactness_pvalue(final, tempered)
    assert p > ALPHA
    assert float(info.accepted.mean()) > 0.8
    assert not bool(info.diverged.any())
