"""``dpmcmc.sample``: validate, account, run, package.

``sample`` is a :class:`~dpmcmc.request.Request` (the call, validated) and three steps, each
usable on its own: :func:`prepare` checks the model against the data's shape and plans the run
with the one planner (:func:`dpmcmc._plan.make_plan`, the same ``dpmcmc.plan`` uses) into a
frozen :class:`RunPlan` (drawing no noise), :func:`run` runs it, :func:`package` turns the draws
into a :class:`~dpmcmc.result.Result`. The order matters for privacy: every check on the inputs
and the budget happens before the first noise draw, and the run length is fixed by the
accountant from (ε, δ) alone — never from anything computed on the data.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import _plan
from .runtime import checkpoint as _checkpoint
from .runtime.checkpoint import CheckpointError, SavedRun
from ._keys import OS_ENTROPY
from ._plan import make_plan, refuse_if_blocked
from .auto import AUTO
from .models.base import Model, check_model
from .request import Request
from .result import NonPrivateDiagnostics, ReleasedStatistics, Result

__all__ = ["sample", "plan_run", "prepare", "run", "package", "RunPlan", "RunOutput",
           "validate_data", "CheckpointError"]

# With a checkpoint and no checkpoint_every, the run is saved about this many times.
DEFAULT_CHECKPOINTS = 20


def validate_data(data: Any, *, finite: bool = True) -> np.ndarray:
    """Return ``data`` as a float array with rows as records, or raise naming ``data``.

    Parameters
    ----------
    data : array_like, shape (n, ...)
    finite : bool, default True
        Also refuse NaN and inf. ``False`` checks only what is public (type, shape, dtype) and
        reads no data value, so that ``dpmcmc.sample`` can check the model contract on the
        shape first and the values last.

    Raises
    ------
    TypeError
        If ``data`` is not numeric (strings, objects, complex numbers).
    ValueError
        If ``data`` is empty, a scalar, or (with ``finite``) contains NaN or inf.
    """
    if data is None:
        raise TypeError("data must be an array of shape (n, ...), got None")
    try:
        arr = np.asarray(data)
    except Exception as exc:  # ragged lists and the like
        raise TypeError(f"data must be convertible to a numeric array: {exc}") from None
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.floating)
        or np.issubdtype(arr.dtype, np.integer)
        or np.issubdtype(arr.dtype, np.bool_)
    ):
        hint = ""
        if arr.dtype.kind in "USO":
            # Labels such as "Yes"/"No": encoding them needs the declared categories (public),
            # never the levels found in the data.
            hint = ("; it holds strings or objects (labels such as 'Yes'/'No'?): encode them as numbers "
                    "with categories you declare, or use dpmcmc.glm / `dpmcmc sample FILE` with "
                    '{"categories": [...]} in the bounds')
        raise TypeError(f"data must be a real numeric array, got dtype {arr.dtype}{hint}")
    if arr.ndim == 0:
        raise ValueError("data must have at least one dimension (rows are records), got a scalar")
    if arr.shape[0] == 0 or arr.size == 0:
        raise ValueError(f"data must contain at least one record, got shape {arr.shape}")
    # float64 whatever jax_enable_x64 says: the run is traced with 64-bit types (see sample).
    arr = arr.astype(np.float64)
    if finite:
        _check_finite(arr)
    return arr


def _check_finite(arr: np.ndarray) -> None:
    # The project's rule: non-finite data are an input error, reported before any noise.
    if not np.all(np.isfinite(arr)):
        raise ValueError("data contains NaN or inf; clean or drop those records before sampling")


def _private_start(model: Model, data_arr: np.ndarray, key: jax.Array, chains: int,
                   start_plan, secret=None) -> np.ndarray:
    """Starts from :mod:`dpmcmc.samplers.private_init` (float64 noise, from a public point;
    in secure mode from the run's ChaCha20 secret, like every other release of the run)."""
    from .kernels.mechanisms import NoiseSource
    from .samplers.private_init import init_plan, private_start, public_point

    k_prior, k_init = jax.random.split(key)
    candidates = _default_theta0(model, k_prior, 64) if model.sample_prior is not None else None
    start = public_point(model, candidates)
    plan = init_plan(data_arr.shape[0], start_plan.mu, start_plan.bound, start_plan.steps)
    noise = None if secret is None else NoiseSource(jnp.asarray(secret, dtype=jnp.uint32))
    with jax.enable_x64(True):
        starts, _ = private_start(k_init, model, jnp.asarray(data_arr), jnp.asarray(start), plan,
                                  chains, noise=noise)
        out = np.asarray(starts, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        # A function of released values only: safe to report.
        raise ValueError("the private initialisation ended at a non-finite point (the log-prior's "
                         "gradient?); pass theta0")
    return out


def _default_theta0(model: Model, key: jax.Array, chains: int) -> np.ndarray:
    """Data-independent start: prior draws when the model can draw them, else zeros."""
    if model.sample_prior is not None:
        draws = np.asarray(model.sample_prior(key, (chains,)), dtype=np.float64)
        if draws.size != chains * model.dim:
            raise ValueError(f"model.sample_prior(key, ({chains},)) must return shape ({chains}, "
                             f"{model.dim}), got {draws.shape}; pass theta0 or fix sample_prior")
        draws = draws.reshape(chains, model.dim)
        if not np.all(np.isfinite(draws)):
            raise ValueError("model.sample_prior returned NaN or inf; pass theta0 or fix sample_prior")
        return draws
    return np.zeros((chains, model.dim))


def sample(
    model: Model,
    data: Any,
    algorithm: str = "dp-hmc",
    *,
    epsilon: Optional[float] = None,
    delta: Optional[float] = None,
    chains: int = 4,
    key: Any = None,
    theta0: Any = None,
    iterations: Optional[int] = None,
    accountant: Optional[str] = None,
    relation: str = "substitute",
    progress: bool = True,
    secure: Any = False,
    checkpoint: Any = None,
    checkpoint_every: Optional[int] = None,
    mesh: Any = None,
    ledger: Any = None,
    init_share: float = 0.1,
    init_steps: int = 30,
    warmup: Any = 0,
    force: bool = False,
    _on_chunk: Optional[Callable[[Any], None]] = None,
    **params: Any,
) -> Result:
    """Draw posterior samples of ``model`` given ``data`` under an (ε, δ) budget.

    Parameters
    ----------
    model : Model
        The model: per-example log-likelihood, log-prior, dimension, tempering.
    data : array_like, shape (n, ...)
        The sensitive records, one per row. Every access goes through an accounted mechanism.
    algorithm : str, default "dp-hmc"
        One of ``dpmcmc.samplers.ALGORITHMS`` (this list is built from the registry):

@ALGORITHM_LIST@
        - ``"auto"``: private, no hand tuning, for any differentiable model with a declared
          per-record gradient bound (``grad_clip``, or ``clip``): a private Newton start, then
          DP-SGLD in the coordinates its released curvature whitens, or — where the budget buys
          no chain that mixes, said in the plan — the start's noise-aware Gaussian
          approximation, labelled ``params["mode"] == "approximation"`` (:mod:`dpmcmc.auto`,
          docs/auto.md). It plans ``iterations``, ``accountant``, ``theta0``, ``warmup`` and
          the rest itself (refused by name when given); its parameters are ``grad_clip`` /
          ``clip``, ``chain`` (``True``/``False`` force a chain or the approximation) and
          ``draws`` (approximation: draws per chain, default 1000).
    epsilon, delta : float
        The total budget for all chains together. With ``iterations=None`` the accountant sets
        the run length to the largest number of iterations per chain the budget buys. With
        ``iterations`` given, ``epsilon`` may be omitted and ``Result.privacy`` states the ε
        spent at ``delta``; if both are given, the run must fit the budget.
    chains : int, default 4
        Number of chains; each touches the data, so they compose.
    key : JAX PRNG key, optional
        ``None`` (default) draws a key from OS entropy (``secrets``); there is no fixed default
        seed. A key you pass fixes the run's privacy noise: the same key on the same or
        overlapping data gives the same underlying noise in every run, only rescaled, so two
        such runs can be combined to cancel it and neither guarantee holds. Such a run warns
        (``KeyReuseWarning``) unless a ``ledger`` is given, which refuses a key it has charged
        before. A published key voids the guarantee too — unless ``secure`` is on, where the
        noise does not depend on it.
    theta0 : array_like, shape (dim,) or (chains, dim), or "private", optional
        Starting points. ``"private"``: a private initialisation
        (:mod:`dpmcmc.samplers.private_init`) spends ``init_share`` of the budget's μ on
        ``init_steps`` clipped gradient sums (bound: the sampler's ``grad_clip``, else ``clip``)
        and starts the chains near the posterior mode; the report lists it as its own mechanism
        and the iterations get the rest (in secure mode its noise comes from the run's secret
        too). Needs ``epsilon`` and a per-record gradient bound (not DP Barker); every
        accountant composes it (the subsampled samplers' PLD through the Gaussian's PLD,
        :func:`dpmcmc.accounting.pld.gaussian_pld`). Default (``None``): the private
        start wherever it applies and the budget sets the run length (``epsilon`` given,
        ``iterations`` not; see ``dpmcmc.plan``) and the budget can pay
        for it and one iteration, in plain and secure mode alike; otherwise independent draws
        from the prior (``model.sample_prior``), or zeros when the model cannot draw from its
        prior — all data-independent.
    init_share : float, default 0.1
        With ``theta0="private"``: the share of μ = gaussian_mu(ε, δ) the start spends, in (0, 1).
    init_steps : int, default 30
        With ``theta0="private"``: the number of gradient releases.
    iterations : int, optional
        Iterations per chain (see ``epsilon``), warm-up included.
    warmup : int or "auto", default 0
        Warm-up iterations per chain that adapt the step size (DP-HMC, HMC) or the proposal
        scale (DP penalty, minibatch penalty, DP Barker, RWMH) toward a target acceptance, and,
        from 40 iterations on, a diagonal scale from the warm-up draws
        (:mod:`dpmcmc.kernels.warmup`). They are part of ``iterations``, so the budget pays for
        them like any others, and cost nothing beyond that: the adaptation reads only the
        released accept flags and draws (docs/post_processing.md). Their draws are dropped:
        ``samples`` holds ``iterations − warmup`` per chain, and ``Result.adapted`` the adapted
        values. ``"auto"``: half the iterations. dp-sgld / dp-sgnht have no accept step: their
        warm-up (at least 40 iterations; ``"auto"`` adapts nothing below that) sets only a
        diagonal preconditioner from the warm-up draws (largest entry 1).
    accountant : {"pld", "zcdp", "rdp", "rdp-direct"}, optional
        Which accountant turns the releases into (ε, δ). Default: the tightest one that
        applies to ``algorithm`` ("pld" where it applies; "rdp-direct" for DP Barker, whose
        "rdp" is 002 Thm 2 as published).
    relation : str, default "substitute"
        Neighbouring relation of the guarantee: replace one record. ``"substitute-legacy"``
        reproduces the papers' accounting of subsampled samplers, whose pair is NOT a valid
        bound for fixed-size batches (see ``dpmcmc.accounting.pld``); never use it for a real
        release.
    progress : bool, default True
        Show a progress bar with the iteration count only.
    secure : bool or dpmcmc.secure.SecureKey, default False
        Secure mode: every privacy-noise draw comes from ChaCha20 (RFC 8439), a cryptographically
        secure generator, keyed by a secret 256-bit key drawn from OS entropy once per run and
        never derived from ``key``; the JAX key then drives only the proposals and accept tests,
        so even a published ``key`` does not reveal the noise. A ``SecureKey``
        (``dpmcmc.secure.secure_key(seed)``) instead of ``True`` makes the noise reproducible
        (for tests; as secret as the data). Costs extra time per noise draw (see
        ``benchmarks/bench_secure_mode.py``). Floating-point noise stays floating point: see
        ``docs/secure_randomness.md`` for what that leaves open.
    checkpoint : path-like, optional
        Save the run after each compiled chunk to this file and, if it already exists, resume
        from it. A resumed call must repeat the arguments of the first (same model name and
        dimension, data, algorithm, parameters, budget, chains, theta0, secure); it reuses the
        run's key, planned length and privacy report — accounting is not redone and no budget is
        spent twice — and returns exactly the draws of the uninterrupted run. A finished
        checkpoint returns its result again without running. THE FILE CONTAINS THE PRNG KEY (and
        the secure-mode secret) AND NON-PRIVATE DIAGNOSTICS: it is as secret as the data; it is
        written atomically with permissions 0o600; delete it once the result is saved.
    checkpoint_every : int, optional
        Iterations per chunk between checkpoints; default ``ceil(iterations / 20)``. The draws do
        not depend on it.
    mesh : jax.sharding.Mesh, optional
        Split the data rows over the devices of this one-axis mesh (e.g.
        ``dpmcmc.records.data_mesh()``); the noise is still drawn once, on the
        assembled statistic, never per device. Full-data algorithms ("rwmh", "hmc",
        "dp-penalty", "dp-hmc"): every pass sums its rows on each device and the partial sums
        are combined across devices; the draws equal the unsharded ones up to the rounding of
        the reordered sums. Subsampled algorithms ("dp-barker", "minibatch-penalty", "dp-sgld",
        "dp-sgnht"): each device gathers the batch rows it holds and the ``b`` rows are
        assembled across devices (no device holds all ``n`` rows); the draws are bit-identical
        to the unsharded ones, in secure mode too. See docs/scaling.md (multi-host use via
        ``jax.distributed``).
    ledger : dpmcmc.Ledger or path-like, optional
        The data set's budget ledger (:class:`dpmcmc.Ledger`). The run's (ε, δ) is charged to it
        before the first noise draw, and a run that would take the ledger over its declared
        total is refused (``LedgerError``) before any data value is read by a mechanism. A
        resumed checkpoint is not charged again.
    force : bool, default False
        Run even when the plan says the chains cannot move (the budget buys fewer than 10
        iterations per chain, or the privacy noise caps a penalty test's acceptance below 5 %),
        which is otherwise refused before anything is spent (:class:`dpmcmc.PlanRefused`), and
        accept ``delta ≥ 1/n``, which is otherwise refused (such a δ protects no one).
    _on_chunk : callable, optional
        Testing hook, called with the driver's ``RunProgress`` after each chunk (after the
        checkpoint is written). Not for real runs.
    **params
        Sampler parameters; see ``dpmcmc.samplers`` (the registry's docstring lists each
        algorithm's parameters and defaults) and docs/noise_parameters.md for what the noise
        parameters mean. "dp-penalty": ``tau``,
        ``clip``, ``proposal_std``, ``mode``; "dp-hmc": ``tau_l``, ``tau_g``, ``clip``,
        ``grad_clip``, ``step_size``, ``leapfrog_steps``, ``mass``; "rwmh"/"hmc": the same
        without the privacy parameters.

    Returns
    -------
    Result
        ``samples`` (chains, iterations, dim), ``privacy`` (PrivacyReport), for a private
        algorithm ``released`` (the accept/divergence flags, covered by the guarantee), and the
        NON-private ``diagnostics`` kept apart.

    Raises
    ------
    ValueError, TypeError
        For any invalid argument, naming it, before any noise is drawn.
    PlanRefused
        (a ValueError) The plan says the chains cannot move, and ``force`` is off.
    CheckpointError
        (a ValueError) If ``checkpoint`` is corrupted or belongs to a different run.
    """
    request = Request.create(
        algorithm, epsilon=epsilon, delta=delta, chains=chains, key=key, theta0=theta0,
        iterations=iterations, accountant=accountant, relation=relation, progress=progress,
        secure=secure, force=force, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
        mesh=mesh, ledger=ledger, init_share=init_share, init_steps=init_steps, warmup=warmup,
        **params)
    if request.algorithm == AUTO:
        # The start, then DP-SGLD's card in the coordinates it whitens or the start's
        # approximation (dpmcmc.auto), planned by the same planner (make_plan).
        return _sample_auto(request, model, data, _on_chunk=_on_chunk)
    run_plan = prepare(request, model, data)
    return package(run_plan, run(run_plan, _on_chunk=_on_chunk))


# ------------------------------------------------------------------------------ plan, run, package

@dataclass(frozen=True)
class RunPlan:
    """A call of :func:`sample`, validated and accounted: all that is fixed before any noise.

    Built by :func:`plan_run`, run by :func:`run`, packaged into a :class:`~dpmcmc.result.Result`
    by :func:`package`; ``sample`` is exactly these three steps. Every check on the inputs and
    the budget has passed, the run length is set by the accountant from (ε, δ) alone, and the
    run's randomness is fixed (its key, secure-mode secret and, except for a private start, its
    starting points), so running one plan twice gives the same draws. A run from a plan with a
    ledger is charged to it each time; a plan that resumes a checkpoint is never charged.

    Attributes
    ----------
    model : Model
    data : ndarray (n, ...)
        The validated records (float64). Sensitive: not shown by ``repr``.
    algorithm : str
    spec : AlgorithmSpec
        The algorithm's registry entry.
    params : dict
        The sampler's parameters with defaults filled (``spec.prepare``).
    chains, iterations : int
        Chains, and iterations per chain (the accountant's, or the checkpoint's when resuming).
    report : PrivacyReport or None
        What the run spends (``None`` for a non-private algorithm).
    plan : dpmcmc.Plan
        The public plan (public inputs only); its warnings were emitted by :func:`plan_run`.
    key : jax PRNG key
        The run's key: the caller's, the checkpoint's, or one drawn from OS entropy. Secret.
    secret : uint32 array (8,) or None
        Secure mode's ChaCha20 key (``None``: secure mode off). Secret.
    theta0 : ndarray (chains, dim) or None
        The starting points; ``None`` with ``private_start`` (drawn by :func:`run`, after the
        ledger is charged, since they are a release on the data).
    private_start : dpmcmc._plan.PrivateStart or None
        The plan's private initialisation (``plan.private_start``), still to be drawn.
    progress : bool
    mesh : jax.sharding.Mesh or None
    ledger : dpmcmc.Ledger or None
    checkpoint : str or None
        The checkpoint path.
    chunk_size : int or None
        Iterations per chunk between checkpoints (``None`` without a checkpoint).
    fingerprint : dict or None
        The call's checkpoint fingerprint (:func:`dpmcmc.runtime.checkpoint.fingerprint`).
    saved : dpmcmc.runtime.checkpoint.SavedRun or None
        The checkpoint this call resumes, if any.
    warmup : int
        Warm-up iterations per chain (included in ``iterations``; see :func:`sample`).
    noise_keys : tuple of bytes
        What fixes the run's privacy noise when the user chose it (the key's raw words, or the
        secure-mode secret the user gave); the ledger refuses a run that repeats one. Empty
        when the noise comes from fresh OS entropy. Secret.
    """

    model: Model
    data: np.ndarray = field(repr=False)
    algorithm: str
    spec: Any = field(repr=False)
    params: dict
    chains: int
    iterations: int
    report: Any
    plan: Any = field(repr=False)
    key: Any = field(repr=False)
    secret: Any = field(repr=False)
    theta0: Optional[np.ndarray] = field(repr=False)
    private_start: Any
    progress: bool
    mesh: Any = field(repr=False)
    ledger: Any = field(repr=False)
    checkpoint: Optional[str]
    chunk_size: Optional[int]
    fingerprint: Optional[dict] = field(repr=False)
    saved: Optional[SavedRun] = field(repr=False)
    warmup: int = 0
    noise_keys: tuple = field(default=(), repr=False)

    def layout(self):
        """The run's data as its kernel reads them (``spec.layout``), once per run.

        In blocks (``PreparedData``, with the gradient-dtype copy DP-HMC uses) for the full-data
        algorithms, as a device array for the subsampled ones; with ``mesh``, split over its
        devices, each device receiving only its own rows from the host array. Passed to the
        chain driver as ``data=``: an argument of the compiled program, never a constant in it.
        """
        with jax.enable_x64(True):
            return self.spec.layout(self.data, self.params, self.model, mesh=self.mesh)

    def build(self, noise=None):
        """The run's kernel (``spec.build``, wrapped in the warm-up adaptation if planned), with
        the privacy-noise source ``noise`` (``None``: ``jax.random``; the chain driver builds each
        step with the run's secret in secure mode). It takes the data as an argument."""
        spec, model, prepared = self.spec, self.model, self.params
        if not self.warmup:
            return spec.build(model, prepared, noise)
        from .kernels.warmup import adaptive_kernel

        adaptation = spec.adaptation
        base = {k: prepared[k] for k in (adaptation.step, adaptation.diagonal)}
        return adaptive_kernel(lambda over: spec.build(model, {**prepared, **over}, noise),
                               adaptation, base, self.warmup)

    @property
    def cache_key(self):
        """The key of the run's compiled programs (``run_chains(cache_key=...)``): the algorithm,
        the model (by ``dpmcmc.runtime.compile_cache.model_key``), the prepared parameters and the
        warm-up; never the data, which the driver keys by layout only."""
        from .runtime.compile_cache import kernel_cache_key

        key = kernel_cache_key(self.algorithm, self.spec.build, self.model, self.params)
        return None if key is None else (key, "warmup", self.warmup)


class RunOutput(NamedTuple):
    """The draws and per-iteration infos of a run (see :func:`dpmcmc.samplers.run_chains`), and,
    after a warm-up, the chains' final state (which holds the adapted values)."""

    positions: Any
    infos: Any
    state: Any = None


def plan_run(model: Model, data: Any, algorithm: str = "dp-hmc", **options: Any) -> RunPlan:
    """Validate and plan a call of :func:`sample` without drawing any noise.

    ``options`` are :func:`sample`'s keyword arguments and the sampler's parameters; this is
    ``prepare(Request.create(algorithm, **options), model, data)``. Emits the plan's
    :class:`~dpmcmc.PlanWarning`; reads a checkpoint to resume if ``checkpoint`` exists; writes
    nothing and charges no ledger (:func:`run` does both).
    """
    return prepare(Request.create(algorithm, **options), model, data)


def prepare(request: Request, model: Model, data: Any) -> RunPlan:
    """A :class:`~dpmcmc.request.Request` and the data in, a :class:`RunPlan` out, no noise drawn.

    The model contract is checked on the data's public shape and dtype, the one planner
    (:func:`dpmcmc._plan.make_plan`) accounts the run from public inputs, a plan whose chains
    cannot move is refused unless ``request.force``, and the run's randomness (key, secure-mode
    secret, starting points unless the start is private) is fixed.

    Raises
    ------
    ValueError, TypeError
        For any invalid argument, naming it.
    PlanRefused, BudgetTooSmall
        (ValueErrors) See :func:`sample`.
    CheckpointError
        (a ValueError) If ``checkpoint`` is corrupted or belongs to a different run.
    """
    from ._keys import run_secrets, warn_reusable_key

    # --- validation: nothing random happens before this block completes -------------------
    if not isinstance(model, Model):
        raise TypeError(f"model must be a dpmcmc.Model, got {type(model).__name__}")
    spec = request.spec
    # Type, shape and dtype only: the model contract is checked on these public facts before
    # any data value is read.
    data_arr = validate_data(data, finite=False)
    n = int(data_arr.shape[0])
    saved = fingerprint = None
    if request.checkpoint is not None:
        # The caller's arguments as given (before defaults are resolved), so a resumed call is
        # compared with the first one on exactly what the user controls.
        prepared = spec.prepare(dict(request.params), model, n)
        fingerprint = _checkpoint.fingerprint(
            model=model, data=data_arr, algorithm=request.algorithm,
            params=dict(prepared, warmup=request.warmup) if request.warmup else prepared,
            chains=request.chains, epsilon=request.epsilon, delta=request.delta,
            iterations=request.iterations, accountant=request.accountant,
            relation=request.relation, theta0=request.theta0,
            secure=request.secure is not None)
        if os.path.exists(request.checkpoint):
            saved = _checkpoint.load(request.checkpoint, fingerprint, model.dim, request.chains)
            # Resuming: the run was accounted when it started; its length and report come from
            # the checkpoint, so nothing is spent again.
            if (request.epsilon is not None and saved.report is not None
                    and saved.report.epsilon > request.epsilon * (1 + 1e-12)):
                raise ValueError(f"the checkpoint's run spends ε={saved.report.epsilon:.6g}, more "
                                 f"than epsilon={request.epsilon:g}")
    plan = make_plan(request, n, model, resume=saved)
    check_model(model, data_arr.shape, data_arr.dtype, gradients=spec.gradient,
                grad_method=plan.params.get("grad_method", "auto"))
    if not spec.private:
        # The non-private baselines publish unprotected draws anyway; for them NaN data are an
        # input error. A private run never refuses a value: the mechanisms bound a non-finite
        # per-record term like any other (docs/nonfinite.md).
        _check_finite(data_arr)

    # --- the run's randomness: keys and starting points -----------------------------------------
    noise_keys: tuple = ()
    start, secret = None, None
    if saved is not None:
        run_key = _checkpoint.same_secret("key", request.key, saved.key, request.checkpoint)
        if request.secure is not None:
            given = None if request.secure is OS_ENTROPY else request.secure
            secret = _checkpoint.same_secret("secure", given, saved.secret, request.checkpoint)
        start = saved.theta0
    else:
        run_key, secret, noise_keys = run_secrets(request.key, request.secure)
        if noise_keys and spec.private:
            warn_reusable_key("secure" if request.secure is not None else "key", stacklevel=4,
                              ledger=request.ledger)
        if spec.one_shot:
            pass  # no chain: nothing starts anywhere
        elif plan.private_start is None:
            start = request.theta0 if request.start_given else None
            if start is None:
                start = _default_theta0(model, _init_key(run_key), request.chains)
            start = np.broadcast_to(start, (request.chains, model.dim)).copy()
            _check_start(model, start, data_arr if not spec.private else None)

    if saved is None:
        # After every check that can refuse on the inputs, before any noise or budget.
        refuse_if_blocked(plan, request.force)
    # The plan's warnings reach the user before any noise is drawn.
    _plan.warn(plan, stacklevel=4)
    chunk_size = None
    if request.checkpoint is not None:
        chunk_size = request.checkpoint_every or max(1, math.ceil(plan.iterations / DEFAULT_CHECKPOINTS))
    return RunPlan(
        model=model, data=data_arr, algorithm=request.algorithm, spec=spec, params=plan.params,
        chains=request.chains, iterations=int(plan.iterations), report=plan.report, plan=plan,
        key=run_key, secret=secret, theta0=start,
        private_start=plan.private_start if saved is None else None,
        progress=request.progress, mesh=request.mesh, ledger=request.ledger,
        checkpoint=request.checkpoint, chunk_size=chunk_size, fingerprint=fingerprint,
        saved=saved, warmup=plan.warmup, noise_keys=noise_keys if spec.private else ())


def _init_key(key: jax.Array) -> jax.Array:
    # The first half of the run's key starts the chains, the second runs them (see run()).
    return jax.random.split(key)[0]


def run(p: RunPlan, *, _on_chunk: Optional[Callable[[Any], None]] = None) -> RunOutput:
    """Run a :class:`RunPlan`: charge the ledger, draw a private start if planned, run the chains.

    The ledger (if any) is charged before the first noise draw, unless the plan resumes a
    checkpoint. With a checkpoint, the run is saved before its first noise draw and after every
    chunk. ``_on_chunk`` is :func:`sample`'s testing hook.

    Returns
    -------
    RunOutput
        ``positions`` (chains, iterations, dim) and the driver's ``infos``.
    """
    from .runtime.driver import init_states, run_chains

    if p.ledger is not None and p.saved is None:
        # Charged at the start: once noise is drawn on the data the budget is spent, even if the
        # run is interrupted. Refused (LedgerError) before any mechanism reads the data.
        p.ledger.charge(p.report, label=f"dpmcmc.sample {p.algorithm} on model {p.model.name!r}",
                        keys=p.noise_keys)
    if p.spec.one_shot:
        # One set of releases, then independent draws (the card's fit): its noise from the
        # run's key or, in secure mode, from ChaCha20 under the run's secret.
        from .kernels.mechanisms import NoiseSource

        noise = None if p.secret is None else NoiseSource(np.asarray(p.secret, dtype=np.uint32))
        out = p.spec.fit(p.key, p.data, p.plan, noise)
        return RunOutput(out["samples"], None, out)
    theta0 = p.theta0
    if p.private_start is not None:
        theta0 = _private_start(p.model, p.data, _init_key(p.key), p.chains, p.private_start,
                                p.secret)
        _check_start(p.model, theta0)
    run_key = jax.random.split(p.key)[1]

    # The laid-out data enter the compiled program as an argument of the kernel's step: never a
    # constant copy in the executable, and sharded over the mesh if given. Traced and run with
    # 64-bit JAX types, scoped to this call and thread (the user's global setting is left as it
    # was): privacy noise is float64 whatever jax_enable_x64 says.
    with jax.enable_x64(True):
        data, cache_key = p.layout(), p.cache_key
        last = {}

        def keep_last(progress_so_far):
            last["state"] = progress_so_far.state  # the adapted values are in the final state
            if _on_chunk is not None:
                _on_chunk(progress_so_far)

        # Only a warm-up needs the final state (a hook makes the driver copy every chunk out).
        on_chunk = keep_last if p.warmup else _on_chunk
        if p.checkpoint is not None:
            saver = _checkpoint.CheckpointWriter(p.checkpoint, p.fingerprint, p.key, p.secret, theta0,
                                                 p.iterations, p.report)
            if p.saved is None:
                # Saved before the first noise draw: an interruption during the first chunk resumes
                # with this key and report instead of starting (and spending) a second run.
                saver.write_start(init_states(p.build, theta0, data, cache_key=cache_key),
                                  theta0)

            def save_and_keep(progress_so_far):
                saver.write(progress_so_far)
                keep_last(progress_so_far)

            on_chunk = save_and_keep
        positions, infos = run_chains(p.build, jnp.asarray(theta0), run_key, p.iterations,
                                      data=data, progress=p.progress, chunk_size=p.chunk_size,
                                      secure_secret=p.secret,
                                      resume=None if p.saved is None else p.saved.progress,
                                      on_chunk=on_chunk, cache_key=cache_key)
    return RunOutput(positions, infos, last.get("state"))


def package(p: RunPlan, out: RunOutput) -> Result:
    """The :class:`~dpmcmc.result.Result` of a run: draws, privacy report, released statistics
    and the NON-private diagnostics, kept apart."""
    positions, infos, adapted = out.positions, out.infos, None
    if p.spec.one_shot:
        # The draws are post-processing of the releases; there are no chains to diagnose.
        return Result(samples=np.asarray(positions), privacy=p.report, diagnostics=None,
                      algorithm=p.algorithm, params=p.params, model_name=p.model.name,
                      param_names=p.model.param_names, secure=p.secret is not None, plan=p.plan)
    if p.warmup:
        # The warm-up draws are not posterior draws: dropped, like their flags.
        # Sliced in NumPy (an eager JAX slice compiles a program per shape).
        positions = np.asarray(positions)[:, p.warmup:]
        infos = jax.tree.map(lambda a: np.asarray(a)[:, p.warmup:], infos)
        if out.state is not None:
            adapted = _adapted_values(p.spec.adaptation, p.params, out.state)
    clip_fraction = np.asarray(infos.clip_fraction).mean(axis=1)  # NumPy: x64 may be off here
    accepted = np.asarray(infos.accepted, dtype=bool)
    diverged = np.asarray(infos.diverged, dtype=bool)
    if p.spec.private:
        # Accept and divergence flags of a private sampler are functions of its noisy releases
        # and of data-independent randomness (docs/post_processing.md): covered by the report.
        # The clip fractions are counted on the raw data and stay apart, NOT private.
        released = ReleasedStatistics(accepted=accepted, diverged=diverged)
        diagnostics = NonPrivateDiagnostics(clip_fraction=clip_fraction)
    else:
        released = None
        diagnostics = NonPrivateDiagnostics(
            acceptance_rate=np.mean(accepted, axis=1, dtype=np.float64),
            clip_fraction=clip_fraction,
            divergences=np.sum(diverged, axis=1, dtype=np.int64),
        )
    return Result(
        samples=np.asarray(positions),
        privacy=p.report,
        diagnostics=diagnostics,
        algorithm=p.algorithm,
        params=p.params,
        model_name=p.model.name,
        param_names=p.model.param_names,
        secure=p.secret is not None,
        released=released,
        plan=p.plan,
        adapted=adapted,
        warmup=int(p.warmup),
    )


def _adapted_values(adaptation, prepared: dict, state) -> dict:
    """The adapted parameters per chain from the final state of an adaptive run (public)."""
    scale = np.asarray(state.scale, dtype=np.float64)
    diag = np.asarray(state.diagonal, dtype=np.float64)
    if adaptation.step == adaptation.diagonal:
        return {adaptation.step: scale[:, None] * diag}
    if adaptation.target is None:  # the step is not adapted
        return {adaptation.diagonal: diag}
    return {adaptation.step: scale * float(prepared[adaptation.step]), adaptation.diagonal: diag}


# ------------------------------------------------------------------------------ starting points

def _check_start(model: Model, theta0: np.ndarray, data: Optional[np.ndarray] = None) -> None:
    """Refuse a start where the run cannot be defined; say so before drawing any noise.

    For every algorithm this checks only public things: the log-prior at θ0 (θ0 and the prior
    are the user's, not the data's). For the private algorithms it reads no record: whether a
    run starts must not depend on one person's row, and a record whose log-likelihood is not
    finite at θ0 is handled inside the mechanism like any other (its clipped ratio is bounded by
    the clip bound and a non-finite gradient is zeroed: see the samplers' module docstrings).
    ``data`` is given only for the non-private baselines, which publish unprotected draws
    anyway: there a non-finite log-likelihood at θ0 would make every proposal's log ratio NaN
    and leave the chain stuck at θ0, so it is refused.
    """
    # The finiteness checks run in NumPy; the model's values come from one compiled program per
    # model (kept with the chain programs, keyed like them by dpmcmc.runtime.compile_cache.model_key):
    # as eager JAX operations each primitive would compile a program per shape (82 for a
    # 20-primitive model under rwmh: 1.8 -> 0.8 CPU-s a run).
    from .runtime import compile_cache as _compile_cache

    try:
        key = ("start-check", _compile_cache.model_key(model))
    except TypeError:
        key = None
    check = None if key is None else _compile_cache.PROGRAMS.get(key)
    if check is None:
        check = (jax.jit(jax.vmap(model.log_prior)),
                 jax.jit(lambda th, d: jax.vmap(lambda t: model.loglik_per_example(t, d))(th)))
        if key is not None:
            _compile_cache.PROGRAMS.put(key, check)
    theta = jnp.asarray(theta0)
    lp = np.asarray(check[0](theta))
    if not np.all(np.isfinite(lp)):
        raise ValueError("theta0: the log-prior is not finite at the starting point of some chain")
    if data is None:
        return
    ll = np.asarray(check[1](theta, jnp.asarray(data)))
    if not np.all(np.isfinite(ll)):
        raise ValueError(
            "theta0: the model's log-likelihood is not finite at the starting point of some chain "
            "for some record (non-private algorithm); choose another theta0 or fix the model"
        )


def _algorithm_list() -> str:
    # Built from the registry so that a new algorithm cannot be missing from the docs.
    from .samplers import ALGORITHMS
    from .samplers.spec import FULL

    lines = []
    for name, spec in ALGORITHMS.items():
        access = "full data" if spec.data_access == FULL else "minibatches"
        kind = "private" if spec.private else "NON-private baseline"
        lines.append(f'        - ``"{name}"``: {kind}, {access}')
    return "\n".join(lines)


if sample.__doc__:
    sample.__doc__ = sample.__doc__.replace("@ALGORITHM_LIST@", _algorithm_list())


# ------------------------------------------------------------------------------ algorithm="auto"

def _sample_auto(request, model, data, _on_chunk=None):
    """``dpmcmc.sample(model, data, "auto", ...)``: the module docstring's run.

    Parameters
    ----------
    request : dpmcmc.request.Request
        ``algorithm == "auto"``, validated (:func:`check_request`): ``epsilon``, ``delta``,
        ``chains``, ``key``, ``progress``, ``secure``, ``force``, ``ledger`` and the parameters
        ``grad_clip`` (or ``clip``), ``chain``, ``draws`` (approximation mode: draws per chain).
    model : Model
    data : array (n, ...)
    _on_chunk : callable, optional
        :func:`dpmcmc.sample`'s testing hook, passed to the chain's driver.

    Returns
    -------
    Result
        ``algorithm == "auto"``; ``params["mode"]`` says whether the draws are a chain's or the
        approximation's; ``plan`` is the one planner's plan (``_plan._auto_plan``).
    """
    import dataclasses
    import warnings

    import jax
    import jax.numpy as jnp

    from ._keys import run_secrets, warn_reusable_key
    from .auto import (APPROXIMATION_DRAWS, AUTO_CARD, KAPPA, MIN_LANGEVIN, SAMPLING_RATIO,
                       config_of, expected_clip)
    from .kernels.mechanisms import NoiseSource
    from .models.base import check_model
    from .models.reparam import affine, to_theta
    from .samplers.private_init import public_point
    from .samplers.private_newton import private_newton, start_draws

    if not isinstance(model, Model):
        raise TypeError(f"model must be a dpmcmc.Model, got {type(model).__name__}")
    # Type, shape and dtype only: no data value decides anything here (docs/nonfinite.md).
    arr = validate_data(data, finite=False)
    check_model(model, arr.shape, arr.dtype, gradients=True)
    n = int(arr.shape[0])
    plan = _plan.make_plan(request, n, model)
    cfg = config_of(request, n, model.dim)
    _plan.refuse_if_blocked(plan, request.force)
    run_key, secret, noise_keys = run_secrets(request.key, request.secure)
    if noise_keys:
        warn_reusable_key("secure" if request.secure is not None else "key", stacklevel=4,
                          ledger=request.ledger)
    _plan.warn(plan, stacklevel=4)
    if request.ledger is not None:
        # Charged before the first release: once noise is drawn on the data it is spent.
        request.ledger.charge(plan.report, keys=noise_keys,
                              label=f"dpmcmc.sample auto ({cfg.mode}) on model {model.name!r}")
    k_point, k_start, k_draw, k_chain = jax.random.split(run_key, 4)
    noise = None if secret is None else NoiseSource(jnp.asarray(secret, dtype=jnp.uint32))
    candidates = (_default_theta0(model, k_point, 64) if model.sample_prior is not None
                  else None)
    point = public_point(model, candidates)
    fit = private_newton(k_start, model, arr, point, cfg.start, noise=noise)
    if not np.all(np.isfinite(np.asarray(fit.start_cov))):
        # A function of released values only: safe to report.
        raise ValueError("the private Newton start ended without a finite approximation: the "
                         "released curvature resolves no precision along some direction and the "
                         "log-prior has none there (a flat prior), or the moves diverged (the "
                         "outer products of the per-record gradients missing the model's "
                         "curvature, as for a misspecified likelihood)")
    params = dict(cfg.params(), mean=np.asarray(fit.mean).tolist())
    common = dict(privacy=plan.report, algorithm=AUTO, model_name=model.name,
                  param_names=model.param_names, secure=secret is not None, plan=plan)
    if cfg.mode == "approximation":
        draws = int(request.params.get("draws", APPROXIMATION_DRAWS))
        with jax.enable_x64(True):
            out = np.asarray(start_draws(k_draw, fit, request.chains * draws))
        return Result(samples=out.reshape(request.chains, draws, model.dim), diagnostics=None,
                      params=params, **common)
    # The chain, in the coordinates whitened by the approximation (post-processing).
    clip_w = float(fit.clips[-1][-1])
    chol = np.linalg.cholesky(np.linalg.inv(np.asarray(fit.precision, dtype=np.float64)))
    zmodel = affine(model, np.asarray(fit.mean), chol)
    with jax.enable_x64(True):
        starts = np.asarray(start_draws(k_draw, fit, request.chains))
    z0 = np.linalg.solve(chol, (starts - np.asarray(fit.mean)).T).T
    grad_clip_z = KAPPA * clip_w / math.sqrt(n)
    # The privacy noise per step, (η/2)(nT/b) σ_m C_z per coordinate, is part of the diffusion:
    # the move draws the rest (post-processing of the released clip).
    s = cfg.sampler
    eta = s["step_size"]
    priv = (0.5 * eta * n * model.temperature / s["batch_size"] * s["noise_multiplier"]
            * grad_clip_z) ** 2 / eta
    langevin = float(min(1.0, max(MIN_LANGEVIN, 1.0 - priv - SAMPLING_RATIO)))
    heat = langevin + priv + SAMPLING_RATIO
    if heat > 1.0 + 1e-9:
        # The start's clip came out larger than the rule expected: more privacy noise per step
        # than the diffusion has room for. Said in the plan's words (from released values).
        warnings.warn(_plan.PlanWarning(
            f"auto: the start's clip of the whitened gradients ({clip_w:.3g}) is above the "
            f"expected {expected_clip(model.dim):.3g}: the chain's privacy noise per step is "
            f"{priv:.3g} of the Langevin noise's variance, and it samples a posterior about "
            f"{math.sqrt(heat):.3g}× too wide"), stacklevel=3)
    # The chain is DP-SGLD's card on the whitened model; its releases are the ones the plan's
    # report composed with the start (the same noise multiplier, batch and run length).
    inner = Request.create(AUTO_CARD, iterations=cfg.iterations, delta=request.delta,
                           chains=request.chains, theta0=z0, progress=request.progress,
                           force=request.force, grad_clip=grad_clip_z, langevin_noise=langevin,
                           **s)
    with warnings.catch_warnings():
        # Its plan's noise line ignores the noise correction (langevin_noise); the check above
        # is the one that applies.
        warnings.simplefilter("ignore", _plan.PlanWarning)
        rp = prepare(inner, zmodel, arr)
    rp = dataclasses.replace(rp, key=k_chain, secret=secret, noise_keys=())
    chain = package(rp, run(rp, _on_chunk=_on_chunk))
    params.update(grad_clip_whitened=grad_clip_z, langevin_noise=langevin)
    samples = to_theta(zmodel, chain.samples)
    if not np.all(np.isfinite(samples)):
        # The draws are released values: checking them is post-processing. Seen where the
        # start's curvature (outer products of the per-record gradients) misses most of the
        # posterior's (per-record gradients nearly collinear, as in a narrow banana): the
        # whitening stretches that direction and the whitened step is unstable (docs/auto.md).
        warnings.warn(_plan.PlanWarning(
            "auto: the chain diverged (non-finite draws): the start's curvature, estimated from "
            "the outer products of the per-record gradients, misses the posterior's along some "
            "direction. Use the approximation (chain=False) or a tuned sampler."), stacklevel=3)
    return Result(samples=samples, diagnostics=chain.diagnostics, params=params,
                  released=chain.released, **common)
