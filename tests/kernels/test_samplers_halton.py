"""Randomised-Halton step sizes: range, low discrepancy, data independence; DP-HMC releases."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS, run_chains
from dpmcmc.kernels.halton import bit_reverse32, draw_mask, halton_multiplier
from dpmcmc.samplers.hmc import jittered_step_size


# The helpers are jitted in these tests: one compiled program each, not one per operation.
_multiplier = jax.jit(halton_multiplier, static_argnums=2)


@functools.partial(jax.jit, static_argnums=1)
def halton_step_sizes(key, num, step_size):
    """The first ``num`` step sizes η·h_i of one chain whose scrambling mask comes from ``key``."""
    return step_size * halton_multiplier(jnp.arange(num, dtype=jnp.uint32), draw_mask(key))


def test_bit_reverse32_matches_python():
    vals = np.random.default_rng(0).integers(0, 2 ** 32, size=200, dtype=np.uint64)
    got = np.asarray(jax.jit(bit_reverse32)(jnp.asarray(vals.astype(np.uint32))))
    want = [int(f"{int(v):032b}"[::-1], 2) for v in vals]
    np.testing.assert_array_equal(got.astype(np.uint64), np.asarray(want, dtype=np.uint64))


def test_mask_zero_is_the_van_der_corput_sequence():
    h = np.asarray(_multiplier(jnp.arange(8, dtype=jnp.uint32), jnp.uint32(0), jnp.float64))
    vdc = np.array([0, 1 / 2, 1 / 4, 3 / 4, 1 / 8, 5 / 8, 3 / 8, 7 / 8])
    np.testing.assert_allclose(h, vdc + 2.0 ** -33, rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_multipliers_lie_in_the_open_unit_interval(dtype):
    idx = jnp.asarray(np.r_[np.arange(4096), 2 ** 32 - 1 - np.arange(64)].astype(np.uint32))
    for mask in (0, 0xFFFFFFFF, 0x12345678):
        h = np.asarray(_multiplier(idx, jnp.uint32(mask), dtype))
        assert h.dtype == dtype
        assert np.all(h > 0) and np.all(h < 1)


@pytest.mark.parametrize("seed", range(5))
def test_randomised_sequence_is_stratified(seed):
    # For any scrambling mask, the first 2^k values hit each interval [j/2^k, (j+1)/2^k) once.
    steps = np.asarray(halton_step_sizes(jax.random.key(seed), 256, 0.5))
    assert np.all((steps > 0) & (steps < 0.5))
    for k in (1, 3, 8):
        cells = np.floor(steps[: 2 ** k] / 0.5 * 2 ** k).astype(int)
        np.testing.assert_array_equal(np.sort(cells), np.arange(2 ** k))


def make(seed, n=60, dim=2, temperature=1.0):
    data = jnp.asarray(np.random.default_rng(seed).normal(seed, 1 + seed, size=(n, dim)))
    model = Model(lambda th, x: -0.5 * jnp.sum((x - th) ** 2), lambda th: -0.5 * jnp.sum(th ** 2),
                  dim, temperature=temperature)
    return model, data


DPHMC = dict(tau_l=0.5, tau_g=0.5, clip=3.0, grad_clip=1.0, step_size=0.05, leapfrog_steps=4)


def dphmc_run(model, data, iters=64, chains=3, key=0, **extra):
    spec = ALGORITHMS["dp-hmc"]
    kernel = spec.build(model, spec.prepare({**DPHMC, **extra}, model, data.shape[0]))
    return run_chains(kernel, jnp.zeros((chains, model.dim)), jax.random.key(key), iters,
                      data=data, progress=False)


@pytest.fixture(scope="module")
def two_data_sets_all_clipped():
    """Two DP-HMC runs of one kernel on other data and another posterior, sharing ONE compiled
    program, with a gradient clip bound far below every per-example gradient norm; read by the
    two tests below.

    The program is shared through its cache_key (the same kernel): each record carries a weight
    w of its log-likelihood, w·(−|x − θ|²/2), as data. Run a is make(0)'s model on make(0)'s
    data (w = 1); run b has make(1)'s data and w = 0.3, the log-likelihood scaled like
    make(1, temperature=0.3)'s."""
    model = Model(lambda th, x: -0.5 * x[2] * jnp.sum((x[:2] - th) ** 2),
                  lambda th: -0.5 * jnp.sum(th ** 2), 2)
    (_, xa), (_, xb) = make(0), make(1)
    data_a = jnp.concatenate([xa, jnp.ones((xa.shape[0], 1))], axis=1)
    data_b = jnp.concatenate([xb, jnp.full((xb.shape[0], 1), 0.3)], axis=1)
    spec = ALGORITHMS["dp-hmc"]
    kernel = spec.build(model, spec.prepare(dict(DPHMC, grad_clip=1e-9), model, data_a.shape[0]))
    cache_key = ("tests/kernels/test_samplers_halton.py::two_data_sets_all_clipped", id(kernel))
    return [run_chains(kernel, jnp.zeros((3, 2)), jax.random.key(0), 64, data=data,
                       progress=False, cache_key=cache_key) for data in (data_a, data_b)]


def test_dp_hmc_step_sizes_are_data_independent_and_in_range(two_data_sets_all_clipped):
    (pos_a, info_a), (pos_b, info_b) = two_data_sets_all_clipped
    # Different data, other chains (the accept decisions read the clipped log-likelihood ratios).
    assert not np.allclose(np.asarray(pos_a), np.asarray(pos_b))
    steps = np.asarray(info_a.step_size)
    np.testing.assert_array_equal(steps, np.asarray(info_b.step_size))
    assert np.all((steps > 0) & (steps < DPHMC["step_size"]))
    # Each chain has its own scrambling, stratified over its first 64 iterations.
    assert len({tuple(s) for s in steps}) == steps.shape[0]
    for s in steps:
        cells = np.floor(s / DPHMC["step_size"] * 64).astype(int)
        np.testing.assert_array_equal(np.sort(cells), np.arange(64))


def test_dp_hmc_releases_L_plus_1_gradients_per_iteration(two_data_sets_all_clipped):
    # With a clip bound far below every per-example gradient norm, each release clips all n
    # gradients, so grad_clip_fraction = (#releases · n) / ((L+1) · n) = 1 exactly iff each
    # iteration makes L+1 gradient releases (k(L+1) in total, as the accountant charges).
    # (The number of releases does not depend on the step size, jittered or not.)
    for _, info in two_data_sets_all_clipped:
        np.testing.assert_array_equal(np.asarray(info.grad_clip_fraction), 1.0)


def test_no_jitter_gives_the_base_step_size():
    # jitter=False: every iteration's step is η itself (the Halton mask is still drawn, and
    # jitter=True gives the multipliers instead). dp-hmc and hmc take their step from this
    # function; a DP-HMC chain built with jitter=False is the slow test below.
    key, mask = jax.random.key(4), jnp.uint32(0)
    f = jax.jit(jittered_step_size, static_argnums=(3, 4, 5))
    for it in (0, 1, 7, 64):
        eta, mask = f(key, jnp.uint32(it), mask, 0.05, False, jnp.float64)
        assert float(eta) == 0.05 and eta.dtype == jnp.float64
        jittered, _ = f(key, jnp.uint32(it), mask, 0.05, True, jnp.float64)
        assert 0 < float(jittered) < 0.05
    assert int(mask) == int(draw_mask(key))


@pytest.fixture(scope="module")
def fixed_step_all_clipped():
    """One DP-HMC run with jitter off (and, as in the runs above, every gradient clipped)."""
    model, data = make(2)
    return dphmc_run(model, data, iters=6, jitter=False, grad_clip=1e-9)[1]


# slow: guard test_no_jitter_gives_the_base_step_size (the function dp-hmc's kernel takes its
# step from, without jitter) in the default run; a chain program of its own (~2 CPU-s).
@pytest.mark.slow
def test_jitter_off_gives_constant_step_size(fixed_step_all_clipped):
    info = fixed_step_all_clipped
    np.testing.assert_array_equal(np.asarray(info.step_size), DPHMC["step_size"])
    np.testing.assert_array_equal(np.asarray(info.grad_clip_fraction), 1.0)
