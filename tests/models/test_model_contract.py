"""The model contract is checked before anything runs, and whether a run starts reads no record.

Refusals (``dpmcmc.sample`` raising ValueError/TypeError naming the function or argument) are
checked with the chain driver and the noise mechanism replaced by stand-ins that fail the test if
called (the pattern of tests/test_api_properties.py), so each refusal is shown to come before any
noise. Data with a NaN in them show that the contract is checked before any data value is read:
the model's error is raised, not the data's.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpmcmc
from dpmcmc import models
from dpmcmc.models import check_model
from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS, SAMPLERS
from dpmcmc.testing import NoiseDrawn, forbid_noise

from api_params import N, budget_kwargs, gaussian_data, valid_params

ALL = sorted(SAMPLERS)
PRIVATE = sorted(a for a in SAMPLERS if SAMPLERS[a].private)
GRADIENT = ("hmc", "dp-hmc", "dp-sgld", "dp-sgnht")
DATA = gaussian_data()


def loglik(th, x):
    return -0.5 * jnp.sum((x - th) ** 2)


def prior(th):
    return -0.5 * jnp.sum(th ** 2) / 100.0


@pytest.fixture
def no_noise(monkeypatch):
    forbid_noise(monkeypatch)


def sample(model, data, algorithm, **kwargs):
    args = dict(budget_kwargs(algorithm), progress=False, **valid_params(algorithm))
    args.update(kwargs)
    return dpmcmc.sample(model, data, algorithm, **args)


def rejects(names, model, data=DATA, algorithm="dp-penalty", exc=(ValueError, TypeError), **kwargs):
    with pytest.raises(exc) as info:
        sample(model, data, algorithm, **kwargs)
    assert not isinstance(info.value, NoiseDrawn), info.value
    for name in (names,) if isinstance(names, str) else names:
        assert name in str(info.value), f"error does not name {name!r}: {info.value}"
    return info.value


def with_nan(data):
    # A NaN in the data is itself refused, but only after the model contract: a test passing
    # this shows the model's error comes first, i.e. before any data value is read.
    data = np.array(data, dtype=float)
    data.flat[0] = np.nan
    return data


# ------------------------------------------------------------------- output shapes and dtypes

@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("algorithm", ALL)
def test_vector_valued_log_likelihood_is_refused_by_every_sampler(algorithm):
    # Per-component clipping of a (d,) output would let one record move the released sum by d
    # times the accounted bound; the old code ran it.
    vec = Model(lambda th, x: -0.5 * (x - th) ** 2, prior, 2)
    err = rejects(("log_likelihood", "(2,)"), vec, with_nan(DATA), algorithm)
    assert isinstance(err, ValueError)


@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("ll,exc,shown", [
    (lambda th, x: jnp.sum(x - th).astype(jnp.int32), TypeError, "int32"),
    (lambda th, x: jnp.sum(x - th) > 0, TypeError, "bool"),
    (lambda th, x: jnp.sum(x - th) + 0j, TypeError, "complex"),
    (lambda th, x: (loglik(th, x), loglik(th, x)), TypeError, "tuple"),
    (lambda th, x: jnp.reshape(loglik(th, x), (1,)), ValueError, "(1,)"),
])
def test_log_likelihood_must_be_one_real_float(ll, exc, shown):
    err = rejects(("log_likelihood", shown), Model(ll, prior, 2), with_nan(DATA), exc=exc)
    assert isinstance(err, exc)


@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("lp,exc,shown", [
    (lambda th: -0.5 * th ** 2, ValueError, "(2,)"),
    (lambda th: jnp.int32(0), TypeError, "int32"),
])
def test_log_prior_must_be_one_real_float(lp, exc, shown):
    rejects(("log_prior", shown), Model(loglik, lp, 2), with_nan(DATA), exc=exc)


@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("which,fn,shown", [
    ("log_likelihood_batch", lambda th, d: -0.5 * jnp.sum((d - th) ** 2, axis=1, keepdims=True),
     f"({N}, 1)"),
    ("log_likelihood_batch", lambda th, d: -0.5 * (d - th) ** 2, f"({N}, 2)"),
    ("grad_log_likelihood_batch", lambda th, d: (d - th).T, f"(2, {N})"),
    ("grad_log_likelihood_batch", lambda th, d: jnp.sum(d - th, axis=1), f"({N},)"),
])
def test_batch_functions_must_have_their_shapes(which, fn, shown):
    model = Model(loglik, prior, 2, **{which: fn})
    for algorithm in ("dp-penalty", "dp-hmc"):
        rejects((which, shown), model, with_nan(DATA), algorithm, exc=ValueError)


def _without_derivative(fn):
    """``fn`` inside a one-pass while loop: evaluates as ``fn`` does, but reverse-mode
    differentiation of a while loop raises at trace time."""
    def ll(th, x):
        return jax.lax.while_loop(lambda c: c[1] < 1, lambda c: (c[0] * 1.0, c[1] + 1),
                                  (fn(th, x), 0))[0]

    return ll


def _no_derivative():
    return Model(_without_derivative(loglik), prior, 2, name="no-derivative")


@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("algorithm", GRADIENT)
def test_gradient_samplers_need_a_differentiable_log_likelihood(algorithm):
    rejects("log_likelihood", _no_derivative(), with_nan(DATA), algorithm, exc=ValueError)


def test_a_passed_check_is_remembered_only_for_what_it_checked():
    """check_model remembers a pass (it traces nothing the second time) but only for the same
    model, shapes, dtypes and gradient route: the undifferentiable model that passes without
    gradients is still refused when a gradient is asked for, and on another record width."""
    model = _no_derivative()
    check_model(model, (5, 2), jnp.float64)
    traced = []
    spy = Model(lambda th, x: traced.append(1) or model.log_likelihood(th, x), prior, 2)
    check_model(spy, (5, 2), jnp.float64)
    assert traced, "the spy model traces its log-likelihood on its first check"
    traced.clear()
    check_model(spy, (5, 2), jnp.float64)
    assert not traced, "a passed check is traced again"
    with pytest.raises(ValueError, match="log_likelihood"):
        check_model(model, (5, 2), jnp.float64, gradients=True)
    with pytest.raises(ValueError, match="data"):
        check_model(model, (5, 3), jnp.float64)


# rwmh and minibatch-penalty are slow-only: whether a model must be differentiable is decided
# in dpmcmc.sample from its list of gradient algorithms (shared code, guarded by the
# dp-penalty and dp-barker cases, the full-data and the minibatch penalty kernels); the slow
# run keeps the per-sampler check that the list is complete. The dp-penalty and dp-barker cases
# are slow too (tests/suite_budget.py, SLOW_CASES_A): the default run's
# test_a_record_non_finite_at_theta0_does_not_decide_whether_a_private_run_starts runs those two
# samplers on a likelihood that cannot be differentiated (a while loop, as here), in one chain
# program each instead of two.
@pytest.mark.parametrize("algorithm", [pytest.param(a, marks=pytest.mark.slow)
                                       if a in ("rwmh", "minibatch-penalty") else a
                                       for a in sorted(set(ALL) - set(GRADIENT))])
def test_samplers_without_gradients_run_an_undifferentiable_model(algorithm):
    # Also keeps the list of gradient algorithms in dpmcmc.api complete: a sampler that
    # differentiates but is missing there fails here instead of being checked.
    res = sample(_no_derivative(), DATA, algorithm, iterations=3, chains=1, key=jax.random.key(0))
    assert np.all(np.isfinite(res.samples))


# ------------------------------------------------------------------- the data's record shape

BUILT_IN = {
    "banana": (lambda: models.banana(3), (3,)),
    "gaussian": (lambda: models.gaussian(np.eye(3)), (3,)),
    "circle": (lambda: models.circle(), (1,)),
    "mixture": (lambda: models.gaussian_mixture(), (1,)),
    "logistic": (lambda: models.logistic_regression(2), (3,)),
}


@functools.lru_cache(maxsize=None)
def _built_in_data(name: str) -> np.ndarray:
    """N records of the shape and dtype the built-in ``name``'s generator returns, made once for
    the tests below, which read the data's shape and dtype only (a shape refusal reads no value:
    test_flattened_data_are_refused_not_read_as_more_records puts a NaN in them). The
    generator's output shape and dtype come from ``jax.eval_shape`` (traced, never compiled: its
    program cost ~0.2-0.4 CPU-s a model), the values from NumPy; the banana's generator computes
    its mean in NumPy, so it cannot be traced on shapes and runs eagerly."""
    model = BUILT_IN[name][0]()
    if name == "banana":
        return np.asarray(models.generate_data(model, jax.random.key(0), N))
    out = jax.eval_shape(lambda k: models.generate_data(model, k, N), jax.random.key(0))
    return np.random.default_rng(0).normal(size=out.shape).astype(out.dtype)


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_built_in_models_declare_their_record_shape(name):
    make, shape = BUILT_IN[name]
    model = make()
    assert model.record_shape == shape
    data = _built_in_data(name)
    assert data.shape == (N, *shape)
    check_model(model, data.shape, data.dtype, gradients=True)


@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("name", sorted(BUILT_IN))
@pytest.mark.parametrize("algorithm", ["dp-penalty", "dp-barker"])
def test_flattened_data_are_refused_not_read_as_more_records(name, algorithm):
    # (n·d,) data would be n·d "records": a guarantee per entry instead of per person.
    make, shape = BUILT_IN[name]
    model = make()
    data = _built_in_data(name).reshape(-1)
    err = rejects(("data", str(shape)), model, with_nan(data), algorithm, exc=ValueError)
    if shape != (1,):
        assert "reshape" in str(err)


@pytest.mark.usefixtures("no_noise")
def test_record_width_must_match_the_declared_shape():
    # The logistic model reads x[:dim] and x[dim]: wider rows evaluate without error, so only
    # the declared record shape catches them (the old code crashed inside a kernel instead).
    rejects(("data", "(3,)", "(5,)"), models.logistic_regression(2), with_nan(np.ones((N, 5))),
            exc=ValueError)
    user = Model(loglik, prior, 2, record_shape=(2,))
    rejects(("data", "(2,)", "(2, 1)"), user, with_nan(DATA[..., None]), exc=ValueError)


@pytest.mark.usefixtures("no_noise")
def test_one_dimensional_data_for_a_multidimensional_model_names_data():
    # No declared shape: the trace on one record of shape () fails inside the model, and the
    # error names data, the function and the shapes, chaining JAX's IndexError.
    model = Model(lambda th, x: -0.5 * ((x[0] - th[0]) ** 2 + (x[1] - th[1]) ** 2), prior, 2)
    err = rejects(("data", "log_likelihood", "(120,)"), model, with_nan(DATA.reshape(-1)),
                  exc=ValueError)
    assert isinstance(err.__cause__, IndexError)


@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("algorithm", ["dp-penalty", "dp-hmc", "minibatch-penalty"])
def test_data_width_not_fitting_the_model_names_data(algorithm):
    model = Model(lambda th, x: -0.5 * (x @ th) ** 2, prior, 2)
    err = rejects(("data", "log_likelihood", "(60, 3)"), model, with_nan(np.ones((N, 3))),
                  algorithm, exc=ValueError)
    assert isinstance(err.__cause__, TypeError)  # JAX's dot_general shape error


@pytest.mark.parametrize("bad", [(0,), (-1, 2), (2.0,), "3", 3, (True,)])
def test_model_record_shape_is_validated(bad):
    with pytest.raises(ValueError, match="record_shape"):
        Model(loglik, prior, 2, record_shape=bad)


def test_model_record_shape_accepts_lists_and_scalars():
    assert Model(loglik, prior, 2, record_shape=[np.int64(2)]).record_shape == (2,)
    scalar = Model(lambda th, x: -0.5 * jnp.sum((x - th) ** 2), prior, 2, record_shape=())
    check_model(scalar, (5,), np.float64)
    with pytest.raises(ValueError, match="data"):
        check_model(scalar, (5, 1), np.float64)


def test_check_model_reads_no_values():
    # Abstract shapes only: a gigantic n costs nothing, since no array of that size is built.
    check_model(models.banana(2), (10 ** 12, 2), np.float32, gradients=True)


# ------------------------------------------------------------------- starting a run (§3)

def _log_x0_model(differentiable: bool = True):
    # ℓ(θ, x) has log x₀ in it: a record with x₀ ≤ 0 makes ℓ and ∇ℓ non-finite at every θ.
    def ll(th, x):
        return -0.5 * jnp.sum((x - th) ** 2) + jnp.log(x[0]) * (1.0 + 0.1 * th[0])

    if differentiable:
        return Model(ll, prior, 2, name="log-x0")
    return Model(_without_derivative(ll), prior, 2, name="log-x0-no-derivative")


def _neighbours(bad: float):
    d = np.random.default_rng(1).normal(size=(N, 2))
    d[:, 0] = np.abs(d[:, 0]) + 0.5
    d2 = d.copy()
    d2[7, 0] = bad  # replace one record
    return d, d2


# x₀ = −1: ℓ is NaN; x₀ = 0: ℓ is −∞ and ∇ℓ non-finite (the same code path, kept for the slow run).
# Whether a run starts is decided in dpmcmc.sample, before any kernel, the same code for every
# sampler; the kernels' bounding of the bad record is per pass. dp-sgnht and minibatch-penalty
# are slow-only: dp-sgnht takes dp-sgld's clipped gradient release of a minibatch (the dp-sgld
# case), minibatch-penalty dp-barker's clipped per-example ratios of a minibatch (the dp-barker
# case). dp-hmc is slow-only too: its ratio pass (the full-data clipped ratio sum, where a bad
# record is counted as clipped every iteration) is dp-penalty's, whose case checks the clip
# fraction as well; its clipped gradient release meets the bad record in the dp-sgld case, and
# the zeroing of a non-finite per-example gradient is
# test_mechanisms.py::test_clip_gradients_bounds_norms_and_zeroes_nonfinite_rows.
_NON_FINITE_SLOW = ("dp-sgnht", "minibatch-penalty", "dp-hmc")


@pytest.mark.parametrize("bad", [-1.0, pytest.param(0.0, marks=pytest.mark.slow)])
@pytest.mark.parametrize("algorithm", [pytest.param(a, marks=pytest.mark.slow)
                                       if a in _NON_FINITE_SLOW else a for a in PRIVATE])
def test_a_record_non_finite_at_theta0_does_not_decide_whether_a_private_run_starts(algorithm, bad):
    # The old code evaluated every record at θ0 and raised on D′ only: a one-bit release of
    # whether some record makes the likelihood non-finite, outside any mechanism.
    # A sampler that takes no gradient runs the likelihood in a while loop, which cannot be
    # differentiated: the run also shows test_samplers_without_gradients_run_an_undifferentiable_
    # model's property (the list of gradient algorithms is complete) for that sampler, in the
    # same chain program. (The while loop is opaque to the per-example rewrite, which rewrites
    # the likelihood computed in its initial value as before.)
    model = _log_x0_model(differentiable=algorithm in GRADIENT)
    d, d2 = _neighbours(bad)
    kw = dict(iterations=8, chains=2, key=jax.random.key(3), theta0=np.array([0.5, 0.0]))
    r, r2 = sample(model, d, algorithm, **kw), sample(model, d2, algorithm, **kw)
    for res in (r, r2):
        assert res.samples.shape == (2, 8, 2)
        assert np.all(np.isfinite(res.samples))
    # The bad record is bounded inside the clipped sum (counted as clipped), not a rejection;
    # the full-data samplers meet it every iteration (the subsampled ones only when drawn).
    assert np.all(r2.released.divergences == 0)
    if algorithm in ("dp-penalty", "dp-hmc"):
        assert np.all(r2.diagnostics.clip_fraction >= 1.0 / N)


@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("algorithm", sorted(set(ALL) - set(PRIVATE)))
def test_nonprivate_baselines_still_refuse_a_non_finite_start(algorithm):
    # No privacy promise there, and a NaN log-likelihood at θ0 would reject every proposal.
    _, d2 = _neighbours(-1.0)
    rejects("theta0", _log_x0_model(), d2, algorithm, theta0=np.array([0.5, 0.0]), exc=ValueError)


@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("algorithm", ALL)
def test_a_non_finite_prior_at_theta0_is_refused(algorithm):
    model = Model(loglik, lambda th: jnp.where(th[0] < 0.0, -jnp.inf, prior(th)), 2)
    rejects("theta0", model, DATA, algorithm, theta0=np.array([-1.0, 0.0]), exc=ValueError)


@pytest.mark.usefixtures("no_noise")
@pytest.mark.parametrize("draw", [lambda key, shape: jnp.zeros((*shape, 3)),
                                  lambda key, shape: jnp.full((*shape, 2), jnp.nan)])
def test_a_bad_prior_draw_for_the_default_start_names_sample_prior(draw):
    model = Model(loglik, prior, 2, sample_prior=draw)
    rejects("sample_prior", model, DATA, exc=ValueError)


@pytest.mark.usefixtures("no_noise")
def test_a_non_numeric_theta0_names_theta0():
    rejects("theta0", Model(loglik, prior, 2), DATA, theta0=["a", "b"])
