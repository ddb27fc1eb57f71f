"""RWMH: what is its own (the shared exactness design, at T = 0.5).

Exactness design: tests/exactness.py."""
import pytest

from exactness import ALPHA, CHAINS, ITERS, build, exactness_pvalue, run_from_stationarity
from exactness import problem, tempered  # noqa: F401  (module fixtures)


# T = 0.5, like the other samplers here, is the default run's case: it checks that RWMH
# multiplies the log-likelihood by T (tests/samplers/test_tempering.py, on the banana, is slow), and it
# has power against a dropped T: the chains would contract to the untempered posterior, half
# the variance (mean z² 0.51 and p = 6e-25 for this key), far below ALPHA. T = 1 is slow.
@pytest.mark.parametrize("which", [pytest.param("problem", marks=pytest.mark.slow), "tempered"])
def test_rwmh_is_exact(which, request):
    problem = request.getfixturevalue(which)
    kernel = build("rwmh", problem, proposal_std=1.2 * problem.sd)
    final, info = run_from_stationarity(kernel, problem, CHAINS, ITERS, key=1)
    p, _ = exactness_pvalue(final, problem)
    assert p > ALPHA
    assert 0.2 < float(info.accepted.mean()) < 0.8
