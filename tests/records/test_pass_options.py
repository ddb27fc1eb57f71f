"""The per-example passes' switches travel with the data, never through module state.

``prepare_data(columnar=..., fused_clip=..., unroll_reductions=...)`` chooses how the passes
trace (benchmarks measure each choice with them). They used to be module globals of the passes'
module read while tracing, flipped by the benchmark around ``jax.clear_caches()``: two traces
in flight at once (two threads) then saw each other's setting. Here two threads trace
the same pass with different switches while a rendezvous inside the model's log-likelihood
(called at trace time) holds both traces open together; each must still get exactly the jaxpr
it gets alone.
"""
from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.models.base import Model
from dpmcmc.records import passes as pe
from dpmcmc.records.layout import prepare_data

N = 8  # rows: tracing is what is tested, not speed
DIM = 2


class Rendezvous:
    """Called from the log-likelihood at trace time: the first call of each thread waits for
    the other thread's first call, so both traces are in flight at the same moment."""

    def __init__(self):
        self.barrier = None
        self.local = threading.local()

    def arm(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties)
        self.local = threading.local()

    def __call__(self) -> None:
        if self.barrier is not None and not getattr(self.local, "met", False):
            self.local.met = True
            self.barrier.wait(timeout=10)


def _model(rendezvous: Rendezvous) -> Model:
    def log_likelihood(theta, x):
        rendezvous()
        # A per-row inner product (rewritten by vectorize_columns, kept by jax.vmap) and a
        # per-record constant vector: the two vectorisations trace to different jaxprs.
        w = jnp.asarray([1.0, -0.5])
        return -0.5 * jnp.sum((x - theta) ** 2) + jnp.dot(w * x, theta)

    return Model(log_likelihood, lambda t: -0.5 * jnp.sum(t ** 2), DIM)


def _data():
    return np.random.default_rng(0).normal(size=(N, DIM))


PASSES = {
    # columnar is read on both sides of the model's first call (θ' then θ).
    "llr": ("columnar", lambda model, data, t: pe.clipped_llr_sum(model, data, t, t + 0.1, 1.0)),
    # fused_clip is read after the per-example gradients (i.e. after the model's first call).
    "grad": ("fused_clip", lambda model, data, t: pe.clipped_grad_sum(model, data, t, 1.0)),
}


def _jaxpr(fn, model, prepared) -> str:
    return str(jax.make_jaxpr(lambda t: fn(model, prepared, t))(jnp.zeros(DIM)))


@pytest.mark.parametrize("name", sorted(PASSES))
def test_concurrent_traces_with_different_switches_get_their_own_jaxprs(name):
    switch, fn = PASSES[name]
    rendezvous = Rendezvous()
    model = _model(rendezvous)
    prepared = {v: prepare_data(_data(), model=model, **{switch: v}) for v in (True, False)}
    alone = {v: _jaxpr(fn, model, prepared[v]) for v in (True, False)}
    assert alone[True] != alone[False], f"{switch} does not change the traced pass"

    for order in [(True, False), (False, True), (True, False)]:
        # A fresh log-likelihood per thread and round: JAX caches the trace of a function it
        # has seen (make_jaxpr inside vectorize_columns), which would skip the rendezvous, and
        # makes a second trace of the same function and shapes wait for the first (deadlock).
        models = {v: _model(rendezvous) for v in order}
        rendezvous.arm(2)
        got, errors = {}, []

        def trace(v):
            try:
                got[v] = _jaxpr(fn, models[v], prepared[v])
            except BaseException as e:  # noqa: BLE001 - reported below with the thread's switch
                errors.append((v, e))

        threads = [threading.Thread(target=trace, args=(v,)) for v in order]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        assert rendezvous.barrier.n_waiting == 0 and not rendezvous.barrier.broken
        for v in (True, False):
            assert got[v] == alone[v], f"{switch}={v} traced concurrently with {switch}={not v}"


def test_switches_default_on_and_survive_the_pytree_round_trip():
    model = _model(Rendezvous())
    default = prepare_data(_data(), model=model)
    assert (default.columnar, default.fused_clip, default.unroll_reductions) == (True, True, True)
    off = prepare_data(_data(), model=model, columnar=False, fused_clip=False,
                          unroll_reductions=False)
    leaves, tree = jax.tree.flatten(off)
    back = jax.tree.unflatten(tree, leaves)
    assert (back.columnar, back.fused_clip, back.unroll_reductions) == (False, False, False)
    # Part of the structure: jit never reuses one setting's compiled pass for another.
    assert jax.tree.structure(default) != tree
    # An already prepared value is passed through with its switches (as the builders do).
    assert prepare_data(off, model=model) is off


def test_switches_change_the_trace_not_the_values():
    """Each switch selects an implementation of the same pass: equal sums and clip counts."""
    model = _model(Rendezvous())
    x = _data() * 3.0  # some rows clipped at bound 1
    t, t_new = jnp.asarray([0.3, -0.2]), jnp.asarray([0.5, 0.1])
    ref = prepare_data(x, model=model)
    off = prepare_data(x, model=model, columnar=False, fused_clip=False,
                          unroll_reductions=False)
    fns = (lambda d: pe.clipped_llr_sum(model, d, t, t_new, 0.2),
           lambda d: pe.clipped_grad_sum(model, d, t, 1.0),
           lambda d: (pe.loglik_sum(model, d, t),),
           lambda d: pe.loglik_sum_and_grad(model, d, t))
    # Every pass under both settings in one compiled program (the switches are part of the
    # prepared data's structure, so each half traces its own implementation).
    results = jax.jit(lambda r, o: [(fn(r), fn(o)) for fn in fns])(ref, off)
    for a, b in results:
        for u, v in zip(a, b):
            np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-12, atol=1e-12)
    count = results[1][0][1]
    assert 0 < int(count) < N


def test_unroll_reductions_switch_keeps_short_reductions():
    """``unroll_reductions=False`` traces the forward pass as written: its per-record 2-term
    sums stay XLA reductions, which the default rewrites as adds."""
    model = _model(Rendezvous())
    fn = PASSES["llr"][1]

    def short_sums(prepared):
        jp = jax.make_jaxpr(lambda t: fn(model, prepared, t))(jnp.zeros(DIM))
        return str(jp).count("reduce_sum")

    on = short_sums(prepare_data(_data(), model=model))
    off = short_sums(prepare_data(_data(), model=model, unroll_reductions=False))
    assert off > on
