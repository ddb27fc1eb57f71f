"""Timing of the composition of Gaussian and pure-DP releases (dpmcmc.accounting.pure).

The noise-aware GLM plans its releases with :func:`dpmcmc.accounting.pure.max_pure_scale`: the
largest scale of its pure (K-norm) releases that, composed with its Gaussian rounds, meets
(ε, δ). The root search evaluates the composed δ a few hundred times, and each evaluation sums
the Gaussian privacy profile over every atom of the pure part's privacy loss (up to ~2^m
atoms). The library evaluates the profile at all atoms in one vectorised NumPy pass. The
baseline is the same sum written as a loop over atoms calling the scalar profile
(``gaussian.log_gaussian_delta`` and the closed form for t < 0), which is how the library
computed it before: both give the same δ to ~1e-13 relative, which this script checks.

Run: ``.venv/bin/python benchmarks/bench_pure.py``. Prints, per budget, the CPU time of one
cold composed-δ evaluation by both methods (interleaved, minimum over batches) and their ratio.
"""
from __future__ import annotations

import math
import time

import numpy as np
from scipy import special

from dpmcmc.accounting import pure
from dpmcmc.accounting._logspace import logsumexp
from dpmcmc.accounting.gaussian import log_gaussian_delta

# (ε, μ of the Gaussian rounds, ε of the pure releases): shapes of GLM plans (logistic, 5
# rounds with a pure last gradient and Hessian, and the pure early rounds of the width change).
# The shares are those release_plan passes for a logistic fit (n = 1000, d = 5, ε = 4, δ = 1e-6):
# a pure last gradient and Hessian; pure early rounds (gradient and Hessian of five rounds in
# geometric weights, 528 atoms after merging); and the pure releases of a linear fit at ε = 1,
# evaluated at ε = 0.5 (where its δ is not 0).
_EARLY = (0.0077419354838709695, 0.0019354838709677424, 0.015483870967741939,
          0.0038709677419354847, 0.030967741935483878, 0.0077419354838709695,
          0.061935483870967756, 0.015483870967741939, 0.12387096774193551,
          0.030967741935483878, 0.5599999999999999)
CASES = [
    (4.0, 0.0702007296832396, (0.64, 0.16)),
    (4.0, 0.04914051077826772, _EARLY),
    (0.5, 0.0, (0.4, 0.32, 0.08)),
]


def scalar_loop(mu: float, shares: tuple, epsilon: float) -> float:
    """The baseline: log δ(ε) as a Python loop over the atoms with the scalar profile."""
    loss, logp = pure._atoms(shares)
    terms = []
    for l, lp in zip(loss, logp):
        t = epsilon - l
        if mu == 0.0:
            v = math.log(-math.expm1(t)) if t < 0 else -math.inf
        elif t >= 0.0:
            v = log_gaussian_delta(mu, t)
        else:
            s = math.sqrt(2.0 * mu)
            d = special.ndtr((mu - t) / s) - math.exp(t) * special.ndtr((-mu - t) / s)
            v = math.log(d) if d > 0 else -math.inf
        terms.append(lp + v)
    return logsumexp(terms)


def _cpu(fn, reps: int = 5, min_batch_s: float = 0.2) -> float:
    fn()
    best = math.inf
    for _ in range(reps):
        calls, c0 = 0, time.process_time()
        while time.process_time() - c0 < min_batch_s:
            fn()
            calls += 1
        best = min(best, (time.process_time() - c0) / calls)
    return best


def main() -> None:
    print("| ε | μ | pure releases | atoms | vectorised (ms) | scalar loop (ms) | ratio | rel. diff |")
    print("|---|---|---|---|---|---|---|---|")
    for eps, mu, shares in CASES:
        atoms = pure._atoms(shares)[0].size
        fast = pure._log_composed_delta(mu, shares, eps)
        slow = scalar_loop(mu, shares, eps)
        diff = abs(fast - slow) / abs(slow)
        t_fast, t_slow = math.inf, math.inf
        for _ in range(3):  # interleaved
            t_fast = min(t_fast, _cpu(lambda: pure._log_composed_delta(mu, shares, eps)))
            t_slow = min(t_slow, _cpu(lambda: scalar_loop(mu, shares, eps)))
        print(f"| {eps:g} | {mu:g} | {len(shares)} | {atoms} | {1e3 * t_fast:.3f} | "
              f"{1e3 * t_slow:.3f} | {t_slow / t_fast:.1f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
