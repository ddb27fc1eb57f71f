"""The data rows laid out in blocks for the per-example passes.

Every full-data pass of :mod:`dpmcmc.records.passes` runs over a :class:`PreparedData`: the
rows cut once per run (by the algorithm's ``SPEC.layout``, before anything is traced) into
blocks of ``block_size`` rows, padded with masked rows, so that per-example intermediates never exceed one block per chain and no pass ever holds
an ``n × dim × chains`` array. On CPU blocks of 4096 rows keep the intermediates in cache
(measured 1.5–6× faster than one pass for n = 10⁵), except in DP-HMC's layout for models with
at most 4 parameters, whose per-record gradient passes run in blocks of up to 131072 rows that
XLA splits over the CPU's threads; on accelerators one block holds everything (see
:func:`auto_block_size`).

Layout
------
For a model that supplies no vectorised functions (the usual case: only
``log_likelihood(theta, x)``) the blocks are stored column-major, ``(blocks, *record_shape,
block_size)``, and the passes vectorise the user's per-record function over the last axis
(:func:`dpmcmc.records.jaxpr_rewrite.vectorize_columns`): every per-example operation then runs
along contiguous memory, which is what makes the autodiff path as fast as hand-written
elementwise code. A model that supplies ``log_likelihood_batch`` / ``grad_log_likelihood_batch``
gets row-major blocks, the layout those functions are written for. A raw array given to a pass
is laid out by the pass itself (concrete arrays in NumPy, traced arrays inside the trace); a run
lays its data out once (``AlgorithmSpec.layout``) and passes the blocks to the kernel's step as
its ``data`` argument.

Gradient dtype
--------------
Per-example gradients may be computed in float32 (``grad_dtype``, see the passes' module
docstring); :func:`prepare_data` then keeps a float32 copy of the blocks beside the canonical
float ones, so that no pass converts the data per iteration.

Sharding
--------
With ``mesh``, :func:`prepare_data` splits the blocks over the devices of one mesh axis
(:func:`data_axis` names it); each pass reduces its local blocks on every device and combines
them with one ``psum`` (see :mod:`dpmcmc.records.sharding`).
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

Array = Any

__all__ = [
    "PreparedData",
    "prepare_data",
    "auto_block_size",
    "resolve_grad_dtype",
    "data_axis",
    "num_rows",
    "CPU_BLOCK_SIZE",
    "RECORD_GRAD_BLOCK_SIZE",
    "RECORD_GRAD_MAX_DIM",
    "large_block",
    "record_gradients",
    "GRAD_DTYPES",
]

CPU_BLOCK_SIZE = 4096
#: Models with at most this many parameters, on column-major blocks, get their per-example
#: gradients by differentiating ONE record's log-likelihood and vectorising that gradient over
#: the rows (:func:`record_gradients`; the passes' ``method="vmap"``).
RECORD_GRAD_MAX_DIM = 4
#: Rows per block (at most) of a layout for per-record gradient passes on CPU (see
#: :func:`auto_block_size`).
RECORD_GRAD_BLOCK_SIZE = 131072


def large_block(rows: int) -> bool:
    """Whether a block of ``rows`` rows is large enough that XLA splitting a pass's loops over
    the CPU's threads pays (more than ``2 * CPU_BLOCK_SIZE`` rows): per-record gradients and
    the masked-term form of the clipped sum are used there only (see :func:`auto_block_size`)."""
    return rows > 2 * CPU_BLOCK_SIZE


#: Accepted values of ``grad_dtype`` (DP-HMC's builder and layout, ``dpmcmc.sample`` parameters).
GRAD_DTYPES = ("float32", "float64")


def num_rows(data) -> int:
    """The number of records of a kernel's ``data`` argument (static: read from its shape).

    Raises
    ------
    TypeError
        ``data`` holds no rows (``None``, say, when a run forgot its ``data=``).
    """
    shape = getattr(data, "shape", None)
    if shape is None or len(shape) < 1:
        raise TypeError("data must be the kernel's data: rows (n, ...), or as laid out by the "
                        f"algorithm's SPEC.layout; got {type(data).__name__} (pass data= to "
                        "run_chains, or the data to the kernel's init and step)")
    return int(shape[0])


def record_gradients(model, column_major: bool, columnar: bool = True,
                     block_rows: Optional[int] = None) -> bool:
    """Whether ``method="auto"`` computes the per-example gradients of ``model`` on such blocks
    as per-record gradients (the passes' ``"vmap"``).

    True on the CPU backend for a model with at most :data:`RECORD_GRAD_MAX_DIM` parameters that
    supplies no vectorised gradient, on column-major blocks vectorised by
    :func:`~dpmcmc.records.jaxpr_rewrite.vectorize_columns`, of ``block_rows`` rows that pass
    :func:`large_block` (None: the layout is still to be chosen). Smaller blocks keep the
    broadcast-θ reverse pass: XLA splits the per-record pass's loops over threads even there,
    which costs more than it gains (see :func:`auto_block_size`). Decided from the model's
    structure and the shapes, never from data.
    """
    return (model is not None and column_major and columnar and jax.default_backend() == "cpu"
            and model.grad_log_likelihood_batch is None and int(model.dim) <= RECORD_GRAD_MAX_DIM
            and (block_rows is None or large_block(block_rows)))


def auto_block_size(n: int, block_size: Optional[int] = None, *,
                    record_grads: bool = False) -> Optional[int]:
    """``block_size`` if given, else on the CPU backend: 4096 when ``n > 2 * 4096`` (and None,
    one block, below), or :data:`RECORD_GRAD_BLOCK_SIZE` when ``record_grads``; None (one block)
    on accelerators.

    ``record_grads``: a layout read by per-record gradient passes (:func:`record_gradients`: DP-HMC
    on a model with few parameters). Their clipped gradient sum is a few elementwise loops
    over the block, which XLA splits over the CPU's threads when a block is large; in blocks of
    4096 rows each loop is split all the same, and the threads then synchronise 25 times per
    pass for little work each (banana preset, DP-HMC, 4 chains, n = 10⁵, wall clock: 91–97 ms
    per iteration in blocks of 4096 or 8192 rows, 11–16 ms in one block; the reverse pass used
    before, in blocks of 4096: 31–33 ms). The per-example intermediates of one block then hold
    at most 131072 rows per chain.
    """
    if block_size is not None:
        return block_size
    if jax.default_backend() != "cpu":
        return None
    if record_grads:
        return RECORD_GRAD_BLOCK_SIZE
    if n > 2 * CPU_BLOCK_SIZE:
        return CPU_BLOCK_SIZE
    return None


def resolve_grad_dtype(grad_dtype: Optional[str]):
    """The numpy dtype of per-example gradient computations for ``grad_dtype``.

    ``None`` or ``"float64"`` mean the canonical float (float64 under x64, float32 otherwise);
    ``"float32"`` means float32.
    """
    canonical = jnp.dtype(jnp.result_type(float))
    if grad_dtype is None or grad_dtype == "float64":
        return canonical
    if grad_dtype == "float32":
        return jnp.dtype(jnp.float32)
    raise ValueError(f"grad_dtype must be one of {GRAD_DTYPES} or None, got {grad_dtype!r}")


# ---------------------------------------------------------------- prepared data

@jax.tree_util.register_pytree_node_class
class PreparedData:
    """The data rows laid out for the per-example passes (see the module docstring).

    Attributes
    ----------
    blocks : array
        ``(num_blocks, block_size, *record)`` (row-major) or ``(num_blocks, *record,
        block_size)`` (column-major), in the canonical float dtype.
    grad_blocks : array or None
        The same in the per-example gradient dtype, when that differs (else None).
    mask : bool array (num_blocks, block_size)
        True for real rows, False for padding.
    n : int
        Number of real rows (static).
    column_major : bool
        Layout of ``blocks`` (static).
    mesh, axis_name
        A ``jax.sharding.Mesh`` and the axis the blocks are split over, or None (static).
    columnar, fused_clip, unroll_reductions : bool
        How the passes trace over these blocks (static; see :func:`prepare_data`). They are
        part of the pytree structure, so kernels built with different settings never share a
        compiled pass, and tracing reads no module-level state.
    """

    def __init__(self, blocks, grad_blocks, mask, n, column_major, mesh=None, axis_name=None,
                 *, columnar: bool = True, fused_clip: bool = True,
                 unroll_reductions: bool = True):
        self.blocks = blocks
        self.grad_blocks = grad_blocks
        self.mask = mask
        self.n = n
        self.column_major = column_major
        self.mesh = mesh
        self.axis_name = axis_name
        self.columnar = bool(columnar)
        self.fused_clip = bool(fused_clip)
        self.unroll_reductions = bool(unroll_reductions)

    def tree_flatten(self):
        return ((self.blocks, self.grad_blocks, self.mask),
                (self.n, self.column_major, self.mesh, self.axis_name,
                 self.columnar, self.fused_clip, self.unroll_reductions))

    @classmethod
    def tree_unflatten(cls, aux, children):
        *layout, columnar, fused_clip, unroll = aux
        return cls(*children, *layout, columnar=columnar, fused_clip=fused_clip,
                   unroll_reductions=unroll)

    @property
    def shape(self) -> tuple:
        """``(n, *record_shape)``: the shape of the original data, so ``data.shape[0]`` works."""
        rec = self.blocks.shape[1:-1] if self.column_major else self.blocks.shape[2:]
        return (self.n,) + tuple(rec)

    @property
    def block_size(self) -> int:
        return self.mask.shape[1]

    def grad_view(self):
        return self.blocks if self.grad_blocks is None else self.grad_blocks


def _default_layout(model) -> bool:
    """Column-major unless the model brings vectorised functions written for rows."""
    if model is None:
        return True
    return model.log_likelihood_batch is None and model.grad_log_likelihood_batch is None


def _layout_np(arr: np.ndarray, n: int, bs: int, nb: int, column_major: bool) -> np.ndarray:
    pad = nb * bs - n
    if pad:
        # Padding rows repeat row 0 (finite wherever the data are) and are masked out.
        arr = np.concatenate([arr, np.broadcast_to(arr[:1], (pad,) + arr.shape[1:])], axis=0)
    arr = arr.reshape((nb, bs) + arr.shape[1:])
    if column_major:
        arr = np.moveaxis(arr, 1, -1)
    return np.ascontiguousarray(arr)


def _layout_jnp(arr: Array, n: int, bs: int, nb: int, column_major: bool) -> Array:
    pad = nb * bs - n
    if pad:
        arr = jnp.concatenate([arr, jnp.broadcast_to(arr[:1], (pad,) + arr.shape[1:])], axis=0)
    arr = arr.reshape((nb, bs) + arr.shape[1:])
    return jnp.moveaxis(arr, 1, -1) if column_major else arr


def prepare_data(data: Array, *, model=None, block_size: Optional[int] = None,
                 column_major: Optional[bool] = None, grad_dtype: Optional[str] = None,
                 mesh=None, axis_name: Optional[str] = None, columnar: bool = True,
                 fused_clip: bool = True, unroll_reductions: bool = True) -> PreparedData:
    """Lay the rows of ``data`` out in blocks for the per-example passes.

    Parameters
    ----------
    data : array (n, ...)
        One record per row.
    model : Model, optional
        Decides the default layout: column-major unless the model supplies vectorised functions.
    block_size : int, optional
        Rows per block; default :func:`auto_block_size` (one block when that gives None).
    column_major : bool, optional
        Override the layout.
    grad_dtype : {"float32", "float64"}, optional
        Dtype of per-example gradient passes; a float32 copy of the blocks is kept when it
        differs from the canonical float. Given (DP-HMC's layout), the blocks are read by
        per-example gradient passes, and the default ``block_size`` is that of
        :func:`auto_block_size` with ``record_grads`` where :func:`record_gradients` holds.
    mesh : jax.sharding.Mesh, optional
        Split the blocks (rows) over the devices of ``axis_name``; the block count is padded to
        a multiple of the device count.
    axis_name : str, optional
        Mesh axis for the rows; default: the mesh's only axis.
    columnar : bool, default True
        On column-major blocks, vectorise the per-record log-likelihood with
        :func:`~dpmcmc.records.jaxpr_rewrite.vectorize_columns`; ``False``: ``jax.vmap`` over
        the last axis.
    fused_clip : bool, default True
        On column-major blocks of models with ≤ ``FUSED_CLIP_MAX_DIM`` parameters, clip and sum
        per-example gradients in one expression (:mod:`dpmcmc.records.passes`); ``False``: the
        separate :func:`~dpmcmc.records.clip.clip_gradients`.
    unroll_reductions : bool, default True
        Let the forward passes rewrite small reductions as unrolled adds
        (:func:`~dpmcmc.records.jaxpr_rewrite.unroll_small_reductions`); ``False``: every pass
        is traced as written.

    The three switches change speed only, never the released values' definition (the same
    clipping rule, the same sums up to rounding); they exist so that benchmarks can measure
    each design choice. They travel with the returned value, so two kernels built from data
    prepared with different switches trace and compile independently, even concurrently.

    Returns
    -------
    PreparedData
        ``data`` itself when it already is one (its layout and switches are kept).
    """
    if isinstance(data, PreparedData):
        return data
    n = num_rows(data)
    if n < 1:
        raise ValueError(f"data must have at least one row, got shape {tuple(data.shape)}")
    if column_major is None:
        column_major = _default_layout(model)
    ndev = 1
    if mesh is not None:
        axis_name = data_axis(mesh, axis_name)
        ndev = int(mesh.shape[axis_name])
    record_grads = grad_dtype is not None and record_gradients(model, column_major, columnar)
    bs = auto_block_size(n, block_size, record_grads=record_grads)
    if bs is None:
        bs = -(-n // ndev)
    elif block_size is None and record_grads:
        bs = min(bs, -(-n // ndev))  # large default blocks never leave a device only padding
    bs = int(min(bs, n))
    nb = -(-n // bs)
    nb = -(-nb // ndev) * ndev
    canonical = jnp.result_type(float)
    gdt = resolve_grad_dtype(grad_dtype)
    concrete = not isinstance(data, jax.core.Tracer)
    if concrete:
        arr = np.asarray(data)
        if not np.issubdtype(arr.dtype, np.floating):
            arr = arr.astype(canonical)
        blocks_np = _layout_np(arr, n, bs, nb, column_major)
        # Concrete device arrays even when called while a kernel is being traced: they become
        # constants of the compiled function instead of a re-layout inside every pass.
        # jax.device_put, not jnp.asarray: the latter lifts a NumPy array through lax.stage,
        # which compiles a program per shape and dtype (the same array, dtype and sharding).
        with jax.ensure_compile_time_eval():
            blocks = jax.device_put(blocks_np)
            grad_blocks = None
            if gdt != blocks.dtype:
                grad_blocks = jax.device_put(blocks_np.astype(gdt))
    else:
        arr = data if jnp.issubdtype(data.dtype, jnp.floating) else data.astype(canonical)
        blocks = _layout_jnp(arr, n, bs, nb, column_major)
        grad_blocks = None if gdt == blocks.dtype else blocks.astype(gdt)
    with jax.ensure_compile_time_eval():
        mask = jax.device_put((np.arange(nb * bs) < n).reshape(nb, bs))
    if mesh is not None:
        from jax.sharding import NamedSharding, PartitionSpec

        sharding = NamedSharding(mesh, PartitionSpec(axis_name))
        blocks = jax.device_put(blocks, sharding)
        mask = jax.device_put(mask, sharding)
        if grad_blocks is not None:
            grad_blocks = jax.device_put(grad_blocks, sharding)
    return PreparedData(blocks, grad_blocks, mask, n, bool(column_major), mesh, axis_name,
                        columnar=columnar, fused_clip=fused_clip,
                        unroll_reductions=unroll_reductions)



def data_axis(mesh, axis_name: Optional[str] = None) -> str:
    """The name of the mesh axis the data rows are split over.

    Parameters
    ----------
    mesh : jax.sharding.Mesh
    axis_name : str, optional
        The axis to use; default: the mesh's only axis.

    Raises
    ------
    ValueError
        ``axis_name`` is not an axis of the mesh, or it is None and the mesh has several axes.
    """
    names = tuple(mesh.axis_names)
    if axis_name is None:
        if len(names) != 1:
            raise ValueError(f"mesh must have exactly one axis (the data rows), got axes {names}; "
                             f"name the data axis with axis_name")
        return names[0]
    if axis_name not in names:
        raise ValueError(f"axis_name {axis_name!r} is not an axis of the mesh {names}")
    return axis_name
