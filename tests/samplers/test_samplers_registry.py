"""The algorithm registry: validation before any data is touched, defaults, accounting params."""
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.models.base import Model
from dpmcmc.samplers import ALGORITHMS, AlgorithmSpec, HMCInfo, Info, Kernel

MODEL = Model(lambda th, x: -0.5 * jnp.sum((x - th) ** 2), lambda th: 0.0, 3)
N = 100

VALID = {
    "rwmh": dict(proposal_std=0.1),
    "hmc": dict(step_size=0.1),
    "dp-penalty": dict(tau=0.3, clip=2.0, proposal_std=[0.1, 0.2, 0.3]),
    "dp-hmc": dict(tau_l=0.3, tau_g=0.5, clip=2.0, grad_clip=1.0, step_size=0.01),
}


def test_registry_entries():
    assert set(ALGORITHMS) >= {"rwmh", "hmc", "dp-penalty", "dp-hmc"}
    for name, spec in ALGORITHMS.items():
        assert isinstance(spec, AlgorithmSpec)
        assert spec.name == name
    assert not ALGORITHMS["rwmh"].private and not ALGORITHMS["hmc"].private
    assert ALGORITHMS["dp-penalty"].private and ALGORITHMS["dp-hmc"].private


def test_defaults_are_filled():
    p = ALGORITHMS["dp-penalty"].prepare(dict(VALID["dp-penalty"]), MODEL, N)
    assert p["mode"] == "random-walk"
    assert p["proposal_std"] == (0.1, 0.2, 0.3)
    p = ALGORITHMS["dp-hmc"].prepare(dict(VALID["dp-hmc"]), MODEL, N)
    assert p["leapfrog_steps"] == 10 and p["mass"] == (1.0, 1.0, 1.0) and p["jitter"] is True
    p = ALGORITHMS["hmc"].prepare(dict(VALID["hmc"]), MODEL, N)
    assert p["clip"] is None and p["leapfrog_steps"] == 10
    p = ALGORITHMS["rwmh"].prepare(dict(VALID["rwmh"]), MODEL, N)
    assert p["proposal_std"] == (0.1, 0.1, 0.1) and p["clip"] is None


def test_accounting_params():
    acc = {name: spec.accounting_params(spec.prepare(dict(VALID[name]), MODEL, N))
           for name, spec in ALGORITHMS.items() if name in VALID}
    assert acc["rwmh"] == {} and acc["hmc"] == {}
    assert acc["dp-penalty"] == {"tau": 0.3}
    assert acc["dp-hmc"] == {"tau_l": 0.3, "tau_g": 0.5, "leapfrog_steps": 10}


def test_accounting_params_are_accepted_by_the_accountant():
    accounting = pytest.importorskip("dpmcmc.accounting")
    releases = getattr(accounting, "releases", None)
    if releases is None:
        pytest.skip("dpmcmc.accounting.releases not available")
    for name in ("dp-penalty", "dp-hmc"):
        spec = ALGORITHMS[name]
        rels = releases(name, N, **spec.accounting_params(spec.prepare(dict(VALID[name]), MODEL, N)))
        assert len(rels) >= 1


@pytest.mark.parametrize("name,bad,match,exc", [
    ("dp-penalty", dict(clip=0.0), "clip", ValueError),
    ("dp-penalty", dict(clip=-1.0), "clip", ValueError),
    ("dp-penalty", dict(tau=0), "tau", ValueError),
    ("dp-penalty", dict(tau=float("nan")), "tau", ValueError),
    ("dp-penalty", dict(tau="big"), "tau", TypeError),
    ("dp-penalty", dict(proposal_std=[0.1, 0.2]), "proposal_std", ValueError),
    ("dp-penalty", dict(proposal_std=[0.1, -0.2, 0.3]), "proposal_std", ValueError),
    ("dp-penalty", dict(mode="sideways"), "mode", ValueError),
    ("dp-penalty", dict(step_size=0.1), "step_size", ValueError),
    ("dp-hmc", dict(step_size=0.0), "step_size", ValueError),
    ("dp-hmc", dict(grad_clip=-2.0), "grad_clip", ValueError),
    ("dp-hmc", dict(tau_g=0.0), "tau_g", ValueError),
    ("dp-hmc", dict(tau_l=-1.0), "tau_l", ValueError),
    ("dp-hmc", dict(mass=[1.0, 2.0]), "mass", ValueError),
    ("dp-hmc", dict(mass=0.0), "mass", ValueError),
    ("dp-hmc", dict(leapfrog_steps=0), "leapfrog_steps", ValueError),
    ("dp-hmc", dict(leapfrog_steps=2.5), "leapfrog_steps", TypeError),
    ("dp-hmc", dict(grad_method="sideways"), "grad_method", ValueError),
    ("dp-hmc", dict(tau=0.3), "tau", ValueError),
    ("hmc", dict(step_size=-0.1), "step_size", ValueError),
    ("hmc", dict(clip=0.0), "clip", ValueError),
    ("hmc", dict(jitter="yes"), "jitter", TypeError),
    ("hmc", dict(mass=[1.0, 1.0, 1.0, 1.0]), "mass", ValueError),
    ("rwmh", dict(proposal_std=0.0), "proposal_std", ValueError),
    ("rwmh", dict(block_size=0), "block_size", ValueError),
    ("rwmh", dict(tau=1.0), "tau", ValueError),
])
def test_bad_parameters_raise_naming_the_argument(name, bad, match, exc):
    params = {**VALID[name], **bad}
    with pytest.raises(exc, match=match):
        ALGORITHMS[name].prepare(params, MODEL, N)


@pytest.mark.parametrize("name,missing", [("dp-penalty", "tau"), ("dp-penalty", "clip"),
                                          ("dp-hmc", "grad_clip"), ("hmc", "step_size"),
                                          ("rwmh", "proposal_std")])
def test_missing_required_parameter(name, missing):
    params = {k: v for k, v in VALID[name].items() if k != missing}
    with pytest.raises(ValueError, match=missing):
        ALGORITHMS[name].prepare(params, MODEL, N)


def test_bad_n():
    with pytest.raises(ValueError, match="n"):
        ALGORITHMS["dp-penalty"].prepare(dict(VALID["dp-penalty"]), MODEL, 0)


# hmc and dp-hmc (~2 CPU-s, a leapfrog program each): slow (tests/suite_budget.py,
# SLOW_CASES_B); their kernels' contract is checked in the default run through run_chains by
# test_samplers_nan.py::test_divergent_leapfrog_is_a_rejection. rwmh is slow too (SLOW_CASES_A4):
# dp-penalty's case checks the shared contract, test_samplers_nan.py's rwmh case runs its kernel.
@pytest.mark.parametrize("name", sorted(VALID))
def test_build_gives_a_kernel_with_the_contract(name):
    import jax

    spec = ALGORITHMS[name]
    data = np.random.default_rng(0).normal(size=(N, 3))
    prepared = spec.prepare(dict(VALID[name]), MODEL, N)
    kernel = spec.build(MODEL, prepared)
    assert isinstance(kernel, Kernel)
    data = spec.layout(data, prepared, MODEL)  # the data the kernel's step reads

    @jax.jit  # init and one step in one program (one compilation instead of two)
    def first_step(key, theta, data):
        state = kernel.init(theta, data)
        return state, kernel.step(key, state, data)

    state, (new_state, info) = first_step(jax.random.key(0), jnp.zeros(3), data)
    assert state.position.shape == (3,)
    assert isinstance(info, (Info, HMCInfo))
    assert info.accepted.dtype == bool and info.diverged.dtype == bool
    assert 0.0 <= float(info.clip_fraction) <= 1.0
    assert jax.tree.structure(new_state) == jax.tree.structure(state)


# ---------------------------------------------------------------- one spec per algorithm

def test_every_algorithm_is_its_own_modules_spec():
    import importlib

    modules = {"rwmh": "rwmh", "hmc": "hmc", "dp-penalty": "dp_penalty", "dp-hmc": "dp_hmc",
               "dp-barker": "barker", "minibatch-penalty": "minibatch_penalty",
               "dp-sgld": "dp_sgld", "dp-sgnht": "dp_sgnht", "noise-aware-glm": "noise_aware_glm"}
    assert set(ALGORITHMS) == set(modules)
    for name, module in modules.items():
        assert ALGORITHMS[name] is importlib.import_module(f"dpmcmc.samplers.{module}").SPEC


def test_spec_declarations_are_complete():
    from dpmcmc import accounting
    from dpmcmc.audit import AUDITS
    from dpmcmc.samplers.spec import DATA_ACCESS

    for name, spec in ALGORITHMS.items():
        assert spec.data_access in DATA_ACCESS
        # Private iff it declares its releases; every private algorithm names an audit design.
        assert (spec.releases is not None) == spec.private
        if spec.private:
            assert AUDITS[name] is spec.audit and spec.audit.algorithm == name
            assert accounting.algorithm_params(name) == (spec.releases.required,
                                                         spec.releases.optional)
            assert accounting.supported_accountants(name)  # the kind has accountants
    # The accountant knows exactly the private algorithms, read from the specs.
    assert set(accounting.ALGORITHMS) == {n for n, s in ALGORITHMS.items() if s.private}
    assert ALGORITHMS["dp-penalty"].data_access == "full"
    assert ALGORITHMS["dp-sgld"].data_access == "subsampled"


def test_no_table_outside_the_specs_is_keyed_by_algorithm_name():
    """An algorithm lives on its card (SPEC): no dict or set literal in the library lists two
    or more algorithm names (such a table is a second place to update when an algorithm is
    added, and drifts). The experiments, the papers' presets and the demo hold run
    configurations per algorithm (data, not behaviour) and are exempt."""
    import ast
    import pathlib

    import dpmcmc

    names = set(ALGORITHMS)
    root = pathlib.Path(dpmcmc.__file__).parent
    exempt = ("experiments/", "models/presets.py", "demo.py")
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        # A string constant equal to a name is written quoted ("name", 'name', or inside a
        # triple-quoted or prefixed literal, which contains the quoted form too): a file with
        # fewer than two such spellings holds no table, and is not parsed (~0.4 CPU-s of the
        # ~0.6 the parse and walk of every file cost).
        if rel.startswith(exempt) or sum(text.count(f'"{n}"') + text.count(f"'{n}'")
                                         for n in names) < 2:
            continue
        for node in ast.walk(ast.parse(text)):
            items = (node.keys if isinstance(node, ast.Dict) else
                     node.elts if isinstance(node, (ast.Set, ast.List, ast.Tuple)) else [])
            hits = [k.value for k in items if isinstance(k, ast.Constant) and k.value in names]
            if len(hits) >= 2:
                found.append(f"{rel}:{node.lineno}: {hits}")
    assert not found, "tables keyed by algorithm name outside the specs:\n" + "\n".join(found)


def test_spec_events_are_the_accountants_releases():
    from dpmcmc import accounting

    p = ALGORITHMS["dp-hmc"].prepare(dict(VALID["dp-hmc"]), MODEL, N)
    assert ALGORITHMS["dp-hmc"].events(N, p) == accounting.releases(
        "dp-hmc", N, **ALGORITHMS["dp-hmc"].accounting_params(p))
    assert ALGORITHMS["rwmh"].events(N, {}) == ()


def test_subsampled_kernels_draw_the_sigma_of_their_release_event():
    # One source of truth for σ: the minibatch releases read it from the accountant's event.
    import jax

    from dpmcmc import accounting
    from dpmcmc.samplers.dp_sgld import release_batch_grad
    from dpmcmc.samplers.minibatch_penalty import release_penalised_llr

    data = jnp.asarray(np.random.default_rng(1).normal(size=(N, 3)))
    theta, theta_new = jnp.zeros(3), jnp.asarray([0.1, -0.2, 0.05])
    # Both releases in one jitted program: the same computation as eager calls, which
    # dispatched (and compiled) their ~90 operations one by one.
    with jax.enable_x64(True):
        (rel, _), mb = jax.jit(lambda k1, k2, d, t, t2: (
            release_batch_grad(k1, MODEL, d, t, 10, 1.7, 0.5),
            release_penalised_llr(k2, MODEL, d[:10], t, t2, N, 0.8, 2.0)))(
                jax.random.key(0), jax.random.key(1), data, theta, theta_new)
        (event,) = accounting.releases("dp-sgld", N, noise_multiplier=1.7, batch_size=10)
        assert float(rel.sigma) == pytest.approx(event.noise_std(0.5), rel=1e-12)
        (event,) = accounting.releases("minibatch-penalty", N, tau=0.8, batch_size=10)
        # Per-example bound c/2 (sensitivity c); σ = √τ·c, μ = c²/(2σ²) = 1/(2τ).
        assert float(mb.sigma) == pytest.approx(event.noise_std(0.5 * float(mb.sensitivity)), rel=1e-12)
        assert event.mu == pytest.approx(float(mb.sensitivity) ** 2 / (2 * float(mb.sigma) ** 2),
                                         rel=1e-12)


def test_accounting_import_does_not_import_jax():
    from host_devices import run_module

    out = run_module("imports", "dpmcmc.accounting", timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
