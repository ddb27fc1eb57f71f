"""theta0="private": a start near the mode for an accounted share of the budget."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpmcmc
from dpmcmc import accounting
from dpmcmc.samplers.private_init import init_plan, private_start

N, DIM = 4000, 2
TRUTH = np.array([3.0, -2.0])
DATA = np.clip(np.random.default_rng(0).normal(TRUTH, 1.0, size=(N, DIM)), -8, 8)
POST_MEAN = DATA.sum(0) / (N + 0.01)
POST_SD = 1 / np.sqrt(N + 0.01)
# Tiny data with a far-off clip: the chains barely move, which these tests do not need (force).
# A proposal short enough that the plan says the chains can move (no PlanWarning to assert):
# the tests are about the start, which stays where it landed either way.
RUN = dict(epsilon=4.0, delta=1e-6, progress=False, force=True, tau=0.5, clip=20.0,
           proposal_std=0.0005)


def _model():
    return dpmcmc.Model(log_likelihood=lambda t, x: -0.5 * jnp.sum((x - t) ** 2),
                        log_prior=lambda t: -0.5 * jnp.sum(t ** 2) / 100.0, dim=DIM, name="gauss-mean",
                        sample_prior=lambda k, shape: 10.0 * jax.random.normal(k, (*shape, DIM)))


def test_private_start_is_accounted_as_its_own_mechanism():
    res = dpmcmc.sample(_model(), DATA, "dp-penalty", theta0="private", key=jax.random.key(1), **RUN)
    rep = res.privacy
    init_mu = 0.1 * accounting.gaussian_mu(4.0, 1e-6)
    (init,) = [m for m in rep.mechanisms if m["name"].startswith("private initialisation")]
    assert init["total_mu"] == pytest.approx(init_mu) and init["count"] == 30
    k = res.samples.shape[1]
    # Gaussian composition: the start's μ plus every iteration's μ = 1/(2τ²n), exactly.
    total = init_mu + k * 4 / (2 * 0.25 * N)
    assert rep.details["total_mu"] == pytest.approx(total)
    assert rep.epsilon == pytest.approx(accounting.gaussian_epsilon(total, 1e-6)) and rep.epsilon <= 4.0
    assert k == accounting.max_iterations("dp-penalty", 4.0, 1e-6, N, tau=0.5, init_mu=init_mu)
    assert k < accounting.max_iterations("dp-penalty", 4.0, 1e-6, N, tau=0.5)
    plan = dpmcmc.plan(_model(), N, "dp-penalty", theta0="private",
                       **{k_: v for k_, v in RUN.items() if k_ != "progress"})
    assert plan.iterations == k and res.plan.iterations == k


def test_private_start_lands_near_the_mode_where_prior_draws_do_not():
    errs = {}
    private = dpmcmc.sample(_model(), DATA, "dp-penalty", theta0="private", key=jax.random.key(7),
                            **RUN)
    # Prior draws (no budget: no private start) for as many iterations: the chain program of
    # the private run (and of test_private_start_is_accounted_as_its_own_mechanism).
    prior = dpmcmc.sample(_model(), DATA, "dp-penalty", theta0=None, key=jax.random.key(7),
                          iterations=private.samples.shape[1],
                          **{k: v for k, v in RUN.items() if k != "epsilon"})
    for theta0, res in ((None, prior), ("private", private)):
        errs[theta0] = np.abs(res.samples[:, 0] - POST_MEAN) / POST_SD
    # Resolution of the start: σ/n per coordinate ≈ C√(2K/μ_init)/n ≈ 7 posterior sds here.
    assert np.median(errs["private"]) < 15, errs["private"]
    assert np.median(errs[None]) > 10 * np.median(errs["private"])
    # Over-dispersed: the chains do not all start at one point.
    assert np.ptp(errs["private"][:, 0]) > 0


def test_the_start_reads_the_data_only_through_the_released_sums():
    # Two data sets with the same gradient sum Σ(x_i − θ) at every θ (same Σx_i, nothing clipped)
    # but different records give the same start with the same released noise (same key).
    other = DATA.copy()
    other[0] += 1.5
    other[1] -= 1.5
    # The plan dpmcmc.sample makes for RUN (bound 20: nothing clipped): the start program of
    # the runs above (keyed by model, plan and chains), not one of its own (~0.4 CPU-s).
    start = dpmcmc.plan(_model(), N, "dp-penalty", theta0="private",
                        **{k: v for k, v in RUN.items() if k != "progress"}).private_start
    plan = init_plan(N, start.mu, start.bound, start.steps)
    assert plan.grad_clip == 20.0
    with jax.enable_x64(True):
        a, trace_a = private_start(jax.random.key(3), _model(), jnp.asarray(DATA), jnp.zeros(DIM), plan, 4)
        b, trace_b = private_start(jax.random.key(3), _model(), jnp.asarray(other), jnp.zeros(DIM), plan, 4)
        c, _ = private_start(jax.random.key(4), _model(), jnp.asarray(DATA), jnp.zeros(DIM), plan, 4)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.asarray(trace_a["theta"]), np.asarray(trace_b["theta"]), atol=1e-9)
    assert not np.allclose(np.asarray(a), np.asarray(c))  # the noise does enter


@pytest.mark.parametrize("kwargs, exc, name", [
    (dict(algorithm="rwmh", iterations=5, proposal_std=0.1), ValueError, "private algorithms"),
    (dict(epsilon=None, iterations=5), ValueError, "epsilon"),
    (dict(init_share=1.0), ValueError, "init_share"),
    (dict(init_steps=0), ValueError, "init_steps"),
    (dict(theta0="prior"), ValueError, "theta0"),
    (dict(algorithm="dp-barker", batch_size=100, proposal_std=0.01), ValueError, "gradient bound"),
])
def test_bad_private_init_arguments_are_named_before_any_data(kwargs, exc, name):
    call = dict(RUN, algorithm="dp-penalty", theta0="private")
    call.update(kwargs)
    if call["algorithm"] != "dp-penalty":
        for key in ("tau", "clip", "proposal_std"):
            if key not in kwargs:
                call.pop(key)
    if call["algorithm"] == "rwmh":
        call.pop("epsilon"), call.pop("delta")
    # Checked before the data's values (a NaN table would fail later); the accountant's refusal
    # comes with the budget, before any noise.
    data = DATA if "accountant" in name else np.full_like(DATA, np.nan)
    with pytest.raises(exc, match=name):
        dpmcmc.sample(_model(), data, call.pop("algorithm"), **call)


def test_public_point_is_the_densest_candidate_not_the_mean_of_prior_draws():
    # The banana prior θ₂ = z₂ − a z₁² (σ₀² = 1000, a = 20) has its mean near −a σ₀² = −2·10⁴,
    # far beyond what 30 sign steps travel; the start must be a point of high prior density.
    from dpmcmc.models import banana
    from dpmcmc.samplers.private_init import public_point

    model = banana(dim=2, a=20.0, sigma0_sq=1000.0)
    draws = np.asarray(model.sample_prior(jax.random.key(0), (64,)))
    assert abs(draws.mean(axis=0)[1]) > 1e3          # the old choice: deep in the tail
    point = public_point(model, draws)
    logp = jax.vmap(model.log_prior)(jnp.asarray(np.vstack([np.zeros(2), draws])))
    assert float(model.log_prior(jnp.asarray(point))) == pytest.approx(float(jnp.max(logp)))
    assert abs(point[1]) < 100.0
    # A centred prior's mode is the origin: chosen over every draw.
    np.testing.assert_array_equal(public_point(_model(), np.ones((5, _model().dim))), 0.0)
    np.testing.assert_array_equal(public_point(_model()), 0.0)


def test_default_start_is_private_exactly_where_it_applies():
    # theta0=None starts privately when the budget sets the run length and the accountant
    # composes the start; elsewhere prior draws. All decided from public inputs (dpmcmc.plan).
    m = _model()
    pen = {k: RUN[k] for k in ("tau", "clip", "proposal_std")}
    sgld = dict(step_size=1e-5, batch_size=100, noise_multiplier=2.0, grad_clip=20.0)
    start = lambda alg, **kw: dpmcmc.plan(m, N, alg, delta=1e-6, chains=2, **kw).start  # noqa: E731
    assert start("dp-penalty", epsilon=4.0, **pen).startswith("private")
    assert start("dp-penalty", iterations=50, **pen).startswith("data-independent")
    assert start("dp-penalty", epsilon=4.0, theta0=np.zeros(DIM), **pen) == "given by the user"
    assert start("dp-sgld", epsilon=4.0, **sgld).startswith("private")   # PLD composes it too
    assert start("dp-sgld", epsilon=4.0, accountant="rdp", **sgld).startswith("private")
    assert start("dp-barker", epsilon=4.0, batch_size=100, proposal_std=0.01).startswith("data-independent")
    # A budget that pays for an iteration but not also for the start: prior draws, not an error
    # (τ = 0.05, n = 4000, 2 chains: one iteration costs μ = 0.1; ε = 2.05 buys μ = 0.105).
    tiny = dict(tau=0.05, clip=20.0, proposal_std=0.003)
    lone = accounting.max_iterations("dp-penalty", 2.05, 1e-6, N, chains=2, tau=0.05)
    assert lone >= 1
    with pytest.raises(ValueError, match="budget too small"):
        accounting.max_iterations("dp-penalty", 2.05, 1e-6, N, chains=2, tau=0.05,
                                  init_mu=0.1 * accounting.gaussian_mu(2.05, 1e-6))
    p = dpmcmc.plan(m, N, "dp-penalty", epsilon=2.05, delta=1e-6, chains=2, **tiny)
    assert p.start.startswith("data-independent") and p.iterations == lone
    # The run does what its plan says. (4 chains, the default: the configuration of
    # test_private_start_is_accounted_as_its_own_mechanism, whose compiled program serves it.)
    res = dpmcmc.sample(m, DATA, "dp-penalty", epsilon=4.0, delta=1e-6, key=jax.random.key(0),
                        progress=False, force=True, **pen)
    assert res.plan.start.startswith("private")
    assert any(x["name"].startswith("private initialisation") for x in res.privacy.mechanisms)
    # Secure mode plans the same private start and charges the same (the run: the slow test
    # below; dpmcmc.sample runs what dpmcmc.plan says in secure mode too:
    # tests/test_plan.py::test_plan_and_sample_share_one_planner_in_every_mode[True]).
    sec = dpmcmc.plan(m, N, "dp-penalty", epsilon=4.0, delta=1e-6, secure=True, force=True, **pen)
    assert sec.start.startswith("private") and sec.secure
    assert sec.report == res.privacy


# slow (a secure chain program of its own, ChaCha20 noise, ~1 CPU-s): guard in default:
# test_default_start_is_private_exactly_where_it_applies (the same start planned in secure
# mode, and its charge) and tests/test_plan.py::test_plan_and_sample_share_one_planner_in_every_mode
# (the run's plan is dpmcmc.plan's in secure mode, a private start included).
@pytest.mark.slow
def test_secure_run_starts_privately_as_planned():
    m = _model()
    pen = {k: RUN[k] for k in ("tau", "clip", "proposal_std")}
    kw = dict(epsilon=4.0, delta=1e-6, progress=False, force=True, **pen)
    res = dpmcmc.sample(m, DATA, "dp-penalty", key=jax.random.key(0), **kw)
    # Secure mode starts privately too (the start's noise from the run's secret), as planned.
    sec = dpmcmc.sample(m, DATA, "dp-penalty", key=jax.random.key(0), secure=True, **kw)
    assert sec.plan.start.startswith("private") and sec.secure
    assert sec.plan.to_dict() == dpmcmc.plan(m, N, "dp-penalty", secure=True,
                                             **{k: v for k, v in kw.items() if k != "progress"}
                                             ).to_dict()
    assert sec.privacy == res.privacy


def test_public_point_under_a_flat_prior_is_a_central_draw_not_the_origin():
    # A flat prior ties every candidate; the origin then has no claim, and for the circle model
    # it is the ring's centre, where every record's gradient is zero (the first Newton move was
    # noise alone). The tie goes to the draw nearest the draws' median.
    from dpmcmc.models import circle
    from dpmcmc.samplers.private_init import public_point

    model = circle()
    draws = np.asarray(model.sample_prior(jax.random.key(3), (64,)))
    point = public_point(model, draws)
    assert any(np.array_equal(point, d) for d in draws)
    dist = np.sum((draws - np.median(draws, axis=0)) ** 2, axis=1)
    np.testing.assert_array_equal(point, draws[np.argmin(dist)])
    assert np.linalg.norm(point) > 0.5          # the sample_prior N((0, 1), I) is off the origin
