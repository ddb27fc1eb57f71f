"""DP-HMC: exact with noise, clipped gradients and tempering, and the correction it needs.

Exactness design: tests/exactness.py."""
import jax.numpy as jnp
import pytest

from dpmcmc.samplers.dp_hmc import tapped_dp_hmc
from dpmcmc.testing import uncorrected_accept

from exactness import (ALPHA, CHAINS, DIM, ITERS, build, dphmc_params, exactness_pvalue,
                       run_from_stationarity)
from exactness import tempered  # noqa: F401  (module fixture)


# ITERS // 4 (37) iterations from stationarity, ITERS // 2 before (~1.2 CPU-s more): the
# false-alarm rate is ALPHA at any length; the uncorrected kernel below is rejected as clearly
# at 37 as at 75 (keys 4-6: p <= 1e-24 at both lengths, mean z² 1.72-2.01 against 1).
# slow (tests/suite_budget.py, SLOW_CASES_A3): a chain program of its own, ~3 CPU-s; its guards
# are DP penalty's exactness (the shared accept step) and DP-HMC's default chains elsewhere.
def test_dp_hmc_is_exact_with_noise_clipped_gradients_and_tempering(tempered):
    kernel = build("dp-hmc", tempered, **dphmc_params(tempered))
    final, info = run_from_stationarity(kernel, tempered, CHAINS, ITERS // 4, key=4)
    p, _ = exactness_pvalue(final, tempered)
    assert float(info.clip_fraction.max()) == 0.0
    assert float(info.grad_clip_fraction.mean()) > 0.1
    assert p > ALPHA
    assert float(info.accepted.mean()) > 0.1


# slow (~1.3 CPU-s, a chain program of its own): the power demonstration for DP-HMC. Its accept
# step is the shared penalty_accept (dpmcmc.kernels.penalty), the one DP penalty uses; that
# this exactness check catches the test without its −σ²/2 term is shown in the default run by
# test_dp_penalty_without_correction_is_detected. DP-HMC's own exactness (which a missing term
# breaks, as this test shows) is slow too: tests/suite_budget.py, SLOW_CASES_A3.
@pytest.mark.slow
def test_dp_hmc_without_correction_is_detected(tempered):
    prm = dphmc_params(tempered)
    kernel = tapped_dp_hmc(tempered.model, prm["tau_l"], prm["tau_g"], prm["clip"],
                           prm["grad_clip"], prm["step_size"], prm["leapfrog_steps"], jnp.ones(DIM),
                           accept=uncorrected_accept).kernel()
    final, _ = run_from_stationarity(kernel, tempered, CHAINS, ITERS // 4, key=4)
    p, var = exactness_pvalue(final, tempered)
    assert p < ALPHA
    assert var > 1.0
