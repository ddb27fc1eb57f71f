"""The chain driver passes the kernel's data to the compiled run as an argument.

``jax.jit`` embeds every concrete array a traced function closes over as a constant of the
compiled program, so a kernel closing over its data would copy all ``n`` rows into the executable
(and, under a mesh, into every device's program). Kernels therefore take their data as an
argument (``step(key, state, data)``), ``dpmcmc.sample`` lays the data out once and hands them
to the driver (``run_chains(kernel, ..., data=...)``), which passes them to the compiled program
as a parameter. Checked here on the optimised HLO text of the compiled chunk program: no
constant has as many elements as the data have rows, the data are entry parameters, and the
same kernel with its data closed over (the path kernels took before they took data as an
argument) does hold the full-size constant (so the check can fail). The draws are bit-identical
to those of the closure path: the same operations run on the same values, only read from a
parameter instead of a constant.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpmcmc
from dpmcmc import api
from dpmcmc.models import banana as banana_model
from dpmcmc.samplers import ALGORITHMS, Kernel, compiled_chunk, run_chains
from dpmcmc.secure import secure_key

from host_devices import check

# Blocks of 512 rows (3 blocks, the last one padded), the blocked layout that n > 2 * 4096 rows
# get by default on the CPU (blocks of 4096), at a seventh of the rows: the programs, their
# parameters and the closure path's data-sized constant are the same in kind, cheaper to
# compile (as tests/runtime/test_chunk_cache.py does).
N = 1201
PARAMS = {
    "dp-penalty": dict(tau=0.17, proposal_std=0.06, clip=0.15, block_size=512),
    # Blocks of 512 rows (3 here) and the broadcast-θ reverse gradient pass. The default layout
    # on CPU, one block with per-record gradients, gives the closure path (the data compile-time
    # constants) draws that differ from the argument path's by up to 5e-12: the same kernel
    # compiled over constant data rounds differently there.
    "dp-hmc": dict(tau_l=0.1, tau_g=0.55, step_size=0.006, leapfrog_steps=3, clip=0.1,
                   grad_clip=0.05, block_size=512),
    "minibatch-penalty": dict(tau=1.0, batch_size=100, clip=0.2, proposal_std=0.01),
}
CHAINS = 2
ITERATIONS = 12

_CONSTANT = re.compile(r"=\s*(\w+)\[([\d,]*)\]\S*\s+constant\(")
_PARAMETER = re.compile(r"=\s*(\w+)\[([\d,]*)\]\S*\s+parameter\((\d+)\)(.*)")


def constant_sizes(hlo: str) -> list:
    """``(dtype, shape, elements)`` of every array constant in an HLO text."""
    out = []
    for dtype, dims in _CONSTANT.findall(hlo):
        shape = tuple(int(d) for d in dims.split(",") if d)
        out.append((dtype, shape, int(np.prod(shape, dtype=np.int64))))
    return out


def entry_parameters(hlo: str) -> list:
    """``(dtype, shape, rest of line)`` of the entry computation's parameters."""
    entry = hlo[hlo.index("\nENTRY"):]
    entry = entry[:entry.index("\n}")]
    return [(dt, tuple(int(d) for d in dims.split(",") if d), rest)
            for dt, dims, _, rest in _PARAMETER.findall(entry)]


@pytest.fixture(scope="module")
def banana():
    # The banana-2d preset's model (no batch functions), on records drawn with NumPy from its
    # likelihood at its theta_true = (0, 3) (x ~ N((0, 3), diag(2000, 2500))): the preset's own
    # generator runs op by op, ~0.7 CPU-s of programs compiled for data whose values the checks
    # here do not read (they compare programs and two runs on the same data).
    model = banana_model(2, a=20.0, sigma_sq=(2000.0, 2500.0), sigma0_sq=1000.0,
                         batch_functions=False)
    theta_true = np.array([0.0, 3.0])
    data = theta_true + np.random.default_rng(0).normal(size=(N, 2)) * np.sqrt([2000.0, 2500.0])
    return model, api.validate_data(data), np.tile(theta_true, (CHAINS, 1))


def closed_over(kernel, data):
    """``kernel`` with ``data`` closed over: the data become constants of any program traced
    from it, as when kernels held their data by closure. Its own data argument is ignored."""
    return Kernel(lambda theta, _data: kernel.init(theta, data),
                  lambda key, state, _data: kernel.step(key, state, data))


_PATHS = {}


def both_paths(algorithm, model, data):
    """The run as ``dpmcmc.sample`` runs it (its plan: kernel builder, laid-out data, compile-cache
    key), and the same kernel closing over the same laid-out data. Made once per algorithm and
    module (the tests only read them), so that the closure kernel's program, compiled through the
    driver's program cache under :func:`closure_key`, is compiled once for the tests that
    inspect and run it."""
    if algorithm not in _PATHS or _PATHS[algorithm][0] is not data:
        planned = api.plan_run(model, data, algorithm, chains=CHAINS, iterations=ITERATIONS,
                               delta=1e-5, key=jax.random.key(0), progress=False,
                               **PARAMS[algorithm])
        laid_out = planned.layout()
        closure = closed_over(ALGORITHMS[algorithm].build(model, planned.params), laid_out)
        _PATHS[algorithm] = (data, (planned, laid_out, closure))
    return _PATHS[algorithm][1]


def closure_key(algorithm, closure):
    """The program-cache key of ``both_paths``' closure kernel of ``algorithm`` (the kernel object
    itself in it: one kernel, one program). Its program holds the data as constants; the suite
    writes no persistent compilation cache (conftest), so that program stays in this process."""
    return ("closure-path", algorithm, id(closure))


def _slow_penalty(algorithms):
    # slow: dp-penalty's case. Its data-argument program (blocks and mask as entry parameters,
    # no data-sized constant) is checked under a mesh by
    # test_sharded_full_data_run_takes_its_blocks_as_a_sharded_parameter and unsharded through
    # dp-hmc's case (the same block layout); its builder path's draws equal the closure path's in
    # test_builder_path_secure_mode_and_chunks_equal_closure_path (planned.build, the kernel
    # dpmcmc.sample runs).
    return [pytest.param(a, marks=pytest.mark.slow) if a == "dp-penalty" else a
            for a in algorithms]


# (minibatch-penalty's case is slow since stop 41: tests/suite_budget.py, with its guards.)
@pytest.mark.parametrize("algorithm", _slow_penalty(sorted(PARAMS)))
def test_compiled_run_holds_no_data_constant(banana, algorithm):
    model, data, theta0 = banana
    planned, laid_out, _ = both_paths(algorithm, model, data)
    # The run's kernel as dpmcmc.sample builds it, compiled through the driver's program cache
    # for a run of ITERATIONS (as test_sample_draws_equal_the_closure_path runs it): that test
    # then reuses this program instead of compiling it again.
    new = compiled_chunk(planned.build, theta0, jax.random.key(1), ITERATIONS, data=laid_out,
                         cache_key=planned.cache_key).as_text()
    # The argument path holds no constant anywhere near the data's size (the largest ones are
    # small tables of the model and the sampler). The closure path's program does hold the rows
    # (test_sample_draws_equal_the_closure_path): this check is able to fail.
    assert max((size for _, _, size in constant_sizes(new)), default=0) < N // 10
    # ... and reads the data from entry parameters of the data's full shape and dtype(s).
    data_leaves = [a for a in jax.tree.leaves(laid_out)]
    params = entry_parameters(new)
    for leaf in data_leaves:
        assert (str(jnp.dtype(leaf.dtype)).replace("float", "f").replace("bool", "pred"),
                tuple(leaf.shape)) in {(dt, shape) for dt, shape, _ in params}
    if algorithm == "dp-hmc":
        # DP-HMC's float32 copy for the gradient passes is a parameter too (column-major blocks:
        # the preset's model has no batch functions).
        assert any(dt == "f32" and shape == (3, 2, 512) for dt, shape, _ in params)


# (minibatch-penalty's case is slow since stop 38: tests/suite_budget.py, with its guards.)
@pytest.mark.parametrize("algorithm", _slow_penalty(sorted(PARAMS)))
def test_sample_draws_equal_the_closure_path(banana, algorithm):
    """``dpmcmc.sample`` gives bit for bit the draws of the former kernel-closure run, whose
    program holds the data as constants."""
    model, data, theta0 = banana
    _, _, closure = both_paths(algorithm, model, data)
    # The closure path's program, compiled for the run of ITERATIONS below (which reuses it):
    # it embeds the rows (3 blocks of 4096, or the raw (N, 2) array), so the check of
    # test_compiled_run_holds_no_data_constant can fail.
    old = compiled_chunk(closure, theta0, jax.random.key(1), ITERATIONS,
                         cache_key=closure_key(algorithm, closure)).as_text()
    assert max(size for _, _, size in constant_sizes(old)) >= N
    key = jax.random.key(5)
    res = dpmcmc.sample(model, data, algorithm, chains=CHAINS, iterations=ITERATIONS, key=key,
                        theta0=theta0, delta=1e-5, progress=False, **PARAMS[algorithm])
    # dpmcmc.sample runs the chains with the second half of its key.
    pos, info = run_chains(closure, jnp.asarray(theta0), jax.random.split(key)[1], ITERATIONS,
                           progress=False, cache_key=closure_key(algorithm, closure))
    np.testing.assert_array_equal(res.samples, np.asarray(pos))
    # Every algorithm here is private: its accept flags are released, per draw.
    np.testing.assert_array_equal(res.released.accepted, np.asarray(info.accepted))
    # (Result's per-chain clip fraction is the NumPy mean of the per-iteration ones.)
    np.testing.assert_array_equal(res.diagnostics.clip_fraction,
                                  np.asarray(info.clip_fraction).mean(axis=1))
    # Non-trivial: the chains moved.
    assert np.max(np.abs(res.samples[:, -1] - res.samples[:, 0])) > 0


def test_builder_path_secure_mode_and_chunks_equal_closure_path(banana):
    """Secure mode and chunked runs: same draws; the builder is traced a fixed number of times."""
    model, data, theta0 = banana
    planned, laid_out, _ = both_paths("dp-penalty", model, data)
    calls, data_traced = [], []

    def build(noise):
        calls.append(noise)
        kernel = planned.build(noise)

        def step(key, state, d):
            data_traced.extend(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(d))
            return kernel.step(key, state, d)

        return Kernel(kernel.init, step)

    key = jax.random.key(9)
    secret = secure_key(3).words
    a, ia = run_chains(build, theta0, key, 17, data=laid_out, progress=False, chunk_size=5,
                       secure_secret=secret)
    # Built for the state init and for the one trace of the step, which gives both the Info
    # shape and the compiled chunk program: never per chunk (4 chunks here), and its step never
    # runs on concrete data.
    assert len(calls) == 2
    assert data_traced and all(data_traced)
    # The steps carry the run's secret (the initial states draw no noise).
    assert calls[0] is None and all(c is not None and c.secure for c in calls[1:])
    # Secure mode needs a builder (the secret reaches the kernel through its noise source): the
    # closure path is a builder of kernels closing over the laid-out data.
    spec = ALGORITHMS["dp-penalty"]
    b, ib = run_chains(lambda noise: closed_over(spec.build(model, planned.params, noise), laid_out),
                       theta0, key, 17, data=None, progress=False, chunk_size=5,
                       secure_secret=secret)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    for x, y in zip(jax.tree.leaves(ia), jax.tree.leaves(ib)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_run_chains_kernel_and_data_arguments(banana):
    model, data, theta0 = banana
    planned, laid_out, closure = both_paths("dp-penalty", model, data)
    kernel = planned.build(None)
    key = jax.random.key(0)
    # A ready Kernel cannot carry the run's secret: secure mode needs a builder.
    with pytest.raises(TypeError, match="build"):
        run_chains(kernel, theta0, key, 3, data=laid_out, progress=False,
                   secure_secret=secure_key(3).words)
    with pytest.raises(TypeError, match="Kernel"):
        run_chains(lambda noise: object(), theta0, key, 3, data=laid_out, progress=False)
    with pytest.raises(TypeError, match="kernel"):
        run_chains(object(), theta0, key, 3, data=laid_out, progress=False)
    with pytest.raises(TypeError, match="cache_key"):
        run_chains(kernel, theta0, key, 3, data=laid_out, progress=False, cache_key=[1])
    assert isinstance(kernel, Kernel) and isinstance(closure, Kernel)


# Run by the session's shared 4-device child (conftest.host_device_results).
HOST_DEVICE_CHILD = "driver_data_argument:sharded_parameter"


# slow (suite budget): a 4-device child process; the default run keeps the mesh path on one
# device (test_sharding.py::test_one_device_mesh_matches_plain_run)
# and the data as a parameter, never a constant, on one device (test_compiled_run_holds_no_data_constant).
@pytest.mark.slow
def test_sharded_full_data_run_takes_its_blocks_as_a_sharded_parameter(host_device_results):
    """4 forced host devices: each device's program takes its 4 of the 16 blocks as a parameter
    sharded over the mesh; no constant holds the blocks (the closure path held all 16 on every
    device); a chunked run compiles its chunk program once."""
    out = check(host_device_results[__name__])

    def size(dims):
        return int(np.prod([int(d) for d in dims.split(",") if d], dtype=np.int64))

    # The closure path: every device's program holds all 16 blocks as a constant.
    assert ["f64", "16,2,1024"] in out["old"]["constants"]  # column-major blocks
    # The argument path: no constant of even one device's share of rows (4 × 1024) ...
    assert max((size(dims) for _, dims in out["new"]["constants"]), default=0) < 1024
    # ... and the blocks and the padding mask are parameters of one device's share, split
    # four ways over the mesh.
    params = {(dt, dims): rest for dt, dims, rest in out["new"]["parameters"]}
    assert "devices=[4,1,1]" in params[("f64", "4,2,1024")]
    assert "devices=[4,1]" in params[("pred", "4,1024")]
    # The sharded run gives the unsharded draws (to the rounding of reordered sums, see
    # tests/records/test_sharding.py for the tolerance).
    assert out["draw_err"] <= 1e-9
    assert out["chunk_compilations"] == 1
