"""Timing and accuracy of the numerical PLD accountant (dpmcmc.accounting.pld).

Run: ``.venv/bin/python benchmarks/bench_pld.py``. For each held reference point it reports,
for the papers' pair (``relation="substitute-legacy"``, which the held values use) and for the
valid default (``relation="substitute"``), the wall and CPU time of a cold call (caches
cleared), our delta, and its relative error against a converged value (Richardson
extrapolation from grids h/2 and h/4 of each of the relation's pairs, the discretisation error
being of second order in h); for the legacy pair also the deviation from the held value.
"""
from __future__ import annotations

import json
import os
import time

import numpy as np

from dpmcmc.accounting import max_iterations, pld

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.join(HERE, "..", "tests", "data", "accounting_reference.json")


def _clear_caches():
    pld._cached_composed.cache_clear()
    pld._cached_step.cache_clear()


def _cold_call(sigma, q, k, epsilon, relation):
    _clear_caches()
    wall, cpu = time.perf_counter(), time.process_time()
    value = pld.subsampled_gaussian_delta(sigma, q, k, epsilon, relation)
    return value, time.perf_counter() - wall, time.process_time() - cpu


def _converged(sigma, q, k, epsilon, relation):
    values = []
    for s, pair in pld._pairs(sigma, relation):
        h = pld.default_grid_step(s, q, k, pair=pair)
        d2 = pld.subsampled_gaussian_pld(s, q, k, pair=pair, grid_step=h / 2).get_delta(epsilon)
        d4 = pld.subsampled_gaussian_pld(s, q, k, pair=pair, grid_step=h / 4).get_delta(epsilon)
        values.append(d4 - (d2 - d4) / 3)
    return max(values)


def dot_products(rounds: int = 5) -> None:
    """``max_iterations`` of DP-SGLD (n = 10^5, b = 1000, sigma = 1.17851, eps = 6: the held
    reference point that tilts step PLDs of 96 171 entries) with the accountant's dot products
    as shipped (``pld._dot``: product and pairwise sum) and through BLAS (``np.dot``),
    interleaved in this process, cold caches: median wall and CPU time over ``rounds``.
    OpenBLAS threads a long dot product and its threads busy-wait, which costs most when the
    cores are busy (other processes, XLA's threads): the difference depends on the load."""
    def run():
        _clear_caches()
        wall, cpu = time.perf_counter(), time.process_time()
        value = max_iterations("dp-sgld", 6.0, 1e-6, 100_000, chains=1, accountant="pld",
                               noise_multiplier=1.17851, batch_size=1000)
        return value, time.perf_counter() - wall, time.process_time() - cpu

    shipped = pld._dot
    variants = {"pld._dot": shipped, "np.dot (BLAS)": lambda a, b: float(np.dot(a, b))}
    times = {name: ([], []) for name in variants}
    try:
        for _ in range(rounds):
            for name, dot in variants.items():
                pld._dot = dot
                value, wall, cpu = run()
                times[name][0].append(wall)
                times[name][1].append(cpu)
    finally:
        pld._dot = shipped
    print(f"\nmax_iterations(dp-sgld, eps=6) = {value}, median of {rounds} interleaved cold calls:")
    for name, (wall, cpu) in times.items():
        print(f"  {name:>14}: wall {np.median(wall):6.3f} s  cpu {np.median(cpu):6.3f} s")


def main() -> None:
    with open(REFERENCE) as f:
        entries = [e for e in json.load(f) if e["call"] == "subsampled_gaussian_delta"]
    print(f"{'sigma':>7} {'q':>6} {'k':>7} {'eps':>4} {'relation':>17} {'delta':>12} "
          f"{'vs held':>9} {'vs conv':>9} {'wall s':>7} {'cpu s':>6}")
    for e in entries:
        a = e["args"]
        for relation in ("substitute-legacy", "substitute"):
            value, wall, cpu = _cold_call(a["sigma"], a["q"], a["k"], a["epsilon"], relation)
            conv = _converged(a["sigma"], a["q"], a["k"], a["epsilon"], relation)
            vs_held = f"{value / e['value'] - 1:9.2e}" if relation == "substitute-legacy" else f"{'':9}"
            print(f"{a['sigma']:7.4g} {a['q']:6g} {a['k']:7d} {a['epsilon']:4g} {relation:>17} "
                  f"{value:12.6e} {vs_held} {value / conv - 1:9.2e} {wall:7.3f} {cpu:6.3f}")
    for relation in ("substitute-legacy", "substitute"):
        print(f"\nk = 1e4 (sigma = 1, q = 0.01, eps = 1), {relation}, five cold calls:")
        for _ in range(5):
            _, wall, cpu = _cold_call(1.0, 0.01, 10_000, 1.0, relation)
            print(f"  wall {wall:.3f} s  cpu {cpu:.3f} s")
    dot_products()


if __name__ == "__main__":
    main()
