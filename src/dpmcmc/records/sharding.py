"""Data-parallel sampling: the data rows split over the devices of a ``jax.sharding.Mesh``.

Full-data samplers
------------------
The full-data samplers ("rwmh", "hmc", "dp-penalty", "dp-hmc") read the data only through the
passes of :mod:`dpmcmc.records.passes`. With a mesh, :func:`shard_data` lays the rows out
in blocks as usual and places the blocks of each device on that device; every pass then reduces
its local blocks on each device (compensated sums) and combines the partial sums with one
``psum`` over the mesh axis. Everything after the sum is unchanged: the clipped total is the
same statistic (up to float rounding of the reordered sum), its sensitivity is the same, and the
noise of a private release is drawn once, by :mod:`dpmcmc.kernels.releases`, on the reduced
value with the iteration's key — never per device. Chains, keys and positions are replicated, so
a sharded run with a given key gives the same draws as an unsharded one, to the rounding of the
reordered sums (tests/records/test_sharding.py).

Subsampled samplers
-------------------
The subsampled samplers ("dp-barker", "minibatch-penalty", "dp-sgld", "dp-sgnht") read the data
only through :func:`dpmcmc.kernels.minibatch.batch_rows`: ``b`` rows gathered by index per
iteration and chain. With a mesh, :func:`shard_rows` splits the rows in ``D`` contiguous ranges
of ``⌈n/D⌉`` rows, one per device of the mesh axis (the last range padded with rows that no
index ever points at), and :func:`gather_rows` assembles a batch with an explicit ``shard_map``:
every device gathers the batch indices that fall in its own range (a masked local gather of at
most ``b`` rows) and writes zero bits elsewhere, and one ``psum`` over the mesh axis assembles
the ``b`` rows on every device. Communication is O(b × record width) per gather, whatever ``n``.
The sum is taken on the rows' bit patterns reinterpreted as unsigned integers: exactly one
device contributes non-zero bits for each entry, so the assembled rows are bit for bit those of
``data[idx]`` (also for ``-0.0``, NaN payloads and subnormals, which a floating-point sum of a
value and zeros could alter under flush-to-zero). The per-example values, their order and the
batch sums are then those of an unsharded run, so a sharded run gives bit-identical draws for
the same key (tests/records/test_sharding_subsampled.py). Noise is still drawn once, by the kernel, on
the statistic of the assembled batch, with the iteration's key; secure mode is unaffected (the
batch indices come from the same ChaCha20 permutation, computed replicated on every device).

Why this design (the compiled HLO, 4 forced host devices, jax 0.10.2 with Shardy):

- Letting the partitioner split ``jnp.take`` on rows placed with ``NamedSharding(mesh,
  P(axis))`` — option (i) — compiles, when the data are an ARGUMENT of the jitted program, to
  the same scheme (a ``select`` of the local gather, then an ``all-reduce`` of the
  ``(chains, b, width)`` batch; no ``all-gather``). It was not chosen because that choice is the
  partitioner's (nothing guarantees it for other shapes or versions), the floating-point
  all-reduce of a value and zeros is not bit-exact in every case, and it needs even shards.
- Either way the data must reach the program as an argument. A concrete array that a traced
  function closes over is embedded by ``jax.jit`` as an HLO ``constant`` of its full shape, and
  an SPMD program replicates constants on every device: each device would hold all ``n`` rows
  however the array was placed (measured: ``f64[n,2] constant({...})`` in the compiled text,
  with or without ``jax_use_simplified_jaxpr_constants``). Kernels therefore take their data as
  an argument (``step(key, state, data)``), and :func:`dpmcmc.samplers.run_chains` passes the
  :class:`ShardedRows` (or the blocks of :func:`shard_data`) to the compiled program as a
  parameter, so the program takes ``⌈n/D⌉`` rows per device, sharded ``{devices=[D,...]}``, and
  never holds the full data. The test checks the compiled program for the absence of any
  ``all-gather`` and of any constant or buffer with ``n`` rows. (Before kernels took their data
  as an argument, :func:`shard_rows` kept the rows in a ``jax.Ref`` so that a kernel closing
  over them still passed them as an implicit argument; the Ref and its limitation, no reading
  inside a ``lax.cond`` under ``vmap``, are gone.)

The full-data path (:func:`shard_data`) holds plain sharded arrays too, passed to the compiled
program as arguments, placed as :func:`shard_data` placed them, so each device holds its own
blocks only.

Multi-host: on several machines, call ``jax.distributed.initialize()`` on every host first, then
build the mesh over ``jax.devices()`` (all hosts' devices) and pass it. See docs/scaling.md for
what has and has not been tested.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dpmcmc.records.layout import PreparedData, data_axis, prepare_data

Array = Any

__all__ = [
    "DEFAULT_AXIS",
    "ShardedRows",
    "data_mesh",
    "shard_data",
    "shard_rows",
    "gather_rows",
]

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


def shard_data(data: Array, mesh: Any, *, model=None, block_size: Optional[int] = None,
               grad_dtype: Optional[str] = None, axis_name: Optional[str] = None
               ) -> PreparedData:
    """Lay out ``data`` in blocks split over the devices of ``mesh`` (full-data samplers).

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
        The ``data`` argument of the kernels of the algorithms whose spec has
        ``data_access == "full"`` (what their ``SPEC.layout(..., mesh=mesh)`` returns).
    """
    from jax.sharding import Mesh

    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    return prepare_data(data, model=model, block_size=block_size, grad_dtype=grad_dtype,
                        mesh=mesh, axis_name=axis_name)


# ---------------------------------------------------------------- subsampled samplers

@jax.tree_util.register_pytree_node_class
class ShardedRows:
    """Rows split in contiguous ranges over the devices of one mesh axis, for batch gathers.

    The data layout of the subsampled samplers under a mesh (their spec's ``data_access`` is
    ``"subsampled"``; the full-data samplers' layout is a :class:`PreparedData` from
    :func:`shard_data`). One row-major block per device: ``blocks`` is an array
    ``(D, ⌈n/D⌉, *record)`` sharded over ``axis_name``, a plain pytree leaf, so a kernel's
    ``data`` argument carries it into the compiled program as a sharded parameter (see the
    module docstring). Read it only through :func:`gather_rows` (or
    :func:`dpmcmc.kernels.minibatch.batch_rows`); it is not a layout for the full-data passes.

    Attributes
    ----------
    blocks : jax.Array
        ``(D, rows_per_device, *record)``; rows ``≥ n`` are padding, never gathered.
    n : int
        Number of real rows (static).
    mesh, axis_name
        The mesh and the axis the rows are split over.
    """

    __slots__ = ("blocks", "n", "mesh", "axis_name")

    def __init__(self, blocks, n, mesh, axis_name):
        self.blocks = blocks
        self.n = int(n)
        self.mesh = mesh
        self.axis_name = axis_name

    def tree_flatten(self):
        return (self.blocks,), (self.n, self.mesh, self.axis_name)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children[0], *aux)

    @property
    def shape(self) -> tuple:
        """``(n, *record_shape)``, so that ``data.shape[0]`` is the number of real rows."""
        return (self.n,) + tuple(self.blocks.shape[2:])

    @property
    def block_size(self) -> int:
        """Rows per device, ``⌈n/D⌉``."""
        return int(self.blocks.shape[1])

    @property
    def dtype(self):
        return self.blocks.dtype


def shard_rows(data: Array, mesh: Any, *, axis_name: Optional[str] = None) -> ShardedRows:
    """Split the rows of ``data`` in contiguous ranges over the devices of ``mesh``.

    Device ``d`` of the axis holds rows ``[d⌈n/D⌉, (d+1)⌈n/D⌉)``; each device's range is copied
    from host memory to that device alone (``jax.make_array_from_callback``), so no device ever
    holds all ``n`` rows. The dtype of ``data`` is kept, so gathered rows equal ``data[idx]``
    exactly.

    Parameters
    ----------
    data : array (n, ...)
        One record per row (a NumPy array avoids a first copy on the default device).
    mesh : jax.sharding.Mesh
        One axis, or name it with ``axis_name``.
    axis_name : str, optional

    Returns
    -------
    ShardedRows
        The ``data`` argument of the kernels of the algorithms whose spec has
        ``data_access == "subsampled"`` (what their ``SPEC.layout(..., mesh=mesh)`` returns).

    Raises
    ------
    TypeError
        ``mesh`` is not a ``jax.sharding.Mesh``.
    ValueError
        ``data`` has no rows, or ``axis_name`` is not an axis of the mesh.
    """
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    if not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh, got {type(mesh).__name__}")
    if isinstance(data, jax.core.Tracer):
        raise TypeError("data must be a concrete array, not a traced value, to be sharded")
    axis_name = data_axis(mesh, axis_name)
    arr = np.asarray(data)
    if arr.ndim < 1 or arr.shape[0] < 1:
        raise ValueError(f"data must have at least one row, got shape {tuple(arr.shape)}")
    n = int(arr.shape[0])
    ndev = int(mesh.shape[axis_name])
    per = -(-n // ndev)
    record = tuple(arr.shape[1:])
    global_shape = (ndev, per) + record

    def local_block(index):
        # ``index`` selects this device's block(s) along the first axis.
        sl = index[0]
        first, last = (sl.start or 0), (ndev if sl.stop is None else sl.stop)
        lo, hi = first * per, last * per
        out = np.zeros((hi - lo,) + record, arr.dtype)
        real = arr[lo:min(hi, n)]
        out[:real.shape[0]] = real
        return out.reshape((last - first, per) + record)

    sharding = NamedSharding(mesh, PartitionSpec(axis_name))
    blocks = jax.make_array_from_callback(global_shape, sharding, local_block)
    return ShardedRows(blocks, n, mesh, axis_name)


def _unsigned_like(dtype) -> Any:
    return jnp.dtype(f"uint{8 * jnp.dtype(dtype).itemsize}")


def gather_rows(data: ShardedRows, idx: Array) -> Array:
    """``data[idx]`` for rows split over a mesh: masked local gathers and one ``psum``.

    Parameters
    ----------
    data : ShardedRows
    idx : int array, any shape
        Row indices in ``[0, n)``.

    Returns
    -------
    array ``idx.shape + record``
        Bit for bit the rows an unsharded ``jnp.take(data, idx, axis=0)`` returns, replicated on
        every device of the mesh.
    """
    from jax.sharding import PartitionSpec

    ax = data.axis_name
    per = data.block_size
    blocks = data.blocks  # a program argument, sharded over ``ax``
    dtype = blocks.dtype
    idx = jnp.asarray(idx)
    if not jnp.issubdtype(idx.dtype, jnp.integer):
        raise TypeError(f"idx must be an integer array, got dtype {idx.dtype}")
    is_bool = dtype == jnp.bool_

    def local(block, ids):
        # block (1, per, *record): this device's rows [d·per, (d+1)·per).
        j = ids - jax.lax.axis_index(ax).astype(ids.dtype) * per
        inside = (j >= 0) & (j < per)
        rows = jnp.take(block[0], jnp.where(inside, j, 0), axis=0)
        if is_bool:
            bits = rows.astype(jnp.uint8)
        else:
            bits = jax.lax.bitcast_convert_type(rows, _unsigned_like(dtype))
        keep = inside.reshape(inside.shape + (1,) * (rows.ndim - inside.ndim))
        # One owner per row: the integer sum of its bits and zeros is exact, so the assembled
        # rows are those of data[idx] bit for bit.
        total = jax.lax.psum(jnp.where(keep, bits, jnp.zeros((), bits.dtype)), ax)
        if is_bool:
            return total.astype(jnp.bool_)
        return jax.lax.bitcast_convert_type(total, dtype)

    return jax.shard_map(local, mesh=data.mesh, in_specs=(PartitionSpec(ax), PartitionSpec()),
                         out_specs=PartitionSpec(), check_vma=False)(blocks, idx)
