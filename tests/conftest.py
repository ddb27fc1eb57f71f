import os

import jax
import pytest
from hypothesis import HealthCheck, settings

jax.config.update("jax_enable_x64", True)
# The suite never writes to the user's persistent compilation cache (~/.cache/dpmcmc/jax):
# results must not depend on what an earlier run left there. tests/test_compile_cache.py turns
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


@pytest.fixture(scope="session")
def host_device_results(request):
    """``module name -> RESULT`` of every selected test module's ``HOST_DEVICE_CHILD`` script,
    all run in ONE child process with 4 forced host devices (one Python + JAX start-up for the
    session, not one per module)."""
    from host_devices import run_children

    scripts = {}
    for item in request.session.items:
        mod = getattr(item, "module", None)
        if mod is not None and hasattr(mod, "HOST_DEVICE_CHILD"):
            scripts[mod.__name__] = mod.HOST_DEVICE_CHILD
    return run_children(scripts)
