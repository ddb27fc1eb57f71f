"""Subsampled samplers with the data rows split over a device mesh.

The multi-device part runs in a subprocess, because XLA_FLAGS=--xla_force_host_platform_device_count
must be set before JAX initialises. Tolerance: NONE. Sharding changes only how the b rows of a
batch are gathered (masked local gathers, then an integer psum of their bit patterns with exactly
one owner per row), so the batch, the per-example values, their order and the released sums are
those of the unsharded run, and the draws must be bit-identical (compared with np.array_equal).
"""
import jax
import pytest

from dpmcmc.models import preset
from dpmcmc.samplers import ALGORITHMS as _ALGORITHMS
from dpmcmc.samplers.registry import check_mesh
from dpmcmc.records.sharding import data_mesh, shard_rows

# The algorithms that gather a fixed-size batch of rows per iteration (their specs say so).
SUBSAMPLED = tuple(name for name, spec in _ALGORITHMS.items() if spec.data_access == "subsampled")

from host_devices import check

# Run by the session's shared 4-device child (conftest.host_device_results). Same key, same
# draws, with and without the mesh: in the default child function for dp-sgld (gradient batches,
# batch indices from jax.random) and minibatch-penalty in secure mode (log-ratio batches, indices
# from ChaCha20), and in the slow one for dp-barker and dp-sgnht, which gather their batches
# through the same batch_rows as those two (dp-sgnht releases through dp-sgld's
# release_batch_grad, dp-barker reads minibatch-penalty's log-ratio batch statistics), and for
# minibatch-penalty outside secure mode (the same gather and log-ratio pass as its secure run, on
# indices drawn as dp-sgld's are).
HOST_DEVICE_CHILD = "sharding_subsampled:gather_draws_program"
# Its tests are slow (the suite's CPU budget: the 4-device child compiles every program of the
# module); the default run keeps the mesh path on one device
# (test_sharding.py::test_one_device_mesh_matches_plain_run)
# and the subsampled samplers' mesh arguments (test_mesh_arguments_for_subsampled_samplers).
# The slow tests' cases, run in the same child when they are selected (conftest._child_functions).
HOST_DEVICE_CHILD_SLOW = "sharding_subsampled:every_sampler"


@pytest.fixture(scope="module")
def child(host_device_results):
    return check(host_device_results[__name__])


@pytest.mark.slow  # suite budget: see the note at HOST_DEVICE_CHILD
def test_gather_is_bit_exact_on_four_host_devices(child):
    # 10003 rows over 4 devices: 2501 per device (one padding row on the last).
    assert child["shard_shapes"] == [[1, 2501, 3]]
    assert child["gather_bits_equal"]


def _same_draws(out):
    for name, same in out["identical"].items():
        assert out["moved"][name] > 1e-4, name  # the chains moved: the comparison has power
        assert same, name


@pytest.mark.slow  # suite budget: see the note at HOST_DEVICE_CHILD
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


@pytest.mark.slow  # suite budget: see the note at HOST_DEVICE_CHILD
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
