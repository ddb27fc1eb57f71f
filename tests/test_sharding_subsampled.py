"""Subsampled samplers with the data rows split over a device mesh.

The multi-device part runs in a subprocess, because XLA_FLAGS=--xla_force_host_platform_device_count
must be set before JAX initialises. Tolerance: NONE. Sharding changes only how the b rows of a
batch are gathered (masked local gathers, then an integer psum of their bit patterns with exactly
one owner per row), so the batch, the per-example values, their order and the released sums are
those of the unsharded run, and the draws must be bit-identical (compared with np.array_equal).
"""
import textwrap

import jax
import pytest

from dpmcmc.models import preset
from dpmcmc.samplers import ALGORITHMS as _ALGORITHMS
from dpmcmc.samplers.registry import check_mesh
from dpmcmc.records.sharding import data_mesh, shard_rows

# The algorithms that gather a fixed-size batch of rows per iteration (their specs say so).
SUBSAMPLED = tuple(name for name, spec in _ALGORITHMS.items() if spec.data_access == "subsampled")

from host_devices import check

# Same key, same draws, with and without the mesh, for the algorithms in ``cases``: run by the
# default child below for dp-sgld (gradient batches, batch indices from jax.random) and
# minibatch-penalty in secure mode (log-ratio batches, indices from ChaCha20), and by the slow
# child for dp-barker and dp-sgnht, which gather their batches through the same batch_rows as
# those two (dp-sgnht releases through dp-sgld's release_batch_grad, dp-barker reads
# minibatch-penalty's log-ratio batch statistics), and for minibatch-penalty outside secure mode
# (the same gather and log-ratio pass as its secure run, on indices drawn as dp-sgld's are).
# ``plain_only``: algorithms run without the mesh only, as the reference a secure run of the
# same key must differ from.
_SETUP = r"""
    import json, os, re, time
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    import dpmcmc
    from dpmcmc.models import preset
    from dpmcmc.samplers import ALGORITHMS
    from dpmcmc.kernels.minibatch import batch_rows
    from dpmcmc.records.sharding import data_mesh, shard_rows
    from dpmcmc.secure import secure_key

    out = {"devices": len(jax.devices())}
    mesh = data_mesh()
    N = 10003                          # 4 x 2501 - 1: the last device holds one padding row
    p = preset("banana-2d", n=N)
    runs = {
        "dp-barker": dict(batch_size=200, proposal_std=0.02),
        "minibatch-penalty": dict(tau=0.5, batch_size=200, clip=0.5, proposal_std=0.02),
        "dp-sgld": dict(step_size=1e-5, batch_size=200, noise_multiplier=1.0, grad_clip=3.0),
        "dp-sgnht": dict(step_size=3e-4, batch_size=200, noise_multiplier=1.0, grad_clip=3.0),
    }

    def same_draws(cases, plain_only=()):
        out["identical"], out["moved"], out["seconds"], plain = {}, {}, {}, {}
        t0 = time.time()
        for alg in plain_only:
            plain[alg] = dpmcmc.sample(p.model, p.data, alg, chains=2, iterations=12,
                                       key=jax.random.key(3), theta0=np.asarray(p.theta_true),
                                       delta=1e-5, progress=False, **runs[alg]).samples
        for alg, secure in cases:
            kw = dict(chains=2, iterations=12, key=jax.random.key(3),
                      theta0=np.asarray(p.theta_true), delta=1e-5, progress=False, **runs[alg])
            if secure:
                kw["secure"] = secure_key(5)
            name = alg + ("/secure" if secure else "")
            a = dpmcmc.sample(p.model, p.data, alg, **kw).samples
            b = dpmcmc.sample(p.model, p.data, alg, mesh=mesh, **kw).samples
            out["identical"][name] = bool(np.array_equal(a, b))
            out["moved"][name] = float(np.max(np.abs(a[:, -1] - a[:, 0])))
            if secure:  # secure mode was on: its batches and noise differ from the plain run's
                out["secure_differs"] = not np.array_equal(a, plain[alg])
            else:
                plain[alg] = a
            out["seconds"][name] = time.time() - t0
            t0 = time.time()
"""

# Run by the session's shared 4-device child (conftest.host_device_results).
HOST_DEVICE_CHILD = textwrap.dedent(_SETUP + r"""
    # 1. The gather alone, on values a float sum could alter: -0.0, NaN payloads, subnormals.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3))
    x[5, 0] = -0.0
    x[2501, 1] = np.frombuffer(np.uint64(0x7FF8000000000123).tobytes(), np.float64)[0]
    x[7000, 2] = 5e-324
    x[N - 1] = [np.inf, -np.inf, -0.0]
    sx = shard_rows(x, mesh)
    out["shard_shapes"] = sorted({tuple(s.data.shape) for s in sx.blocks.addressable_shards})
    idx = jnp.asarray([0, 5, 2500, 2501, 5002, 7000, 7502, N - 1, N - 2, 3, 5], jnp.int32)
    got = np.asarray(jax.jit(lambda i: batch_rows(sx, i))(idx))
    want = x[np.asarray(idx)]
    out["gather_bits_equal"] = bool(np.array_equal(got.view(np.uint64), want.view(np.uint64)))

    # 2. Same key, same draws, through dpmcmc.sample.
    same_draws([("dp-sgld", False), ("minibatch-penalty", True)], plain_only=["minibatch-penalty"])

    # 3. The compiled program: no all-gather, and no buffer holding all N rows.
    def big_shapes(txt):
        found = []
        for ln in txt.splitlines():
            for dims in re.findall(r"[a-z0-9]+\[([0-9,]+)\]", ln):
                d = [int(v) for v in dims.split(",") if v]
                if d and max(d) >= N - 1:
                    found.append(ln.strip()[:160])
        return found

    spec = ALGORITHMS["dp-sgld"]
    prm = spec.prepare(dict(runs["dp-sgld"]), p.model, N)
    texts = {}
    kernel = spec.build(p.model, prm)
    keys = jax.random.split(jax.random.key(0), 2)
    step_all = jax.vmap(kernel.step, in_axes=(0, 0, None))
    # Sharded: the rows are the step's data argument, a parameter of the compiled program.
    data = spec.layout(np.asarray(p.data, np.float64), prm, p.model, mesh=mesh)
    state = jax.vmap(kernel.init, in_axes=(0, None))(jnp.tile(p.theta_true, (2, 1)), data)
    texts["sharded"] = jax.jit(step_all).lower(keys, state, data).compile().as_text()
    # Plain rows closed over (the detector's power): a constant with all N rows.
    plain = jnp.asarray(p.data, jnp.float64)
    texts["plain"] = jax.jit(lambda k, s: step_all(k, s, plain)).lower(keys, state).compile().as_text()
    sh = texts["sharded"]
    out["all_gather"] = "all-gather" in sh
    out["big_sharded"] = big_shapes(sh)
    out["big_plain"] = big_shapes(texts["plain"])   # the detector's power: a closed-over array
    out["param_sharded"] = bool(re.search(r"f64\[1,2501,2\]\S* parameter\(\d+\), sharding=\{devices=\[4",
                                          sh))
    out["batch_allreduce"] = bool(re.search(r"u64\[2,200,2\]\S* all-reduce\(", sh))
    print("RESULT" + json.dumps(out))
""")

# The slow tests' cases, run in the same child when they are selected (conftest._child_scripts).
HOST_DEVICE_CHILD_SLOW = textwrap.dedent(_SETUP + r"""
    same_draws([("dp-barker", False), ("dp-sgnht", False), ("minibatch-penalty", False)])
    print("RESULT" + json.dumps(out))
""")


@pytest.fixture(scope="module")
def child(host_device_results):
    return check(host_device_results[__name__])


def test_gather_is_bit_exact_on_four_host_devices(child):
    # 10003 rows over 4 devices: 2501 per device (one padding row on the last).
    assert child["shard_shapes"] == [[1, 2501, 3]]
    assert child["gather_bits_equal"]


def _same_draws(out):
    for name, same in out["identical"].items():
        assert out["moved"][name] > 1e-4, name  # the chains moved: the comparison has power
        assert same, name


def test_sharded_draws_equal_unsharded_draws(child):
    """A gradient sampler and a log-ratio sampler (in secure mode); the other two, and the
    log-ratio sampler outside secure mode, are test_sharded_draws_equal_unsharded_draws_every_sampler
    (slow)."""
    assert set(child["identical"]) == {"dp-sgld", "minibatch-penalty/secure"}
    assert child["secure_differs"]
    _same_draws(child)


# slow: dp-barker and dp-sgnht gather through the same batch_rows as dp-sgld and
# minibatch-penalty (see above), and minibatch-penalty outside secure mode is the same sharded
# gather and pass as its secure run, all compared in test_sharded_draws_equal_unsharded_draws.
@pytest.mark.slow
def test_sharded_draws_equal_unsharded_draws_every_sampler(child, host_device_results):
    slow = check(host_device_results[__name__ + ":slow"])
    assert set(child["identical"]) | set(slow["identical"]) == (
        set(SUBSAMPLED) | {"minibatch-penalty/secure"})
    _same_draws(slow)


def test_compiled_program_never_holds_all_rows(child):
    assert not child["all_gather"]
    assert child["big_sharded"] == [], child["big_sharded"]
    # The same check flags the unsharded kernel, whose closed-over data are a constant.
    assert any("constant" in ln for ln in child["big_plain"]), child["big_plain"]
    # The rows enter as a sharded parameter; a batch is assembled by one all-reduce of b rows.
    assert child["param_sharded"]
    assert child["batch_allreduce"]


def test_mesh_arguments_for_subsampled_samplers():
    mesh = data_mesh(jax.devices()[:1])
    for alg in SUBSAMPLED:
        assert check_mesh(mesh, alg) == "rows"
    with pytest.raises(ValueError, match="mesh"):
        check_mesh(mesh, "no-such-algorithm")
    p = preset("banana-2d", n=50)
    with pytest.raises(TypeError, match="mesh"):
        shard_rows(p.data, "all-devices")
    with pytest.raises(ValueError, match="axis_name"):
        shard_rows(p.data, mesh, axis_name="cols")
    rows = shard_rows(p.data, mesh)
    assert rows.shape == (50, 2) and rows.block_size == 50
