"""Four rewrites of a traced function's jaxpr, evaluated by one interpreter.

All re-evaluate a function's jaxpr equation by equation (:func:`_interpret`, nested ``jit``
calls inlined) and differ only in the rule that evaluates one equation:

- :func:`vectorize_columns` applies a per-record function to every column of a column-major
  block, keeping the row axis trailing through the whole computation (where ``jax.vmap`` moves
  it to the front);
- :func:`unroll_small_reductions` writes reductions and products over ≤ 16 elements as explicit
  adds, which XLA on CPU vectorises across rows;
- :func:`small_operand_first` writes every matrix product with its smaller operand on the left,
  so that in a reverse-mode gradient pass over column-major blocks the product with a constant
  matrix keeps the rows on the last axis;
- :func:`record_gradient` differentiates one record's log-likelihood with θ held as its
  elements, so that a static slice of θ needs no padded cotangent.

All keep the function's semantics: any primitive a rule does not rewrite is bound as
``jax.core.eval_jaxpr`` binds it (vectorised by ``jax.vmap`` in :func:`vectorize_columns`);
only the order of floating-point additions in rewritten reductions and products changes.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jax_core

Array = Any

__all__ = [
    "vectorize_columns",
    "unroll_small_reductions",
    "small_operand_first",
    "record_gradient",
    "SMALL_INDEXING",
    "SMALL_CONTRACTION",
    "SMALL_REDUCTION",
]

# Scatters / gathers with trace-time-constant indices into at most this many record elements
# are written as slices and concatenations; products contracting at most this many elements
# between two per-row operands as elementwise products and adds (see :func:`vectorize_columns`).
SMALL_INDEXING = 256
SMALL_CONTRACTION = 16
# Reductions over at most this many elements per output are written as explicit adds (see
# :func:`unroll_small_reductions`).
SMALL_REDUCTION = 16


# ---------------------------------------------------------------- the interpreter

_CALLS = ("pjit", "jit", "closed_call")


def _bind(eqn, invals) -> list:
    """Apply ``eqn``'s primitive to ``invals`` (as ``jax.core.eval_jaxpr`` does)."""
    res = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
    return list(res) if eqn.primitive.multiple_results else [res]


def _call_body(eqn):
    """The closed body of a nested ``jit`` / closed call, or None for any other equation."""
    if eqn.primitive.name not in _CALLS:
        return None
    body = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
    return body if isinstance(body, jax_core.ClosedJaxpr) else None


def _interpret(jaxpr, consts, args, rule: Callable) -> list:
    """Evaluate ``jaxpr`` on ``args``, every equation by ``rule(eqn, invals) -> outputs``.

    The bodies of nested ``jit`` / closed calls are evaluated in place by the same rule, so a
    rewrite reaches into functions the user jitted.
    """
    env = {}

    def read(v):
        return v.val if isinstance(v, jax_core.Literal) else env[v]

    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        env[v] = a
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        body = _call_body(eqn)
        if body is not None:
            outs = _interpret(body.jaxpr, body.consts, invals, rule)
        else:
            outs = rule(eqn, invals)
        for v, o in zip(eqn.outvars, outs):
            env[v] = o
    return [read(v) for v in jaxpr.outvars]


def _unrolled(op: Callable, x: Array, axes) -> Array:
    """``x`` reduced by ``op`` over ``axes`` as a chain of binary ops on slices."""
    for ax in sorted(axes, reverse=True):
        parts = [jax.lax.index_in_dim(x, i, ax, keepdims=False) for i in range(x.shape[ax])]
        acc = parts[0]
        for part in parts[1:]:
            acc = op(acc, part)
        x = acc
    return x


def _as_products(a: Array, b: Array, dimension_numbers, *, rows: bool, max_k: int,
                 max_free: Optional[int] = None, dtype=None) -> Optional[Array]:
    """``dot_general(a, b)`` as broadcast products and unrolled adds over the contraction.

    ``rows``: both operands carry a trailing row axis that the dimension numbers do not name;
    it stays the output's last axis. ``dtype``: the operands are cast to it first. Returns None
    when more than ``max_k`` elements are contracted or (with ``max_free``) the free dimensions
    hold more than ``max_free`` elements, which the products would blow up.
    """
    (lc, rc), (lb, rb) = dimension_numbers
    k = int(np.prod([a.shape[i] for i in lc])) if lc else 1
    tail = 1 if rows else 0
    lf = [i for i in range(a.ndim - tail) if i not in lc and i not in lb]
    rf = [i for i in range(b.ndim - tail) if i not in rc and i not in rb]
    if k > max_k:
        return None
    if max_free is not None:
        free = int(np.prod([a.shape[i] for i in lf] + [b.shape[i] for i in rf]))
        if free > max_free:
            return None
    # (batch, lhs free, 1.., contracted, rows) * (batch, 1.., rhs free, contracted, rows)
    a2 = jnp.transpose(a, list(lb) + lf + list(lc) + ([a.ndim - 1] if rows else []))
    b2 = jnp.transpose(b, list(rb) + rf + list(rc) + ([b.ndim - 1] if rows else []))
    if dtype is not None:
        a2, b2 = a2.astype(dtype), b2.astype(dtype)
    nb, nlf, nrf, nc = len(lb), len(lf), len(rf), len(lc)
    a2 = a2.reshape(a2.shape[:nb + nlf] + (1,) * nrf + a2.shape[nb + nlf:])
    b2 = b2.reshape(b2.shape[:nb] + (1,) * nlf + b2.shape[nb:])
    prod = a2 * b2
    return _unrolled(jax.lax.add, prod, list(range(nb + nlf + nrf, nb + nlf + nrf + nc)))


# ---------------------------------------------------------------- column-wise vectorisation

# Primitives that act elementwise on operands of one shape (after jnp's broadcasting): a trailing
# row axis passes through them once constant operands are broadcast along it.
_ELEMENTWISE = frozenset("""
abs acos acosh add and asin asinh atan atan2 atanh cbrt ceil clamp complex conj convert_element_type
copy copy_p cos cosh digamma div eq erf erf_inv erfc exp exp2 expm1 floor ge gt igamma igammac imag
integer_pow is_finite le lgamma log log1p logistic lt max min mul ne neg nextafter not or polygamma
pow real reduce_precision regularized_incomplete_beta rem round rsqrt select_n sign sin sinh sqrt
square stop_gradient sub tan tanh xor zeta random_gamma_grad bessel_i0e bessel_i1e
""".split())

# Primitives whose parameters name leading (record) axes only: a trailing row axis is untouched.
_LEADING_AXES = frozenset("""
reduce_sum reduce_max reduce_min reduce_prod reduce_and reduce_or argmax argmin cumsum cumprod
cummax cummin cumlogsumexp squeeze
""".split())


class _Rows:
    """A value of the vectorised record function that varies per row (rows on its last axis)."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x


def _bcast_rows(x: Array, m: int) -> Array:
    """A per-record constant broadcast along a trailing row axis of length ``m``."""
    x = jnp.asarray(x)
    return jax.lax.broadcast_in_dim(x, x.shape + (m,), tuple(range(x.ndim)))


def _full_rows(v, shape: tuple) -> Array:
    """An operand of an elementwise primitive at the output's ``shape`` (rows last).

    Per-record constants are broadcast along the rows; rank-0 operands (lax allows scalars
    beside arrays) to the whole shape.
    """
    if isinstance(v, _Rows):
        x = v.x
        return x if x.ndim == len(shape) else jax.lax.broadcast_in_dim(x, shape, (len(shape) - 1,))
    x = jnp.asarray(v)
    dims = () if x.ndim == 0 else tuple(range(x.ndim))
    return jax.lax.broadcast_in_dim(x, shape, dims)


def _runs(codes) -> list:
    """Split a sequence of ints into runs ``[start, length]`` of consecutive values."""
    runs: list = []
    for c in codes:
        if runs and runs[-1][0] + runs[-1][1] == c:
            runs[-1][1] += 1
        else:
            runs.append([c, 1])
    return runs


def _take0(flat: Array, codes) -> Array:
    """``flat[codes]`` along axis 0 for static ``codes``: slices and one concatenation."""
    parts = [jax.lax.slice_in_dim(flat, c, c + k, axis=0) for c, k in _runs(codes)]
    return parts[0] if len(parts) == 1 else jax.lax.concatenate(parts, 0)


def _scatter_columns(eqn, operand, indices, updates, m: int):
    """scatter / scatter-add with constant indices into a small record, rows kept trailing.

    Where each update element lands is found by running the scatter itself on marker values at
    trace time, so every index mode (clip, drop, out of range) keeps the primitive's semantics.
    Returns None when the rewrite does not apply.
    """
    rec = eqn.invars[0].aval.shape
    urec = eqn.invars[2].aval.shape
    size, usize = int(np.prod(rec)), int(np.prod(urec))
    dt = eqn.invars[0].aval.dtype
    if (not 0 < size <= SMALL_INDEXING or not 0 < usize <= SMALL_INDEXING
            or not jnp.issubdtype(dt, jnp.floating)):
        return None
    with jax.ensure_compile_time_eval():
        zeros = jnp.zeros(rec, dt)
        eye = jnp.eye(usize, dtype=dt).reshape((usize,) + tuple(urec))
        hits = np.asarray(jax.vmap(lambda u: _bind(eqn, [zeros, indices, u])[0])(eye))
    hits = hits.reshape(usize, size)
    if not np.all((hits >= 0) & (hits == np.round(hits))):
        return None
    if eqn.primitive.name == "scatter" and np.any(hits.sum(axis=0) > 1):
        return None  # duplicate indices: XLA leaves the winner unspecified; keep the primitive
    op = _bcast_rows(operand, m) if not isinstance(operand, _Rows) else operand.x
    up = _bcast_rows(updates, m) if not isinstance(updates, _Rows) else updates.x
    op = op.reshape((size, m))
    up = up.reshape((usize, m))
    pieces, keep = [], []
    for s in range(size):
        ks = [k for k in range(usize) for _ in range(int(hits[k, s]))]
        if not ks:
            keep.append(s)
            continue
        if keep:
            pieces.append(_take0(op, keep))
            keep = []
        if eqn.primitive.name == "scatter":
            val = jax.lax.slice_in_dim(up, ks[0], ks[0] + 1, axis=0)
        else:
            val = jax.lax.slice_in_dim(op, s, s + 1, axis=0)
            for k in ks:
                val = val + jax.lax.slice_in_dim(up, k, k + 1, axis=0)
        pieces.append(val)
    if keep:
        pieces.append(_take0(op, keep))
    out = pieces[0] if len(pieces) == 1 else jax.lax.concatenate(pieces, 0)
    return out.reshape(tuple(rec) + (m,))


def _gather_columns(eqn, operand, indices, m: int):
    """A gather with constant indices from a small record, as slices; rows kept trailing."""
    rec = eqn.invars[0].aval.shape
    out_shape = eqn.outvars[0].aval.shape
    size, osize = int(np.prod(rec)), int(np.prod(out_shape))
    if not 0 < size <= SMALL_INDEXING or not 0 < osize <= SMALL_INDEXING:
        return None
    params = dict(eqn.params)
    if "fill_value" in params:
        params["fill_value"] = -1.0
    with jax.ensure_compile_time_eval():
        codes = jnp.arange(size, dtype=jnp.float32).reshape(rec)
        got = np.asarray(eqn.primitive.bind(codes, indices, **params)).reshape(osize)
    if not np.all((got >= 0) & (got < size) & (got == np.round(got))):
        return None  # out-of-range reads (fill values): keep the primitive
    flat = operand.x.reshape((size, m))
    return _take0(flat, [int(c) for c in got]).reshape(tuple(out_shape) + (m,))


def _dot_columns(eqn, a, b, m: int):
    """dot_general with a trailing row axis on one or both operands; output rows trailing."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    av, bv = isinstance(a, _Rows), isinstance(b, _Rows)
    pet = eqn.params.get("preferred_element_type")
    if av and bv:
        out = _as_products(a.x, b.x, eqn.params["dimension_numbers"], rows=True,
                           max_k=SMALL_CONTRACTION)
        if out is None:
            return None
        return out.astype(pet) if pet is not None else out
    if lb or rb:
        return None
    if bv:  # constant @ rows: the rows axis is the last free axis of the rhs, i.e. last
        return jax.lax.dot_general(a, b.x, ((lc, rc), ((), ())), preferred_element_type=pet)
    # rows @ constant: rows are a free axis of the lhs, followed by the rhs's free axes
    out = jax.lax.dot_general(a.x, b, ((lc, rc), ((), ())), preferred_element_type=pet)
    nlf = a.x.ndim - len(lc)
    return jnp.moveaxis(out, nlf - 1, -1)


def _vmap_eqn(eqn, invals, m: int) -> list:
    """Any primitive, vectorised by ``jax.vmap`` over the trailing row axis (the fallback)."""
    axes = [-1 if isinstance(v, _Rows) else None for v in invals]
    args = [v.x if isinstance(v, _Rows) else v for v in invals]
    n_out = len(eqn.outvars)
    outs = jax.vmap(lambda *xs: tuple(_bind(eqn, xs)), in_axes=axes, out_axes=-1,
                    axis_size=m)(*args)
    return [_Rows(o) for o in outs[:n_out]]


def _columns_rule(m: int) -> Callable:
    """The equation rule of :func:`vectorize_columns` for blocks of ``m`` rows."""

    def rule(eqn, invals) -> list:
        name = eqn.primitive.name
        rows = [isinstance(v, _Rows) for v in invals]
        outs = None
        if not any(rows):
            # Per-record constants (θ-only work in forward passes, index arrays built from
            # literals) stay unvectorised; index arrays are evaluated now, so that the rules
            # below see them.
            if all(not isinstance(v, jax.core.Tracer) for v in invals) and not eqn.effects:
                with jax.ensure_compile_time_eval():
                    return _bind(eqn, invals)
            return _bind(eqn, invals)
        if name in _ELEMENTWISE:
            shape = tuple(eqn.outvars[0].aval.shape) + (m,)
            outs = [_Rows(o) for o in _bind(eqn, [_full_rows(v, shape) for v in invals])]
        elif name in _LEADING_AXES:
            outs = [_Rows(o) for o in _bind(eqn, [invals[0].x])]
        elif name == "broadcast_in_dim" and all(not r for r in rows[1:]):
            shape = tuple(eqn.params["shape"]) + (m,)
            dims = tuple(eqn.params["broadcast_dimensions"]) + (len(shape) - 1,)
            outs = [_Rows(jax.lax.broadcast_in_dim(invals[0].x, shape, dims))]
        elif name == "reshape" and len(invals) == 1 and eqn.params.get("dimensions") is None:
            outs = [_Rows(invals[0].x.reshape(tuple(eqn.params["new_sizes"]) + (m,)))]
        elif name == "slice":
            p = eqn.params
            strides = p["strides"] or (1,) * len(p["start_indices"])
            outs = [_Rows(jax.lax.slice(invals[0].x, tuple(p["start_indices"]) + (0,),
                                        tuple(p["limit_indices"]) + (m,), tuple(strides) + (1,)))]
        elif name == "transpose":
            perm = tuple(eqn.params["permutation"])
            outs = [_Rows(jnp.transpose(invals[0].x, perm + (len(perm),)))]
        elif name == "concatenate":
            xs = [v.x if isinstance(v, _Rows) else _bcast_rows(v, m) for v in invals]
            outs = [_Rows(jax.lax.concatenate(xs, eqn.params["dimension"]))]
        elif name == "pad" and not rows[1]:
            cfg = tuple(eqn.params["padding_config"]) + ((0, 0, 0),)
            outs = [_Rows(jax.lax.pad(invals[0].x, invals[1], cfg))]
        elif name in ("scatter-add", "scatter") and not rows[1]:
            out = _scatter_columns(eqn, *invals, m=m)
            outs = None if out is None else [_Rows(out)]
        elif name == "gather" and rows[0] and not rows[1]:
            out = _gather_columns(eqn, *invals, m=m)
            outs = None if out is None else [_Rows(out)]
        elif name == "dot_general":
            out = _dot_columns(eqn, *invals, m=m)
            outs = None if out is None else [_Rows(out)]
        return _vmap_eqn(eqn, invals, m) if outs is None else outs

    return rule


def vectorize_columns(fn: Callable, in_rows: tuple) -> Callable:
    """``fn`` (a function of one record) applied to every column of column-major blocks.

    ``vectorize_columns(fn, (False, True))(theta, xb)`` equals ``jax.vmap(fn, in_axes=(None,
    -1))(theta, xb)`` (outputs with the row axis last), but keeps the row axis trailing through
    the whole computation. ``jax.vmap`` moves a batch axis to the front whenever an operation
    meets a per-record constant (``tau * r`` with ``tau`` a constant vector, any ``theta``-only
    vector in a forward pass) and in the batching rules of scatter, gather and dot_general: one
    ``theta.at[1].add(v)`` or one ``tau * r`` then turns the pass into one over interleaved
    ``(m, d)`` data with transposes inside every block (the banana preset's float32 clipped
    gradient pass: 3.0 → 1.6 ms, 4 chains, n = 10⁵).

    ``fn`` is traced once per call at the record's shapes and its jaxpr replayed with the row
    axis appended to per-row values only: elementwise primitives get constant operands broadcast
    along the rows (XLA fuses the broadcast); axis-parametrised primitives (reductions, slices,
    reshapes, transposes, concatenations, pads, broadcasts) get the trailing axis added to their
    parameters; scatters and gathers with constant indices into ≤ 256 record elements become
    slices, adds and one concatenation (the scatter itself, run on marker values at trace time,
    says where each update lands, so every index mode keeps its semantics); a product of two
    per-row operands contracting ≤ 16 elements becomes elementwise products and adds, a product
    with a constant stays one ``dot_general`` (a matrix product per block). Per-record constants
    stay unvectorised. Any other primitive (control flow, custom derivatives, ...) is vectorised
    by ``jax.vmap`` with the row axis moved back to the end, so the result is always that of
    ``vmap``; only the order of additions in rewritten inner products differs.

    Parameters
    ----------
    fn : callable
        A function of one record's arguments.
    in_rows : tuple of bool
        Per positional argument: True if it carries a trailing row axis.
    """

    def wrapped(*args):
        m = next(a.shape[-1] for a, r in zip(args, in_rows) if r)
        rec = [jax.ShapeDtypeStruct(a.shape[:-1] if r else a.shape, a.dtype)
               for a, r in zip(args, in_rows)]
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*rec)
        flat = []
        for a, r in zip(args, in_rows):
            flat.extend(_Rows(leaf) if r else leaf for leaf in jax.tree.leaves(a))
        outs = _interpret(closed.jaxpr, closed.consts, flat, _columns_rule(m))
        outs = [o.x if isinstance(o, _Rows) else _bcast_rows(o, m) for o in outs]
        return jax.tree.unflatten(jax.tree.structure(out_shape), outs)

    return wrapped




# ---------------------------------------------------------------- small-reduction unrolling

_UNROLL_OPS = {"reduce_sum": jax.lax.add, "reduce_max": jax.lax.max, "reduce_min": jax.lax.min}


def _dot_as_products(eqn, a: Array, b: Array, need_batch: bool = True):
    """A ``dot_general`` with a small contraction as broadcast products + unrolled adds.

    Returns None when the rewrite does not apply (no batch dimensions while ``need_batch``, a
    large contraction, or large free dimensions that the products would blow up).
    """
    dimension_numbers = eqn.params["dimension_numbers"]
    if need_batch and not dimension_numbers[1][0]:
        return None
    return _as_products(a, b, dimension_numbers, rows=False, max_k=SMALL_REDUCTION,
                        max_free=SMALL_REDUCTION * SMALL_REDUCTION,
                        dtype=eqn.outvars[0].aval.dtype)


# Higher-order primitives whose bodies this rewrite evaluates itself, so that reductions inside
# them are unrolled too; each is rebuilt with its semantics kept (:func:`_inline`; nested calls
# are inlined by :func:`_interpret`).
_INLINED = frozenset({"pjit", "jit", "closed_call", "custom_jvp_call", "custom_vjp_call", "cond"})
# Primitives with sub-jaxprs bound unchanged, exactly as ``jax.core.eval_jaxpr`` binds them: loops,
# linear solves and rematerialisation (their bodies keep their reductions), and the primitives
# whose sub-jaxpr is only a scalar combiner (variadic ``lax.reduce``, as in the passes' own
# ``_sum_and_count``; windowed reductions; scatters from ``x.at[i].add`` and their
# gradients). Any other primitive that carries a sub-jaxpr is one this rewrite does not
# understand: the whole function then runs as written (see :func:`unroll_small_reductions`).
_OPAQUE = frozenset("""
while scan custom_linear_solve checkpoint remat2 reduce reduce_window scatter scatter-add
scatter-sub scatter-mul scatter-min scatter-max select_and_scatter select_and_scatter_add
""".split())


def _sub_jaxprs(eqn) -> list:
    return list(jax_core.jaxprs_in_params(eqn.params))


def _understood(jaxpr) -> bool:
    """Whether every higher-order primitive of ``jaxpr`` (recursively) is inlined or opaque.

    Decided from the jaxpr's structure alone (primitive names and sub-jaxprs), never from values.
    """
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _INLINED:
            if not all(_understood(j) for j in _sub_jaxprs(eqn)):
                return False
        elif name not in _OPAQUE and _sub_jaxprs(eqn):
            return False
    return True


def _rewrites(jaxpr) -> bool:
    """Whether evaluating ``jaxpr`` here may rewrite anything (a reduction or a dot_general)."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _UNROLL_OPS or name == "dot_general":
            return True
        if name in _INLINED and any(_rewrites(j) for j in _sub_jaxprs(eqn)):
            return True
    return False


def _eval_closed(closed, args) -> tuple:
    return tuple(_interpret(closed.jaxpr, closed.consts, list(args), _unroll_rule))


def _inline(eqn, invals) -> Optional[list]:
    """Evaluate a custom-derivative or ``cond`` primitive with its body unrolled, semantics kept.

    - ``custom_jvp_call`` / ``custom_vjp_call``: a new custom-derivative function whose primal
      is the unrolled body and whose rule is the ORIGINAL primitive differentiated (so
      ``jax.nn.softplus``'s or a user's rule still applies if the result is differentiated);
    - ``cond``: ``lax.switch`` over the unrolled branches (same index, same operands).

    Returns None (bind the primitive unchanged) when the body has nothing to rewrite, e.g. the
    elementwise bodies of ``jax.nn.softplus`` or ``jnp.logaddexp``, and for a nested call that
    :func:`_interpret` did not inline (one without a closed body).
    """
    name = eqn.primitive.name
    if name in _CALLS or not any(_rewrites(j) for j in _sub_jaxprs(eqn)):
        return None

    def original(*xs):
        return tuple(_bind(eqn, list(xs)))

    if name == "custom_jvp_call":
        body = eqn.params["call_jaxpr"]
        fun = jax.custom_jvp(lambda *xs: _eval_closed(body, xs))
        fun.defjvp(lambda primals, tangents: jax.jvp(original, primals, tangents))
        return list(fun(*invals))
    if name == "custom_vjp_call":
        body = eqn.params["call_jaxpr"]
        fun = jax.custom_vjp(lambda *xs: _eval_closed(body, xs))
        # The residual is the original primitive's pullback (a pytree of arrays).
        fun.defvjp(lambda *xs: jax.vjp(original, *xs), lambda pullback, cts: pullback(cts))
        return list(fun(*invals))
    if name == "cond":
        index, *ops = invals
        branches = [lambda *xs, br=br: _eval_closed(br, xs) for br in eqn.params["branches"]]
        return list(jax.lax.switch(index, branches, *ops))
    return None


def _unroll_rule(eqn, invals) -> list:
    """The equation rule of :func:`unroll_small_reductions`.

    Small reductions and products are rewritten as unrolled adds; every other primitive is bound
    as ``jax.core.eval_jaxpr`` binds it (``get_bind_params``: the form that custom-derivative
    and call primitives need). Callers check :func:`_understood` first.
    """
    name = eqn.primitive.name
    outs = None
    if name in _UNROLL_OPS:
        shape = np.shape(invals[0])
        axes = eqn.params["axes"]
        if len(shape) > len(axes) and int(np.prod([shape[i] for i in axes])) <= SMALL_REDUCTION:
            outs = [_unrolled(_UNROLL_OPS[name], invals[0], axes)]
    elif name == "dot_general":
        out = _dot_as_products(eqn, *invals)
        outs = None if out is None else [out]
    elif name in _INLINED:
        outs = _inline(eqn, invals)
    return _bind(eqn, invals) if outs is None else outs


def _same_types(a, b) -> bool:
    return len(a) == len(b) and all(
        tuple(x.shape) == tuple(y.shape) and x.dtype == y.dtype for x, y in zip(a, b))


def unroll_small_reductions(fn: Callable) -> Callable:
    """``fn`` with every reduction over ≤ 16 elements per output written as explicit adds.

    A per-record function vectorised over a block reduces over the record's few components
    (``jnp.sum`` over d = 2, an inner product ``r @ (P @ r)`` over d = 10) once per row. XLA on
    CPU emits such short reductions as a scalar loop per row, several times slower than the
    surrounding vectorised elementwise code; as a chain of adds of slices they vectorise across
    rows. Measured on the presets' per-record log-likelihoods (one block pass, 4 chains): banana
    8.8 → 1.0 ms, 10-d Gaussian 47 → 21 ms, faster than their hand-written vectorised versions.
    Only the order of floating-point additions changes.

    Nested ``jit`` calls are inlined; the bodies of ``custom_jvp`` / ``custom_vjp`` functions
    and of ``lax.cond`` are rewritten too, their differentiation rules and branch selection
    kept; loops, linear solves, ``checkpoint`` and primitives with scalar combiners (variadic
    ``lax.reduce``, scatters) run unchanged. A function with any other higher-order primitive
    (e.g. ``custom_vmap``) runs exactly as written, and so does one whose rewritten
    trace fails or changes an output's shape or dtype: both are decided at trace time, from
    the jaxpr's structure, never from data values.
    """

    def wrapped(*args):
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        if not _understood(closed.jaxpr):
            return fn(*args)
        flat = jax.tree.leaves(args)
        try:
            # Traced on abstract values: whether this fails depends only on the structure.
            unrolled = jax.make_jaxpr(
                lambda *xs: _interpret(closed.jaxpr, closed.consts, list(xs), _unroll_rule))(*flat)
        except Exception:  # a primitive this interpreter mishandles: the plain path instead
            return fn(*args)
        if not _same_types(unrolled.out_avals, closed.out_avals):
            return fn(*args)
        outs = jax_core.jaxpr_as_fun(unrolled)(*flat)
        return jax.tree.unflatten(jax.tree.structure(out_shape), outs)

    return wrapped


# ---------------------------------------------------------------- product orientation

def _small_first_rule(eqn, invals) -> list:
    """The equation rule of :func:`small_operand_first`."""
    if eqn.primitive.name == "dot_general":
        a, b = invals
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        if not lb and np.size(a) > np.size(b):
            # dot_general(a, b) = transpose(dot_general(b, a)): the swapped product lists b's
            # free axes first, then a's; move them back.
            out = jax.lax.dot_general(b, a, ((rc, lc), ((), ())),
                                      precision=eqn.params.get("precision"),
                                      preferred_element_type=eqn.params.get("preferred_element_type"))
            nbf, naf = np.ndim(b) - len(rc), np.ndim(a) - len(lc)
            return [jnp.transpose(out, tuple(range(nbf, nbf + naf)) + tuple(range(nbf)))]
    return _bind(eqn, invals)


def small_operand_first(fn: Callable) -> Callable:
    """``fn`` with every matrix product without batch axes computed with its smaller operand on
    the left, and the result transposed back.

    For the reverse-mode per-example gradients of column-major blocks. There a product
    ``P @ r`` of a constant matrix with a block's rows (rows on the last axis) has the transpose
    ``cotangent @ P`` (JAX's transpose rule puts the cotangent first), whose result has the rows
    FIRST: XLA on CPU materialises a transposed copy of the block before the product and another
    after it, and runs the product in the tall orientation. As ``P^T @ cotangent`` the rows stay
    last and the two transposes cancel (the 10-d Gaussian preset's float32 clipped gradient pass,
    4 chains, n = 10⁵, CPU time, interleaved: 22 → 11.6 ms). The same products; only the order
    of additions inside XLA's product kernel may differ.
    """

    def wrapped(*args):
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        outs = _interpret(closed.jaxpr, closed.consts, jax.tree.leaves(args), _small_first_rule)
        return jax.tree.unflatten(jax.tree.structure(out_shape), outs)

    return wrapped


# ---------------------------------------------------------------- θ held as its elements

class _Elements:
    """A rank-1 value held as the list of its scalar elements (see :func:`record_gradient`)."""

    def __init__(self, parts):
        self.parts = list(parts)

    def array(self) -> Array:
        return jnp.stack(self.parts)


def _elements_rule(eqn, invals):
    """Static slices (and squeezes) of an :class:`_Elements` value are its elements; any other
    use stacks them into the array they stand for."""
    if not any(isinstance(v, _Elements) for v in invals):
        return _bind(eqn, invals)
    x = invals[0]
    name = eqn.primitive.name
    if name == "slice" and len(invals) == 1:
        (start,), (stop,) = eqn.params["start_indices"], eqn.params["limit_indices"]
        step = eqn.params["strides"][0] if eqn.params["strides"] else 1
        return [_Elements(x.parts[start:stop:step])]
    if name == "squeeze" and isinstance(x, _Elements) and len(x.parts) == 1:
        return [x.parts[0]]
    return _bind(eqn, [v.array() if isinstance(v, _Elements) else v for v in invals])


def record_gradient(fn: Callable) -> Callable:
    """``∇_θ fn(θ, x)`` for ONE record, by reverse mode with respect to θ's elements.

    ``fn(theta, x) -> scalar`` with ``theta`` of shape ``(d,)``. Reverse mode transposes each
    static slice of θ (``theta[0]``) into a ``pad`` of the cotangent to θ's full shape, and the
    pads are added up; vectorised over a block's rows (:func:`vectorize_columns`) that is a
    padded ``(d, rows)`` array per slice, which XLA materialises. Here ``fn`` is evaluated with θ
    held as its d elements: a static slice of θ IS the elements it selects (no pad in the
    transpose), and only the other uses of θ see the stacked vector. The banana preset's float32
    clipped gradient pass (4 chains, one block of 10⁵ rows, interleaved): 0.91 → 0.76 ms wall,
    1.52 → 1.33 ms CPU. The same gradient; only the order of its additions may differ.
    """

    def grad(theta, x):
        d = theta.shape[0]

        def of_elements(*parts):
            closed = jax.make_jaxpr(fn)(jnp.stack(parts), x)
            (out,) = _interpret(closed.jaxpr, closed.consts, [_Elements(parts), x],
                                _elements_rule)
            return out.array() if isinstance(out, _Elements) else out

        parts = [theta[k] for k in range(d)]
        return jnp.stack(jax.grad(of_elements, argnums=tuple(range(d)))(*parts))

    return grad
