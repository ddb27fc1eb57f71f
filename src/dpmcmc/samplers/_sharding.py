"""Data-parallel sampling: the data rows split over the devices of a ``jax.sharding.Mesh``.

The full-data samplers ("rwmh", "hmc", "dp-penalty", "dp-hmc") read the data only through the
passes of :mod:`dpmcmc.samplers._per_example`. With a mesh, :func:`shard_data` lays the rows out
in blocks as usual and places the blocks of each device on that device; every pass then reduces
its local blocks on each device (compensated sums) and combines the partial sums with one
``psum`` over the mesh axis. Everything after the sum is unchanged: the clipped total is the
same statistic (up to float rounding of the reordered sum), its sensitivity is the same, and the
noise of a private release is drawn once, by :mod:`dpmcmc.samplers._releases`, on the reduced
value with the iteration's key — never per device. Chains, keys and positions are replicated, so
a sharded run with a given key gives the same draws as an unsharded one, to the rounding of the
reordered sums (tests/test_sharding.py).

Multi-host: on several machines, call ``jax.distributed.initialize()`` on every host first, then
build the mesh over ``jax.devices()`` (all hosts' devices) and pass it. See docs/scaling.md for
what has and has not been tested.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import numpy as np

from dpmcmc.samplers._per_example import PreparedData, prepare_data

Array = Any

__all__ = ["SHARDABLE", "DEFAULT_AXIS", "data_mesh", "check_mesh", "shard_data"]

#: Algorithms whose data accesses are full-data passes, which sharding splits.
SHARDABLE = ("rwmh", "hmc", "dp-penalty", "dp-hmc")

#: Name of the mesh axis made by :func:`data_mesh`.
DEFAULT_AXIS = "rows"


def data_mesh(devices: Optional[Sequence[Any]] = None, axis_name: str = DEFAULT_AXIS):
    """A one-axis mesh over ``devices`` (default: all of ``jax.devices()``) for the data rows.

    Parameters
    ----------
    devices : sequence of jax devices, optional
    axis_name : str, default "rows"

    Returns
    -------
    jax.sharding.Mesh
    """
    from jax.sharding import Mesh

    devs = list(jax.devices() if devices is None else devices)
    if not devs:
        raise ValueError("devices must contain at least one device")
    return Mesh(np.array(devs), (axis_name,))


def check_mesh(mesh: Any, algorithm: str, axis_name: Optional[str] = None) -> str:
    """Validate ``mesh`` for ``algorithm``; return the data axis name.

    Raises
    ------
    TypeError
        ``mesh`` is not a ``jax.sharding.Mesh``.
    ValueError
        ``algorithm`` does not make full-data passes, or the mesh has several axes and no
        ``axis_name`` picks one.
    """
    from jax.sharding import Mesh

    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    if algorithm not in SHARDABLE:
        raise ValueError(f"mesh is supported for the full-data algorithms {SHARDABLE}, "
                         f"not {algorithm!r}")
    names = tuple(mesh.axis_names)
    if axis_name is None:
        if len(names) != 1:
            raise ValueError(f"mesh must have exactly one axis (the data rows), got axes {names}")
        return names[0]
    if axis_name not in names:
        raise ValueError(f"axis_name {axis_name!r} is not an axis of the mesh {names}")
    return axis_name


def shard_data(data: Array, mesh: Any, *, model=None, block_size: Optional[int] = None,
               grad_dtype: Optional[str] = None, axis_name: Optional[str] = None
               ) -> PreparedData:
    """Lay out ``data`` in blocks split over the devices of ``mesh`` (see the module docstring).

    Parameters
    ----------
    data : array (n, ...)
    mesh : jax.sharding.Mesh
        One axis (or name it with ``axis_name``); rows are split over its devices.
    model : Model, optional
        Picks the block layout (column-major for models without vectorised functions).
    block_size : int, optional
        Rows per block on each device (default: ``auto_block_size``).
    grad_dtype : {"float32", "float64"}, optional
        Keep a copy for per-example gradient passes in this dtype.
    axis_name : str, optional

    Returns
    -------
    PreparedData
        Pass it as ``data`` to the kernel builders of :data:`SHARDABLE`.
    """
    from jax.sharding import Mesh

    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    return prepare_data(data, model=model, block_size=block_size, grad_dtype=grad_dtype,
                        mesh=mesh, axis_name=axis_name)
