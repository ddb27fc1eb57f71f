"""``dpmcmc.sample``: validate, account, run, package.

The order matters for privacy: every check on the inputs and the budget happens before the
first noise draw, and the run length is fixed by the accountant from (ε, δ) alone — never from
anything computed on the data.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ._checkpoint import CheckpointError, data_digest, jsonable, read_checkpoint, write_checkpoint
from ._keys import resolve_key
from .accounting._checks import check_int, check_positive, check_probability
from .models.base import Model, check_model
from .result import NonPrivateDiagnostics, ReleasedStatistics, Result

__all__ = ["sample", "validate_data", "CheckpointError"]

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


# Algorithms whose kernels differentiate the log-likelihood: the model contract then includes a
# gradient of shape (dim,). tests/test_model_contract.py runs every other algorithm on a model
# that cannot be differentiated, so an algorithm missing here fails that test.
_GRADIENT_ALGORITHMS = frozenset({"hmc", "dp-hmc", "dp-sgld", "dp-sgnht"})


def _validate_theta0(theta0: Any, chains: int, dim: int) -> np.ndarray:
    try:
        arr = np.asarray(theta0, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"theta0 must be a real array of shape ({dim},) or ({chains}, {dim}): {exc}") from None
    if arr.shape == (dim,):
        arr = np.broadcast_to(arr, (chains, dim)).copy()
    elif arr.shape != (chains, dim):
        raise ValueError(
            f"theta0 must have shape ({dim},) or ({chains}, {dim}) for dim={dim} and chains={chains}, "
            f"got {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError("theta0 contains NaN or inf")
    return arr


def _check_private_init(spec, prepared: dict, epsilon, secure_key, share, steps) -> float:
    """Arguments of ``theta0="private"``, checked before any data value is read; the clip bound."""
    if not spec.private:
        raise ValueError(f"theta0='private' applies to the private algorithms, not {spec.name!r}")
    if epsilon is None:
        raise ValueError("theta0='private' spends a share of epsilon: give epsilon")
    if secure_key is not None:
        raise ValueError("theta0='private' with secure=True is not supported yet: pass theta0")
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share < 1.0:
        raise ValueError(f"init_share must lie in (0, 1), got {share!r}")
    check_int("init_steps", steps, minimum=1)
    bound = prepared.get("grad_clip", prepared.get("clip"))
    if bound is None:
        raise ValueError(f"theta0='private' needs a per-record gradient bound (grad_clip or clip); "
                         f"{spec.name!r} has none: pass theta0")
    return float(bound)


def _private_start(model: Model, data_arr: np.ndarray, key: jax.Array, chains: int, n: int,
                   init_mu: float, bound: float, steps: int) -> np.ndarray:
    """Starts from :mod:`dpmcmc.samplers.private_init` (float64 noise, from a public point)."""
    from .samplers.private_init import init_plan, private_start

    k_prior, k_init = jax.random.split(key)
    # The public point: the average of prior draws where the model can draw them, else zeros.
    start = np.zeros(model.dim)
    if model.sample_prior is not None:
        start = _default_theta0(model, k_prior, 64).mean(axis=0)
    plan = init_plan(n, init_mu, bound, steps)
    with jax.enable_x64(True):
        starts, _ = private_start(k_init, model, jnp.asarray(data_arr), jnp.asarray(start), plan, chains)
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
    epsilon, delta : float
        The total budget for all chains together. With ``iterations=None`` the accountant sets
        the run length to the largest number of iterations per chain the budget buys. With
        ``iterations`` given, ``epsilon`` may be omitted and ``Result.privacy`` states the ε
        spent at ``delta``; if both are given, the run must fit the budget.
    chains : int, default 4
        Number of chains; each touches the data, so they compose.
    key : JAX PRNG key, optional
        ``None`` (default) draws a key from OS entropy (``secrets``); there is no fixed default
        seed. Passing a key makes the run reproducible; a published key (or seed) voids the
        privacy guarantee, since anyone holding it can regenerate and subtract the noise — unless
        ``secure`` is on, where the noise does not depend on it.
    theta0 : array_like, shape (dim,) or (chains, dim), or "private", optional
        Starting points. Default: independent draws from the prior (``model.sample_prior``), or
        zeros when the model cannot draw from its prior — both data-independent.
        ``"private"``: a private initialisation (:mod:`dpmcmc.samplers.private_init`) spends
        ``init_share`` of the budget's μ on ``init_steps`` clipped gradient sums (bound: the
        sampler's ``grad_clip``, else ``clip``) and starts the chains near the posterior mode;
        the report lists it as its own mechanism and the iterations get the rest. Needs
        ``epsilon``; not with ``secure`` or DP Barker yet; the subsampled samplers need
        ``accountant="rdp"``.
    init_share : float, default 0.1
        With ``theta0="private"``: the share of μ = gaussian_mu(ε, δ) the start spends, in (0, 1).
    init_steps : int, default 30
        With ``theta0="private"``: the number of gradient releases.
    iterations : int, optional
        Iterations per chain (see ``epsilon``).
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
        ``dpmcmc.samplers._sharding.data_mesh()``); the noise is still drawn once, on the
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
    CheckpointError
        (a ValueError) If ``checkpoint`` is corrupted or belongs to a different run.
    """
    from .samplers import ALGORITHMS
    from .samplers._driver import run_chains

    # --- validation: nothing random happens before this block completes -------------------
    if not isinstance(model, Model):
        raise TypeError(f"model must be a dpmcmc.Model, got {type(model).__name__}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
    spec = ALGORITHMS[algorithm]
    chains = check_int("chains", chains, minimum=1)
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True or False, got {progress!r}")
    secure_key = _validate_secure(secure)
    ckpt_path = _validate_checkpoint_path(checkpoint)
    from .ledger import open_ledger

    the_ledger = open_ledger(ledger)
    if the_ledger is not None and not spec.private:
        raise ValueError(f"ledger: algorithm {algorithm!r} is not private; a ledger records private runs only")
    if checkpoint_every is not None:
        if ckpt_path is None:
            raise ValueError("checkpoint_every needs checkpoint (a file path)")
        checkpoint_every = check_int("checkpoint_every", checkpoint_every, minimum=1)
    # Type, shape and dtype only: the model contract is checked on these public facts before
    # any data value is read (the finiteness check last).
    data_arr = validate_data(data, finite=False)
    n = int(data_arr.shape[0])
    if iterations is not None:
        iterations = check_int("iterations", iterations, minimum=1)
    prepared = spec.prepare(dict(params), model, n)
    check_model(model, data_arr.shape, data_arr.dtype,
                gradients=algorithm in _GRADIENT_ALGORITHMS,
                grad_method=prepared.get("grad_method", "auto"))
    private_init = isinstance(theta0, str) and theta0 == "private"
    if isinstance(theta0, str) and not private_init:
        raise ValueError(f"theta0 must be an array of starting points or 'private', got {theta0!r}")
    init_bound = None
    if private_init:
        init_bound = _check_private_init(spec, prepared, epsilon, secure_key, init_share, init_steps)
    _check_finite(data_arr)
    if mesh is not None:
        from .samplers._sharding import check_mesh

        check_mesh(mesh, algorithm)

    if epsilon is not None:
        epsilon = check_positive("epsilon", epsilon)
    if delta is not None:
        delta = check_probability("delta", delta)
    theta0_given = None if theta0 is None or private_init else _validate_theta0(theta0, chains, model.dim)
    user_key = None if key is None else resolve_key(key)

    saved = fingerprint = None
    if ckpt_path is not None:
        # The caller's arguments as given (before defaults are resolved), so a resumed call is
        # compared with the first one on exactly what the user controls.
        fingerprint = _fingerprint(model, data_arr, algorithm, prepared, chains, epsilon, delta,
                                   iterations, accountant, relation,
                                   "private" if private_init else theta0_given,
                                   secure_key is not None)
        if os.path.exists(ckpt_path):
            saved = _load_checkpoint(ckpt_path, fingerprint, model, chains)

    report = None
    if spec.private:
        if saved is not None:
            # Resuming: the run was accounted when it started; taking its length and report from
            # the checkpoint spends nothing again.
            iterations, report = saved["planned"], saved["report"]
            if epsilon is not None and report.epsilon > epsilon * (1 + 1e-12):
                raise ValueError(f"the checkpoint's run spends ε={report.epsilon:.6g}, more than "
                                 f"epsilon={epsilon:g}")
        else:
            from ._plan import account

            iterations, report = account(algorithm, spec, prepared, n, chains, epsilon, delta, iterations,
                                         accountant, relation, init_share if private_init else None,
                                         init_steps)
    else:
        if epsilon is not None or delta is not None:
            raise ValueError(
                f"algorithm {algorithm!r} is not private: it takes no epsilon/delta (use a dp-* algorithm)"
            )
        if iterations is None:
            raise ValueError(f"iterations is required for the non-private algorithm {algorithm!r}")
        if saved is not None:
            iterations = saved["planned"]

    # The plan (public inputs only): its warnings reach the user before any noise is drawn.
    from . import _plan

    run_plan = _plan._build(algorithm, prepared, n, model.dim, chains, iterations, epsilon, delta, report,
                           model.temperature)
    _plan.warn(run_plan)
    if the_ledger is not None and saved is None:
        # Charged at the start: once noise is drawn on the data the budget is spent, even if the
        # run is interrupted. Refused (LedgerError) before any mechanism reads the data.
        the_ledger.charge(report, label=f"dpmcmc.sample {algorithm} on model {model.name!r}")

    if saved is not None:
        key = _same_secret("key", user_key, saved["key"], ckpt_path)
        secret = None
        if secure_key is not None:
            given = None if isinstance(secure_key, str) else secure_key
            secret = _same_secret("secure", given, saved["secret"], ckpt_path)
        theta0_arr = saved["theta0"]
    else:
        key = resolve_key(user_key)
        secret = None
        if secure_key is not None:
            # Drawn from OS entropy for this run alone, never from ``key``.
            from .secure import secure_key_from_os

            secret = (secure_key_from_os() if isinstance(secure_key, str) else secure_key).words
        init_key = jax.random.split(key)[0]
        if private_init:
            # The μ the report charges for the start is the μ its releases draw: one source.
            (init_mu,) = [m["total_mu"] for m in report.mechanisms if m.get("per_iteration") == 0]
            theta0_arr = _private_start(model, data_arr, init_key, chains, n, init_mu, init_bound,
                                        init_steps)
        else:
            theta0_arr = _default_theta0(model, init_key, chains) if theta0_given is None else theta0_given
        _check_start(model, theta0_arr, data_arr if not spec.private else None)
    run_key = jax.random.split(key)[1]

    # --- the run ----------------------------------------------------------------------------
    # The kernel is built inside the compiled program from the laid-out data, which enter it as
    # an argument: never a constant copy in the executable, and sharded over the mesh if given.
    # Traced and run with 64-bit JAX types, scoped to this call and thread (the user's global
    # setting is left as it was): privacy noise is float64 whatever jax_enable_x64 says.
    with jax.enable_x64(True):
        kernel = _run_kernel(spec, model, data_arr, prepared, algorithm, mesh)
        chunk_size = None
        on_chunk = _on_chunk
        if ckpt_path is not None:
            chunk_size = checkpoint_every or max(1, math.ceil(iterations / DEFAULT_CHECKPOINTS))
            saver = _CheckpointWriter(ckpt_path, fingerprint, key, secret, theta0_arr, iterations, report)
            if saved is None:
                # Saved before the first noise draw: an interruption during the first chunk resumes
                # with this key and report instead of starting (and spending) a second run.
                saver.write_start(kernel, theta0_arr)

            def on_chunk(progress_so_far):
                saver.write(progress_so_far)
                if _on_chunk is not None:
                    _on_chunk(progress_so_far)
        positions, infos = run_chains(kernel, jnp.asarray(theta0_arr), run_key, iterations,
                                      progress=progress, chunk_size=chunk_size, secure_secret=secret,
                                      resume=None if saved is None else saved["progress"],
                                      on_chunk=on_chunk)

        clip_fraction = np.asarray(jnp.mean(infos.clip_fraction, axis=1))
        accepted = np.asarray(infos.accepted, dtype=bool)
        diverged = np.asarray(infos.diverged, dtype=bool)
        if spec.private:
            # Accept and divergence flags of a private sampler are functions of its noisy releases
            # and of data-independent randomness (docs/post_processing.md): covered by the report.
            # The clip fractions are counted on the raw data and stay apart, NOT private.
            released = ReleasedStatistics(accepted=accepted, diverged=diverged)
            diagnostics = NonPrivateDiagnostics(clip_fraction=clip_fraction, released=released)
        else:
            released = None
            diagnostics = NonPrivateDiagnostics(
                acceptance_rate=np.mean(accepted, axis=1, dtype=np.float64),
                clip_fraction=clip_fraction,
                divergences=np.sum(diverged, axis=1, dtype=np.int64),
            )
    return Result(
        samples=np.asarray(positions),
        privacy=report,
        diagnostics=diagnostics,
        algorithm=algorithm,
        params=prepared,
        model_name=model.name,
        param_names=model.param_names,
        secure=secret is not None,
        released=released,
        plan=run_plan,
    )


# ------------------------------------------------------------------------------ the run's kernel

def _run_kernel(spec, model: Model, data_arr: np.ndarray, prepared: dict, algorithm: str,
                mesh: Any = None):
    """The run's kernel builder and its data, as a ``DataKernel`` for the chain driver.

    The data are laid out here, once, from the host array: in blocks (``PreparedData``, with the
    gradient-dtype copy DP-HMC uses) for the full-data algorithms, as a device array for the
    subsampled ones; with ``mesh``, split over its devices (``shard_data``/``shard_rows``). The
    builder reads only the static layout, so the driver can build the kernel inside the compiled
    program on the traced data. The draws are those of ``spec.build(model, data_arr, prepared)``.
    """
    from .samplers._driver import DataKernel
    from .samplers._per_example import prepare_data
    from .samplers._sharding import shard_data, shard_rows
    from .samplers._spec import FULL

    full_data = spec.data_access == FULL
    layout = dict(model=model, block_size=prepared.get("block_size"),
                  grad_dtype=prepared.get("grad_dtype"))
    if mesh is None:
        # Laid out as the builder would (same block size, layout and gradient dtype).
        data = prepare_data(data_arr, **layout) if full_data else jnp.asarray(data_arr)
    elif full_data:
        data = shard_data(data_arr, mesh, **layout)
    else:
        # From the host array: each device receives only its own rows.
        data = shard_rows(data_arr, mesh)

    def build(d, noise=None):
        # The chain driver passes its noise source (the run's secret) in secure mode only.
        if noise is None:
            return spec.build(model, d, prepared)
        return spec.build(model, d, prepared, noise=noise)

    # The compiled programs are reused by later calls with the same algorithm, model object and
    # parameters on data of the same layout (dpmcmc._compile_cache): keyed on those, not on data.
    from ._compile_cache import kernel_cache_key

    return DataKernel(build, data, cache_key=kernel_cache_key(algorithm, spec.build, model, prepared))


# ------------------------------------------------------------------------------ secure mode

def _validate_secure(secure: Any):
    """``None`` (off), ``"os"`` (a secret from OS entropy) or the user's SecureKey."""
    if isinstance(secure, (bool, np.bool_)):
        return "os" if secure else None
    from .secure import SecureKey, resolve_secure_key

    if isinstance(secure, SecureKey):
        return resolve_secure_key(secure)  # checks it is a single 256-bit key
    raise TypeError(
        f"secure must be True, False or a dpmcmc.secure.SecureKey, got {type(secure).__name__}"
    )


# ------------------------------------------------------------------------------ checkpoints

def _validate_checkpoint_path(checkpoint: Any) -> Optional[str]:
    if checkpoint is None:
        return None
    if not isinstance(checkpoint, (str, os.PathLike)):
        raise TypeError(f"checkpoint must be a file path, got {type(checkpoint).__name__}")
    path = os.fspath(checkpoint)
    if not isinstance(path, str) or not path:
        raise ValueError(f"checkpoint must be a non-empty file path, got {checkpoint!r}")
    if os.path.isdir(path):
        raise ValueError(f"checkpoint must be a file path, got the directory {path!r}")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise ValueError(f"checkpoint: directory {directory!r} does not exist")
    return path


def _fingerprint(model, data_arr, algorithm, prepared, chains, epsilon, delta, iterations,
                 accountant, relation, theta0, secure) -> dict:
    return jsonable({
        "algorithm": algorithm,
        "params": prepared,
        "chains": chains,
        "data": data_digest(data_arr),
        "data_shape": list(data_arr.shape),
        "model_name": model.name,
        "model_dim": model.dim,
        "temperature": float(model.temperature),
        "epsilon": epsilon,
        "delta": delta,
        "iterations": iterations,
        "accountant": accountant,
        "relation": relation,
        "theta0": None if theta0 is None else (
            theta0 if isinstance(theta0, str) else data_digest(np.asarray(theta0, np.float64))),
        "secure": bool(secure),
    })


def _load_checkpoint(path: str, fingerprint: dict, model: Model, chains: int) -> dict:
    """Read ``path`` and check it belongs to this call; return what the run needs to resume."""
    from .accounting import PrivacyReport
    from .samplers._driver import RunProgress

    meta, arrays = read_checkpoint(path)
    try:
        stored = meta["fingerprint"]
        diff = sorted(k for k in set(stored) | set(fingerprint) if stored.get(k) != fingerprint.get(k))
        if diff:
            raise CheckpointError(
                f"checkpoint {path!r} belongs to a different run: {', '.join(diff)} differ from the "
                "call that wrote it; repeat that call's arguments to resume, or use another path"
            )
        n_state, n_info, done, planned = (int(meta[k]) for k in ("n_state", "n_info", "done", "planned"))
        key = jax.random.wrap_key_data(jnp.asarray(arrays["key"]), impl=meta["key_impl"])
        report = None if meta["report"] is None else PrivacyReport.from_json(meta["report"])
        theta0 = np.asarray(arrays["theta0"])
        if theta0.shape != (chains, model.dim) or not 0 <= done <= planned:
            raise ValueError("inconsistent shapes or counts")
        progress = RunProgress([arrays[f"state_{i}"] for i in range(n_state)], arrays["positions"],
                               [arrays[f"info_{i}"] for i in range(n_info)], done)
        secret = jnp.asarray(arrays["secret"]) if "secret" in arrays else None
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path!r} is corrupted or incomplete ({type(exc).__name__}: "
                              f"{exc})") from None
    return {"fingerprint": stored, "key": key, "secret": secret, "theta0": theta0, "planned": planned,
            "report": report, "progress": progress}


def _same_secret(name: str, given: Any, stored: Any, path: str):
    """The stored key, after checking a key given again is the same one."""
    if stored is None:
        raise CheckpointError(f"checkpoint {path!r} holds no {name} key")
    if given is None:
        return stored
    given_words = np.asarray(jax.random.key_data(given) if name == "key" else given.words)
    stored_words = np.asarray(jax.random.key_data(stored) if name == "key" else stored)
    if given_words.shape != stored_words.shape or not np.array_equal(given_words, stored_words):
        raise CheckpointError(
            f"checkpoint {path!r} belongs to a different run: {name} differs from the key it was "
            f"started with (pass the same {name}, or {'None' if name == 'key' else 'True'} to reuse "
            "the stored one)"
        )
    return stored


class _CheckpointWriter:
    """Writes the run's checkpoint (atomic, 0o600) at the start and after every chunk."""

    def __init__(self, path, fingerprint, key, secret, theta0, planned, report):
        self.path = path
        self.meta = {
            "fingerprint": fingerprint,
            "planned": int(planned),
            "key_impl": str(jax.random.key_impl(key)),
            "report": None if report is None else report.to_json(),
        }
        self.fixed = {"key": np.asarray(jax.random.key_data(key)), "theta0": np.asarray(theta0)}
        if secret is not None:
            self.fixed["secret"] = np.asarray(secret)

    def write_start(self, kernel, theta0):
        from .samplers._driver import RunProgress, _init_states

        state = _init_states(kernel, jnp.asarray(theta0, dtype=jnp.result_type(float)))
        # The infos' structure is known only after a step; an empty checkpoint stores none and
        # the driver rebuilds empty infos from the kernel when it resumes at iteration 0.
        self.write(RunProgress(state, np.zeros((theta0.shape[0], 0, theta0.shape[1])), None, 0))

    def write(self, prog):
        state = [np.asarray(a) for a in jax.tree.leaves(prog.state)]
        infos = [] if prog.infos is None else [np.asarray(a) for a in jax.tree.leaves(prog.infos)]
        arrays = dict(self.fixed)
        arrays["positions"] = np.asarray(prog.positions)
        arrays.update({f"state_{i}": a for i, a in enumerate(state)})
        arrays.update({f"info_{i}": a for i, a in enumerate(infos)})
        meta = dict(self.meta, done=int(prog.done), n_state=len(state), n_info=len(infos))
        write_checkpoint(self.path, meta, arrays)


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
    theta = jnp.asarray(theta0)
    lp = jax.vmap(model.log_prior)(theta)
    if not bool(jnp.all(jnp.isfinite(lp))):
        raise ValueError("theta0: the log-prior is not finite at the starting point of some chain")
    if data is None:
        return
    ll_ok = jax.vmap(lambda t: jnp.all(jnp.isfinite(model.loglik_per_example(t, jnp.asarray(data)))))(theta)
    if not bool(jnp.all(ll_ok)):
        raise ValueError(
            "theta0: the model's log-likelihood is not finite at the starting point of some chain "
            "for some record (non-private algorithm); choose another theta0 or fix the model"
        )


def _algorithm_list() -> str:
    # Built from the registry so that a new algorithm cannot be missing from the docs.
    from .samplers import ALGORITHMS
    from .samplers._spec import FULL

    lines = []
    for name, spec in ALGORITHMS.items():
        access = "full data" if spec.data_access == FULL else "minibatches"
        kind = "private" if spec.private else "NON-private baseline"
        lines.append(f'        - ``"{name}"``: {kind}, {access}')
    return "\n".join(lines)


if sample.__doc__:
    sample.__doc__ = sample.__doc__.replace("@ALGORITHM_LIST@", _algorithm_list())
