"""The shared parts of every kernel, each written once.

- :mod:`~dpmcmc.kernels.mechanisms` — the one place privacy noise is drawn:
  :class:`~dpmcmc.kernels.mechanisms.NoiseSource` (``jax.random`` or, in secure mode, ChaCha20
  under the run's secret; always float64), the Gaussian and ℓ∞ K-norm mechanisms.
- :mod:`~dpmcmc.kernels.releases` — the full-data samplers' accounted releases (clipped
  log-likelihood-ratio and gradient sums plus noise, each a
  :class:`~dpmcmc.kernels.releases.NoisySum` whose σ is the release event's).
- :mod:`~dpmcmc.kernels.minibatch` — fixed-size batches without replacement, and the
  subsampled samplers' clipped batch statistics.
- :mod:`~dpmcmc.kernels.penalty` (the penalty and MH accept tests),
  :mod:`~dpmcmc.kernels.proposals` (the propose-then-test step skeleton and its proposal modes),
  :mod:`~dpmcmc.kernels.leapfrog`, :mod:`~dpmcmc.kernels.halton` (randomised step sizes),
  :mod:`~dpmcmc.kernels.barker_correction` (002's correction distribution),
  :mod:`~dpmcmc.kernels.warmup` (adaptation from released values only) and
  :mod:`~dpmcmc.kernels.types` (``Kernel``, ``Info``, ``TappedKernel``, ``ChunkCache``).

An algorithm (:mod:`dpmcmc.samplers`) is one module that composes these; how it reads the data
is :mod:`dpmcmc.records`; :mod:`dpmcmc.runtime` runs any kernel.
"""
from dpmcmc.kernels.mechanisms import DEFAULT_NOISE, NoiseSource, gaussian_mechanism, knorm_mechanism

__all__ = ["NoiseSource", "DEFAULT_NOISE", "gaussian_mechanism", "knorm_mechanism"]
