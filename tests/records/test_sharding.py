"""Data sharding over a device mesh gives the same draws as an unsharded run.

The multi-device part runs in a subprocess, because XLA_FLAGS=--xla_force_host_platform_device_count
must be set before JAX initialises. Tolerance: sharding only reorders the sums (each device sums
its blocks, compensated, then one psum), so every released sum agrees to float64 rounding
(≲ 1e-12 relative); the chains then agree to 1e-9 absolute over 25 iterations unless an accept
test falls within ~1e-12 of its threshold, which has negligible probability at these sizes.
"""
import jax
import numpy as np
import pytest

import dpmcmc
from dpmcmc.models import preset
from dpmcmc.samplers.registry import check_mesh
from dpmcmc.records.sharding import data_mesh, shard_data

from host_devices import check

# Run by the session's shared 4-device child (conftest.host_device_results). The sharded passes
# of the full-data samplers are compared one by one: dp-penalty's clipped log-ratio sum, dp-hmc's
# clipped gradient sum (on the float32 gradient copy) and log-likelihood sum. Their sharded runs
# end to end are the slow child function: the driver's part of a sharded run (the blocks a
# sharded parameter of the chain program, the draws those of the unsharded run) is
# test_driver_data_argument's 4-device test, on dp-penalty's preset batch functions.
HOST_DEVICE_CHILD = "sharding:passes"
# The slow test's cases, run in the same child when it is selected (conftest._child_functions).
HOST_DEVICE_CHILD_SLOW = "sharding:draws"


def _same_draws(out):
    for alg, err in out["draw_err"].items():
        assert out["draws_moved"][alg] > 0, alg  # the chains did move: the comparison has power
        assert err < 1e-9, (alg, err)


def test_sharded_equals_unsharded_on_four_host_devices(host_device_results):
    out = check(host_device_results[__name__])
    # 10011 rows in blocks of 512 = 20 blocks (the last one padded), 5 per device.
    assert out["shard_shapes"] == [[5, 2, 512]]
    assert set(out["rel_err"]) == {"llr", "grad", "loglik"}
    for name, err in out["rel_err"].items():
        assert err < 1e-12, (name, err)


# slow: each sampler's sharded passes are compared one by one by
# test_sharded_equals_unsharded_on_four_host_devices, and the driver's sharded run end to end by
# test_driver_data_argument.py::test_sharded_full_data_run_takes_its_blocks_as_a_sharded_parameter
# (dp-penalty under the mesh against the unsharded run, to the same 1e-9).
@pytest.mark.slow
def test_sharded_full_data_draws_equal_unsharded_on_four_host_devices(host_device_results):
    out = check(host_device_results[__name__ + ":slow"])
    assert set(out["draw_err"]) == {"dp-penalty", "dp-hmc"}
    _same_draws(out)


def test_mesh_argument_errors():
    p = preset("banana-2d", n=500)
    mesh = data_mesh(jax.devices()[:1])
    with pytest.raises(TypeError, match="mesh"):
        dpmcmc.sample(p.model, p.data, "dp-penalty", delta=1e-5, iterations=5, tau=0.17,
                      clip=0.15, proposal_std=0.06, mesh="all-devices", progress=False)
    with pytest.raises(ValueError, match="mesh"):
        check_mesh(mesh, "no-such-algorithm")
    from jax.sharding import Mesh

    two_axes = Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ("a", "b"))
    with pytest.raises(ValueError, match="one axis"):
        check_mesh(two_axes, "dp-hmc")
    with pytest.raises(TypeError, match="mesh"):
        shard_data(p.data, None)


def test_one_device_mesh_matches_plain_run():
    p = preset("banana-2d", n=3000)
    mesh = data_mesh(jax.devices()[:1])
    kw = dict(chains=2, iterations=20, key=jax.random.key(1), theta0=np.asarray(p.theta_true),
              delta=1e-5, tau=0.17, clip=0.15, proposal_std=0.06, progress=False)
    a = dpmcmc.sample(p.model, p.data, "dp-penalty", **kw).samples
    b = dpmcmc.sample(p.model, p.data, "dp-penalty", mesh=mesh, **kw).samples
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
