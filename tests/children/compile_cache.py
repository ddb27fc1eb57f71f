"""test_compile_cache.py's child: ``python -m children.compile_cache PHASE`` in a fresh process
with the persistent compilation cache in ``$XDG_CACHE_HOME`` (a temporary directory); prints
``RESULT<json>`` with the dict :func:`run` returns.

Phase "write": samples with dp-penalty on data of distinctive values (saved to ``$DATA_FILE``;
every program compiled is written: min compile time 0, a user setting dpmcmc keeps), lists the
files written, then compiles a program that CLOSES OVER the data, the leak the search must be
able to see. Phase "write-hmc": the same, with a dp-hmc run (its float32 gradient copy of the
data) before. Phase "read": the dp-penalty call again, counting persistent-cache hits and
compilations of the chain program.
"""
from __future__ import annotations

import io
import json
import logging
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import compilation_cache as cc

PENALTY = dict(tau=0.17, proposal_std=0.06, clip=0.15)


def cache_files(cache: str) -> dict:
    """path -> hex of every file under ``cache``, decompressed where it is a cached executable."""
    out = {}
    for root, _, names in os.walk(cache):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                raw = f.read()
            try:
                raw = cc.decompress_executable(raw)
            except Exception:
                pass
            out[path] = raw.hex()
    return out


def run(phase: str) -> dict:
    """One phase (see the module's docstring): the cache's files, the cache hits, the chain
    program's compilations and cache hits, the end of JAX's log and the draws."""
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    # dpmcmc is imported after the user's setting, as a user's script would.
    import dpmcmc
    from dpmcmc.models import preset

    p = preset("banana-2d", n=300, key=jax.random.key(0))
    rng = np.random.default_rng(7)
    data = 0.5 + rng.random((300, 2))   # values that are nowhere else
    np.save(os.environ["DATA_FILE"], data)
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "dpmcmc", "jax")

    hits = [0]

    def count_hit(name, **kw):
        hits[0] += name == "/jax/compilation_cache/cache_hits"

    jax.monitoring.register_event_listener(count_hit)
    log = io.StringIO()
    logging.getLogger("jax").addHandler(logging.StreamHandler(log))
    result = {}
    with jax.log_compiles(True):
        if phase == "write-hmc":
            dpmcmc.sample(p.model, data, "dp-hmc", chains=2, iterations=3, delta=1e-5,
                          progress=False, tau_l=0.1, tau_g=0.55, step_size=0.01, leapfrog_steps=2, clip=0.1,
                          grad_clip=0.05)
        r = dpmcmc.sample(p.model, data, "dp-penalty", chains=2, iterations=3, delta=1e-5,
                          key=jax.random.key(1), progress=False, **PENALTY)
    result["sampling_files"] = cache_files(cache)
    result["hits"] = hits[0]
    result["run_compiles"] = log.getvalue().count("Compiling jit(run)")
    result["run_hits"] = log.getvalue().count("cache hit for 'jit_run'")
    result["log"] = log.getvalue()[-4000:]
    result["samples"] = np.asarray(r.samples).tolist()
    if phase.startswith("write"):
        const = jnp.asarray(data)
        jax.jit(lambda t: jnp.sum((const - t) ** 2))(jnp.float64(0.3)).block_until_ready()
        result["all_files"] = cache_files(cache)
    return result


if __name__ == "__main__":
    print("RESULT" + json.dumps(run(sys.argv[1])))
