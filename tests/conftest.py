import os

# XLA compilation is most of the suite's time, and the suite's programs are small and mostly
# run briefly, so the suite compiles them cheaply (about 40 % of its CPU time):
# - XLA:CPU's classic elemental emitters instead of its MLIR fusion emitters (slower to compile);
# - one LLVM module per program (``xla_cpu_parallel_codegen_split_count=1``): XLA otherwise splits
#   it into parts compiled on parallel threads, each paying its own per-module set-up (target
#   machine, passes); that buys wall time on many cores and costs CPU time (~6 % of the suite's
#   CPU in paired runs here);
# - LLVM optimisation level 0 (JAX's ``jax_disable_most_optimizations``), set per test by the
#   hook at the end of this file. A test marked ``xla_optimized`` is compiled at level 1 instead
#   (XLA_FLAGS below): a long chain or audit, where level 0 costs more at run time than it saves
#   in compilation, or a bit-for-bit comparison of two programs, which level 0 does not round
#   alike (an audit tap must leave the chain unchanged to the last bit).
# They change how XLA generates code, not what a program computes. Set through the environment,
# so that the child processes (those of tests/children/, the CLI and Snakemake runs) inherit them;
# a child function that runs a long computation turns jax_disable_most_optimizations off for it.
# XLA flags the user set win, and DPMCMC_TEST_FULL_COMPILE=1 runs the suite on JAX's and XLA's
# defaults.
_CHEAP_COMPILE = {"--xla_cpu_use_fusion_emitters": "false", "--xla_backend_optimization_level": "1",
                  "--xla_cpu_parallel_codegen_split_count": "1"}
if os.environ.get("DPMCMC_TEST_FULL_COMPILE", "") != "1":
    _flags = os.environ.get("XLA_FLAGS", "").split()
    _flags += [f"{k}={v}" for k, v in _CHEAP_COMPILE.items()
               if not any(f.startswith(k + "=") for f in _flags)]
    os.environ["XLA_FLAGS"] = " ".join(_flags)
    os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")

# NumPy's and SciPy's OpenBLAS split a long dot or matrix product over threads that busy-wait
# for each other; the suite's BLAS calls are small and the machine has 2 shared cores, so that
# spinning was CPU time spent for nothing (the whole suite: 454 s -> 429 s of CPU with one BLAS
# thread, the accounting tests' dot products, which dpmcmc.accounting now computes without
# BLAS, and the MMD tests' matrix products). Read when OpenBLAS loads, at NumPy's first import,
# which comes after this file; a value the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402  (after the environment it reads)
import pytest
from hypothesis import HealthCheck, settings

jax.config.update("jax_enable_x64", True)
# The suite never writes to the user's persistent compilation cache (~/.cache/dpmcmc/jax):
# results must not depend on what an earlier run left there. tests/runtime/test_compile_cache.py turns
# it on in child processes with a temporary cache directory.
os.environ.setdefault("DPMCMC_NO_COMPILE_CACHE", "1")

settings.register_profile(
    "default", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("ci", deadline=None, max_examples=60, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "default")

REFERENCE = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "reference", "accounting.json")


@pytest.fixture(scope="session")
def reference_entries():
    """Held accounting values from ../shared/reference/accounting.json."""
    import json

    # Prefer the live held values beside the checkout; the copy in tests/data keeps the
    # tests meaningful in a clone without ../shared.
    path = os.environ.get("DPMCMC_REFERENCE", REFERENCE)
    if not os.path.exists(path):
        path = os.path.join(os.path.dirname(__file__), "data", "accounting_reference.json")
    with open(path) as f:
        return json.load(f)


def _child_functions(session, attribute: str, fixture: str) -> dict:
    """``module name -> "module:function"``: the ``attribute`` of every test module that has one
    and a selected test reading ``fixture``, the name of a function in ``tests/children/`` (see
    ``host_devices.py``).

    A module may also have ``attribute + "_SLOW"``: the child function of the cases that only its
    ``slow`` tests read (``make test-all``). It runs, in the same child, under the name
    ``module name + ":slow"`` when a slow test of that module is selected."""
    names = {}
    for item in session.items:
        mod = getattr(item, "module", None)
        # Only a module whose selected tests read the child's results (through ``fixture``) has
        # its function run: a module whose child-reading tests are all slow costs nothing in
        # the default run.
        if mod is None or fixture not in getattr(item, "fixturenames", ()):
            continue
        slow = item.get_closest_marker("slow") is not None
        if hasattr(mod, attribute):
            names[mod.__name__] = getattr(mod, attribute)
        if hasattr(mod, attribute + "_SLOW") and slow:
            names[mod.__name__ + ":slow"] = getattr(mod, attribute + "_SLOW")
    return names


@pytest.fixture(scope="session")
def host_device_results(request):
    """``module name -> result`` of every selected test module's ``HOST_DEVICE_CHILD`` function,
    all run in ONE child process with 4 forced host devices and ``JAX_ENABLE_X64=1``, like the
    suite (one Python + JAX start-up for the session, not one per module)."""
    from host_devices import run_children

    return run_children(_child_functions(request.session, "HOST_DEVICE_CHILD", "host_device_results"),
                        env={"JAX_ENABLE_X64": "1"})


@pytest.fixture(scope="session")
def x64_off_results(request):
    """``module name -> result`` of every selected test module's ``X64_OFF_CHILD`` function, all
    run in ONE child process started with ``JAX_ENABLE_X64=0`` (the suite itself turns it on),
    one after the other; each function checks that the global setting is still off."""
    from host_devices import run_children

    return run_children(_child_functions(request.session, "X64_OFF_CHILD", "x64_off_results"), devices=None,
                        env={"JAX_ENABLE_X64": "0", "JAX_PLATFORMS": "cpu"}, timeout=600)


_CHEAP_COMPILE_ON = os.environ.get("DPMCMC_TEST_FULL_COMPILE", "") != "1"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Compile the test's programs (and those of the fixtures it sets up first) with most
    optimisations off (LLVM level 0: JAX's ``jax_disable_most_optimizations``), unless it is
    marked ``xla_optimized``: a long-running chain, where level 0 costs more at run time than it
    saves in compilation, or a bit-for-bit comparison of two programs, whose rounding level 0
    does not keep alike. ``slow`` tests (the large statistical ones) are compiled at level 1
    too. Child processes read JAX_DISABLE_MOST_OPTIMIZATIONS (set above)."""
    if _CHEAP_COMPILE_ON:
        optimise = any(item.get_closest_marker(m) is not None for m in ("xla_optimized", "slow"))
        jax.config.update("jax_disable_most_optimizations", not optimise)



def pytest_collection_finish(session):
    """Make Python's cycle collector cheap for the run (CPU time only; nothing a test checks
    depends on when a cycle is collected):

    - the modules, fixtures and test objects that exist once collection ends live to the end of
      the session; ``gc.freeze`` moves them out of the collector's sight, so that a full
      collection no longer walks them (pytest itself runs several at the end);
    - JAX makes many short-lived container objects while tracing, so the default threshold
      (a young-generation pass every 700 net allocations, a full one every 100 of those) ran
      ~2,300 collections over 120 s of tests; with the one below, 670. Memory held by cycles
      between passes stays small against the machine's (measured: 5.7 s -> 2.3 s of GC in
      tests/samplers and tests/models).

    At exit, JAX's ``atexit`` hook clears its backends and caches, which destroys every
    compiled program of the session one by one (~5 s of CPU here) just before the process ends
    and the operating system frees them anyway; the suite's process skips it.
    """
    import atexit
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
    try:
        from jax._src.api import clean_up
    except ImportError:  # a JAX without this hook: nothing to skip
        return
    atexit.unregister(clean_up)


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` the costly twins listed in tests/suite_budget.py (each with the default-run
    guard of its property named there)."""
    import suite_budget

    for item in items:
        if item.nodeid in suite_budget.SLOW_CASES:
            item.add_marker(pytest.mark.slow)
        suite_budget.COLLECTED[item.nodeid] = item.get_closest_marker("slow") is not None
