"""Named presets that reproduce the seeds' experiment settings.

==============================  ==============================================================
name                            source
==============================  ==============================================================
``banana-2d``                   000 §4 "Banana Model": d = 2, a = 20, sigma_1^2 = 2000,
                                sigma_2^2 = 2500, sigma_0^2 = 1000, n = 100000, theta = (0, 3)
``gaussian-10d``                000 §4 "Gaussian Model": d = 10, n = 100000, mu_0 = 0,
                                sigma_0 = 100, random covariance (gamma(0.5, 1) eigenvalues)
``thesis-flat-banana-2d``       001 Table 5.1 row "Flat banana, d = 2"
``thesis-flat-banana-10d``      001 Table 5.1 row "Flat banana, d = 10"
``thesis-tempered-banana-2d``   001 Table 5.1 row "Tempered banana, d = 2" (n0 = 1000)
``thesis-tempered-banana-10d``  001 Table 5.1 row "Tempered banana, d = 10" (n0 = 1000)
``thesis-gauss-30d``            001 Table 5.1 row "High dimensional Gauss" (banana with a = 0)
``thesis-narrow-banana``        001 Table 5.1 row "Narrow banana" (a = 350)
``thesis-correlated-gauss``     001 Table 5.1 row "Correlated Gauss" (0.999 correlation)
``thesis-circle``               001 Table 5.1 row "Circle" (a = 1e-5)
``gmm-2d``                      002 §4: 2-d Gaussian mixture, N = 10^6, N0 = 100, b = 1000
==============================  ==============================================================

Common to the thesis rows (001 §5.4): b = m = 0; sigma_1^2 = 20, sigma_2^2 = 2.5,
sigma_i^2 = 1 for i > 2 (banana and 30-d Gauss); true theta_2 = 3, other components 0 (all but
the circle); T = n0 / n where n0 is given, else 1.

Data. Presets generate synthetic data; that is not a privacy run, so ``key=None`` uses a fixed,
documented key per preset (:data:`DATA_SEEDS`, ``jax.random.key(seed)``) and presets are
reproducible. Pass ``key`` for other data sets. The random covariance of ``gaussian-10d`` is part
of the model and always comes from ``jax.random.key(GAUSSIAN_10D_COV_SEED)``. The data are drawn
with this library's generators, so they are not bit-identical to the authors' data sets; the
model, hyperparameters and true parameters are.

Settings. ``Preset.settings`` holds the hyperparameters the seeds state (n, n0, T, delta,
chains, burn-in, reference sample size, clip bounds, clip-fraction target...). Where the paper
text does not state an algorithm's tuned parameters, ``settings["algorithms"]`` gives the values
from the authors' public experiment code, each dict with a ``"source"`` naming the file. Those
use the noise convention of ARCHITECTURE.md (sigma_l = 2 tau sqrt(n) b ||theta - theta'||,
sigma_g = 2 tau_g sqrt(n) b_g), which is the convention of that code. :func:`preset_settings`
returns the settings alone, without generating the data where they do not depend on them.

Vectorised functions. The banana presets with curvature (``a != 0``: ``banana-2d`` and the
thesis bananas) give the samplers only the per-record ``log_likelihood``: the factory's
row-major batch functions, which ``grad_method="auto"`` would use, measured 2–6× slower per
DP-HMC and DP-penalty iteration than the samplers' own autodiff over column-major blocks
(n = 10⁵–2·10⁵, 4 chains, CPU) and no faster on minibatches. ``thesis-gauss-30d`` (a = 0)
keeps them: its ratio pass is 2× faster with them (its DP-HMC iteration 1.6× slower). Build the
model with :func:`~dpmcmc.models.banana.banana` to get them.

Discrepancies resolved: 000 §4 prints "sigma_0 = 1000" for the banana; the authors' code uses
tau_0 = 0.001, i.e. sigma_0^2 = 1000, as does 001 Table 5.1; we use sigma_0^2 = 1000 (with
n tau_1 = 50 the prior's effect on the posterior is below 1e-4 relative either way).
"""
from __future__ import annotations

import dataclasses

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._common import check_key, check_n
from .banana import banana
from .base import Model
from .circle import circle
from .gaussian import correlated_covariance, gaussian, random_covariance
from .mixture import gaussian_mixture

__all__ = ["Preset", "preset", "preset_settings", "PRESETS", "DATA_SEEDS", "GAUSSIAN_10D_COV_SEED"]

#: Fixed data-generation seeds used when ``preset(..., key=None)``.
DATA_SEEDS = {
    "banana-2d": 43247,
    "gaussian-10d": 4627290,
    "thesis-flat-banana-2d": 1001,
    "thesis-flat-banana-10d": 1002,
    "thesis-tempered-banana-2d": 1003,
    "thesis-tempered-banana-10d": 1004,
    "thesis-gauss-30d": 1005,
    "thesis-narrow-banana": 1006,
    "thesis-correlated-gauss": 1007,
    "thesis-circle": 1008,
    "gmm-2d": 2019,
}

#: Seed of the fixed random covariance of ``gaussian-10d``.
GAUSSIAN_10D_COV_SEED = 43235667


class Preset(NamedTuple):
    """A named model + data set + evaluation target.

    Attributes
    ----------
    name : str
    model : Model
    data : array (n, record width)
    theta_true : array (dim,) or None
        The parameter the data were generated from (None for the circle).
    posterior_sampler : callable or None
        ``(key, num_draws) -> (num_draws, dim)`` exact draws from the (tempered) posterior
        given ``data``.
    posterior_mean : array (dim,) or None
        The exact posterior mean where known.
    settings : dict
        The seed's experiment hyperparameters (see module docstring).
    description : str
    """

    name: str
    model: Model
    data: Any
    theta_true: Optional[Any]
    posterior_sampler: Optional[Callable[[Any, int], Any]]
    posterior_mean: Optional[Any]
    settings: dict
    description: str


# --- settings from the seeds ------------------------------------------------------------------

_PAPER_COMMON = {
    # 000 §4.1: 4 chains, 10 repeats, first half discarded, 1000 i.i.d. reference draws,
    # delta = 0.1 / n; clip bounds tuned for < 20% clipped log-likelihood ratios (§4.2).
    "chains": 4,
    "repeats": 10,
    "burn_in_fraction": 0.5,
    "reference_draws": 1000,
    "clip_fraction_target": 0.2,
    "init": {
        "kind": "normal around theta_true",
        "std": "mean of the componentwise standard deviations of the reference posterior sample",
    },
    "mmd": {"kernel": "gaussian", "bandwidth": "median distance of 500 paired subsample points"},
    "source": "000 §4",
}

_THESIS_COMMON = {
    # 001 §5.4 and §6.3: 20 chains, first half discarded, 1000 reference draws (Fig. 5.1 /
    # §6.2), delta = 0.1 / n, hyperparameters tuned at epsilon = 4, < 10% clipping.
    "chains": 20,
    "burn_in_fraction": 0.5,
    "reference_draws": 1000,
    "clip_fraction_target": 0.1,
    "tuning_epsilon": 4.0,
    "mmd": {"kernel": "gaussian", "bandwidth": "median distance of 50 subsample points"},
    "source": "001 Table 5.1, §5.4, §6.3",
}

_HMC_PAPER_CODE = "DPBayes/DP-HMC-experiments params/dp-hmc_{}.py"
_PEN_PAPER_CODE = "DPBayes/DP-HMC-experiments params/dp-penalty_{}.py"
_HMC_THESIS_CODE = "oraisa/masters-thesis code/params/hmc_{}.py"
_PEN_THESIS_CODE = "oraisa/masters-thesis code/params/dpps_{}.py"


def _hmc(tau_l, tau_g, step_size, steps, clip, grad_clip, mass, source):
    return {
        "tau_l": tau_l,
        "tau_g": tau_g,
        "step_size": step_size,
        "leapfrog_steps": steps,
        "clip": clip,
        "grad_clip": grad_clip,
        "mass": mass,
        "source": source,
    }


def _penalty(tau, proposal_std, clip, source):
    return {"tau": tau, "proposal_std": proposal_std, "clip": clip, "source": source}


# Row data of 001 Table 5.1: (label, d, n, n0, a, sigma0^2), with the authors' code key.
_THESIS_ROWS = {
    "thesis-flat-banana-2d": ("Flat banana, d = 2", 2, 100000, None, 20.0, 1000.0, "easy-2d"),
    "thesis-flat-banana-10d": ("Flat banana, d = 10", 10, 200000, None, 20.0, 1000.0, "easy-10d"),
    "thesis-tempered-banana-2d": ("Tempered banana, d = 2", 2, 100000, 1000, 20.0, 1000.0, "tempered-2d"),
    "thesis-tempered-banana-10d": ("Tempered banana, d = 10", 10, 200000, 1000, 20.0, 1000.0, "tempered-10d"),
    "thesis-gauss-30d": ("High dimensional Gauss", 30, 200000, None, 0.0, 1000.0, "gauss-30d"),
    "thesis-narrow-banana": ("Narrow banana", 2, 150000, None, 350.0, 1000.0, "hard-2d"),
    "thesis-correlated-gauss": ("Correlated Gauss", 2, 200000, None, 0.0, 100.0, "hard-gauss-2d"),
    "thesis-circle": ("Circle", 2, 100000, None, 1e-5, None, "circle"),
}

# Tuned parameters from the thesis code (HMC and plain DP penalty), and the start deviations of
# its model_params_table.tex. Keyed by the code's experiment name.
_THESIS_CODE_PARAMS = {
    "easy-2d": (_hmc(0.1, 0.4, 0.0005, 10, 2.0, 1.0, 1.0, ""), _penalty(0.1, 0.008, 2.0, ""), 0.02),
    "easy-10d": (_hmc(0.05, 0.2, 0.00015, 10, 2.5, 3.0, 1.0, ""), _penalty(0.1, 0.0015, 2.0, ""), 0.02),
    "tempered-2d": (_hmc(0.2, 0.6, 0.01, 10, 2.5, 2.0, 1.0, ""), _penalty(0.2, 0.035, 5.0, ""), 0.02),
    "tempered-10d": (_hmc(0.08, 0.2, 0.015, 10, 2.5, 3.5, 1.0, ""), _penalty(0.18, 0.02, 3.0, ""), 0.02),
    "gauss-30d": (
        _hmc(0.05, 0.1, 0.0002, 5, 3.1, 6.0, (0.1, 1.0) + (2.0,) * 28, ""),
        _penalty(0.06, tuple(0.00014 * v for v in (20.0, 7.0) + (5.0,) * 28), 3.0, ""),
        0.02,
    ),
    "hard-2d": (_hmc(0.15, 0.25, 0.00045, 5, 3.5, 2.8, 1.0, ""), _penalty(0.2, 0.0015, 4.5, ""), 0.02),
    "hard-gauss-2d": (_hmc(0.05, 0.2, 0.00007, 8, 30.0, 29.0, 1.0, ""), _penalty(0.07, 0.00015, 50.0, ""), 0.005),
    "circle": (_hmc(0.6, 1.9, 0.07, 40, 0.001, 0.0015, 1.0, ""), _penalty(4.0, 0.2, 0.002, ""), 0.1),
}


def _thesis_settings(name: str, n: int, dim: int, temperature: float) -> dict:
    label, d, n_table, n0, a, s0, code = _THESIS_ROWS[name]
    hmc, pen, start_std = _THESIS_CODE_PARAMS[code]
    hmc = dict(hmc, source=_HMC_THESIS_CODE.format(code))
    pen = dict(pen, source=_PEN_THESIS_CODE.format(code))
    s = dict(_THESIS_COMMON)
    s.update(
        table_row=label,
        dim=d,
        n=n,
        n_table=n_table,
        n0=n0,
        temperature=temperature,
        a=a,
        sigma0_sq=s0,
        delta=0.1 / n,
        algorithms={"dp-hmc": hmc, "dp-penalty": pen},
    )
    if name == "thesis-circle":
        s["init"] = {"kind": "normal", "mean": (0.0, 1.0), "variance": 1.0, "code_start_std": start_std}
        s["r_distribution"] = {"mean": 3.0, "variance": 1.0}
        s["evaluation"] = "distance of the sample mean from the origin"
    else:
        s["init"] = {
            "kind": "normal around theta_true",
            "std": "mean of the componentwise standard deviations of a true posterior sample",
            "code_start_std": start_std,
        }
        s["b"] = 0.0
        s["m"] = 0.0
        s["evaluation"] = "MMD against 1000 exact posterior draws"
    if name != "thesis-correlated-gauss" and name != "thesis-circle":
        s["sigma_sq"] = (20.0, 2.5) + (1.0,) * (d - 2)
    if name == "thesis-correlated-gauss":
        s["cov"] = ((1.0, 0.999), (0.999, 1.0))
    return s


def _resolve(name: str, n: Optional[int], key: Any, default_n: int) -> tuple[int, jax.Array]:
    n = default_n if n is None else check_n(n)
    key = jax.random.key(DATA_SEEDS[name]) if key is None else check_key(key)
    return n, key


def _finish(name, model, data, theta_true, settings, description) -> Preset:
    sampler = None
    if model.exact_posterior is not None:
        exact = model.exact_posterior

        def sampler(key, num_draws):
            return exact(key, data, num_draws)

    mean_fn = model.metadata.get("posterior_mean")
    mean = None if mean_fn is None else mean_fn(data)
    return Preset(
        name=name,
        model=model,
        data=data,
        theta_true=None if theta_true is None else jnp.asarray(theta_true),
        posterior_sampler=sampler,
        posterior_mean=mean,
        settings=settings,
        description=description,
    )


def _banana_2d(n, key):
    n, key = _resolve("banana-2d", n, key, 100000)
    model = banana(2, a=20.0, sigma_sq=(2000.0, 2500.0), sigma0_sq=1000.0, name="banana-2d",
                   batch_functions=False)
    data = model.metadata["generate_data"](key, n)
    s = dict(_PAPER_COMMON)
    s.update(
        dim=2,
        n=n,
        temperature=1.0,
        a=20.0,
        b=0.0,
        m=0.0,
        sigma_sq=(2000.0, 2500.0),
        sigma0_sq=1000.0,
        delta=0.1 / n,
        clip={"dp-hmc": 0.1, "dp-penalty": 0.15},
        algorithms={
            "dp-hmc": _hmc(0.10, 0.55, 0.006, 25, 0.1, 0.05, 1.0, _HMC_PAPER_CODE.format("banana")),
            "dp-penalty": _penalty(0.17, 0.06, 0.15, _PEN_PAPER_CODE.format("banana")),
        },
    )
    return _finish(
        "banana-2d", model, data, model.metadata["theta_true"], s,
        "2-d banana posterior of 000 §4 (Ban(0, 1000 I, 20) prior, sigma^2 = (2000, 2500)).",
    )


def _gaussian_10d(n, key):
    n, key = _resolve("gaussian-10d", n, key, 100000)
    cov = random_covariance(jax.random.key(GAUSSIAN_10D_COV_SEED), 10, shape=0.5, scale=1.0)
    theta_true = np.zeros(10)
    theta_true[1] = 3.0
    model = gaussian(cov, prior_mean=0.0, prior_cov=100.0**2, theta_true=theta_true, name="gaussian-10d")
    # The preset leaves out the factory's row-major batch functions, as the banana preset does:
    # with them grad_method="auto" took a gradient pass 1.35-1.45x slower than autodiff of the
    # per-record log-likelihood (and with the log-likelihood's alone, differentiating it made
    # DP-HMC 4x the limit), while DP penalty is as fast either way (benchmarks/results/limit.md).
    model = dataclasses.replace(model, log_likelihood_batch=None, grad_log_likelihood_batch=None)
    data = model.metadata["generate_data"](key, n)
    s = dict(_PAPER_COMMON)
    s.update(
        dim=10,
        n=n,
        temperature=1.0,
        prior_mean=0.0,
        sigma0=100.0,
        cov="random: eigenvalues ~ Gamma(shape 0.5, scale 1), eigenvectors from QR of U[0,1]",
        cov_seed=GAUSSIAN_10D_COV_SEED,
        delta=0.1 / n,
        clip={"dp-hmc": 6.0, "dp-penalty": 10.0},
        algorithms={
            "dp-hmc": _hmc(0.1, 0.25, 0.00015, 12, 6.0, 10.0, 1.0, _HMC_PAPER_CODE.format("gauss")),
            "dp-penalty": _penalty(0.05, 0.0007, 10.0, _PEN_PAPER_CODE.format("gauss")),
        },
    )
    return _finish(
        "gaussian-10d", model, data, theta_true, s,
        "10-d Gaussian model of 000 §4 with a random known covariance, prior N(0, 100^2 I).",
    )


def _thesis_size(name: str, n: Optional[int]) -> tuple[int, float]:
    """A thesis preset's n (the table's by default) and its temperature T = n0 / n (or 1)."""
    n_table, n0 = _THESIS_ROWS[name][2], _THESIS_ROWS[name][3]
    n = n_table if n is None else check_n(n)
    temperature = 1.0 if n0 is None else n0 / n
    if temperature > 1.0:
        raise ValueError(f"n must be at least n0 = {n0} for preset {name!r}, got {n}")
    return n, temperature


def _thesis(name, n, key):
    label, d, n_table, n0, a, s0, _ = _THESIS_ROWS[name]
    n, temperature = _thesis_size(name, n)
    n, key = _resolve(name, n, key, n_table)
    if name == "thesis-circle":
        model = circle(a, temperature=temperature, name=name)
    elif name == "thesis-correlated-gauss":
        model = gaussian(correlated_covariance(0.999), prior_cov=s0, temperature=temperature,
                         theta_true=(0.0, 3.0), name=name)
    else:
        model = banana(d, a=a, b=0.0, m=0.0, sigma_sq=(20.0, 2.5), sigma0_sq=s0,
                       temperature=temperature, name=name, batch_functions=a == 0.0)
    if name in ("thesis-circle", "thesis-correlated-gauss"):
        # 2 parameters: DP-HMC's per-record gradients and the column-major ratio pass beat the
        # factories' row-major batch functions, which the presets leave out as the banana ones
        # do (benchmarks/bench_record_grads.py, n = 10⁵ / 2·10⁵, 4 chains, the presets'
        # settings, wall clock, interleaved: DP-HMC circle 186 → 16 ms, correlated Gauss
        # 158 → 65 ms per iteration; DP penalty circle 0.18 ms either way, correlated Gauss
        # 13.6 → 4.4 ms).
        model = dataclasses.replace(model, log_likelihood_batch=None,
                                    grad_log_likelihood_batch=None)
    data = model.metadata["generate_data"](key, n)
    settings = _thesis_settings(name, n, d, temperature)
    desc = f"001 Table 5.1 row '{label}': d = {d}, n = {n_table}"
    desc += f", n0 = {n0}" if n0 is not None else ""
    desc += f", a = {a:g}" + (f", sigma0^2 = {s0:g}" if s0 is not None else ", flat prior") + "."
    return _finish(name, model, data, model.metadata["theta_true"], settings, desc)


def _gmm_2d(n, key):
    n, key = _resolve("gmm-2d", n, key, 10**6)
    n0 = 100
    if n < n0:
        raise ValueError(f"n must be at least n0 = {n0} for preset 'gmm-2d', got {n}")
    model = gaussian_mixture(temperature=n0 / n, name="gmm-2d")
    data = model.metadata["generate_data"](key, n)
    s = {
        "dim": 2,
        "n": n,
        "n0": n0,
        "temperature": n0 / n,
        "prior_var": (10.0, 1.0),
        "sigma_x_sq": 2.0,
        "batch_size": 1000,
        "correction_variance_C": 2.0,
        "init": {"kind": "DPVI estimate", "epsilon": 0.21, "delta": 1e-6},
        "runs": 20,
        "source": "002 §4",
    }
    return _finish(
        "gmm-2d", model, data, model.metadata["theta_true"], s,
        "2-d Gaussian mixture of 002 §4 (N = 10^6, tempered to N0 = 100, minibatch b = 1000).",
    )


_BUILDERS: dict[str, Callable[[Optional[int], Any], Preset]] = {
    "banana-2d": _banana_2d,
    "gaussian-10d": _gaussian_10d,
    **{k: (lambda n, key, _k=k: _thesis(_k, n, key)) for k in _THESIS_ROWS},
    "gmm-2d": _gmm_2d,
}

#: Names accepted by :func:`preset`.
PRESETS: tuple[str, ...] = tuple(_BUILDERS)


def preset_settings(name: str, n: Optional[int] = None) -> dict:
    """The seed's settings of a preset, ``preset(name, n).settings``, without building its data.

    For the thesis presets (001 Table 5.1) the settings follow from the table alone, so this
    skips generating their 10^5–2·10^5 records (the thesis-comparison experiment reads the tuned
    parameters of all eight in every cell process: ≈ 6 s of CPU that way); for the others it
    builds the preset.

    Parameters
    ----------
    name : str
        One of :data:`PRESETS`.
    n : int, optional
        As in :func:`preset`.

    Returns
    -------
    dict
    """
    _check_name(name)
    if name in _THESIS_ROWS:
        n, temperature = _thesis_size(name, n)
        return _thesis_settings(name, n, _THESIS_ROWS[name][1], temperature)
    return preset(name, n).settings


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    if name not in _BUILDERS:
        raise ValueError(f"unknown preset name {name!r}; choose one of {', '.join(PRESETS)}")


def preset(name: str, n: Optional[int] = None, key: Any = None) -> Preset:
    """Build a named preset: model, synthetic data, exact posterior and the seed's settings.

    Parameters
    ----------
    name : str
        One of :data:`PRESETS` (see the module docstring for the source of each).
    n : int, optional
        Data size; default the seed's n. For tempered presets T = n0 / n follows n.
    key : JAX PRNG key, optional
        Data-generation key; ``None`` uses the fixed key ``jax.random.key(DATA_SEEDS[name])``
        (synthetic data, not a privacy run, so a fixed default keeps presets reproducible).

    Returns
    -------
    Preset

    Raises
    ------
    ValueError
        Unknown ``name`` or bad ``n``.
    TypeError
        ``key`` is not a JAX PRNG key.
    """
    _check_name(name)
    return _BUILDERS[name](n, key)
