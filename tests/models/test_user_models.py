"""Models written with everyday JAX run under every sampler, and the fast path keeps their values.

The per-example passes rewrite a model's computation (:func:`vectorize_columns` keeps the row
axis trailing, :func:`unroll_small_reductions` writes short reductions as adds). A user model
built from ``jax.nn``, ``jax.scipy.special`` / ``jax.scipy.stats``, ``lax.cond``, ``jnp.where``,
``logsumexp`` or its own ``custom_jvp`` / ``custom_vjp`` functions meets primitives with
sub-jaxprs (``custom_jvp_call``, ``custom_vjp_call``, ``cond``, ``jit``); these once crashed the
unrolling (``KeyError: 'subfuns'``, issue 12 §1), the built-in logistic regression included.

Checked here:

- the fast path equals plain ``vmap(log_likelihood)`` / ``vmap(grad)`` per example and in the
  passes' sums, to 1e-12 in float64, on several θ;
- the rewrite really happens (no short reduction left in the unrolled jaxpr), custom
  differentiation rules survive it, and a function with a higher-order primitive the rewrite
  does not know runs exactly as written, decided from the jaxpr alone;
- every battery model and every built-in model runs under every sampler (a few iterations).
"""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import jax.scipy.stats as jst
import numpy as np
import pytest
from jax import custom_batching, lax
from jax.extend import core as jax_core

import dpmcmc
from dpmcmc import models
from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS, SAMPLERS
from dpmcmc.records import jaxpr_rewrite as jr
from dpmcmc.records import passes as pe

from api_params import KNOWN

D = 2          # parameters; a record is (features x[:D], label-or-count x[D])
N = 96         # rows: small, the battery is about running, not about statistics
ITERS = 5


# ------------------------------------------------------------------- user-written custom rules

@jax.custom_jvp
def _sq_norm(v):
    return jnp.sum(v * v)


@_sq_norm.defjvp
def _sq_norm_jvp(primals, tangents):
    (v,), (dv,) = primals, tangents
    # Deliberately 3, not 2: a rewrite that dropped the rule would change the gradient.
    return _sq_norm(v), 3.0 * jnp.sum(v * dv)


@jax.custom_vjp
def _soft_total(v):
    return jnp.sum(jnp.tanh(v))


def _soft_total_fwd(v):
    return _soft_total(v), v


def _soft_total_bwd(v, g):
    # Deliberately not the true derivative (1 - tanh²): a lost rule would show.
    return (0.5 * g * jnp.ones_like(v),)


_soft_total.defvjp(_soft_total_fwd, _soft_total_bwd)


@custom_batching.custom_vmap
def _batched_total(v):
    return jnp.sum(v)


@_batched_total.def_vmap
def _batched_total_rule(axis_size, in_batched, v):
    return jnp.sum(v, axis=-1), in_batched[0]


# custom_vmap has no reverse-mode rule of its own: a custom_jvp around it supplies one, so the
# model below can be differentiated. Called on θ alone, it survives vectorisation over the rows
# and reaches the unrolling as a `custom_vmap_call` inside a `custom_jvp_call`.
@jax.custom_jvp
def _theta_total(v):
    return _batched_total(v * v)


@_theta_total.defjvp
def _theta_total_jvp(primals, tangents):
    (v,), (dv,) = primals, tangents
    return _theta_total(v), jnp.sum(2.0 * v * dv)


# ------------------------------------------------------------------- the battery

def _z(th, x):
    return x[:D] @ th


BATTERY = {
    "softplus": lambda th, x: x[D] * _z(th, x) - jax.nn.softplus(_z(th, x)),
    "logaddexp": lambda th, x: x[D] * _z(th, x) - jnp.logaddexp(0.0, _z(th, x)),
    "log_sigmoid": lambda th, x: (x[D] * jax.nn.log_sigmoid(_z(th, x))
                                  + (1.0 - x[D]) * jax.nn.log_sigmoid(-_z(th, x))),
    # θ-only predicate: stays a `cond` inside the vectorised block, with reductions in branches.
    "cond": lambda th, x: lax.cond(th[0] > 0.0,
                                   lambda: -0.5 * jnp.sum((x[:D] - th) ** 2),
                                   lambda: -0.5 * jnp.sum((x[:D] - th) ** 2) - 0.1 * th[0]),
    "where_huber": lambda th, x: jnp.sum(jnp.where(jnp.abs(x[:D] - th) < 1.0,
                                                   -0.5 * (x[:D] - th) ** 2,
                                                   0.5 - jnp.abs(x[:D] - th))),
    "logsumexp_mixture": lambda th, x: jsp.logsumexp(
        jnp.stack([jst.norm.logpdf(x[0], th[0], 1.0), jst.norm.logpdf(x[0], th[1], 2.0)]),
        b=jnp.array([0.3, 0.7])),
    "stats": lambda th, x: (jnp.sum(jst.t.logpdf(x[:D], 4.0, th, 1.5))
                            + jst.poisson.logpmf(x[D] * 3.0, jnp.exp(0.2 * th[0]))
                            + jst.bernoulli.logpmf(x[D], jsp.expit(_z(th, x)))),
    "special": lambda th, x: (jsp.xlogy(x[D], jsp.expit(_z(th, x)))
                              + jsp.xlog1py(1.0 - x[D], -jsp.expit(_z(th, x)))
                              - jsp.gammaln(2.0 + th[0] ** 2) + jsp.log_ndtr(_z(th, x))),
    "nn": lambda th, x: (-jnp.sum(jax.nn.relu(x[:D] - th) ** 2)
                         - 0.01 * jnp.sum(jax.nn.gelu(th)) - 0.1 * jnp.sum(jax.nn.elu(x[:D] * th))
                         + jnp.sum(jax.nn.log_softmax(jnp.concatenate([th, x[:D]])))),
    "custom_jvp": lambda th, x: -0.5 * _sq_norm(x[:D] - th),
    "custom_vjp": lambda th, x: _soft_total(x[:D] * th) - 0.5 * jnp.sum(th * th),
}

# One of each kind of sub-jaxpr (custom_jvp, custom_vjp, cond, logsumexp's stop_gradient and
# short reductions), for the every-sampler run in the default suite; the full battery under
# every sampler is the slow test below (each model compiles once per sampler).
_SINK = ("softplus", "cond", "logsumexp_mixture", "custom_vjp")
_PARTS = tuple(BATTERY[k] for k in _SINK)
BATTERY["kitchen_sink"] = lambda th, x: sum(f(th, x) for f in _PARTS) / len(_PARTS)

# A higher-order primitive the unrolling does not know (custom_vmap), beside a short reduction
# it would otherwise rewrite.
UNKNOWN = lambda th, x: 0.1 * _theta_total(th) * x[D] - 0.5 * jnp.sum((x[:D] - th) ** 2)  # noqa: E731

THETAS = [np.array([0.3, -0.7]), np.array([-1.2, 0.4]), np.array([2.5, 1.5])]


def _prior(th):
    return -0.5 * jnp.sum(th * th) / 4.0


def _model(name: str) -> Model:
    fn = UNKNOWN if name == "unknown" else BATTERY[name]
    return Model(fn, _prior, D, name=name)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(N, D + 1))
    x[:, D] = (x[:, D] > 0).astype(float)
    return x


def _short_reductions(jaxpr) -> int:
    """Reductions over ≤ 16 elements per output of a batched operand (what the rewrite targets),
    counted in a jaxpr and every sub-jaxpr in its parameters."""
    count = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("reduce_sum", "reduce_max", "reduce_min"):
            shape, axes = eqn.invars[0].aval.shape, eqn.params["axes"]
            count += len(shape) > len(axes) and int(np.prod([shape[i] for i in axes])) <= 16
        for sub in jax_core.jaxprs_in_params(eqn.params):
            count += _short_reductions(sub)
    return count


def _prims(jaxpr) -> set:
    """Primitive names of a jaxpr and of every sub-jaxpr in its parameters."""
    out = set()
    for eqn in jaxpr.eqns:
        out.add(eqn.primitive.name)
        for sub in jax_core.jaxprs_in_params(eqn.params):
            out |= _prims(sub)
    return out


def _block_fn(ll):
    """The forward block computation of the samplers: vectorised columns, then unrolled."""
    return jr.unroll_small_reductions(jr.vectorize_columns(ll, (False, True)))


# ------------------------------------------------------------------- equality with vmap

# slow: special, stats and nn (the costliest compilations); guard in default: the other cases,
# which hold every kind of sub-jaxpr and short reduction these three do (custom_jvp: custom_jvp
# and softplus; logsumexp's stop_gradient: logsumexp_mixture; short reductions: where_huber,
# cond), through the same passes and checks. (logaddexp and log_sigmoid are slow too since stop
# 38: tests/suite_budget.py, with their guard.)
_FAST_PATH_SLOW = ("special", "stats", "nn")


@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.slow) if k in _FAST_PATH_SLOW
                                  else k for k in sorted(set(BATTERY) - {"kitchen_sink"})] + ["unknown"])
def test_fast_path_equals_vmap(name, data):
    model = _model(name)
    ll = model.log_likelihood
    x = jnp.asarray(data)

    @jax.jit
    def everything(t, t2):
        # One compilation per model: per-example values (forward block pass) and gradients (the
        # broadcast-θ reverse pass), the passes' sums, and the plain vmap references.
        per_ex = _block_fn(ll)(t, x.T)
        g = jax.grad(lambda s: jnp.sum(jr.vectorize_columns(ll, (True, True))(s, x.T)))(
            jnp.broadcast_to(t[:, None], (D, N)))
        sums = (pe.loglik_sum(model, x, t), pe.clipped_llr_sum(model, x, t, t2, None)[0],
                pe.clipped_grad_sum(model, x, t, 1e12)[0], pe.loglik_sum_and_grad(model, x, t))
        refs = (jax.vmap(ll, (None, 0))(t, x), jax.vmap(ll, (None, 0))(t2, x),
                jax.vmap(jax.grad(ll), (None, 0))(t, x))
        return per_ex, g.T, sums, refs

    for th, th2 in zip(THETAS, THETAS[1:] + THETAS[:1]):
        per_ex, g, (total, llr, gsum, (total2, gtotal)), (ref, ref2, gref) = everything(
            jnp.asarray(th), jnp.asarray(th2))
        assert np.all(np.isfinite(ref)) and np.all(np.isfinite(gref))
        np.testing.assert_allclose(per_ex, ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g, gref, rtol=1e-12, atol=1e-12)
        # The sums the samplers release (before noise), against plain sums of vmap.
        scale = 1e-12 * max(1.0, float(jnp.sum(jnp.abs(ref))))
        assert abs(float(total) - float(jnp.sum(ref))) <= scale
        assert abs(float(total2) - float(jnp.sum(ref))) <= scale
        assert abs(float(llr) - float(jnp.sum(ref2 - ref))) <= scale
        gscale = 1e-12 * max(1.0, float(jnp.sum(jnp.abs(gref))))
        np.testing.assert_allclose(gsum, jnp.sum(gref, axis=0), rtol=0, atol=gscale)
        np.testing.assert_allclose(gtotal, jnp.sum(gref, axis=0), rtol=0, atol=gscale)


@pytest.mark.parametrize("name", ["logistic", "gaussian", "banana", "circle", "mixture"])
def test_builtin_batch_functions_equal_vmap(name, builtin_models):
    """Built-ins' vectorised functions, unrolled, equal vmap of their per-record function."""
    model, x = builtin_models[name]
    x = jnp.asarray(x)
    # The unrolled batch function and the vmap reference in one compiled program.
    both = jax.jit(lambda t, x: (jr.unroll_small_reductions(model.log_likelihood_batch)(t, x),
                                 jax.vmap(model.log_likelihood, (None, 0))(t, x)))
    for th in THETAS[:2]:
        assert model.dim == D
        fast, ref = both(jnp.asarray(th), x)
        np.testing.assert_allclose(fast, ref, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------- the rewrite itself

@pytest.mark.parametrize("name", ["where_huber", "nn", "cond", "logsumexp_mixture", "custom_jvp",
                                  "custom_vjp", "kitchen_sink"])
def test_short_reductions_are_rewritten(name):
    """Understood models take the fast path: no short reduction over the rows is left over.

    With the rewrite silently skipped (a fallback taken too eagerly) the values would still
    agree with vmap; this is what shows the fast path is in use.
    """
    ll = BATTERY[name]
    x = jnp.zeros((D + 1, 8))
    t = jnp.zeros(D)
    assert _short_reductions(jax.make_jaxpr(jr.vectorize_columns(ll, (False, True)))(t, x).jaxpr)
    assert _short_reductions(jax.make_jaxpr(_block_fn(ll))(t, x).jaxpr) == 0


@pytest.mark.parametrize("name", ["gaussian", "banana", "logistic", "kitchen_sink", "custom_jvp"])
def test_forward_passes_take_the_rewrite(name, builtin_models, data):
    """Inside the samplers' real forward passes (whose own variadic ``lax.reduce`` and clip
    helpers are higher-order too) the short reductions are rewritten: the fallback is not taken
    for models it understands, built-in (row-major batch functions) or user-written."""
    if name in builtin_models:
        model, x = builtin_models[name]
        if name == "gaussian":
            model = models.gaussian(np.eye(10))  # a 10-term inner product per row
            x = np.random.default_rng(3).normal(size=(N, 10))  # traced only: its shape is read
    else:
        model, x = _model(name), data
    x = jnp.asarray(x)
    t = jnp.zeros(model.dim)
    jp = jax.make_jaxpr(lambda a, b: (pe.clipped_llr_sum(model, x, a, b, 1.0),
                                      pe.loglik_sum(model, x, a)))(t, t + 0.1)
    assert _short_reductions(jp.jaxpr) == 0


@pytest.mark.parametrize("name", ["custom_jvp", "custom_vjp", "cond", "softplus"])
def test_rewrite_keeps_custom_rules(name, data):
    """Differentiating the rewritten function uses the model's own rules (deliberately wrong
    ones here, so that the true derivative of the rewritten body would not match)."""
    ll = BATTERY[name]
    x = jnp.asarray(data[:16])
    block = lambda t: jnp.sum(jax.vmap(ll, (None, 0))(t, x))  # noqa: E731
    fast = jr.unroll_small_reductions(block)
    # Both gradients in one compiled program (one compilation per model, not one per operation).
    grads = jax.jit(lambda t: (jax.grad(fast)(t), jax.grad(block)(t)))
    for th in THETAS:
        g_fast, g_block = grads(jnp.asarray(th))
        np.testing.assert_allclose(g_fast, g_block, rtol=1e-12, atol=1e-12)
    if name == "custom_jvp":
        # The rule's factor 3 (not 2) is the one applied: d/dθ Σ -½‖x_j−θ‖² by it is 1.5 Σ (x_j−θ).
        t = jnp.asarray(THETAS[0])
        expect = 1.5 * jnp.sum(x[:, :D] - t, axis=0)
        np.testing.assert_allclose(grads(t)[0], expect, rtol=1e-12)


def test_unknown_higher_order_primitive_runs_as_written(data):
    """A custom_vmap function is not understood: the whole function runs unchanged (its short
    reduction stays), the result equals vmap, and the choice is made on the jaxpr alone (an
    abstract trace with no data values takes the same route)."""
    x = jnp.zeros((D + 1, 8))
    t = jnp.zeros(D)
    traced = jax.make_jaxpr(_block_fn(UNKNOWN))(t, x)
    assert "custom_vmap_call" in _prims(traced.jaxpr)
    assert _short_reductions(traced.jaxpr) > 0
    # Same structure whatever θ, data or row count: nothing value-dependent in the decision.
    again = jax.make_jaxpr(_block_fn(UNKNOWN))(jax.ShapeDtypeStruct((D,), jnp.float64),
                                                jax.ShapeDtypeStruct((D + 1, 8), jnp.float64))
    assert str(again) == str(traced)
    plain = jax.make_jaxpr(jr.vectorize_columns(UNKNOWN, (False, True)))(t, x)
    assert str(traced) == str(plain)
    # Understood apart from that primitive: without it, the same reduction is rewritten.
    known = lambda th, xr: -0.5 * jnp.sum((xr[:D] - th) ** 2)  # noqa: E731
    assert _short_reductions(jax.make_jaxpr(_block_fn(known))(t, x).jaxpr) == 0


# ------------------------------------------------------------------- every sampler

def _run(model, x, algo):
    params = dict(KNOWN[algo])
    if ALGORITHMS[algo].private:
        params["delta"] = 1e-3
    # Tiny data: the chains need not move, only run (force). The plan may say so: the only
    # warning allowed is its PlanWarning about chains that cannot move.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = dpmcmc.sample(model, x, algo, iterations=ITERS, chains=1, key=jax.random.key(0),
                            progress=False, force=ALGORITHMS[algo].private, **params)
    caught = [w for w in caught if not issubclass(w.category, dpmcmc.KeyReuseWarning)]
    assert all(issubclass(w.category, dpmcmc.PlanWarning) and "move" in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    s = np.asarray(res.samples)
    assert s.shape == (1, ITERS, model.dim)
    assert np.all(np.isfinite(s))
    return res


# The every-sampler runs of a user model with sub-jaxprs (the kitchen sink) and of the built-in
# logistic regression (row-major batch functions; its softplus is a custom_jvp) are split between
# the two in the default suite, so that every sampler's own use of the per-example passes meets
# one of them: the kitchen sink under dp-hmc (clipped gradient and ratio sums over all rows;
# slow, see below), dp-penalty (the cached per-row log-likelihoods), dp-barker (clipped per-example ratios of a
# minibatch) and rwmh (ratio and log-likelihood sums); the logistic regression under hmc
# (log-likelihood sum and gradient), dp-sgld (clipped gradient sum of a minibatch) and
# minibatch-penalty (clipped per-example ratios of a minibatch, dp-barker's pass). dp-sgnht steps
# through dp-sgld's gradient release (dp_sgnht imports prepare_sgd and its releases from
# dp_sgld), so logistic[dp-sgld] guards it. Each model under every sampler is the slow run; every
# pass (the gradient sum hmc takes included) on every battery model is
# test_fast_path_equals_vmap.
# The kitchen sink under rwmh and dp-barker is slow-only as well: rwmh's passes are the
# unclipped ratio and log-likelihood sums, which the kitchen sink meets inside a chain under
# dp-penalty (and test_fast_path_equals_vmap checks on each of its parts), and
# rwmh itself runs in the default suite on a user model (test_unknown_primitive_model_under_a_
# sampler; the built-ins under rwmh, test_builtin_under_rwmh, are slow since stop 41);
# dp-barker's pass (clipped per-example ratios of a minibatch) is minibatch-penalty's, run by
# logistic[minibatch-penalty] (a custom_jvp sub-jaxpr), its per-row values on every battery
# model being test_fast_path_equals_vmap's forward block pass.
# (The kitchen sink under dp-hmc is slow too since stop 38: tests/suite_budget.py, with its
# guards.)
_KITCHEN_SLOW = ("hmc", "dp-sgld", "dp-sgnht", "minibatch-penalty", "rwmh", "dp-barker")
# logistic[hmc] is slow-only: hmc's pass (the log-likelihood sum and its gradient) is checked
# on the softplus model (the logistic likelihood, custom_jvp included) and every other battery
# model by test_fast_path_equals_vmap, and the gradient passes run inside a chain in the default
# suite under dp-sgld (logistic).
_LOGISTIC_SLOW = ("dp-hmc", "dp-penalty", "dp-barker", "rwmh", "dp-sgnht", "hmc")


def _samplers(slow):
    return [pytest.param(a, marks=pytest.mark.slow) if a in slow else a for a in sorted(SAMPLERS)]


@pytest.mark.parametrize("algo", _samplers(_KITCHEN_SLOW))
def test_kitchen_sink_model_under_every_sampler(algo, data):
    _run(_model("kitchen_sink"), data, algo)


def test_unknown_primitive_model_under_a_sampler(data):
    """The model the unrolling does not understand runs inside a sampler (chains vmapped around
    the block pass): the fallback is taken there too. rwmh is the cheapest sampler through the
    unrolled forward pass (its ratio and log-likelihood sums; dp-penalty's run was a costlier
    chain program of the same passes until stop 40). Every battery model under every sampler is
    the slow test below; every pass on every battery model is test_fast_path_equals_vmap."""
    _run(_model("unknown"), data, "rwmh")


@pytest.mark.slow
@pytest.mark.parametrize("algo", sorted(SAMPLERS))
@pytest.mark.parametrize("name", sorted(set(BATTERY) - {"kitchen_sink"}) + ["unknown"])
def test_battery_under_every_sampler(name, algo, data):
    _run(_model(name), data, algo)


# ------------------------------------------------------------------- built-in models

@pytest.fixture(scope="module")
def builtin_models():
    built = {
        "logistic": models.logistic_regression(D),
        "gaussian": models.gaussian(np.eye(D)),
        "banana": models.banana(D),
        "circle": models.circle(),
        "mixture": models.gaussian_mixture(),
    }
    # Records of each model's shape and support drawn with NumPy: the tests below compare the
    # fast path with vmap on them and run chains on them, reading nothing of their law (the
    # generators' laws are test_models.py's). The generators run op by op: ~1 CPU-s of small
    # programs compiled for data these tests do not need them for.
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N, D))
    records = {
        "logistic": np.column_stack([x, rng.uniform(size=N) < 1.0 / (1.0 + np.exp(-x.sum(1)))]),
        "gaussian": rng.normal(size=(N, D)),
        "banana": np.array([0.0, 3.0]) + rng.normal(size=(N, D)) * np.sqrt([20.0, 2.5]),
        "circle": rng.normal(3.0, 1.0, size=(N, 1)),
        "mixture": rng.normal(0.5, 1.5, size=(N, 1)),
    }
    return {k: (m, records[k].astype(np.float64)) for k, m in built.items()}


@pytest.mark.parametrize("algo", _samplers(_LOGISTIC_SLOW))  # split: see _KITCHEN_SLOW
def test_logistic_regression_under_every_sampler(algo, builtin_models):
    model, x = builtin_models["logistic"]
    _run(model, x, algo)


# circle and mixture are slow-only: their unrolled batch functions equal vmap in
# test_builtin_batch_functions_equal_vmap, and the in-chain run of a built-in's unrolled forward
# pass is guarded by the logistic runs above. (banana is slow too since stop 38, gaussian since
# stop 41: tests/suite_budget.py, with their guards.)
@pytest.mark.parametrize("name", ["gaussian", "banana", pytest.param("circle", marks=pytest.mark.slow),
                                  pytest.param("mixture", marks=pytest.mark.slow)])
def test_builtin_under_rwmh(name, builtin_models):
    """Each built-in through the unrolled forward pass (rwmh is its cheapest user); the slow
    test runs every built-in under every sampler."""
    model, x = builtin_models[name]
    _run(model, x, "rwmh")


@pytest.mark.slow
@pytest.mark.parametrize("algo", sorted(SAMPLERS))
@pytest.mark.parametrize("name", ["logistic", "gaussian", "banana", "circle", "mixture"])
def test_builtin_under_every_sampler(name, algo, builtin_models):
    model, x = builtin_models[name]
    _run(model, x, algo)
    # The same model written as users write it (per-record function only: column-major path).
    plain = Model(model.log_likelihood, model.log_prior, model.dim, name=name + "-plain")
    _run(plain, x, algo)
