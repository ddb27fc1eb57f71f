"""vectorize_columns equals jax.vmap over a trailing row axis, values and per-row gradients.

The record functions cover each rewrite rule of :func:`vectorize_columns` (constant-index
scatter-add / scatter / scatter-mul, fancy and negative gathers, per-row inner products, products
with a constant matrix on either side, scalar-vs-array elementwise operands) and the ``jax.vmap``
fallback (a data-dependent index, ``lax.cond``, custom-JVP functions). The per-row gradients
are also checked through :func:`small_operand_first`, as the gradient passes take them.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.records import jaxpr_rewrite as jr

M = np.arange(9.0).reshape(3, 3) / 7.0

FNS = {
    "at_add": lambda t, x: jnp.sum((x - t.at[1].add(t[0] ** 2)) ** 2),
    "at_set": lambda t, x: jnp.sum((x - t.at[0].set(3 * t[2])) ** 2),
    "at_mul": lambda t, x: jnp.sum((x - t.at[-1].mul(2.0)) ** 2),
    "at_slice": lambda t, x: jnp.sum((x - t.at[1:3].add(t[:2])) ** 2),
    "at_duplicates": lambda t, x: jnp.sum((x - t.at[jnp.array([0, 0, 2])].add(t[1])) ** 2),
    "gather": lambda t, x: jnp.sum(x * t[jnp.array([2, 0, 1])]),
    "gather_negative": lambda t, x: jnp.sum(x * t[jnp.array([-1, 0, 1])]),
    "dynamic_index": lambda t, x: x[jnp.argmax(x)] * t[0],
    "inner_products": lambda t, x: jnp.dot(x - t, x - t) + x @ jnp.asarray(M) @ t,
    "const_matrix_left": lambda t, x: jnp.sum(jnp.tanh(jnp.asarray(M) @ (x - t))),
    "const_matrix_right": lambda t, x: jnp.sum(jnp.sin((x * t) @ jnp.asarray(M))),
    "outer": lambda t, x: jnp.sum(jnp.outer(t, x) ** 2),
}
# Sub-jaxpr primitives (custom_jvp_call, cond) and select_n: the fallback and the elementwise
# rule, which FNS's scatter-mul and dynamic index and every function's arithmetic meet by
# default; checked like FNS by the slow test below (tests/models/test_user_models.py runs user
# models built from jax.nn, custom_jvp / custom_vjp, lax.cond and jnp.where through the same
# rewrite in the default run).
FNS_SUB_JAXPRS = {
    "custom_jvp": lambda t, x: jnp.sum(jax.nn.softplus(x * t)) + jax.nn.logsumexp(t * x),
    "cond": lambda t, x: jax.lax.cond(x[0] > 0, lambda: t @ x, lambda: -t @ x),
    "where": lambda t, x: jnp.sum(jnp.where(x > 0, t, -t) * x),
}


def test_vectorize_columns_matches_vmap():
    """Every function of FNS, each rewrite rule and the fallback: the rewritten values and
    per-row gradients equal jax.vmap's (rtol 1e-13)."""
    _check_against_vmap(FNS)


# slow: guard in default: test_vectorize_columns_matches_vmap (the same checks through the same
# rewrite, its rules and its fallback, on FNS); ~0.5-0.7 CPU-s of tracing.
@pytest.mark.slow
def test_vectorize_columns_matches_vmap_through_sub_jaxprs():
    """test_vectorize_columns_matches_vmap's checks on FNS_SUB_JAXPRS."""
    _check_against_vmap(FNS_SUB_JAXPRS)


def _check_against_vmap(fns):
    rng = np.random.default_rng(1)
    t = jnp.asarray(rng.normal(size=3))
    x = jnp.asarray(rng.normal(size=(3, 64)))
    ts = jnp.broadcast_to(t[:, None], (3, 64))

    def checks(f, t, ts):
        grad_cols = jax.grad(lambda s: jnp.sum(jr.vectorize_columns(f, (True, True))(s, x)))
        return (jax.vmap(f, in_axes=(None, -1))(t, x),
                jax.vmap(jax.grad(f), in_axes=(None, -1), out_axes=-1)(t, x),
                jr.vectorize_columns(f, (False, True))(t, x),
                # Per-row gradients by the broadcast-θ reverse pass (θ with a trailing row
                # axis), as written and through small_operand_first.
                grad_cols(ts), jr.small_operand_first(grad_cols)(ts),
                # Per-record gradients, one record's gradient jaxpr replayed over the rows
                # (method="vmap"), with θ's static slices resolved to its elements
                # (record_gradient) or by plain jax.grad.
                [jr.vectorize_columns(grad(f), (False, True))(t, x)
                 for grad in (jr.record_gradient, jax.grad)])

    # ONE compilation for every function (one per function before, ~0.3 CPU-s each: fifteen
    # programs): the rewritten values and every per-row gradient, and the plain vmap
    # references. Each function's checks are traced on their own, so a rewrite is tested
    # exactly as it was in a program of its own.
    results = jax.jit(lambda t, ts: {name: checks(f, t, ts) for name, f in fns.items()})(t, ts)
    assert sorted(results) == sorted(fns)
    for name, (ref, gref, got, g, g2, g3s) in results.items():
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13, err_msg=name)
        np.testing.assert_allclose(g, gref, rtol=1e-13, atol=1e-13, err_msg=name)
        np.testing.assert_allclose(g2, gref, rtol=1e-13, atol=1e-13, err_msg=name)
        for g3 in g3s:
            np.testing.assert_allclose(g3, gref, rtol=1e-13, atol=1e-13, err_msg=name)


def test_record_gradient_resolves_static_slices_of_theta():
    """A static slice of θ is the element itself: the gradient has no pad (the transpose of a
    slice) where jax.grad has one per slice; other uses of θ still see the whole vector."""
    f = FNS["at_add"]  # t[0] ** 2 (a slice) and t.at[1].add (a use of the whole vector)
    t, x = jnp.asarray([0.3, -0.2, 0.5]), jnp.asarray([1.0, 2.0, -1.0])

    def prims(fn):
        return [e.primitive.name for e in jax.make_jaxpr(fn)(t, x).jaxpr.eqns]
    # Strided and multi-element slices, and a squeeze of a one-element slice.
    g = lambda t, x: jnp.sum(t[::2] * x[:2]) + t[1:2].squeeze() ** 3 + jnp.dot(t, x)
    assert "pad" in prims(jax.grad(f)) and "pad" not in prims(jr.record_gradient(f))
    assert "pad" not in prims(jr.record_gradient(g))
    # The values, both functions in one compiled program.
    got = jax.jit(lambda t, x: [(jr.record_gradient(h)(t, x), jax.grad(h)(t, x))
                                for h in (f, g)])(t, x)
    for resolved, plain in got:
        np.testing.assert_allclose(resolved, plain, rtol=1e-15)


def test_auto_gradients_are_per_record_exactly_where_the_layout_says():
    """``method="auto"``: per-record gradients on DP-HMC's default CPU layout of a model with
    ≤ 4 parameters (one block of all rows here), the broadcast-θ reverse pass in blocks of 4096
    rows and for more parameters; the same clipped sums either way."""
    from dpmcmc.models import Model, banana, gaussian
    from dpmcmc.samplers import ALGORITHMS
    from dpmcmc.records.layout import prepare_data
    from dpmcmc.records.passes import clipped_grad_sum, per_example_grads

    n = 9000
    rng = np.random.default_rng(3)
    g6 = gaussian(np.eye(6) * 2.0)  # as a user writes it: the per-record function only
    g6 = Model(g6.log_likelihood, g6.log_prior, g6.dim)
    for model in (banana(2, a=5.0, batch_functions=False), g6):
        data = rng.normal(size=(n, model.dim)) + 0.5
        theta = jnp.asarray(rng.normal(size=model.dim) * 0.3)
        spec = ALGORITHMS["dp-hmc"]
        p = spec.prepare(dict(tau_l=0.1, tau_g=0.5, clip=0.1, grad_clip=1.0, step_size=0.01,
                              leapfrog_steps=2, grad_dtype="float64"), model, n)
        laid = spec.layout(data, p, model)
        small = model.dim <= 4
        assert laid.blocks.shape[-1] == (n if small else 4096)

        def trace(method, d=laid):
            return str(jax.make_jaxpr(lambda th: clipped_grad_sum(model, d, th, 1.0,
                                                                  method=method))(theta))
        auto = trace("auto")
        assert (auto == trace("vmap")) == small and (auto == trace("reverse")) == (not small)

        # One compiled program for the three passes (the data and the layout are arguments),
        # at a bound that clips about half the gradients: their median norm, computed in it.
        @jax.jit
        def passes(data, laid, th):
            bound = jnp.median(jnp.linalg.norm(per_example_grads(model, th, data), axis=1))
            return [clipped_grad_sum(model, data, th, bound, method="reverse"),
                    *(clipped_grad_sum(model, laid, th, bound, method=method)
                      for method in ("auto", "vmap"))]

        ref, *gots = passes(data, laid, theta)
        for got in gots:
            np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
            assert int(got[1]) == int(ref[1])
        assert 0 < int(ref[1]) < n  # some, not all, gradients clipped
        if small:
            blocked = prepare_data(data, model=model, block_size=4096, grad_dtype="float64")
            assert trace("auto", blocked) == trace("reverse", blocked)


def _dots(closed):
    return [e for e in closed.jaxpr.eqns if e.primitive.name == "dot_general"]


def test_small_operand_first_puts_the_smaller_operand_left():
    # The transpose of P @ r (reverse mode) is cotangent @ P, rows first; rewritten, every
    # product has its smaller operand on the left, and values, dtypes and shapes are kept.
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.normal(size=(3, 64)))
    ts = jnp.asarray(rng.normal(size=(3, 64)))
    grad = jax.grad(lambda s: jnp.sum(
        jr.vectorize_columns(FNS["const_matrix_left"], (True, True))(s, x)))
    before = jax.make_jaxpr(grad)(ts)
    after = jax.make_jaxpr(jr.small_operand_first(grad))(ts)
    assert any(np.prod(e.invars[0].aval.shape) > np.prod(e.invars[1].aval.shape)
               for e in _dots(before))
    assert _dots(after) and all(np.prod(e.invars[0].aval.shape) <= np.prod(e.invars[1].aval.shape)
                                for e in _dots(after))
    # Both evaluated in one compiled program (eagerly, every operation compiled its own).
    rewritten, plain = jax.jit(lambda s: (jr.small_operand_first(grad)(s), grad(s)))(ts)
    np.testing.assert_allclose(rewritten, plain, rtol=1e-13)

    # Batch axes are left alone; a requested output dtype is kept.
    a = jnp.asarray(rng.normal(size=(2, 50, 3)), jnp.float32)
    b = jnp.asarray(rng.normal(size=(2, 3, 4)), jnp.float32)
    c = jnp.asarray(rng.normal(size=(3, 4)), jnp.float32)

    def f(a, b, c):
        batched = jax.lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))
        wide = jax.lax.dot_general(a, c, (((2,), (0,)), ((), ())),
                                   preferred_element_type=jnp.float64)
        return batched, wide

    got, want = jax.jit(lambda a, b, c: (jr.small_operand_first(f)(a, b, c), f(a, b, c)))(a, b, c)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5)
    dots = _dots(jax.make_jaxpr(jr.small_operand_first(f))(a, b, c))
    assert dots[0].params["dimension_numbers"][1] == ((0,), (0,))   # batched: as written
    assert dots[1].invars[0].aval.shape == (3, 4)                     # swapped
