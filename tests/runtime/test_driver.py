"""The chain driver: chunking invariance, independent chains, compiled iterations."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS, Info, Kernel, run_chains


def gaussian_setup(n=100, dim=2, seed=0):
    model = Model(lambda th, x: -0.5 * jnp.sum((x - th) ** 2), lambda th: -0.5 * jnp.sum(th ** 2) / 100.0, dim)
    data = jnp.asarray(np.random.default_rng(seed).normal(size=(n, dim)))
    return model, data


def kernel_for(name, model, data, **params):
    spec = ALGORITHMS[name]
    return spec.build(model, spec.prepare(params, model, data.shape[0]))


PARAMS = {
    "rwmh": dict(proposal_std=0.1),
    "hmc": dict(step_size=0.1, leapfrog_steps=3),
    "dp-penalty": dict(tau=0.5, clip=5.0, proposal_std=0.1, mode="guided-walk"),
    "dp-hmc": dict(tau_l=0.5, tau_g=0.5, clip=5.0, grad_clip=3.0, step_size=0.1, leapfrog_steps=3),
}


_REFERENCE = {}


def reference_run(name):
    """``(kernel, positions, infos)`` of the unchunked 3-chain, 23-iteration run of ``name`` with
    key 42, run once per module: test_chunking_does_not_change_draws compares its chunked runs
    with it, test_outputs_are_numpy_convertible_with_documented_shapes reads its outputs. Kept
    per XLA optimisation setting (slow tests compile at level 1, see conftest), whose rounding
    the chunked runs must share."""
    cache = (name, jax.config.read("jax_disable_most_optimizations"))
    if cache not in _REFERENCE:
        model, data = gaussian_setup()
        kernel = kernel_for(name, model, data, **PARAMS[name])
        pos, info = run_chains(kernel, jnp.zeros((3, 2)), jax.random.key(42), 23, data=data,
                               progress=False)
        _REFERENCE[cache] = (kernel, data, pos, info)
    return _REFERENCE[cache]


# Every chunk size is one compilation (seconds on a busy CPU): a few sizes for the simplest
# kernel, one for the others (their states carry Halton masks and guided-walk directions).
@pytest.mark.parametrize("name,chunks", [
    ("rwmh", (1, 5)),
    # slow: a last chunk of one iteration; chunks of 5 (a partial last chunk of 3) and of 1 are
    # the case above.
    pytest.param("rwmh", (22,), marks=pytest.mark.slow),
    pytest.param("hmc", (7,), marks=pytest.mark.slow),
    pytest.param("dp-penalty", (7,), marks=pytest.mark.slow),
    # slow: chunking is the driver's, alike for every kernel: the rwmh case above, and for a
    # private kernel whose state carries guided-walk directions
    # test_chunk_cache.py::test_the_cache_changes_no_draw_at_any_chunk_size (dp-penalty in
    # chunks of 5 of 24 against one chunk, bit for bit) and
    # test_chunk_cache.py::test_secure_mode_and_warmup_keep_the_draws (chunks of 6 of 16).
    # test_outputs_are_numpy_convertible_with_documented_shapes still runs dp-hmc's reference.
    pytest.param("dp-hmc", (7,), marks=pytest.mark.slow),
])
def test_chunking_does_not_change_draws(name, chunks):
    kernel, data, ref_pos, ref_info = reference_run(name)
    theta0 = jnp.zeros((3, 2))
    key = jax.random.key(42)
    assert ref_pos.shape == (3, 23, 2)
    for chunk in chunks:
        pos, info = run_chains(kernel, theta0, key, 23, data=data, progress=False, chunk_size=chunk)
        np.testing.assert_array_equal(np.asarray(pos), np.asarray(ref_pos))
        for a, b in zip(info, ref_info):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # Another key, other draws.
    other, _ = run_chains(kernel, theta0, jax.random.key(43), 23, data=data, progress=False,
                          chunk_size=chunks[0])
    assert not np.array_equal(np.asarray(other), np.asarray(ref_pos))


def test_outputs_are_numpy_convertible_with_documented_shapes():
    # DP-HMC's unchunked run of test_chunking_does_not_change_draws (3 chains, 23 iterations):
    # the same program, run once for both tests.
    _, _, pos, info = reference_run("dp-hmc")
    assert np.asarray(pos).shape == (3, 23, 2)
    for field in ("accepted", "clip_fraction", "diverged", "grad_clip_fraction", "step_size"):
        assert np.asarray(getattr(info, field)).shape == (3, 23)
    assert np.asarray(info.accepted).dtype == bool
    assert np.asarray(info.diverged).dtype == bool
    # Draws are the recorded states: a rejection repeats the previous draw.
    p = np.asarray(pos)
    acc = np.asarray(info.accepted)
    moved = np.any(p[:, 1:] != p[:, :-1], axis=-1)
    np.testing.assert_array_equal(moved, acc[:, 1:])
    # Non-trivial: both accepted and rejected proposals are in the comparison.
    assert acc[:, 1:].any() and not acc[:, 1:].all()


_RWMH = {}


def rwmh_kernel():
    """``(kernel, data, cache_key)``: one rwmh kernel for the module, whose runs go through the
    driver's program cache, so that test_progress_bar_shows_only_iteration_counts and
    test_iterations_are_compiled_not_a_python_loop run the program
    test_chains_are_independent_and_match_single_chain_runs compiled (same chains, same chunk
    length) instead of compiling their own, whichever runs first. Its step counts its traces
    in ``_RWMH["traces"]`` (a Python side effect: it runs only while the step is traced);
    ``_RWMH["inner"]`` is the same kernel without the count."""
    if not _RWMH:
        model, data = gaussian_setup()
        inner = kernel_for("rwmh", model, data, **PARAMS["rwmh"])
        traces = _RWMH["traces"] = []

        def step(key, state, data):
            traces.append(1)  # runs only while tracing
            return inner.step(key, state, data)

        kernel = Kernel(inner.init, step)
        _RWMH["inner"] = inner
        _RWMH["run"] = (kernel, data, ("tests/runtime/test_driver.py::rwmh", id(kernel)))
    return _RWMH["run"]


CHAINS, ITERS = 40, 200
SINGLE = 15  # iterations of the single-chain runs compared with the batched one (50 until stop 42)


def test_chains_are_independent_and_match_single_chain_runs():
    kernel, data, cache_key = rwmh_kernel()
    chains, iters = CHAINS, ITERS
    key = jax.random.key(7)
    pos, _ = run_chains(kernel, jnp.zeros((chains, 2)), key, iters, data=data, progress=False,
                        chunk_size=iters, cache_key=cache_key)
    pos = np.asarray(pos)
    # Chain c is exactly the single-chain run with key split(key, chains)[c] (its init and each
    # step jitted: one program each, not one per operation), over its first SINGLE iterations:
    # step t's key is fold_in(chain key, t) at every t, so a longer prefix adds Python-loop
    # dispatches (~1 ms each), not a different computation.
    keys = jax.random.split(key, chains)
    inner = _RWMH["inner"]  # the kernel's step without its trace count
    init = jax.jit(inner.init)
    step = jax.jit(lambda k, t, s: inner.step(jax.random.fold_in(k, t), s, data))
    for c in (0, 17):
        state = init(jnp.zeros(2), data)
        single = []
        for t in range(SINGLE):
            state, _ = step(keys[c], jnp.uint32(t), state)
            single.append(np.asarray(state.position))
        np.testing.assert_allclose(np.stack(single), pos[c, :SINGLE], rtol=1e-12, atol=1e-14)
    # Identical starting points, yet the chains differ, and increments of different chains are
    # uncorrelated: |Pearson r| of chain 0 vs chain c over 199 increments, Bonferroni over 39
    # pairs at family false-alarm rate 1e-3.
    inc = np.diff(pos[:, :, 0], axis=1)
    pvals = [stats.pearsonr(inc[0], inc[c]).pvalue for c in range(1, chains)]
    assert min(pvals) > 1e-3 / (chains - 1)
    assert len({tuple(np.round(pos[c, -1], 12)) for c in range(chains)}) == chains


def test_iterations_are_compiled_not_a_python_loop():
    # How often the driver traces a step is the driver's, whatever the kernel: rwmh's is the
    # cheapest chain program to compile (dp-penalty's chains were compiled here until stop 40;
    # its runs in chunks are test_chunk_cache.py's). The module's rwmh kernel counts its traces
    # over every run of the module (test_chains_are_independent_and_match_single_chain_runs and
    # test_progress_bar_shows_only_iteration_counts run the same program for 200 iterations).
    kernel, data, cache_key = rwmh_kernel()
    # 1100 iterations in chunks of 200 (the last one partial): the step is traced for the shape
    # of Info and once for the compiled scan, never per iteration, per chunk or per run. (One
    # program for every run of the module: a program of its own cost ~0.5 CPU-s until stop 42.)
    pos, _ = run_chains(kernel, jnp.zeros((CHAINS, 2)), jax.random.key(0), 1100, data=data,
                        progress=False, chunk_size=ITERS, cache_key=cache_key)
    assert pos.shape == (CHAINS, 1100, 2)
    assert 1 <= len(_RWMH["traces"]) <= 2


def test_progress_bar_shows_only_iteration_counts(capsys):
    kernel, data, cache_key = rwmh_kernel()
    # One chunk of the whole run: the program of test_chains_are_independent_and_match_single_
    # chain_runs (the bar's chunks are the driver's, whatever their length).
    pos, _ = run_chains(kernel, jnp.zeros((CHAINS, 2)), jax.random.key(0), ITERS, data=data,
                        progress=True, chunk_size=ITERS, cache_key=cache_key)
    assert pos.shape == (CHAINS, ITERS, 2)
    out = capsys.readouterr()
    text = out.out + out.err
    assert f"{ITERS}/{ITERS}" in text
    # Nothing computed from the data (acceptance rates etc.) is printed.
    assert "accept" not in text.lower()


@pytest.mark.parametrize("kwargs,match", [
    (dict(num_iterations=0), "num_iterations"),
    (dict(num_iterations=2.5), "num_iterations"),
    (dict(num_iterations=5, chunk_size=0), "chunk_size"),
])
def test_driver_argument_errors(kwargs, match):
    model, data = gaussian_setup()
    kernel = kernel_for("rwmh", model, data, **PARAMS["rwmh"])
    n_it = kwargs.pop("num_iterations")
    with pytest.raises(ValueError, match=match):
        run_chains(kernel, jnp.zeros((2, 2)), jax.random.key(0), n_it, data=data, progress=False,
                   **kwargs)


def test_theta0_must_be_two_dimensional():
    model, data = gaussian_setup()
    kernel = kernel_for("rwmh", model, data, **PARAMS["rwmh"])
    with pytest.raises(ValueError, match="theta0"):
        run_chains(kernel, jnp.zeros(2), jax.random.key(0), 5, data=data, progress=False)


def test_info_contract_fields():
    assert Info._fields[:3] == ("accepted", "clip_fraction", "diverged")


# Run by the session's shared child with JAX_ENABLE_X64=0 (conftest.x64_off_results) where a
# test below is selected (both are slow, the first in tests/suite_budget.py): a private sampler, whose privacy noise the fixed bug
# drew in float32. The driver scopes 64-bit types to every run alike; the other samplers run in
# the slow child function: the non-private ones (their runs carry no privacy noise), and
# dp-penalty, whose run through dpmcmc.sample with x64 off is
# also test_noise_source.py::test_noise_is_float64_with_x64_off_and_the_setting_is_kept (float64
# draws, the setting still off afterwards).
X64_OFF_CHILD = "driver:private"
X64_OFF_CHILD_SLOW = "driver:non_private"


def test_samplers_run_in_float32_mode(x64_off_results):  # slow: tests/suite_budget.py
    out = x64_off_results[__name__]
    assert "error" not in out, out["error"]
    assert out == {"x32": ["dp-hmc"]}


# slow: dp-penalty's float64 run with x64 off is also
# test_noise_source.py::test_noise_is_float64_with_x64_off_and_the_setting_is_kept.
@pytest.mark.slow
def test_non_private_samplers_run_in_float32_mode(x64_off_results):
    out = x64_off_results[__name__ + ":slow"]
    assert "error" not in out, out["error"]
    assert out == {"x32": ["rwmh", "hmc", "dp-penalty"]}
