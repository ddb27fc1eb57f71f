"""Running a kernel: the chain driver, the compile cache and checkpoints.

- :mod:`~dpmcmc.runtime.driver` — the one chain driver: jit + chunked ``lax.scan`` + ``vmap``
  over chains, the data an argument of the compiled program, progress between chunks.
- :mod:`~dpmcmc.runtime.compile_cache` — compiled programs shared by runs (in-process) and
  JAX's persistent cache across processes.
- :mod:`~dpmcmc.runtime.checkpoint` — resumable runs (the file holds the key: as secret as the
  data).
"""
