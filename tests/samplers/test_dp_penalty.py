"""DP penalty: exact with its noise and tempering, and the correction it needs (every proposal mode).

Exactness design: tests/exactness.py."""
import jax.numpy as jnp
import pytest

from dpmcmc.samplers.dp_penalty import tapped_dp_penalty
from dpmcmc.testing import uncorrected_accept

from exactness import (ALPHA, CHAINS, DIM, ITERS, build, exactness_pvalue, penalty_params,
                       run_from_stationarity)
from exactness import tempered  # noqa: F401  (module fixture)


# ITERS // 2 (75) iterations from stationarity, ITERS before (~0.5 CPU-s more for the pair):
# the false-alarm rate is ALPHA at any length; the uncorrected kernel is rejected as clearly at
# 75 as at 150 (keys 3-5: p <= 5e-17 at 75, <= 5e-20 at 150; mean z² 1.57-1.75 against 1).
def test_dp_penalty_is_exact_with_noise_and_tempering(tempered):
    kernel = build("dp-penalty", tempered, **penalty_params(tempered))
    final, info = run_from_stationarity(kernel, tempered, CHAINS, ITERS // 2, key=3)
    p, _ = exactness_pvalue(final, tempered)
    assert float(info.clip_fraction.max()) == 0.0  # exactness assumes no clipping
    assert p > ALPHA
    assert float(info.accepted.mean()) > 0.1


def test_dp_penalty_without_correction_is_detected(tempered):
    prm = penalty_params(tempered)
    kernel = tapped_dp_penalty(tempered.model, prm["tau"], prm["clip"],
                               jnp.full(DIM, prm["proposal_std"]), "random-walk",
                               accept=uncorrected_accept).kernel()
    final, _ = run_from_stationarity(kernel, tempered, CHAINS, ITERS // 2, key=3)
    p, var = exactness_pvalue(final, tempered)
    assert p < ALPHA
    assert var > 1.0  # the uncorrected chain over-accepts: too wide




@pytest.mark.slow
@pytest.mark.parametrize("mode", ["one-component", "guided-walk"])
def test_dp_penalty_modes_are_exact_and_need_the_correction(tempered, mode):
    prm = penalty_params(tempered)
    std = jnp.full(DIM, 2.0 * tempered.sd)
    good = build("dp-penalty", tempered, **{**prm, "proposal_std": 2.0 * tempered.sd, "mode": mode})
    key = 5 if mode == "one-component" else 6
    final, info = run_from_stationarity(good, tempered, CHAINS, 2 * ITERS, key=key)
    assert float(info.clip_fraction.max()) == 0.0
    assert exactness_pvalue(final, tempered)[0] > ALPHA
    bad = tapped_dp_penalty(tempered.model, prm["tau"], prm["clip"], std, mode,
                            accept=uncorrected_accept).kernel()
    final, _ = run_from_stationarity(bad, tempered, CHAINS, 2 * ITERS, key=key)
    p, var = exactness_pvalue(final, tempered)
    assert p < ALPHA and var > 1.0
