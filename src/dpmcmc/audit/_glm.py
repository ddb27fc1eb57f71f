"""The privacy audit of the noise-aware GLM (``dpmcmc audit noise-aware-glm``).

The GLM is not a Markov chain: one fit makes ``2K`` releases (each round's gradient and Hessian
sums at a public point chosen from the earlier releases) and then post-processes them. The
audit runs the fit's own release code (:func:`dpmcmc.samplers.noise_aware_glm._releases`, with
the kernel-style noise source, so a miscalibrated source reaches it) many times on two
neighbouring data sets and applies the tests of :mod:`dpmcmc.audit._core`:

* ``releases``: the exact log-likelihood ratio ``log p_D(T)/p_D'(T)`` of each run's transcript
  ``T``: the sum over releases of each mechanism's log density ratio at the realised query
  point (Gaussian: ``(‖r − b‖² − ‖r − a‖²)/(2σ²)``; K-norm: ``ε(‖r − b‖_K − ‖r − a‖_K)``, with
  ``a``, ``b`` the clipped sums on D and D'). By Neyman–Pearson this is the most powerful
  statistic for this pair.
* ``draws``: the noise-aware posterior mean of the slope (the last round's Newton estimate),
  what a user would publish.

Design (``n = 200`` records, one covariate, slope 6, so the fitted probabilities are near 0 or
1): D has the record ``(x = 1, y = 0)``, D' has ``(x = −1, y = 1)`` in its place. At a fitted
point both records are "surprising", so their gradients differ by almost the whole width of the
K-norm box in the intercept coordinate and by 2 in norm: the pair is close to worst case for the
last round's mechanism, which dominates the budget.
"""
from __future__ import annotations

import time
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpmcmc import linalg
from dpmcmc.samplers import noise_aware_glm as nag
from dpmcmc.kernels.mechanisms import NoiseSource

__all__ = ["GLM_ALGORITHM", "glm_design", "audit_glm"]

GLM_ALGORITHM = "noise-aware-glm"
#: Records per data set and the slope of the design.
GLM_DESIGN_N = 200
GLM_SLOPE = 6.0
#: Runs per compiled call (memory: each run holds its n per-record Hessians per round).
GLM_CHUNK = 10000
#: Prior sd of the audited fit (dpmcmc.glm's default).
GLM_PRIOR_SD = 10.0


def glm_design(n: int = GLM_DESIGN_N, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The neighbouring data sets ``(D, D')``: rows ``(1, x, y)`` of a scaled design."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-(-0.5 + GLM_SLOPE * x)))).astype(float)
    d_set = np.column_stack([np.ones(n), x, y])
    d_set[0] = [1.0, 1.0, 0.0]
    dp_set = d_set.copy()
    dp_set[0] = [1.0, -1.0, 1.0]
    return d_set, dp_set


def _release_sum(plan, data, theta, rel):
    X, y = data[:, :-1], data[:, -1]
    g, h = nag._per_record(plan.family, theta, X, y, plan.noise_sd)
    return nag._clipped_sum(g if rel.statistic == "gradient" else h, rel)


def _runner(plan, d_set, dp_set, noise: NoiseSource):
    """``(data, keys) -> (transcript log-ratio, posterior-mean slope)`` per run, compiled once."""
    prior = jnp.eye(plan.d) / GLM_PRIOR_SD ** 2
    d_set, dp_set = jnp.asarray(d_set), jnp.asarray(dp_set)

    def one(data, key):
        thetas, gs, hs = nag._releases(key, data[:, :-1], data[:, -1], plan, prior, noise)
        llr = 0.0
        for k in range(plan.steps):
            for rel, out in ((plan.gradients[k], gs[k]), (plan.hessians[k], hs[k])):
                a = _release_sum(plan, d_set, thetas[k], rel)
                b = _release_sum(plan, dp_set, thetas[k], rel)
                if rel.kind == nag.GAUSSIAN:
                    s2 = 2.0 * rel.sigma ** 2
                    llr = llr + (jnp.sum((out - b) ** 2) - jnp.sum((out - a) ** 2)) / s2
                else:
                    r = out if rel.statistic == "gradient" else out[np.triu_indices(plan.d)]
                    w = jnp.asarray(rel.widths())
                    llr = llr + rel.epsilon * (jnp.max(jnp.abs(r - b) / w)
                                               - jnp.max(jnp.abs(r - a) / w))
        theta, g = thetas[-1], gs[-1]
        q = nag._psd(hs[-1], nag.hessian_floor(plan.hessians[-1].noise_sd, plan.d,
                                                plan.draw_floor_factor)) + prior
        mean = theta + linalg.solve(q, g - prior @ theta)  # one matrix per call under the vmap
        return llr, mean[1]

    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


def audit_glm(epsilon: float, delta: float, *, trials: int, confidence: float, statistic: str,
              key, calib: int, chunk_size: int, noise: Optional[NoiseSource]):
    """The audit of :func:`dpmcmc.audit.audit` for ``"noise-aware-glm"`` (arguments checked
    there; ``key`` a threefry key). The claim is the fit's own composition at ``delta``.

    The fit clips nothing inside the declared box, so a miscalibrated source can only scale its
    noise (``noise_scale``); ``sensitivity_factor`` is refused."""
    if noise is not None and noise.sensitivity_factor != 1.0:
        raise ValueError("_miscalibration: the noise-aware GLM clips nothing inside its box; only "
                         "noise_scale applies")
    from dpmcmc.audit._core import _result, _simulate

    start = time.perf_counter()
    d_set, dp_set = glm_design()
    plan = nag.release_plan("logistic", d_set.shape[0], d_set.shape[1] - 1, epsilon, delta)
    claimed = plan.epsilon_spent()
    source = NoiseSource() if noise is None else noise
    run = _runner(plan, d_set, dp_set, source)

    def runner(data, keys):
        llr, slope = run(data, keys)
        return llr, slope, jnp.ones(keys.shape[0], bool)

    # Each run holds its per-record terms of every round: a few thousand runs per call.
    chunk = min(chunk_size, GLM_CHUNK)
    k_d, k_dp = jax.random.split(key)
    rel_d, drw_d, _ = _simulate(runner, jnp.asarray(d_set), k_d, trials, chunk)
    rel_dp, drw_dp, _ = _simulate(runner, jnp.asarray(dp_set), k_dp, trials, chunk)
    params = {"steps": plan.steps, "final_mechanism": plan.gradients[-1].kind,
              "mu_total": plan.mu_total, "pure_epsilon": list(plan.pure)}
    # all_clipped = 0: inside the box the fit clips nothing (its releases are exact plus noise).
    return _result(GLM_ALGORITHM, float(claimed), (rel_d, rel_dp), (drw_d, drw_dp), calib, delta,
                   confidence, statistic, trials, plan.steps, params, int(d_set.shape[0]), 0.0,
                   start, noise)
