"""All per-example computations of the samplers: one pass over the data each.

Every data access of every sampler goes through this module, so that the cost of an iteration
is a known number of data passes:

- :func:`clipped_llr_sum` — Σ_j clip(ℓ_j(θ') − ℓ_j(θ)): the log-likelihood difference and the
  clipping are one fused expression, reduced without storing more than one block of ratios.
- :func:`clipped_grad_sum` — Σ_j clip(∇ℓ_j(θ)), per-example gradients clipped in L2 norm.
- :func:`loglik_sum`, :func:`loglik_sum_and_grad` — unclipped totals for non-private samplers
  (one forward / one reverse-mode pass, no per-example gradients).

Data layout and blocking
------------------------
Passes run over :class:`PreparedData`: the rows cut once (at kernel build time) into blocks of
``block_size`` rows, padded with masked rows, so that per-example intermediates never exceed one
block per chain and no pass ever holds an ``n × dim × chains`` array. On CPU blocks of 4096 rows
keep the intermediates in cache (measured 1.5–6× faster than one pass for n = 10⁵); on
accelerators one block holds everything (see :func:`auto_block_size`). For a model that supplies
no vectorised functions (the usual case: only ``log_likelihood(theta, x)``) the blocks are stored
column-major, ``(blocks, *record_shape, block_size)``, and the user's per-record function is
vectorised over the last axis: every per-example operation then runs along contiguous memory,
which is what makes the autodiff path as fast as hand-written elementwise code. A model that
supplies ``log_likelihood_batch`` / ``grad_log_likelihood_batch`` gets row-major blocks, the
layout those functions are written for. Raw arrays passed to the functions here are prepared on
the fly (concrete arrays once, with a cache; traced arrays inside the trace).

Per-example gradients
---------------------
``method="auto"`` uses ``model.grad_log_likelihood_batch`` when the model supplies one, else
``"reverse"``: ONE reverse-mode pass of ``Σ_j ℓ(θ_j, x_j)`` with respect to a broadcast copy
``θ_j = θ`` per row, whose gradient is exactly the matrix of per-example gradients. XLA fuses
that into elementwise loops; ``vmap(grad(ℓ))`` (``"vmap"``) measured 1.05–3× and forward mode
(``"forward"``: one JVP per dimension, θ-only computations kept unbatched, the better choice
when the likelihood transforms θ expensively, e.g. a Cholesky factor) 2.5–3.8× slower on the
presets' DP-HMC iterations (benchmarks/README.md).

Precision
---------
Log-likelihood ratios and their sums are computed in the dtype of ``theta`` (float64 under x64):
a ratio ℓ_j(θ') − ℓ_j(θ) is a difference of nearly equal numbers, and the acceptance test needs
its sum to ~1e-8 absolute (tests/test_per_example_precision.py). Block sums are combined with
Neumaier-compensated summation, so the error of a total over n = 10⁷ rows stays at the level of
one block's rounding. Per-example GRADIENTS may be computed in float32 (``grad_dtype``): they
only steer proposals (exactness comes from the accept test) and their released sum carries noise
σ_g = 2 τ_g √n b_g far above float32 rounding. Float32 terms are clipped to a bound shrunk by a
few float32 ulps, so each clipped term provably stays within ``b_g`` after rounding, and are
accumulated in the dtype of ``theta``.

Sharding
--------
:func:`prepare_data` with ``mesh`` splits the blocks over the devices of one mesh axis; each
pass then reduces its local blocks on every device and combines them with one ``psum``. The
released statistic is that reduced value: noise is drawn by the caller
(:mod:`dpmcmc.samplers._releases`) once, after the reduction, never per device.
"""
from __future__ import annotations

import math
import weakref
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jax_core

from dpmcmc.samplers._clip import clip_gradients, clip_ratios

Array = Any

__all__ = [
    "PreparedData",
    "prepare_data",
    "clipped_llr_sum",
    "clipped_grad_sum",
    "loglik_sum",
    "loglik_sum_and_grad",
    "per_example_loglik",
    "per_example_grads",
    "auto_block_size",
    "resolve_grad_dtype",
    "unroll_small_reductions",
    "CPU_BLOCK_SIZE",
    "GRAD_METHODS",
    "GRAD_DTYPES",
]

CPU_BLOCK_SIZE = 4096
GRAD_METHODS = ("auto", "reverse", "forward", "vmap")
GRAD_DTYPES = ("float32", "float64")


def auto_block_size(n: int, block_size: Optional[int] = None) -> Optional[int]:
    """``block_size`` if given, else 4096 on the CPU backend when ``n > 2 * 4096``, else None."""
    if block_size is not None:
        return block_size
    if jax.default_backend() == "cpu" and n > 2 * CPU_BLOCK_SIZE:
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
    """

    def __init__(self, blocks, grad_blocks, mask, n, column_major, mesh=None, axis_name=None):
        self.blocks = blocks
        self.grad_blocks = grad_blocks
        self.mask = mask
        self.n = n
        self.column_major = column_major
        self.mesh = mesh
        self.axis_name = axis_name

    def tree_flatten(self):
        return ((self.blocks, self.grad_blocks, self.mask),
                (self.n, self.column_major, self.mesh, self.axis_name))

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children, *aux)

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
                 mesh=None, axis_name: Optional[str] = None) -> PreparedData:
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
        differs from the canonical float.
    mesh : jax.sharding.Mesh, optional
        Split the blocks (rows) over the devices of ``axis_name``; the block count is padded to
        a multiple of the device count.
    axis_name : str, optional
        Mesh axis for the rows; default: the mesh's only axis.

    Returns
    -------
    PreparedData
    """
    if isinstance(data, PreparedData):
        return data
    if data.ndim < 1 or data.shape[0] < 1:
        raise ValueError(f"data must have at least one row, got shape {tuple(data.shape)}")
    n = int(data.shape[0])
    if column_major is None:
        column_major = _default_layout(model)
    ndev = 1
    if mesh is not None:
        axis_name = _mesh_axis(mesh, axis_name)
        ndev = int(mesh.shape[axis_name])
    bs = auto_block_size(n, block_size)
    if bs is None:
        bs = -(-n // ndev)
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
        with jax.ensure_compile_time_eval():
            blocks = jnp.asarray(blocks_np)
            grad_blocks = None
            if gdt != blocks.dtype:
                grad_blocks = jnp.asarray(blocks_np.astype(gdt))
    else:
        arr = data if jnp.issubdtype(data.dtype, jnp.floating) else data.astype(canonical)
        blocks = _layout_jnp(arr, n, bs, nb, column_major)
        grad_blocks = None if gdt == blocks.dtype else blocks.astype(gdt)
    with jax.ensure_compile_time_eval():
        mask = jnp.asarray((np.arange(nb * bs) < n).reshape(nb, bs))
    if mesh is not None:
        from jax.sharding import NamedSharding, PartitionSpec

        sharding = NamedSharding(mesh, PartitionSpec(axis_name))
        blocks = jax.device_put(blocks, sharding)
        mask = jax.device_put(mask, sharding)
        if grad_blocks is not None:
            grad_blocks = jax.device_put(grad_blocks, sharding)
    return PreparedData(blocks, grad_blocks, mask, n, bool(column_major), mesh, axis_name)


def _mesh_axis(mesh, axis_name: Optional[str]) -> str:
    names = tuple(mesh.axis_names)
    if axis_name is None:
        if len(names) != 1:
            raise ValueError(f"mesh has axes {names}; name the data axis with axis_name")
        return names[0]
    if axis_name not in names:
        raise ValueError(f"axis_name {axis_name!r} is not an axis of the mesh {names}")
    return axis_name


# Raw concrete arrays are prepared once per (array, layout) and reused across traces.
_CACHE: dict = {}


def _as_prepared(data, model, block_size, grad_dtype=None) -> PreparedData:
    if isinstance(data, PreparedData):
        return data
    if isinstance(data, jax.core.Tracer):
        return prepare_data(data, model=model, block_size=block_size, grad_dtype=grad_dtype)
    key = (id(data), tuple(data.shape), str(data.dtype), block_size, _default_layout(model),
           str(resolve_grad_dtype(grad_dtype)))
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is data:
        return hit[1]
    prepared = prepare_data(data, model=model, block_size=block_size, grad_dtype=grad_dtype)
    try:
        ref = weakref.ref(data)
    except TypeError:  # e.g. a NumPy array subclass without weakref support: do not cache
        return prepared
    _CACHE[key] = (ref, prepared)
    weakref.finalize(data, _CACHE.pop, key, None)
    return prepared


# ---------------------------------------------------------------- per-example functions

def _rows(xb: Array, column_major: bool) -> Array:
    """A block as rows ``(m, ...)``, for functions written for row-major data."""
    return jnp.moveaxis(xb, -1, 0) if column_major else xb


def _block_loglik(model, theta: Array, xb: Array, column_major: bool) -> Array:
    if model.log_likelihood_batch is not None:
        return model.log_likelihood_batch(theta, _rows(xb, column_major))
    axis = -1 if column_major else 0
    return jax.vmap(model.log_likelihood, in_axes=(None, axis))(theta, xb)


def _block_grads(model, theta: Array, xb: Array, column_major: bool, method: str) -> Array:
    """Per-example gradients of one block: ``(dim, m)`` if column-major, else ``(m, dim)``."""
    if method == "auto":
        method = "supplied" if model.grad_log_likelihood_batch is not None else "reverse"
    axis = -1 if column_major else 0
    m = xb.shape[axis]
    dim = theta.shape[0]
    if method == "supplied":
        g = model.grad_log_likelihood_batch(theta, _rows(xb, column_major))
        return g.T if column_major else g
    if method == "reverse":
        # d/dθ_j Σ_k ℓ(θ_k, x_k) at θ_k = θ is ∇ℓ(θ, x_j): one reverse pass gives every row.
        shape = (dim, m) if column_major else (m, dim)
        thetas = jnp.broadcast_to(theta[:, None] if column_major else theta[None, :], shape)

        def total(ts):
            return jnp.sum(jax.vmap(model.log_likelihood, in_axes=(axis, axis))(ts, xb))

        return jax.grad(total)(thetas)
    if method == "forward":
        _, lin = jax.linearize(
            lambda t: jax.vmap(model.log_likelihood, in_axes=(None, axis))(t, xb), theta)
        basis = jnp.eye(dim, dtype=theta.dtype)
        return jax.vmap(lin, out_axes=0 if column_major else 1)(basis)
    if method == "vmap":
        g = jax.vmap(jax.grad(model.log_likelihood), in_axes=(None, axis))(theta, xb)
        return g.T if column_major else g
    raise ValueError(f"method must be one of {GRAD_METHODS}, got {method!r}")


def per_example_loglik(model, theta: Array, data: Array) -> Array:
    """Per-example (untempered) log-likelihoods ``(m,)`` of the rows of ``data`` at ``theta``."""
    return model.loglik_per_example(theta, data)


def per_example_grads(model, theta: Array, data: Array, method: str = "auto") -> Array:
    """Per-example gradients ``(m, dim)`` of the untempered log-likelihood at ``theta``.

    Parameters
    ----------
    model : Model
    theta : array (dim,)
    data : array (m, ...)
        Rows (row-major).
    method : {"auto", "reverse", "forward", "vmap"}
        ``"auto"``: the model's ``grad_log_likelihood_batch`` if supplied, else ``"reverse"``
        (see the module docstring).
    """
    if method not in GRAD_METHODS:
        raise ValueError(f"method must be one of {GRAD_METHODS}, got {method!r}")
    return _block_grads(model, theta, data, False, method)


# ---------------------------------------------------------------- small-reduction unrolling

# Reductions over at most this many elements per output are written as explicit adds.
SMALL_REDUCTION = 16


def _unrolled(op: Callable, x: Array, axes) -> Array:
    for ax in sorted(axes, reverse=True):
        parts = [jax.lax.index_in_dim(x, i, ax, keepdims=False) for i in range(x.shape[ax])]
        acc = parts[0]
        for part in parts[1:]:
            acc = op(acc, part)
        x = acc
    return x


_UNROLL_OPS = {"reduce_sum": jax.lax.add, "reduce_max": jax.lax.max, "reduce_min": jax.lax.min}


def _dot_as_products(eqn, a: Array, b: Array):
    """A batched ``dot_general`` with a small contraction as broadcast products + unrolled adds.

    Returns None when the rewrite does not apply (no batch dimensions, a large contraction, or
    large free dimensions that the products would blow up).
    """
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    if not lb:
        return None
    k = int(np.prod([a.shape[i] for i in lc])) if lc else 1
    lf = [i for i in range(a.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(b.ndim) if i not in rc and i not in rb]
    free = int(np.prod([a.shape[i] for i in lf] + [b.shape[i] for i in rf]))
    if k > SMALL_REDUCTION or free > SMALL_REDUCTION * SMALL_REDUCTION:
        return None
    dtype = eqn.outvars[0].aval.dtype
    a2 = jnp.transpose(a, list(lb) + lf + list(lc)).astype(dtype)
    b2 = jnp.transpose(b, list(rb) + rf + list(rc)).astype(dtype)
    nb, nlf, nrf, nc = len(lb), len(lf), len(rf), len(lc)
    a2 = a2.reshape(a2.shape[:nb + nlf] + (1,) * nrf + a2.shape[nb + nlf:])
    b2 = b2.reshape(b2.shape[:nb] + (1,) * nlf + b2.shape[nb:])
    prod = a2 * b2
    axes = list(range(nb + nlf + nrf, nb + nlf + nrf + nc))
    return _unrolled(jax.lax.add, prod, axes) if axes else prod


def _eval_unrolled(jaxpr, consts, args):
    env = {}

    def read(v):
        return v.val if isinstance(v, jax_core.Literal) else env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        name = eqn.primitive.name
        outs = None
        if name in _UNROLL_OPS:
            x = invals[0]
            axes = eqn.params["axes"]
            if x.ndim > len(axes) and int(np.prod([x.shape[i] for i in axes])) <= SMALL_REDUCTION:
                outs = [_unrolled(_UNROLL_OPS[name], x, axes)]
        elif name == "dot_general":
            out = _dot_as_products(eqn, *invals)
            outs = None if out is None else [out]
        elif name in ("pjit", "jit") and "jaxpr" in eqn.params:
            inner = eqn.params["jaxpr"]
            outs = _eval_unrolled(inner.jaxpr, inner.consts, invals)
        if outs is None:
            res = eqn.primitive.bind(*invals, **eqn.params)
            outs = res if eqn.primitive.multiple_results else [res]
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
    return [read(v) for v in jaxpr.outvars]


def unroll_small_reductions(fn: Callable) -> Callable:
    """``fn`` with every reduction over ≤ 16 elements per output written as explicit adds.

    A per-record function vectorised over a block reduces over the record's few components
    (``jnp.sum`` over d = 2, an inner product ``r @ (P @ r)`` over d = 10) once per row. XLA on
    CPU emits such short reductions as a scalar loop per row, several times slower than the
    surrounding vectorised elementwise code; as a chain of adds of slices they vectorise across
    rows. Measured on the presets' per-record log-likelihoods (one block pass, 4 chains): banana
    8.8 → 1.0 ms, 10-d Gaussian 47 → 21 ms, faster than their hand-written vectorised versions.
    Only the order of floating-point additions changes. Nested ``jit`` calls are inlined; other
    higher-order primitives run unchanged.
    """

    def wrapped(*args):
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        flat = jax.tree.leaves(args)
        outs = _eval_unrolled(closed.jaxpr, closed.consts, flat)
        return jax.tree.unflatten(jax.tree.structure(out_shape), outs)

    return wrapped


# ---------------------------------------------------------------- the reduction

def _is_float(x) -> bool:
    return jnp.issubdtype(x.dtype, jnp.floating)


def _neumaier(acc, comp, x):
    """One step of Neumaier's compensated summation (elementwise)."""
    t = acc + x
    big = jnp.abs(acc) >= jnp.abs(x)
    comp = comp + jnp.where(big, (acc - t) + x, (x - t) + acc)
    return t, comp


def _local_reduce(fn: Callable, args: Any, blocks: Array, mask: Array, unroll: bool = True):
    """Σ over blocks of ``fn(args, block, mask)``: float leaves compensated, as (sum, comp)."""
    if unroll:
        fn = unroll_small_reductions(fn)
    if blocks.shape[0] == 1:
        out = fn(args, blocks[0], mask[0])
        return out, jax.tree.map(jnp.zeros_like, out)
    zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                        jax.eval_shape(fn, args, blocks[0], mask[0]))

    def body(carry, xs):
        acc, comp = carry
        out = fn(args, *xs)
        leaves_a, tree = jax.tree.flatten(acc)
        new_a, new_c = [], []
        for a, c, x in zip(leaves_a, jax.tree.leaves(comp), jax.tree.leaves(out)):
            if _is_float(x):
                a, c = _neumaier(a, c, x)
            else:
                a = a + x
            new_a.append(a)
            new_c.append(c)
        return (jax.tree.unflatten(tree, new_a), jax.tree.unflatten(tree, new_c)), None

    (acc, comp), _ = jax.lax.scan(body, (zero, zero), (blocks, mask))
    return acc, comp


def _reduce(fn: Callable, args: Any, prepared: PreparedData, blocks: Array, unroll: bool = True):
    """Σ over all rows of ``fn(args, block, mask)`` (a pytree of sums), across devices if sharded.

    ``args`` (θ, bounds...) are passed explicitly rather than closed over, so that under a mesh
    they enter the per-device computation as replicated inputs.
    """
    if prepared.mesh is None:
        acc, comp = _local_reduce(fn, args, blocks, prepared.mask, unroll)
        return jax.tree.map(lambda a, c: a + c if _is_float(a) else a, acc, comp)

    from jax.sharding import PartitionSpec

    ax = prepared.axis_name

    def local(a, b, m):
        acc, comp = _local_reduce(fn, a, b, m, unroll)
        # Every device ends with the same reduced value: the noise the caller adds afterwards
        # is drawn once, on the total, with the caller's key.
        acc = jax.lax.psum(acc, ax)
        comp = jax.lax.psum(comp, ax)
        return jax.tree.map(lambda x, c: x + c if _is_float(x) else x, acc, comp)

    rep = jax.tree.map(lambda _: PartitionSpec(), args)
    return jax.shard_map(local, mesh=prepared.mesh,
                         in_specs=(rep, PartitionSpec(ax), PartitionSpec(ax)),
                         out_specs=PartitionSpec(), check_vma=False)(args, blocks, prepared.mask)


def _acc_dtype(theta: Array):
    return jnp.result_type(theta, jnp.float32)


def _f32_safe_bound(bound: Array, dtype, dim: int) -> Array:
    """``bound`` shrunk so that a term clipped in ``dtype`` keeps norm ≤ ``bound`` after rounding.

    The squared norm of ``dim`` entries carries a relative error ≤ (dim+1)u, the square root,
    division and scaling a few u more (u = unit roundoff of ``dtype``); shrinking by
    (dim+8)·2u covers all of it.
    """
    u = float(jnp.finfo(dtype).eps) / 2.0
    return bound * (1.0 - 2.0 * (dim + 8) * u)


# ---------------------------------------------------------------- the passes

def clipped_llr_sum(model, data: Array, theta: Array, theta_new: Array, bound: Optional[Array], *,
                    nan_to_bound: bool = True, block_size: Optional[int] = None
                    ) -> tuple[Array, Array]:
    """Sum of clipped per-example log-likelihood ratios ``Σ_j clip(ℓ_j(θ') − ℓ_j(θ))``.

    Parameters
    ----------
    model : Model
    data : array (n, ...) or PreparedData
    theta, theta_new : array (dim,)
        Current and proposed parameters.
    bound : float or None
        Clip bound ``c = b‖θ−θ'‖`` (each ratio clipped to ``[-c, c]``); ``None``: no clipping.
    nan_to_bound : bool, default True
        Private samplers: a NaN ratio becomes ``-bound`` and counts as clipped, so the sum keeps
        its sensitivity. ``False`` (non-private samplers): NaN propagates into the sum, so that
        the caller rejects the proposal.
    block_size : int, optional
        Rows per block when ``data`` is a raw array (ignored for PreparedData).

    Returns
    -------
    total : scalar
        The (untempered) clipped sum, in the floating dtype of ``theta`` (compensated across
        blocks).
    clip_count : scalar int
        Number of ratios clipped (NaN included when ``nan_to_bound``).
    """
    prepared = _as_prepared(data, model, block_size)
    dtype = _acc_dtype(theta)
    cm = prepared.column_major

    def fn(a, x, mask):
        theta, theta_new, bound = a
        x = x.astype(dtype)
        r = (_block_loglik(model, theta_new, x, cm) - _block_loglik(model, theta, x, cm)).astype(dtype)
        if bound is None:
            c, clipped = r, jnp.zeros(r.shape, bool)
        elif nan_to_bound:
            c, clipped = clip_ratios(r, jnp.asarray(bound, dtype))
        else:
            c = jnp.clip(r, -bound, bound)
            clipped = jnp.abs(r) > bound
        c = jnp.where(mask, c, 0.0)
        clipped = clipped & mask
        return jnp.sum(c), jnp.sum(clipped, dtype=jnp.int32)

    args = (theta, theta_new, None if bound is None else jnp.asarray(bound, dtype))
    return _reduce(fn, args, prepared, prepared.blocks)


def clipped_grad_sum(model, data: Array, theta: Array, grad_clip: Array, *,
                     method: str = "auto", block_size: Optional[int] = None,
                     grad_dtype: Optional[str] = None) -> tuple[Array, Array]:
    """Sum of per-example log-likelihood gradients, each clipped to L2 norm ``grad_clip``.

    Parameters
    ----------
    model : Model
    data : array (n, ...) or PreparedData
    theta : array (dim,)
    grad_clip : float
        Clip bound ``b_g``. Non-finite per-example gradients contribute zero.
    method : {"auto", "reverse", "forward", "vmap"}
        See :func:`per_example_grads`.
    block_size : int, optional
        Rows per block when ``data`` is a raw array.
    grad_dtype : {"float32", "float64"}, optional
        Dtype of the per-example gradients (default: that of ``theta``). With PreparedData the
        float32 copy made by :func:`prepare_data` is used when present.

    Returns
    -------
    total : array (dim,)
        Σ_j clip(∇ℓ_j(θ)) (untempered), accumulated in the floating dtype of ``theta``.
    clip_count : scalar int
        Number of per-example gradients clipped (non-finite ones included).
    """
    if method not in GRAD_METHODS:
        raise ValueError(f"method must be one of {GRAD_METHODS}, got {method!r}")
    prepared = _as_prepared(data, model, block_size, grad_dtype)
    acc = _acc_dtype(theta)
    gdt = resolve_grad_dtype(grad_dtype) if grad_dtype is not None else jnp.dtype(acc)
    gdt = jnp.promote_types(gdt, jnp.float32)
    if jnp.finfo(gdt).bits > jnp.finfo(acc).bits:
        gdt = jnp.dtype(acc)
    blocks = prepared.grad_view() if gdt != prepared.blocks.dtype else prepared.blocks
    cm = prepared.column_major
    dim = theta.shape[0]
    b = jnp.asarray(grad_clip, acc)
    b_local = (b if gdt == acc else _f32_safe_bound(b, gdt, dim)).astype(gdt)
    th = theta.astype(gdt)

    def fn(a, x, mask):
        th, b_local = a
        g = _block_grads(model, th, x.astype(gdt), cm, method).astype(gdt)
        rows = g.T if cm else g
        rows, clipped = clip_gradients(rows, b_local)
        rows = jnp.where(mask[:, None], rows, 0.0)
        clipped = clipped & mask
        return jnp.sum(rows.astype(acc), axis=0), jnp.sum(clipped, dtype=jnp.int32)

    # Reverse-mode per-example gradients measured 1.5–3× SLOWER with small reductions unrolled
    # (banana, 10-d Gaussian): the unrolling is applied only to forward passes.
    return _reduce(fn, (th, b_local), prepared, blocks, unroll=False)


def loglik_sum(model, data: Array, theta: Array, *, block_size: Optional[int] = None) -> Array:
    """Σ_j ℓ_j(θ), untempered and unclipped (non-private samplers only)."""
    prepared = _as_prepared(data, model, block_size)
    dtype = _acc_dtype(theta)
    cm = prepared.column_major

    def fn(theta, x, mask):
        ll = _block_loglik(model, theta, x.astype(dtype), cm).astype(dtype)
        return jnp.sum(jnp.where(mask, ll, 0.0))

    return _reduce(fn, theta, prepared, prepared.blocks)


def loglik_sum_and_grad(model, data: Array, theta: Array, *, block_size: Optional[int] = None
                        ) -> tuple[Array, Array]:
    """``(Σ_j ℓ_j(θ), ∇_θ Σ_j ℓ_j(θ))`` in one reverse-mode pass (non-private samplers only).

    Uses ``model.grad_log_likelihood_batch`` summed over rows when the model supplies it.
    """
    prepared = _as_prepared(data, model, block_size)
    dtype = _acc_dtype(theta)
    cm = prepared.column_major

    def fn(theta, x, mask):
        x = x.astype(dtype)
        if model.grad_log_likelihood_batch is not None:
            ll = _block_loglik(model, theta, x, cm).astype(dtype)
            g = model.grad_log_likelihood_batch(theta, _rows(x, cm)).astype(dtype)
            return jnp.sum(jnp.where(mask, ll, 0.0)), jnp.sum(jnp.where(mask[:, None], g, 0.0), axis=0)

        # The broadcast-θ form of the per-example gradients (see the module docstring), summed:
        # measured 2–6× faster on CPU than reverse mode through the vmapped sum with θ shared.
        axis = -1 if cm else 0
        m = x.shape[axis]
        shape = (theta.shape[0], m) if cm else (m, theta.shape[0])
        thetas = jnp.broadcast_to(theta[:, None] if cm else theta[None, :], shape)

        def total(ts):
            ll = jax.vmap(model.log_likelihood, in_axes=(axis, axis))(ts, x).astype(dtype)
            return jnp.sum(jnp.where(mask, ll, 0.0))

        value, g = jax.value_and_grad(total)(thetas)
        return value, jnp.sum(g, axis=axis)

    # Reverse-mode passes measured slower with small reductions unrolled: not applied here.
    return _reduce(fn, theta, prepared, prepared.blocks, model.grad_log_likelihood_batch is not None)
