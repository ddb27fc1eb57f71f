"""The audit itself: run the real kernels on D and D', test, and bound ε from below."""
from __future__ import annotations

import json
import math
import numbers
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize

from dpmcmc import accounting
from dpmcmc._keys import resolve_key
from dpmcmc.audit._stats import AuditOutcome, evaluate_threshold, select_threshold
from dpmcmc.samplers import ALGORITHMS
from dpmcmc.samplers.audit_design import AuditEntry, OneShotAudit
from dpmcmc.kernels.mechanisms import NoiseSource

__all__ = ["AuditResult", "audit", "AUDITS", "STATISTICS", "DEFAULTS"]

#: The audit entry of every registered algorithm that has one (``SPEC.audit``, its card): an
#: :class:`AuditEntry` for a sampler, a :class:`OneShotAudit` for a one-shot algorithm.
AUDITS: dict[str, Any] = {name: spec.audit for name, spec in ALGORITHMS.items()
                          if spec.audit is not None}

STATISTICS = ("releases", "draws")

#: Defaults of :func:`audit` (and of ``dpmcmc audit``).
DEFAULTS = {
    "epsilon": 3.0,
    "delta": 1e-5,
    "trials": 1_000_000,
    "confidence": 0.95,
    "calibration_fraction": 0.5,
    "chunk_size": 100_000,
}


@dataclass(frozen=True)
class AuditResult:
    """Outcome of an empirical privacy audit.

    Attributes
    ----------
    algorithm : str
    epsilon_claimed : float
        ε that the accountant (:func:`dpmcmc.accounting.spent`, the sampler's own) charges one
        run of ``iterations`` iterations at ``delta``.
    epsilon_lower : float
        Lower bound on the true ε at ``delta`` from the ``statistic`` test, holding with
        probability ≥ ``confidence``. 0.0 when the test gives no evidence.
    epsilon_lower_draws : float
        The same from the final draws alone.
    delta, confidence : float
    trials : int
        Runs per data set (calibration and held-out together).
    iterations : int
        Iterations per run.
    statistic : str
        ``"releases"`` (the accounted noisy statistics) or ``"draws"``: the test reported in the
        top-level fields.
    tpr, fpr : float
        Held-out rates of the reported test (see :class:`dpmcmc.audit.AuditOutcome` for the role).
    tpr_ci, fpr_ci : tuple of float
        Their Clopper–Pearson intervals at ``confidence``.
    flagged : bool
        ``epsilon_lower > epsilon_claimed``: the sampler leaks more than it claims.
    tests : dict
        ``"releases"`` and ``"draws"`` → :class:`dpmcmc.audit.AuditOutcome`.
    params : dict
        The sampler parameters of the worst-case configuration.
    n : int
        Records per data set.
    all_clipped : float
        Fraction of runs in which every per-example term of every release was clipped (the design
        check: should be 1 up to rare zero-length moves).
    runtime_s : float
        Wall time of the audit.
    miscalibration : dict or None
        Only for the testing-only ``_miscalibration`` of :func:`audit`: its settings.
    """

    algorithm: str
    epsilon_claimed: float
    epsilon_lower: float
    epsilon_lower_draws: float
    delta: float
    confidence: float
    trials: int
    iterations: int
    statistic: str
    tpr: float
    fpr: float
    tpr_ci: tuple
    fpr_ci: tuple
    flagged: bool
    tests: dict = field(repr=False)
    params: dict = field(repr=False)
    n: int = 0
    all_clipped: float = 1.0
    runtime_s: float = 0.0
    miscalibration: Optional[dict] = None

    def to_dict(self) -> dict:
        """Plain JSON-serialisable dictionary."""
        out = {
            "algorithm": self.algorithm,
            "epsilon_claimed": self.epsilon_claimed,
            "epsilon_lower": self.epsilon_lower,
            "epsilon_lower_draws": self.epsilon_lower_draws,
            "delta": self.delta,
            "confidence": self.confidence,
            "trials": self.trials,
            "iterations": self.iterations,
            "statistic": self.statistic,
            "tpr": self.tpr,
            "fpr": self.fpr,
            "tpr_ci": list(self.tpr_ci),
            "fpr_ci": list(self.fpr_ci),
            "flagged": self.flagged,
            "flagged_draws": self.tests["draws"].epsilon_lower > self.epsilon_claimed,
            "tests": {k: v.to_dict() for k, v in self.tests.items()},
            "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.params.items()},
            "n": self.n,
            "all_clipped": self.all_clipped,
            "runtime_s": self.runtime_s,
        }
        if self.miscalibration is not None:
            out["miscalibration"] = dict(self.miscalibration)
        return out

    def to_json(self) -> str:
        """One JSON object."""
        return json.dumps(self.to_dict())

    def __str__(self) -> str:
        rel, drw = self.tests["releases"], self.tests["draws"]
        verdict = ("FLAGGED: the audited lower bound exceeds the claimed ε" if self.flagged
                   else "consistent with the claim (lower bound ≤ claimed ε)")
        lines = [
            f"Privacy audit of {self.algorithm}: {self.trials} runs per data set × "
            f"{self.iterations} iterations, n = {self.n}, δ = {self.delta:g}",
            f"  claimed ε (accountant)          {self.epsilon_claimed:.4f}",
            f"  audited ε lower bound, releases {rel.epsilon_lower:.4f}   "
            f"(TPR {rel.tpr:.3g} ∈ [{rel.tpr_ci[0]:.3g}, {rel.tpr_ci[1]:.3g}], "
            f"FPR {rel.fpr:.3g} ∈ [{rel.fpr_ci[0]:.3g}, {rel.fpr_ci[1]:.3g}])",
            f"  audited ε lower bound, draws    {drw.epsilon_lower:.4f}",
            f"  confidence {self.confidence:g} (Clopper–Pearson, threshold chosen on a held-out "
            f"calibration split)",
            f"  {verdict}",
            f"  runtime {self.runtime_s:.1f} s",
        ]
        return "\n".join(lines)


# ---------------------------------------------------------------- argument checks

def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _real(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and low < v < high):
        raise ValueError(f"{name} must lie in ({low:g}, {high:g}), got {value!r}")
    return v


# ---------------------------------------------------------------- configuration

def _claimed(entry: AuditEntry, scale: float, iterations: int, delta: float):
    """(design, prepared params, report) at noise scale ``scale``.

    The claim is the sampler's default accountant (the tightest that applies, as in
    :func:`dpmcmc.sample`).
    """
    spec = ALGORITHMS[entry.algorithm]
    design = entry.design(scale)
    n = int(design.data.shape[0])
    prepared = spec.prepare(entry.params(scale), design.model, n)
    accountant = accounting.supported_accountants(entry.algorithm)[0]
    report = accounting.spent(entry.algorithm, iterations, delta, n, chains=1,
                              accountant=accountant, **spec.accounting_params(prepared))
    return design, prepared, report


def _solve_integer_scale(excess, max_scale: int = 2**30) -> int:
    """Smallest integer s ≥ 1 with excess(s) ≤ 0 (excess non-increasing); None if s > max_scale."""
    hi = 1
    while excess(hi) > 0:
        if hi >= max_scale:
            return None
        hi = min(2 * hi, max_scale)
    lo = hi // 2  # excess(lo) > 0, or lo = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if excess(mid) > 0:
            lo = mid
        else:
            hi = mid
    return hi


def _solve_scale(entry: AuditEntry, iterations: int, delta: float, epsilon: float) -> float:
    """The noise scale at which the accountant charges ``epsilon`` for one run (at most
    ``epsilon``, as close as an integer scale allows, for ``entry.integer_scale``)."""
    if entry.integer_scale:
        def int_excess(s: int) -> float:
            try:
                return _claimed(entry, s, iterations, delta)[2].epsilon - epsilon
            except (ValueError, OverflowError):
                return math.inf  # too small for the accountant to evaluate: ε is huge
        limit = 2**30 if entry.max_scale is None else int(entry.max_scale)
        scale = _solve_integer_scale(int_excess, limit)
        if scale is None:
            # Refused before any design is built or any kernel runs: the design's size grows
            # without bound as epsilon -> 0 (DP Barker: eps ~ 1/sqrt(b) at fixed noise).
            design, _, report = _claimed(entry, limit, iterations, delta)
            rows = int(design.data.shape[0])
            raise ValueError(
                f"epsilon={epsilon!r} is too small to audit {entry.algorithm}: the claim reaches it "
                f"only with a data set (batch) of more than {rows} records, the largest this audit "
                f"builds (each run reads every record each iteration); at {rows} records the "
                f"accountant charges epsilon = {report.epsilon:.4g}, the smallest auditable value")
        return float(scale)

    def excess(log_s: float) -> float:
        try:
            return _claimed(entry, math.exp(log_s), iterations, delta)[2].epsilon - epsilon
        except (ValueError, OverflowError):
            return math.inf  # too little noise for the accountant to evaluate: ε is huge

    lo, hi = -1.0, 1.0
    for _ in range(60):
        if excess(lo) > 0:
            break
        lo -= 1.0
    else:
        raise ValueError(f"epsilon={epsilon!r} is too large to configure an audit of {entry.algorithm}")
    for _ in range(60):
        if excess(hi) < 0:
            break
        hi += 1.0
    else:
        raise ValueError(f"epsilon={epsilon!r} is too small to configure an audit of {entry.algorithm}")
    return math.exp(optimize.brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12))


# ---------------------------------------------------------------- the runs

def _make_runner(entry: AuditEntry, design, prepared: dict, iterations: int,
                 noise: NoiseSource = None):
    """One compiled function for both data sets: ``(data, keys) -> per-run statistics``.

    The kernel is the sampler's own (its tapped core, :attr:`AuditEntry.tapped`, with the noise
    source ``noise``, default ``jax.random``), stepped with the driver's key schedule
    ``fold_in(run_key, t)``; each run is one chain, runs are a ``vmap``. The data (laid out by
    :func:`_layout`) are the program's argument, as in a run: both data sets share the program.
    """
    model, theta0 = design.model, design.theta0
    n = design.data.shape[0]
    kernel = entry.tapped(model, prepared, noise)

    def run(data, keys):
        def one(k):
            state = kernel.init(theta0, data)

            def body(s, t):
                s, info, taps = kernel.transition(jax.random.fold_in(k, t), s, data)
                clipped = info.clip_fraction >= 1.0
                if hasattr(info, "grad_clip_fraction"):
                    clipped = clipped & (info.grad_clip_fraction >= 1.0)
                return s, (s.position, taps, clipped)

            ts = jnp.arange(iterations, dtype=jnp.uint32)
            _, (pos, taps, clipped) = jax.lax.scan(body, state, ts)
            return (entry.release_statistic(taps, prepared, n), entry.draws_statistic(pos),
                    jnp.all(clipped))

        return jax.vmap(one)(keys)

    return jax.jit(run)


def _layout(entry: AuditEntry, design, prepared: dict, data):
    """One of the design's data sets as the sampler's kernel reads it (its spec's layout)."""
    return ALGORITHMS[entry.algorithm].layout(data, prepared, design.model)


def _threefry(key):
    """The audit's key as a threefry key, folding in all the bits of a wider one.

    The default key (``key=None``) is a 128-bit "rbg" key, whose bit generator XLA runs one
    vmapped run at a time on CPU: the audit's 10^6 vmapped runs then take minutes instead of
    seconds. The audit simulates synthetic worst-case data sets, so the key only has to make the
    runs independent, not keep any real record's noise secret: threefry's 64 bits suffice.
    """
    if jax.random.key_impl(key) == jax.random.key_impl(jax.random.key(0)):
        return key
    words = np.asarray(jax.random.key_data(key), dtype=np.uint32).reshape(-1)
    folded = np.zeros(2, dtype=np.uint32)
    for i, w in enumerate(words):
        folded[i % 2] ^= w
    return jax.random.wrap_key_data(jnp.asarray(folded), impl="threefry2x32")


def _simulate(runner, data, key, trials: int, chunk: int):
    keys = jax.random.split(key, trials)
    chunk = min(chunk, trials)
    pad = (-trials) % chunk
    if pad:
        keys = jnp.concatenate([keys, keys[:pad]])  # padded runs are discarded below
    rel, drw, clip = [], [], []
    for start in range(0, trials + pad, chunk):
        r, d, c = jax.device_get(runner(data, keys[start:start + chunk]))
        rel.append(r)
        drw.append(d)
        clip.append(c)
    cat = lambda xs: np.concatenate(xs)[:trials]  # noqa: E731
    return cat(rel).astype(np.float64), cat(drw).astype(np.float64), cat(clip)


def _test(name, s_d, s_dp, calib, delta, confidence) -> AuditOutcome:
    threshold, role = select_threshold(s_d[:calib], s_dp[:calib], delta, confidence,
                                       (s_d.size - calib, s_dp.size - calib))
    return evaluate_threshold(name, s_d[calib:], s_dp[calib:], threshold, role, delta,
                              confidence, calib)


def audit(algorithm: str, epsilon: float = DEFAULTS["epsilon"], delta: float = DEFAULTS["delta"],
          *, trials: int = DEFAULTS["trials"], iterations: Optional[int] = None,
          confidence: float = DEFAULTS["confidence"], statistic: str = "releases",
          key: Any = None, calibration_fraction: float = DEFAULTS["calibration_fraction"],
          chunk_size: int = DEFAULTS["chunk_size"], family: Optional[str] = None,
          _miscalibration: Optional[dict] = None) -> AuditResult:
    """Empirical privacy audit: a lower bound on the ε of ``algorithm`` to set against its claim.

    The sampler runs ``trials`` times for ``iterations`` iterations on each of two neighbouring
    data sets built to be worst-case for its clipped statistics (``SPEC.audit``, :mod:`dpmcmc.samplers.audit_design`),
    with its noise scale set so that the accountant charges ``epsilon`` at ``delta`` for one run.
    A likelihood-ratio test on the released noisy statistics (observed through the kernel's own
    code path) and a test on the final draws separate the runs; a threshold and role chosen on a
    calibration split are applied to the held-out runs, and their true/false-positive rates,
    bounded by Clopper–Pearson intervals, give ``ε ≥ log((TPR_low − δ) / FPR_high)`` with
    probability ≥ ``confidence``.

    Parameters
    ----------
    algorithm : str
        A private algorithm with an audit entry (:data:`dpmcmc.audit.AUDITS`), or
        ``"noise-aware-glm"`` (its card's audit entry: its release rounds on a worst-case
        pair of ``family``, the exact transcript likelihood ratio as the test statistic).
    epsilon : float, default 3.0
        The ε the sampler is configured to claim for one run; the claim actually charged
        (``epsilon_claimed``) is the accountant's value at the solved noise scale.
    delta : float, default 1e-5
    trials : int, default 1000000
        Runs per data set (calibration and held-out together), ≥ 1000.
    iterations : int, optional
        Iterations per run; default per algorithm (5 for dp-penalty and minibatch-penalty, 2 for
        dp-hmc, 3 for dp-sgld and dp-sgnht, 8 for dp-barker).
    confidence : float, default 0.95
    statistic : {"releases", "draws"}
        Which test the top-level fields of the result report (both are always run).
    key : PRNG key, optional
        ``None`` draws one from OS entropy.
    calibration_fraction : float, default 0.5
        Share of the runs used to choose the threshold.
    chunk_size : int, default 100000
        Runs per compiled call (bounds memory).
    family : str, optional
        ``noise-aware-glm`` only: the GLM family whose releases are audited, ``"linear"``
        (default: one round, the design that reaches the claim), ``"logistic"`` or ``"poisson"``
        (the Newton rounds, all K-norm; docs/audit.md).
    _miscalibration : dict, optional
        TESTING ONLY: ``{"noise_scale": s, "sensitivity_factor": f}`` audits a deliberately
        wrong kernel, built here with a miscalibrated
        :class:`~dpmcmc.kernels.mechanisms.NoiseSource` (noise multiplied by ``s``; clipping to
        ``bound / f`` while the noise stays calibrated to ``bound``), to show that the audit
        flags it. Never use it to audit a real configuration.

    Returns
    -------
    AuditResult

    Raises
    ------
    ValueError
        For an argument out of range, naming it; for an ``epsilon`` whose design would exceed
        the largest the audit builds (DP Barker: :data:`dpmcmc.audit.MAX_DESIGN_ROWS`
        records), before any run.
    """
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a string, got {type(algorithm).__name__}")
    if algorithm not in AUDITS:
        raise ValueError(f"algorithm must be one of {sorted(AUDITS)} (the audited private "
                         f"algorithms), got {algorithm!r}")
    entry = AUDITS[algorithm]
    one_shot = isinstance(entry, OneShotAudit)
    epsilon = _real("epsilon", epsilon, 0.0, math.inf)
    delta = _real("delta", delta, 0.0, 1.0)
    trials = _int("trials", trials, 1000)
    if one_shot and iterations is not None:
        raise ValueError(f"iterations: {algorithm} makes one fixed set of releases (no chain)")
    families = entry.families if one_shot else ()
    if family is not None and family not in families:
        raise ValueError(f"family must be one of {families} for {algorithm}, got {family!r}"
                         if families else f"family: {algorithm} has one audit design (no family)")
    family = families[0] if families and family is None else family
    iterations = (None if one_shot else
                  entry.iterations if iterations is None else _int("iterations", iterations, 1))
    confidence = _real("confidence", confidence, 0.0, 1.0)
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
    calibration_fraction = _real("calibration_fraction", calibration_fraction, 0.0, 1.0)
    chunk_size = _int("chunk_size", chunk_size, 1)
    calib = int(round(trials * calibration_fraction))
    if not (100 <= calib <= trials - 100):
        raise ValueError(f"calibration_fraction={calibration_fraction!r} leaves fewer than 100 "
                         f"calibration or held-out runs out of trials={trials}")
    noise = _miscalibrated_source(_miscalibration)
    key = _threefry(resolve_key(key))
    # The kernels draw their privacy noise in float64: 64-bit JAX types for this call only.
    with jax.enable_x64(True):
        if one_shot:
            return _audit_one_shot(entry, epsilon, delta, trials, confidence, statistic, key,
                                   calib, chunk_size, noise, family)
        return _audit(entry, algorithm, epsilon, delta, trials, iterations, confidence,
                      statistic, key, calib, chunk_size, noise)


def _miscalibrated_source(settings: Optional[dict]) -> Optional[NoiseSource]:
    if settings is None:
        return None
    if not isinstance(settings, dict) or not set(settings) <= {"noise_scale", "sensitivity_factor"}:
        raise ValueError("_miscalibration must be a dict with keys noise_scale and/or "
                         f"sensitivity_factor, got {settings!r}")
    return NoiseSource(**settings)  # checks each factor is finite and > 0


def _audit(entry, algorithm, epsilon, delta, trials, iterations, confidence, statistic, key,
           calib, chunk_size, noise):
    start = time.perf_counter()
    scale = _solve_scale(entry, iterations, delta, epsilon)
    design, prepared, report = _claimed(entry, scale, iterations, delta)
    n = int(design.data.shape[0])

    runner = _make_runner(entry, design, prepared, iterations, noise)
    k_d, k_dp = jax.random.split(key)
    rel_d, drw_d, clip_d = _simulate(runner, _layout(entry, design, prepared, design.data), k_d,
                                     trials, chunk_size)
    rel_dp, drw_dp, clip_dp = _simulate(runner, _layout(entry, design, prepared, design.data_prime),
                                        k_dp, trials, chunk_size)

    return _result(algorithm, float(report.epsilon), (rel_d, rel_dp), (drw_d, drw_dp), calib,
                   delta, confidence, statistic, trials, iterations, dict(prepared), n,
                   float(np.mean(np.concatenate([clip_d, clip_dp]))), start, noise)


def _audit_one_shot(entry: OneShotAudit, epsilon, delta, trials, confidence, statistic, key,
                    calib, chunk_size, noise, family=None) -> "AuditResult":
    """The audit of a one-shot algorithm: its own releases on the entry's pair, many times.
    The claim is the accountant's ε of the configuration that spends (ε, δ)."""
    start = time.perf_counter()
    options = {} if family is None else {"family": family}
    d_set, dp_set = entry.design(**options)
    claimed, params, run = entry.setup(epsilon, delta, noise, **options)

    def runner(data, keys):
        rel, drw = run(data, keys)
        return rel, drw, np.ones(keys.shape[0], bool)  # NumPy: eager jnp.ones compiles per shape

    chunk = min(chunk_size, entry.chunk)
    k_d, k_dp = jax.random.split(key)
    # jax.device_put, not jnp.asarray: the latter lifts a NumPy array through lax.stage, which
    # compiles a program per shape and dtype (the same array either way).
    rel_d, drw_d, _ = _simulate(runner, jax.device_put(np.asarray(d_set)), k_d, trials, chunk)
    rel_dp, drw_dp, _ = _simulate(runner, jax.device_put(np.asarray(dp_set)), k_dp, trials, chunk)
    # all_clipped = 0: inside its design the fit clips nothing (its releases are exact plus noise).
    return _result(entry.algorithm, float(claimed), (rel_d, rel_dp), (drw_d, drw_dp), calib, delta,
                   confidence, statistic, trials, params.get("steps"), params,
                   int(d_set.shape[0]), 0.0, start, noise)


def _result(algorithm, claimed, releases, draws, calib, delta, confidence, statistic, trials,
            iterations, params, n, all_clipped, start, noise) -> AuditResult:
    """Both tests on the simulated statistics ``(on D, on D')``, and the result."""
    tests = {
        "releases": _test("releases", *releases, calib, delta, confidence),
        "draws": _test("draws", *draws, calib, delta, confidence),
    }
    main = tests[statistic]
    misc = None if noise is None or noise.calibrated else {
        "noise_scale": noise.noise_scale, "sensitivity_factor": noise.sensitivity_factor}
    return AuditResult(
        algorithm=algorithm, epsilon_claimed=claimed, epsilon_lower=main.epsilon_lower,
        epsilon_lower_draws=tests["draws"].epsilon_lower, delta=delta, confidence=confidence,
        trials=trials, iterations=iterations, statistic=statistic, tpr=main.tpr, fpr=main.fpr,
        tpr_ci=main.tpr_ci, fpr_ci=main.fpr_ci, flagged=bool(main.epsilon_lower > claimed),
        tests=tests, params=params, n=n, all_clipped=all_clipped,
        runtime_s=time.perf_counter() - start, miscalibration=misc)
