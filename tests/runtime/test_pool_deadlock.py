"""No program of the library can deadlock XLA's CPU thread pool (issue 33 §2; dpmcmc/linalg.py).

jaxlib splits a LAPACK custom call on a batch of matrices into chunks on XLA's intra-op thread
pool and blocks the calling thread, itself often a pool thread, until they finish; with as many
such calls at once as the pool has threads, every thread waits on work queued behind it. The
noise-aware GLM's draws hung that way (two batched triangular solves on a 2-core machine). An
FFT thunk blocks on the pool the same way. The library's rule: every LAPACK call acts on one
matrix (``dpmcmc.linalg`` loops over any batch), and no program holds an FFT or a foreign
custom call.

Checked structurally on every program the library compiles: the noise-aware GLM's two programs
(also on their optimised HLO), each sampler's initialisation and chunk programs (plain and, for
the private samplers, secure mode), the private start, the audit's GLM runner and the Gaussian
model's exact posterior; the built-in models' functions (a sampler vmaps them over records and
chains, so any LAPACK call in them would run batched); and the sources (no LAPACK-backed call
outside ``dpmcmc/linalg.py``). The programs are checked on their jaxprs, which cost a trace and
no compilation: a LAPACK custom call comes only from a linear-algebra primitive, with the
primitive's operand shape (batch axes first), so "no linear-algebra primitive on a batch" in the
jaxpr is "no batched LAPACK call" in the compiled program, as the HLO check of the GLM's draws
confirms. Both checkers flag the unfixed form (a vmapped Cholesky and triangular solve), so they
can fail. That the rule prevents the hang: the stress test (tests/runtime/test_stress_hang.py,
benchmarks/stress_hang.py).
"""
from __future__ import annotations

import math
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jax_core

from dpmcmc import linalg
from dpmcmc.samplers import ALGORITHMS, SAMPLERS
from dpmcmc.samplers import noise_aware_glm as nag
from dpmcmc.testing import driver_programs

from api_params import budget_kwargs, gaussian_data, gaussian_model, valid_params

# ------------------------------------------------------------------------------- checkers

#: The library's detector (the model contract uses it on user models too).
blocking_primitives = linalg.pool_blocking_operations


# `%x = f64[4000,8,1]{1,2,0} custom-call(...), custom_call_target="lapack_dtrsm_ffi"`; a
# tuple-shaped result starts with "(".
_CUSTOM_CALL = re.compile(r"=\s*\(?\s*(\w+)\[([\d,]*)\][^\n]*?custom-call\([^\n]*?"
                          r'custom_call_target="([^"]+)"')
_FFT = re.compile(r"=[^\n]*?\sfft\(")


def blocking_calls(hlo: str) -> list:
    """The same on an optimised HLO text: every LAPACK custom call on more than one matrix,
    every other custom call, every FFT."""
    found = []
    for dtype, dims, target in _CUSTOM_CALL.findall(hlo):
        shape = [int(d) for d in dims.split(",") if d]
        if not target.startswith("lapack_") or math.prod(shape[:-2]) > 1:
            found.append(f"{target} on {dtype}[{dims}]")
    assert len(found) <= hlo.count("custom-call(")  # every custom call was parsed
    return found + _FFT.findall(hlo)


def _assert_safe(jaxpr, what: str):
    bad = blocking_primitives(jaxpr)
    assert not bad, f"{what}: operations that can deadlock XLA's CPU pool: {bad}"


def _jaxpr(fun, *args, static_argnums=()):
    with jax.enable_x64(True):
        return jax.make_jaxpr(fun, static_argnums=static_argnums)(*args)


def _unfixed(a, b):
    return jax.vmap(lambda m, v: jax.scipy.linalg.solve_triangular(
        jnp.linalg.cholesky(m), v, lower=True))(a, b)


def _fixed(a, b):
    return jax.vmap(lambda m, v: linalg.solve_triangular(linalg.cholesky(m), v, lower=True))(a, b)


def test_checkers_flag_batched_lapack_and_fft():
    a, b = jnp.eye(3)[None].repeat(5, 0), jnp.ones((5, 3))
    with jax.enable_x64(True):
        hlo_bad = jax.jit(_unfixed).lower(a, b).compile().as_text()
        hlo_good = jax.jit(_fixed).lower(a, b).compile().as_text()
        hlo_fft = jax.jit(jnp.fft.rfft).lower(b).compile().as_text()
    bad = blocking_calls(hlo_bad)
    assert any("lapack_dpotrf" in c and "[5,3,3]" in c for c in bad), bad
    assert any("lapack_dtrsm" in c and "[5,3" in c for c in bad), bad
    assert blocking_calls(hlo_fft)
    # The same through dpmcmc.linalg: one matrix per LAPACK call, in a loop.
    assert "lapack_dpotrf_ffi" in hlo_good and "lapack_dtrsm_ffi" in hlo_good
    assert blocking_calls(hlo_good) == []
    # The jaxpr checker agrees, at any depth of vmap.
    assert {c.split()[0] for c in blocking_primitives(_jaxpr(_unfixed, a, b))} == {
        "cholesky", "triangular_solve"}
    assert blocking_primitives(_jaxpr(jnp.fft.rfft, b)) == ["fft"]
    assert blocking_primitives(_jaxpr(jax.vmap(_fixed), a[None], b[None])) == []


def test_helpers_equal_jax_bit_for_bit():
    """Each helper gives exactly ``jnp.linalg`` / ``jax.scipy.linalg``'s values, under a vmap,
    on leading batch axes and (forward mode) under ``jax.jacfwd``."""
    rng = np.random.default_rng(0)
    m = rng.normal(size=(3, 4, 4))
    a = m @ np.swapaxes(m, -1, -2) + np.eye(4)
    b, bb, c = rng.normal(size=(3, 4)), rng.normal(size=(3, 4, 2)), np.linalg.cholesky(a)
    sp = jax.scipy.linalg
    pairs = {
        "cholesky": (linalg.cholesky, jnp.linalg.cholesky, (a,)),
        "eigh": (linalg.eigh, lambda x: tuple(jnp.linalg.eigh(x)), (a,)),
        "inv": (linalg.inv, jnp.linalg.inv, (a,)),
        "solve": (linalg.solve, jnp.linalg.solve, (a, bb)),
        "cho_solve": (linalg.cho_solve, lambda c, b: sp.cho_solve((c, True), b), (c, b)),
        "solve_triangular": (lambda c, b: linalg.solve_triangular(c, b, lower=True, trans=1),
                             lambda c, b: sp.solve_triangular(c, b, lower=True, trans=1), (c, bb)),
        "jacfwd": (jax.jacfwd(linalg.cholesky), jax.jacfwd(jnp.linalg.cholesky), (a,)),
    }

    def both(args):
        out = {}
        for name, (ours, theirs, _) in pairs.items():
            vmapped = jax.vmap(ours)(*args[name])
            # (a Jacobian of the whole batch is another function: its vmap stands in)
            leading = vmapped if name == "jacfwd" else ours(*args[name])
            out[name] = (vmapped, leading, jax.vmap(theirs)(*args[name]))
        return out

    with jax.enable_x64(True):
        out = jax.jit(both)({name: xs for name, (_, _, xs) in pairs.items()})
    for name, (vmapped, leading, reference) in out.items():
        for x, y, z in zip(*map(jax.tree.leaves, (vmapped, leading, reference))):
            assert np.array_equal(x, z) and np.array_equal(y, z), name


# --------------------------------------------------------------------------- the programs

def _glm_programs(family, d, mechanism, n=30, draws=64):
    """``nag.fit``'s programs as fit jits them: ``(function, arguments, static_argnums)``."""
    plan = nag.release_plan(family, n, d, 1.0, 1e-6, mechanism=mechanism)
    key, prior = jax.random.key(0), jnp.eye(d)
    ss = None if plan.sum_of_squares is None else jnp.ones(1)
    out = [(nag._releases, (key, jnp.zeros((n, d)), jnp.zeros(n), plan, prior,
                            nag.NoiseSource()), (3,)),
           (nag.noise_aware_draws, (key, jnp.zeros(d), jnp.zeros(d), jnp.eye(d), plan, prior,
                                    draws, ss), (4, 6))]
    if ss is not None:
        out.append((nag._sum_of_squares, (key, jnp.zeros(n), plan, nag.NoiseSource()), (2,)))
    return out


@pytest.mark.parametrize("family,d,mechanism", [
    ("logistic", 4, "gaussian"),
    # slow: the K-norm last round's draws hold the same linear algebra as the Gaussian's
    # (default: the logistic-gaussian and linear cases; the linear plan's last round is K-norm)
    pytest.param("logistic", 3, "knorm", marks=pytest.mark.slow),
    ("linear", 3, "auto")])
def test_noise_aware_glm_programs(family, d, mechanism):
    for fun, args, static in _glm_programs(family, d, mechanism):
        _assert_safe(_jaxpr(fun, *args, static_argnums=static), f"{family} {fun.__name__}")


# slow: the compiled program confirms the jaxpr check, which test_noise_aware_glm_programs makes
# by default (test_checkers_flag_batched_lapack_and_fft shows the two checks agree).
@pytest.mark.slow
def test_noise_aware_glm_draws_compiled():
    """The program that hung, compiled: its LAPACK calls each act on one matrix."""
    fun, args, static = _glm_programs("logistic", 4, "auto")[1]
    with jax.enable_x64(True):
        hlo = jax.jit(fun, static_argnums=static).lower(*args).compile().as_text()
    assert "lapack_dtrsm_ffi" in hlo and "lapack_dsyevd_ffi" in hlo  # the calls are there ...
    assert blocking_calls(hlo) == []  # ... one matrix each


# slow: the runner vmaps nag._releases (checked by test_noise_aware_glm_programs) and its own
# solve goes through dpmcmc.linalg (test_sources_call_lapack_only_through_the_helper).
@pytest.mark.slow
def test_glm_audit_runner():
    d_set, dp_set = nag.audit_design(n=20)
    plan = nag.release_plan("logistic", 20, 2, 1.0, 1e-6, steps=2)  # a scanned round, the last
    with jax.enable_x64(True):
        run = nag.audit_runner(plan, d_set, dp_set, nag.NoiseSource())
        jaxpr = run.trace(jnp.asarray(d_set), jax.random.split(jax.random.key(0), 8)).jaxpr
    _assert_safe(jaxpr, "audit runner")


def _check_sampler(algorithm: str, variant: str):
    """Each sampler's programs as ``dpmcmc.sample`` runs them: ``variant`` "plain", "secure"
    (private samplers) or "warm-up" (the adaptive kernel the table path uses)."""
    from dpmcmc import api
    from dpmcmc.kernels.warmup import MIN_DIAGONAL_WARMUP

    model, data = gaussian_model(f"pool-{algorithm}-{variant}"), gaussian_data(24)
    budget = budget_kwargs(algorithm)
    if variant == "warm-up":
        budget = dict(budget, iterations=MIN_DIAGONAL_WARMUP + 4, warmup=MIN_DIAGONAL_WARMUP)
    planned = api.plan_run(model, data, algorithm, chains=2, key=jax.random.key(0),
                           progress=False, theta0=np.zeros(2), secure=variant == "secure",
                           **budget, **valid_params(algorithm, model, 24))
    init, chunk = driver_programs(planned.build, planned.layout(), np.zeros((2, 2)),
                                  variant == "secure")
    _assert_safe(init, f"{algorithm} init ({variant})")
    _assert_safe(chunk, f"{algorithm} chunk ({variant})")


@pytest.mark.parametrize("algorithm", sorted(SAMPLERS))
def test_sampler_programs(algorithm):
    _check_sampler(algorithm, "plain")


# slow: secure mode swaps the noise source (integer ChaCha20 arithmetic) and warm-up wraps the
# kernel in elementwise adaptation; neither adds linear algebra (default: the plain programs
# above and test_sources_call_lapack_only_through_the_helper).
@pytest.mark.slow
@pytest.mark.parametrize("algorithm", sorted(SAMPLERS))
def test_sampler_program_variants(algorithm):
    for variant in ("secure", "warm-up") if ALGORITHMS[algorithm].private else ("warm-up",):
        _check_sampler(algorithm, variant)


def test_private_start_program():
    from dpmcmc.samplers.private_init import init_plan, private_start

    model, data = gaussian_model("pool-private-start"), jnp.asarray(gaussian_data(24))
    plan = init_plan(24, 0.1, 1.0, steps=4)
    _assert_safe(_jaxpr(lambda k, x, s: private_start(k, model, x, s, plan, 3),
                        jax.random.key(0), data, jnp.zeros(2)), "private start")


def test_private_newton_round_program():
    """auto's start (dpmcmc.samplers.private_newton): one round's program, its linear algebra
    (eigh, inv, solve of the curvature) through dpmcmc.linalg, and the approximation's draws."""
    from dpmcmc.records.layout import prepare_data
    from dpmcmc.kernels.mechanisms import DEFAULT_NOISE
    from dpmcmc.samplers.private_newton import NewtonFit, _round, newton_plan, start_draws

    model, data = gaussian_model("pool-newton"), jnp.asarray(gaussian_data(24))
    sigmas = jnp.asarray(newton_plan(24, 2, 1.0, 1.0, rounds=1).sigmas()[0])
    with jax.enable_x64(True):
        prepared = prepare_data(data, model=model)
    _assert_safe(_jaxpr(lambda k, th, w: _round(model, prepared, 24, 0.95, k, th, w, 1.0, sigmas,
                                                DEFAULT_NOISE),
                        jax.random.key(0), jnp.zeros(2), jnp.eye(2)), "private Newton round")
    fit = NewtonFit(jnp.zeros(2), jnp.eye(2), jnp.eye(2), None, None, None, None)
    _assert_safe(_jaxpr(lambda k: start_draws(k, fit, 8), jax.random.key(0)),
                 "approximation draws")


def test_gaussian_exact_posterior():
    from dpmcmc.models import gaussian

    m = gaussian(np.eye(3) + 0.5)
    x = jnp.zeros((10, 3))
    for what, fun, args in (
            ("exact posterior", lambda k, x: m.exact_posterior(k, x, 50), (jax.random.key(0), x)),
            ("posterior covariance", m.metadata["posterior_cov"], (x,)),
            # Over a batch of data sets, still one matrix per call.
            ("vmapped posterior mean", jax.vmap(m.metadata["posterior_mean"]),
             (jnp.zeros((4, 10, 3)),))):
        jaxpr = _jaxpr(fun, *args)
        assert {"cholesky", "lu"} & _primitive_names(jaxpr.jaxpr), what  # the calls are there
        _assert_safe(jaxpr, what)


def _builtin_models():
    """Every built-in model with a few rows of its data (the table path's models too)."""
    from dpmcmc import models, tabular
    from dpmcmc.tabular import front

    out = [(m, jnp.zeros((8,) + m.record_shape)) for m in (
        models.banana(2), models.banana(3, batch_functions=False), models.gaussian(np.eye(3) + 0.5),
        models.circle(), models.gaussian_mixture(), models.logistic_regression(3))]
    for family in tabular.MODELS:
        cap = 10 if family == "poisson" else None  # the count cap the Poisson model declares
        out.append((front._build_model(family, 3, ("a", "b", "c"), 10.0, 0.5, count_cap=cap),
                    jnp.zeros((8, 4))))
    return out


def test_builtin_models_hold_no_linear_algebra():
    """A sampler vmaps a model's functions over records and chains: a LAPACK call in them would
    run batched. The built-in models' log-likelihoods, gradients, log-priors and prior samplers
    hold no linear-algebra or FFT primitive at all, however nested."""
    bad = []
    for m, x in _builtin_models():
        funs = {"loglik": lambda t: m.loglik_per_example(t, x),
                "grad": lambda t: m.grad_per_example(t, x), "prior": m.log_prior}
        for what, fun in funs.items():
            names = _primitive_names(_jaxpr(fun, jnp.zeros(m.dim)).jaxpr)
            bad += [f"{m.name} {what}: {p}" for p in sorted(names & (linalg.LINALG_PRIMITIVES | linalg.ALWAYS_BLOCKING))]
        if m.sample_prior is not None:
            names = _primitive_names(_jaxpr(lambda k: m.sample_prior(k, (3,)), jax.random.key(0)).jaxpr)
            bad += [f"{m.name} sample_prior: {p}" for p in sorted(names & (linalg.LINALG_PRIMITIVES | linalg.ALWAYS_BLOCKING))]
    assert not bad, bad


def _primitive_names(jaxpr) -> set:
    out = set()
    for eqn in jaxpr.eqns:
        out.add(eqn.primitive.name)
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(sub, (jax_core.ClosedJaxpr, jax_core.Jaxpr)):
                    out |= _primitive_names(getattr(sub, "jaxpr", sub))
    return out


# ----------------------------------------------------------------------------- the sources

# Calls that lower to LAPACK (or an FFT) and so must go through dpmcmc.linalg;
# jnp.linalg.norm and jax.scipy.special are not among them.
_FORBIDDEN = re.compile(
    r"\b(?:jnp|jax\.numpy)\.linalg\.(?!norm\b)\w+|\bjax\.scipy\.linalg\b|\b(?:jax\.)?lax\.linalg\b"
    r"|\b(?:jnp|jax\.numpy)\.fft\b|\bjax\.random\.multivariate_normal\b"
    r"|\bfrom jax\.(?:numpy|scipy|lax) import linalg\b")


def test_sources_call_lapack_only_through_the_helper():
    src = pathlib.Path(linalg.__file__).parent
    bad = []
    for path in sorted(src.rglob("*.py")):
        if path.name == "linalg.py":
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if _FORBIDDEN.search(line.split("#", 1)[0]):
                bad.append(f"{path.relative_to(src)}:{i}: {line.strip()}")
    assert not bad, "LAPACK-backed calls outside dpmcmc/linalg.py:\n" + "\n".join(bad)


def test_user_model_with_batched_linear_algebra_is_refused_before_anything_runs():
    # The samplers apply a user's log-likelihood to many records at once: a jnp.linalg call in
    # it is a batched LAPACK call; the contract refuses it, naming the function and the fix,
    # and accepts the same model written with dpmcmc.linalg.
    import dpmcmc
    from dpmcmc.models.base import check_model

    def ll_bad(theta, x):
        a = jnp.eye(2) + jnp.outer(x, x)
        return -0.5 * jnp.sum(jax.scipy.linalg.solve_triangular(jnp.linalg.cholesky(a), theta,
                                                                lower=True) ** 2)

    def ll_good(theta, x):
        a = jnp.eye(2) + jnp.outer(x, x)
        return -0.5 * jnp.sum(linalg.solve_triangular(linalg.cholesky(a), theta, lower=True) ** 2)

    prior = lambda t: -0.5 * jnp.sum(t ** 2)  # noqa: E731
    with pytest.raises(ValueError, match=r"log_likelihood: uses cholesky.*dpmcmc.linalg"):
        check_model(dpmcmc.Model(ll_bad, prior, 2), (50, 2), jnp.float64)
    check_model(dpmcmc.Model(ll_good, prior, 2), (50, 2), jnp.float64)
