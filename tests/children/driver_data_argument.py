"""test_driver_data_argument.py's child function, run in the shared 4-device child: the
compiled chunk program of a sharded run takes its blocks as a sharded parameter."""
from __future__ import annotations

import io
import logging
import re

import jax
import numpy as np

import dpmcmc
from dpmcmc import api
from dpmcmc.models import preset
from dpmcmc.records.sharding import data_mesh
from dpmcmc.samplers import ALGORITHMS, Kernel, compiled_chunk


def _hlo_summary(text: str) -> dict:
    """The constants (dtype, dims) and the entry computation's parameters (dtype, dims, the rest
    of the line: their sharding) of a compiled program's HLO text."""
    return {
        "constants": [[dt, dims] for dt, dims in
                      re.findall(r"=\s*(\w+)\[([\d,]*)\]\S*\s+constant\(", text)],
        "parameters": [[dt, dims, rest] for dt, dims, rest in
                       re.findall(r"=\s*(\w+)\[([\d,]*)\]\S*\s+parameter\(\d+\)(.*)",
                                  text[text.index("\nENTRY"):])],
    }


def sharded_parameter() -> dict:
    """The HLO of the chunk program with the data as an argument ("new") and closed over
    ("old"), the compilations of a chunked sharded run, and its draws against the unsharded
    run's."""
    p = preset("banana-2d", n=16001, key=jax.random.key(0))  # 16 blocks of 1024 rows, 4 per device
    params = dict(tau=0.17, proposal_std=0.06, clip=0.15, block_size=1024)
    spec = ALGORITHMS["dp-penalty"]
    mesh = data_mesh()
    theta0 = np.tile(np.asarray(p.theta_true), (2, 1))
    key = jax.random.key(1)
    planned = api.plan_run(p.model, p.data, "dp-penalty", chains=2, iterations=9, key=key,
                           theta0=theta0, delta=1e-5, progress=False, mesh=mesh, **params)
    data = planned.layout()
    new = compiled_chunk(planned.build, theta0, key, 4, data=data).as_text()
    # The same kernel closing over the same sharded blocks (the path before kernels took data).
    kernel = spec.build(p.model, planned.params)
    closure = Kernel(lambda th, _d: kernel.init(th, data), lambda k, s, _d: kernel.step(k, s, data))
    old = compiled_chunk(closure, theta0, key, 4).as_text()
    out = {"devices": len(jax.devices()), "new": _hlo_summary(new), "old": _hlo_summary(old)}
    # Chunked (the progress bar cuts 9 iterations into 9 chunks): one compilation of the chunk
    # program all the same.
    log = io.StringIO()
    logging.getLogger("jax").addHandler(logging.StreamHandler(log))
    with jax.log_compiles(True):
        res = dpmcmc.sample(p.model, p.data, "dp-penalty", chains=2, iterations=9, key=key,
                            theta0=theta0, delta=1e-5, progress=True, mesh=mesh, **params)
    out["chunk_compilations"] = log.getvalue().count("Compiling jit(run)")
    ref = dpmcmc.sample(p.model, p.data, "dp-penalty", chains=2, iterations=9, key=key,
                        theta0=theta0, delta=1e-5, progress=False, **params)
    out["draw_err"] = float(np.max(np.abs(res.samples - ref.samples)))
    return out
