"""DP penalty's chunk-local cache of ℓ_j(θ) (``Kernel.cached``, a ``ChunkCache``).

The chain driver carries the n per-record log-likelihoods at each chain's position through a
compiled chunk, so that an iteration evaluates the model once per record (at θ') instead of
twice. The cache is computed from the raw data and is NOT private, so it must never leave the
chunk, and it must change nothing: the draws and every ``Info`` field equal those of the same
kernel stepped without it, bit for bit, whatever the chunk size (the cache is rebuilt at every
chunk start), in secure mode and under warm-up adaptation. Checked at XLA's optimisation level 1
(JAX's default), where a ratio fused into one expression could be rounded differently.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.models.base import Model
from dpmcmc.models import preset
from dpmcmc.samplers import ALGORITHMS, ChunkCache, Kernel, build_dp_penalty, run_chains
from dpmcmc.secure import secure_key

from host_devices import check

# Blocks of 512 rows (3 blocks, the last one padded), as n > 2 * 4096 rows are laid out in
# blocks of 4096 on the CPU by default (the same blocked pass, a seventh of the rows to compile
# and run). The proposal keeps its ratio to the posterior sd (0.015 at n = 9001, tau = 0.3).
N, DIM, CHAINS, ITERS = 1201, 3, 3, 24
PARAMS = dict(tau=0.3, clip=2.0, proposal_std=0.04, mode="guided-walk", block_size=512)

# The draws are compared bit for bit at level 1: every test that runs the kernel is marked
# xla_optimized (test_the_cache_is_used_where_the_model_is_expensive compares no draws).


def _model():
    # Not a preset: an FMA-prone per-record function (a product then a sum), with a log.
    def log_likelihood(theta, x):
        r = x - theta
        return -0.5 * jnp.sum(r * r * jnp.array([1.0, 2.0, 0.5])) + 0.1 * jnp.log1p(x[0] ** 2)

    return Model(log_likelihood, lambda t: -0.5 * jnp.sum(t * t) / 100.0, DIM)


@pytest.fixture(scope="module")
def setup():
    model = _model()
    data = np.random.default_rng(4).normal(0.3, 1.0, size=(N, DIM))
    spec = ALGORITHMS["dp-penalty"]
    params = spec.prepare(dict(PARAMS), model, N)
    laid_out = spec.layout(data, params, model)
    theta0 = np.full((CHAINS, DIM), 0.3) + np.linspace(-0.01, 0.01, CHAINS)[:, None]
    return model, spec, params, laid_out, jnp.asarray(theta0)


def _build(model, params, noise=None, cache=True):
    # The test model is cheap: the cache is forced on (by default it is used only where it pays,
    # see test_the_cache_is_used_where_the_model_is_expensive).
    return build_dp_penalty(model, params["tau"], params["clip"], params["proposal_std"],
                            params["mode"], noise=noise, loglik_cache=cache)


def _equal(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _uncached(kernel):
    return Kernel(kernel.init, kernel.step)


@pytest.fixture(scope="module")
def runs(setup):
    """The uncached reference run, and the cached one in chunks of 5 (its ``on_chunk`` progress
    kept for test_the_cache_never_leaves_the_chunk): two programs, compiled once for the tests
    that read them."""
    model, spec, params, laid_out, theta0 = setup
    kernel = _build(model, params)
    key = jax.random.key(5)
    seen = []
    return dict(
        kernel=kernel, key=key,
        ref=run_chains(_uncached(kernel), theta0, key, ITERS, data=laid_out, progress=False),
        chunked=run_chains(kernel, theta0, key, ITERS, data=laid_out, progress=False,
                           chunk_size=5, on_chunk=seen.append),
        seen=seen)


@pytest.mark.xla_optimized
def test_the_cache_changes_no_draw_at_any_chunk_size(runs):
    """Chunks of 5 of 24 iterations: the cache is rebuilt at every chunk start, the last chunk
    partial. One chunk for the whole run is test_the_cache_changes_no_draw_in_one_chunk (slow)."""
    assert isinstance(runs["kernel"].cached, ChunkCache)
    ref = runs["ref"]
    # The test has power only if the chains move (each accepted move replaces the cache).
    assert 0.2 < float(np.mean(ref[1].accepted)) < 0.95
    _equal(runs["chunked"], ref)


# slow: the cached run in one chunk. Its program is the chunked run's scan at another length
# (test_the_cache_changes_no_draw_at_any_chunk_size); test_secure_mode_and_warmup_keep_the_draws
# (chunks of 6 of 16) and the 4-device child's runs (one chunk of 12 and chunks of 5) compare
# the cached pass with the uncached one as well.
@pytest.mark.slow
@pytest.mark.xla_optimized
def test_the_cache_changes_no_draw_in_one_chunk(setup, runs):
    model, spec, params, laid_out, theta0 = setup
    _equal(run_chains(runs["kernel"], theta0, runs["key"], ITERS, data=laid_out, progress=False),
           runs["ref"])


@pytest.mark.xla_optimized
def test_cached_step_keeps_the_contract(setup):
    """step(key, s, init(s)) == (plain step, init(new state)), bit for bit."""
    model, spec, params, laid_out, theta0 = setup
    kernel = _build(model, params)

    @jax.jit
    def check(key, theta):
        s = kernel.init(theta, laid_out)
        cache = kernel.cached.init(s, laid_out)
        s1, cache1, info1 = kernel.cached.step(key, s, cache, laid_out)
        s2, info2 = kernel.step(key, s, laid_out)
        return (s1, info1), (s2, info2), cache1, kernel.cached.init(s2, laid_out)

    accepted = []
    for i in range(6):
        (a, b, cache1, expected) = check(jax.random.key(i), theta0[i % CHAINS])
        _equal(a, b)
        _equal(cache1, expected)
        accepted.append(bool(a[1].accepted))
        # One value per row of the laid-out blocks (padding included), nothing else.
        assert cache1.shape == laid_out.mask.shape
    assert any(accepted) and not all(accepted)


@pytest.mark.xla_optimized
def test_the_cache_never_leaves_the_chunk(setup, runs):
    """What a run hands out (the state to checkpoints, the draws, the infos) holds no per-record
    array: the state is the kernel's own, whose arrays are all of the parameter's size. (The
    cached run in chunks of 5 of test_the_cache_changes_no_draw_at_any_chunk_size: 24
    iterations, 5 chunks, the last one partial.)"""
    model, spec, params, laid_out, theta0 = setup
    seen = runs["seen"]
    assert len(seen) == 5
    for progress in seen:
        assert type(progress.state).__name__ == "ProposalState"
        assert all(np.asarray(a).shape == (CHAINS, DIM) for a in jax.tree.leaves(progress.state))
        assert all(N not in np.asarray(a).shape and laid_out.mask.size not in np.asarray(a).shape
                   for a in jax.tree.leaves((progress.positions, progress.infos)))


@pytest.mark.slow  # the cache's draws at every chunk size are the default run's
@pytest.mark.xla_optimized
def test_secure_mode_and_warmup_keep_the_draws(setup):
    """One run in secure mode AND under warm-up adaptation (as ``dpmcmc.sample`` builds it with
    both: the adaptive kernel of builders that carry the run's noise source), chunked, against
    the same run uncached: a cache broken by either would change its draws. (Two programs where
    one pair for each costs four.)"""
    from dpmcmc.samplers import ALGORITHMS
    from dpmcmc.kernels.warmup import adaptive_kernel

    model, spec, params, laid_out, theta0 = setup
    key = jax.random.key(8)
    secret = secure_key(11).words
    adaptation = ALGORITHMS["dp-penalty"].adaptation
    base = {k: params[k] for k in (adaptation.step, adaptation.diagonal)}

    def build(noise):
        return adaptive_kernel(lambda over: _build(model, {**params, **over}, noise),
                               adaptation, base, 12)

    def build_uncached(noise):
        return _uncached(build(noise))

    assert build(None).cached is not None
    c = run_chains(build, theta0, key, 16, data=laid_out, progress=False, chunk_size=6,
                   secure_secret=secret)
    d = run_chains(build_uncached, theta0, key, 16, data=laid_out, progress=False,
                   secure_secret=secret)
    _equal(c, d)
    assert 0.0 < float(np.mean(c[1].accepted)) < 1.0


def test_the_cache_is_used_where_the_model_is_expensive():
    """By default the cache holds ℓ_j(θ) only where one model evaluation per record costs more
    than storing it: not for the banana (a few operations per record, where the cache measured
    3× slower), yes for the 10-d Gaussian (a 10 × 10 quadratic form). Decided from the model's
    structure and the data's shape, never from the values; the kernel has its cached step
    either way (an empty cache is the plain pass)."""
    spec = ALGORITHMS["dp-penalty"]
    for name, cached in (("banana-2d", False), ("gaussian-10d", True)):
        p = preset(name, n=50)  # 50 records are all it reads
        data = np.asarray(p.data)
        assert data.shape[0] == 50
        params = spec.prepare(dict(tau=0.1, clip=1.0, proposal_std=0.01), p.model, 50)
        kernel = spec.build(p.model, params)
        forced = _build(p.model, dict(params, mode="random-walk"), cache=True)

        def inits(theta, data):
            state = kernel.init(theta, data)
            return kernel.cached.init(state, data), forced.cached.init(state, data)

        # Traced on shapes alone, never compiled nor run: the decision cannot read a value.
        cache, forced_cache = jax.eval_shape(
            inits, jax.ShapeDtypeStruct((p.model.dim,), jnp.float64),
            jax.ShapeDtypeStruct(data.shape, data.dtype))
        assert (cache is not None) == cached, name
        if cached:
            assert cache.size >= 50
        assert forced_cache is not None


# Run by the session's shared 4-device child (conftest.host_device_results): the cached pass
# under a mesh, each device reading and writing its own blocks' share of the cache.
HOST_DEVICE_CHILD = "chunk_cache:cached_equals_uncached"
# The slow test's case, run in the same child when it is selected (conftest._child_functions).
HOST_DEVICE_CHILD_SLOW = "chunk_cache:sharded_vs_plain"


# slow (suite budget): a 4-device child process; the default run keeps the mesh path on one
# device (test_sharding.py::test_one_device_mesh_matches_plain_run)
# and the cache unsharded (test_the_cache_changes_no_draw_at_any_chunk_size).
@pytest.mark.slow
def test_the_cache_under_a_mesh_changes_no_draw(host_device_results):
    """4 forced host devices: the cached pass over blocks split across the mesh gives the draws
    of the uncached one bit for bit."""
    out = check(host_device_results[__name__])
    assert 0.2 < out["acceptance"] < 0.95
    assert out["cached_equals_uncached"]


# slow: the sharded cached run against the unsharded cached run. The cache changes no draw under
# the mesh (test_the_cache_under_a_mesh_changes_no_draw, bit for bit against the uncached pass)
# nor unsharded (test_the_cache_changes_no_draw_at_any_chunk_size), and the uncached dp-penalty
# pass under the mesh gives the unsharded draws to 1e-9
# (test_driver_data_argument.py::test_sharded_full_data_run_takes_its_blocks_as_a_sharded_parameter).
@pytest.mark.slow
def test_the_cached_pass_under_a_mesh_gives_the_unsharded_draws(host_device_results):
    """The sharded cached run against the unsharded one, whose block sums add in another order:
    within float tolerance."""
    out = check(host_device_results[__name__ + ":slow"])
    assert 0.2 < out["acceptance"] < 0.95
    assert out["sharded_vs_plain"] < 1e-8
