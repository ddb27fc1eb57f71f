"""Python-loop DP-HMC and DP penalty in the structure of the papers' public experiment code, for timing only.

The issue quotes the papers' reference implementation (DP-HMC, n = 10⁵, 4 chains) at 329 ms per
iteration on the banana and 4354 ms on the 10-d Gaussian, measured on another machine. That code
does not run on current JAX (it uses the removed ``jax.ops.index_update``), so to measure a
speed-up *in one run* this module re-creates its execution structure, written for this benchmark:

- a Python ``for`` loop over iterations and, inside it, over the L leapfrog steps;
- each gradient release is one eager call of ``jax.vmap`` (over chains, chains on the last axis
  of θ) of a jitted function that evaluates ``vmap(grad(log_likelihood))`` over the (n, d)
  row-major data in float64, clips each row's gradient to norm ``grad_clip`` and sums;
- the log-likelihoods of the proposal are one eager call of a vmapped jitted per-record
  log-likelihood; the ratio against the cached current values is clipped eagerly;
- keys are split eagerly, noise is drawn eagerly, and the accepted state is written into the
  chain array chain by chain with ``.at[].set`` (the reference's ``index_update``);
- XLA runs with the same flags as the rest of the benchmark (one thread).

DP penalty (:class:`ReferenceLoopDPPenalty`) follows the same structure: per iteration one eager
random-walk proposal, one eager call of the vmapped per-record log-likelihood on the proposal, the
ratio against the cached current values clipped and summed eagerly, eager noise and penalty test,
and the chain array written chain by chain.

By default it uses the model's own per-record ``log_likelihood`` (the same function our sampler
differentiates), so both sides compute the same quantities. For the 10-d Gaussian the reference
evaluated each record with a triangular solve against the Cholesky factor of the covariance
(``gauss_model.py``, ``log_likelihood_per_sample_fast``); our preset's per-record function is a
quadratic form in the precision matrix, which is cheaper. :func:`papers_record_model` gives the
model with the papers' per-record function instead, so the benchmark can time the loop both ways
(the banana's per-record function is the same sum of squares in both codes).

It is not part of the library and is not private in any useful sense (fixed seed; timing only).
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np


def papers_record_model(model):
    """``model`` with the per-record log-likelihood written as the papers' code writes it, or
    ``None`` where it is already the same computation (the banana).

    The 10-d Gaussian: ``z = L⁻¹(x − θ)`` by a triangular solve with the Cholesky factor ``L`` of
    the covariance, ``−½ zᵀz`` (the papers leave out the constant, which cancels in every ratio
    and gradient). Same values as the quadratic form up to that constant and rounding.
    """
    import dataclasses

    if model.metadata.get("family") != "gaussian":
        return None
    chol = jnp.asarray(np.linalg.cholesky(np.asarray(model.metadata["cov"], dtype=np.float64)))

    def log_likelihood(theta, x):
        z = jax.scipy.linalg.solve_triangular(chol, x - theta, lower=True)
        return -0.5 * jnp.sum(z ** 2)

    return dataclasses.replace(model, log_likelihood=log_likelihood, log_likelihood_batch=None,
                               grad_log_likelihood_batch=None, name=model.name + "-papers-record")


def _clipped_grad_sum(log_likelihood):
    """jit((bound, theta, X) -> (Σ clipped per-row gradients, number clipped))."""
    per_row = jax.vmap(jax.grad(log_likelihood), in_axes=(None, 0))

    def clip_one(g, bound):
        norm = jnp.sqrt(jnp.sum(g ** 2))
        return g / norm * jnp.minimum(norm, bound), norm > bound

    @jax.jit
    def fn(bound, theta, X):
        g, clipped = jax.vmap(clip_one, in_axes=(0, None))(per_row(theta, X), bound)
        return jnp.sum(g, axis=0), jnp.sum(clipped)

    return fn


class _ReferenceLoop:
    """The eager pieces both reference loops share: per-record log-likelihoods and the prior."""

    def __init__(self, model, data, params):
        self.X = jnp.asarray(data, dtype=jnp.float64)
        self.n = self.X.shape[0]
        self.p = dict(params)
        per_ll = jax.jit(jax.vmap(model.log_likelihood, in_axes=(None, 0)))
        self.vm_ll = jax.vmap(per_ll, in_axes=(1, None), out_axes=1)
        self.vm_prior = jax.vmap(jax.jit(model.log_prior), 1, 0)

    @staticmethod
    def write(chain, llc, i, accept, current, prop, llp):
        """Row ``i + 1`` of the chain array, chain by chain (the reference's ``index_update``)."""
        for j in range(chain.shape[2]):
            if accept[j]:
                chain = chain.at[i + 1, :, j].set(prop[:, j])
                llc = llc.at[:, j].set(llp[:, j])
            else:
                chain = chain.at[i + 1, :, j].set(current[:, j])
        return chain, llc


class ReferenceLoopDPPenalty(_ReferenceLoop):
    """DP penalty driven from Python, one eager JAX call per data pass (see the module docstring).

    Parameters
    ----------
    model : dpmcmc.Model
    data : array (n, d)
    params : dict
        ``tau, clip, proposal_std`` (scalar or per dimension).
    """

    def run(self, theta0, iters, seed=0):
        """``iters`` iterations from ``theta0`` (dim, chains); returns the chain (iters+1, dim, chains)."""
        p, n, X = self.p, self.n, self.X
        dim, chains = theta0.shape
        std = jnp.reshape(jnp.asarray(p["proposal_std"], dtype=jnp.float64), (-1, 1))
        sigma = 2 * p["tau"] * np.sqrt(n) * p["clip"]
        rng = jax.random.PRNGKey(seed)
        chain = jnp.zeros((iters + 1, dim, chains)).at[0].set(theta0)
        llc = self.vm_ll(theta0, X)
        for i in range(iters):
            current = chain[i]
            rng, k_prop, k_ll, k_acc = jax.random.split(rng, 4)
            prop = current + std * jax.random.normal(k_prop, (dim, chains))
            llp = self.vm_ll(prop, X)
            dist = jnp.sqrt(jnp.sum((current - prop) ** 2, axis=0))
            bound = dist * p["clip"]
            r = jnp.sum(jnp.clip(llp - llc, -bound, bound), axis=0)
            s = jax.random.normal(k_ll, (chains,)) * sigma * dist
            log_ratio = r + s + self.vm_prior(prop) - self.vm_prior(current)
            u = jnp.log(jax.random.uniform(k_acc, (chains,)))
            accept = u < log_ratio - 0.5 * (sigma * dist) ** 2
            chain, llc = self.write(chain, llc, i, accept, current, prop, llp)
        return jax.block_until_ready(chain)


class ReferenceLoopDPHMC(_ReferenceLoop):
    """DP-HMC driven from Python, one eager JAX call per data pass (see the module docstring).

    Parameters
    ----------
    model : dpmcmc.Model
        Only ``log_likelihood``, ``log_prior`` and ``dim`` are used.
    data : array (n, d)
    params : dict
        ``tau_l, tau_g, clip, grad_clip, step_size, leapfrog_steps, mass`` (scalar mass).
    """

    def __init__(self, model, data, params):
        super().__init__(model, data, params)
        self.vm_grad = jax.vmap(_clipped_grad_sum(model.log_likelihood), in_axes=(None, 1, None),
                                out_axes=(1, 0))
        self.vm_prior_grad = jax.vmap(jax.jit(jax.grad(model.log_prior)), 1, 1)

    def run(self, theta0, iters, seed=0):
        """``iters`` iterations from ``theta0`` (dim, chains); returns the chain (iters+1, dim, chains)."""
        p, n, X = self.p, self.n, self.X
        dim, chains = theta0.shape
        mass, L, eta = p["mass"], p["leapfrog_steps"], p["step_size"]
        sigma_l = 2 * p["tau_l"] * np.sqrt(n) * p["clip"]
        sigma_g = 2 * p["tau_g"] * np.sqrt(n) * p["grad_clip"]
        rng = jax.random.PRNGKey(seed)
        rng, halton_key = jax.random.split(rng)
        step_scale = jax.random.uniform(halton_key, (iters,))  # stands in for the Halton draws

        def grad_fun(theta, key):
            g, _clipped = self.vm_grad(p["grad_clip"], theta, X)
            noise = jax.random.normal(key, (dim, chains)) * sigma_g
            return g + noise + self.vm_prior_grad(theta)

        chain = jnp.zeros((iters + 1, dim, chains)).at[0].set(theta0)
        llc = self.vm_ll(theta0, X)
        for i in range(iters):
            current = chain[i]
            rng, k_mom, k_grad, k_ll, k_acc = jax.random.split(rng, 5)
            mom = jax.random.normal(k_mom, (dim, chains)) * np.sqrt(mass)
            mom0 = mom
            prop = current
            k_grad, use = jax.random.split(k_grad)
            g = grad_fun(current, use)
            h = step_scale[i] * eta
            for _ in range(L):
                mom = mom + 0.5 * h * g
                prop = prop + h * mom / mass
                k_grad, use = jax.random.split(k_grad)
                g = grad_fun(prop, use)
                mom = mom + 0.5 * h * g
            llp = self.vm_ll(prop, X)
            r = llp - llc
            dist = jnp.sqrt(jnp.sum((current - prop) ** 2, axis=0))
            bound = dist * p["clip"]
            r = jnp.clip(r, -bound, bound)
            s = jax.random.normal(k_ll, (chains,)) * sigma_l * dist
            dH = (0.5 * jnp.sum(mom0 ** 2 / mass, axis=0) - 0.5 * jnp.sum(mom ** 2 / mass, axis=0)
                  + jnp.sum(r, axis=0) + s + self.vm_prior(prop) - self.vm_prior(current))
            u = jnp.log(jax.random.uniform(k_acc, (chains,)))
            accept = u < dH - 0.5 * (sigma_l * dist) ** 2
            chain, llc = self.write(chain, llc, i, accept, current, prop, llp)
        return jax.block_until_ready(chain)


LOOPS = {"dp-hmc": ReferenceLoopDPHMC, "dp-penalty": ReferenceLoopDPPenalty}


def time_reference(model, data, params, theta0, iters, reps=2, algorithm="dp-hmc"):
    """(CPU ms, wall ms) per iteration of the reference-style loop, minimum over ``reps``.

    One warm-up iteration first compiles the jitted pieces (the reference also paid that once).
    """
    ref = LOOPS[algorithm](model, data, params)
    theta0 = jnp.asarray(theta0, dtype=jnp.float64)
    ref.run(theta0, 1, seed=1)
    cpu, wall = np.inf, np.inf
    for r in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        ref.run(theta0, iters, seed=2 + r)
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return 1e3 * cpu / iters, 1e3 * wall / iters
