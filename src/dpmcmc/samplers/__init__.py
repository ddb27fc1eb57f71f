"""Samplers: pure JAX Markov kernels, one chain driver, and the algorithm registry.

- :data:`ALGORITHMS` — ``name -> AlgorithmSpec``, each algorithm module's ``SPEC`` (name,
  private, prepare, build, data access and layout, release declaration, audit design);
  :data:`SAMPLERS` — those that run chains (all but the one-shot noise-aware GLM).
- :func:`run_chains` — jit + chunked ``lax.scan`` + ``vmap`` over chains, the data an argument
  of the compiled program; :func:`init_states` (a run's initial kernel states) and
  :func:`compiled_chunk` (its compiled chunk program, for inspecting the HLO).
- :class:`Kernel`, :class:`Info`, :class:`HMCInfo` — the kernel contract: ``init(theta, data)``,
  ``step(key, state, data) -> (state, info)``; the ``build_*`` functions build kernels from a
  model and parameters (and a noise source), without data.
- :func:`sensitivity`, :func:`gaussian_mechanism` — the mechanism; its noise scale is the
  release event's (:meth:`dpmcmc.accounting.ReleaseEvent.noise_std`), shared with the accountant.
"""
from dpmcmc.runtime.driver import compiled_chunk, init_states, run_chains
from dpmcmc.kernels.mechanisms import gaussian_mechanism, sensitivity
from dpmcmc.samplers.registry import ALGORITHMS, SAMPLERS, AlgorithmSpec
from dpmcmc.kernels.types import ChunkCache, HMCInfo, Info, Kernel
from dpmcmc.samplers.barker import build_dp_barker
from dpmcmc.samplers.dp_hmc import build_dp_hmc
from dpmcmc.samplers.dp_penalty import build_dp_penalty
from dpmcmc.samplers.dp_sgld import build_dp_sgld
from dpmcmc.samplers.dp_sgnht import build_dp_sgnht
from dpmcmc.samplers.hmc import build_hmc
from dpmcmc.samplers.minibatch_penalty import build_minibatch_penalty
from dpmcmc.samplers.rwmh import build_rwmh

__all__ = [
    "ALGORITHMS",
    "SAMPLERS",
    "AlgorithmSpec",
    "Kernel",
    "ChunkCache",
    "Info",
    "HMCInfo",
    "run_chains",
    "init_states",
    "compiled_chunk",
    "sensitivity",
    "gaussian_mechanism",
    "build_rwmh",
    "build_hmc",
    "build_dp_penalty",
    "build_dp_hmc",
    "build_dp_barker",
    "build_minibatch_penalty",
    "build_dp_sgld",
    "build_dp_sgnht",
]
