"""The model abstraction: a per-example log-likelihood and a log-prior in JAX."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional

import jax
import jax.numpy as jnp
import numpy as np

Array = Any
LogLikelihood = Callable[[Array, Array], Array]
LogPrior = Callable[[Array], Array]

__all__ = ["Model", "check_model", "check_param_names"]


def check_param_names(names: Any, dim: int, argument: str = "param_names") -> tuple:
    """Return ``names`` as a tuple of ``dim`` unique non-empty strings, or raise naming ``argument``."""
    if isinstance(names, str) or not isinstance(names, (tuple, list)):
        raise TypeError(f"{argument} must be a tuple of strings, got {type(names).__name__}")
    if len(names) != dim:
        raise ValueError(f"{argument} must have one name per parameter ({dim}), got {len(names)}")
    bad = [nm for nm in names if not isinstance(nm, str) or not nm]
    if bad:
        raise TypeError(f"{argument} must hold non-empty strings, got {bad[0]!r}")
    dup = sorted({nm for nm in names if list(names).count(nm) > 1})
    if dup:
        raise ValueError(f"{argument} must be unique, repeated: {', '.join(map(repr, dup))}")
    return tuple(names)


@dataclass(frozen=True)
class Model:
    """A Bayesian model defined by a per-example log-likelihood and a log-prior.

    Parameters
    ----------
    log_likelihood : callable
        ``log_likelihood(theta, x) -> scalar``: the log-likelihood of ONE record ``x`` (one row
        of the data array) at the flat parameter vector ``theta`` of shape ``(dim,)``. Written in
        JAX; it is differentiated and vectorised by the samplers. It must not include the
        tempering factor: samplers apply ``temperature`` themselves.
    log_prior : callable
        ``log_prior(theta) -> scalar``. Data-independent.
    dim : int
        Length of ``theta``.
    temperature : float, default 1.0
        Tempering factor T in (0, 1]: the posterior is ``prior(θ) · Π_i p(x_i | θ)^T``
        (the papers use T = n0 / n).
    name : str
        A label used in reports and plots.
    sample_prior : callable, optional
        ``sample_prior(key, shape) -> array (*shape, dim)``: draws from the prior; used for the
        data-independent default starting point of the chains.
    exact_posterior : callable, optional
        ``exact_posterior(key, data, num_draws) -> array (num_draws, dim)``: exact draws from the
        (tempered) posterior given ``data``, where one is known. Evaluation only: never used inside
        a private run.
    log_likelihood_batch : callable, optional
        ``log_likelihood_batch(theta, data) -> (n,)``: a vectorised version of
        ``log_likelihood`` over all rows, for speed. Must agree with
        ``vmap(log_likelihood, (None, 0))``; used only when given.
    grad_log_likelihood_batch : callable, optional
        ``grad_log_likelihood_batch(theta, data) -> (n, dim)``: vectorised per-example gradients
        of ``log_likelihood`` with respect to ``theta``; used only when given.
    record_shape : tuple of int, optional
        The shape of ONE record (one row of the data array), e.g. ``(d,)`` for a d-vector per
        person or ``()`` for one number per person. When given, ``dpmcmc.sample`` refuses data
        whose rows have another shape: data of shape ``(n·d,)`` given to a model of ``(d,)``
        records would otherwise be read as n·d records, and the guarantee would protect one
        entry instead of one person. ``None`` (default): any row shape the functions accept
        (see :func:`check_model`).
    metadata : dict
        Free-form extras (hyperparameters, data generators); not compared, never used in a run.
    param_names : tuple of str, optional
        One name per component of ``theta`` (length ``dim``, unique, non-empty strings), e.g.
        ``("intercept", "balance", "student[Yes]")``. When a :class:`~dpmcmc.Result` carries
        them, its ArviZ export and saved file hold one posterior variable per name instead of
        one ``theta`` vector. ``None`` (default): components are unnamed.

    Notes
    -----
    :func:`check_model` checks this contract on the data's public shape and dtype, without
    evaluating anything on data values; ``dpmcmc.sample`` calls it before anything else runs.
    """

    log_likelihood: LogLikelihood
    log_prior: LogPrior
    dim: int
    temperature: float = 1.0
    name: str = "custom"
    sample_prior: Optional[Callable[[Array, tuple], Array]] = None
    exact_posterior: Optional[Callable[[Array, Array, int], Array]] = None
    log_likelihood_batch: Optional[Callable[[Array, Array], Array]] = None
    grad_log_likelihood_batch: Optional[Callable[[Array, Array], Array]] = None
    metadata: dict = field(default_factory=dict, compare=False)
    record_shape: Optional[tuple] = None
    param_names: Optional[tuple] = None

    def __post_init__(self):
        if not callable(self.log_likelihood):
            raise TypeError("log_likelihood must be callable: log_likelihood(theta, x) -> scalar")
        if not callable(self.log_prior):
            raise TypeError("log_prior must be callable: log_prior(theta) -> scalar")
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"dim must be a positive integer, got {self.dim!r}")
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (0.0 < float(t) <= 1.0):
            raise ValueError(f"temperature must lie in (0, 1], got {t!r}")
        for name in ("sample_prior", "exact_posterior", "log_likelihood_batch", "grad_log_likelihood_batch"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise TypeError(f"{name} must be callable or None, got {type(getattr(self, name)).__name__}")
        if self.record_shape is not None:
            rs = self.record_shape
            if (not isinstance(rs, (tuple, list))
                    or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in rs)):
                raise ValueError(f"record_shape must be None or a tuple of positive integers, got {rs!r}")
            # Frozen dataclass: normalise a list (or NumPy ints) to a tuple of ints.
            object.__setattr__(self, "record_shape", tuple(int(k) for k in rs))
        if self.param_names is not None:
            object.__setattr__(self, "param_names", check_param_names(self.param_names, self.dim))

    # Vectorised views used by the samplers. They fall back to autodiff + vmap when the model
    # supplies nothing, so a user model needs only the per-example function.
    def loglik_per_example(self, theta: Array, data: Array) -> Array:
        """Per-example log-likelihoods ``(n,)`` at ``theta`` (untempered)."""
        if self.log_likelihood_batch is not None:
            return self.log_likelihood_batch(theta, data)
        return jax.vmap(self.log_likelihood, in_axes=(None, 0))(theta, data)

    def grad_per_example(self, theta: Array, data: Array) -> Array:
        """Per-example gradients ``(n, dim)`` of the untempered log-likelihood at ``theta``."""
        if self.grad_log_likelihood_batch is not None:
            return self.grad_log_likelihood_batch(theta, data)
        return jax.vmap(jax.grad(self.log_likelihood), in_axes=(None, 0))(theta, data)

    def log_posterior(self, theta: Array, data: Array) -> Array:
        """Unnormalised (tempered) log-posterior; non-private, for baselines and tests."""
        return self.log_prior(theta) + self.temperature * jnp.sum(self.loglik_per_example(theta, data))


# ------------------------------------------------------------------------- the model contract

def _describe(sd: Any) -> str:
    return f"{sd.dtype}{list(sd.shape)}" if hasattr(sd, "shape") else type(sd).__name__


def _abstract(fn: Callable, args: tuple, what: str, argument: str, inputs: str) -> Any:
    """``jax.eval_shape(fn, *args)``; an error inside becomes a ValueError naming ``argument``.

    ``eval_shape`` traces ``fn`` on shapes and dtypes only: no value of the data is read.
    """
    try:
        return jax.eval_shape(fn, *args)
    except Exception as exc:  # IndexError, TypeError from dot_general, tracer errors, ...
        raise ValueError(
            f"{argument}: {what} cannot be evaluated on {inputs}: {type(exc).__name__}: {exc}"
        ) from exc


def _expect(out: Any, shape: tuple, what: str, inputs: str, argument: str = "model") -> None:
    if not isinstance(out, jax.ShapeDtypeStruct):
        raise TypeError(f"{argument}: {what} must return one array of shape {shape}, got "
                        f"{type(out).__name__} on {inputs}")
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(f"{argument}: {what} must return real floating values, got dtype "
                        f"{out.dtype} on {inputs}")
    if tuple(out.shape) != tuple(shape):
        extra = ""
        if argument == "log_likelihood" and shape == () and out.shape:
            extra = (" (a per-record log-likelihood must be ONE number: each output component "
                     "would be clipped to the full bound and summed, multiplying the sensitivity)")
        raise ValueError(f"{argument}: {what} must return shape {shape}, got {tuple(out.shape)} "
                         f"on {inputs}{extra}")


def _check_pool_safe(model: "Model", theta, x, rows) -> None:
    """Refuse a model whose functions would hand XLA's CPU thread pool a batched LAPACK call
    or an FFT once the samplers apply them to many records and chains at once: on CPU such a
    call can wait for work queued behind itself and hang the run (issue 33 §2). Traced on
    abstract values, two records at a time; the fix is one matrix per call,
    :mod:`dpmcmc.linalg`. Accelerators have no such pool: checked on CPU only."""
    from dpmcmc import linalg

    if jax.default_backend() != "cpu":
        return
    two = jax.ShapeDtypeStruct((2, *x.shape), x.dtype)
    programs = [("log_likelihood", jax.vmap(model.log_likelihood, (None, 0)), (theta, two)),
                ("log_prior", jax.vmap(model.log_prior),
                 (jax.ShapeDtypeStruct((2, *theta.shape), theta.dtype),))]
    if model.log_likelihood_batch is not None:
        programs.append(("log_likelihood_batch", model.log_likelihood_batch, (theta, rows)))
    if model.grad_log_likelihood_batch is not None:
        programs.append(("grad_log_likelihood_batch", model.grad_log_likelihood_batch,
                         (theta, rows)))
    for name, fn, args in programs:
        try:
            bad = linalg.pool_blocking_operations(jax.make_jaxpr(fn)(*args))
        except Exception:  # noqa: BLE001 - the shape checks report trace errors, naming them
            continue
        if bad:
            raise ValueError(
                f"{name}: uses {', '.join(sorted(set(bad)))} on several records at once, which "
                "on CPU can deadlock XLA's thread pool (a batched LAPACK call waits for work "
                "queued behind itself); use dpmcmc.linalg (cholesky, cho_solve, "
                "solve_triangular, solve, inv, eigh: one matrix per call) rather than the "
                "linear algebra of jax.numpy or jax.scipy, and no FFT")


def check_model(model: Model, data_shape: tuple, dtype: Any, *, gradients: bool = False,
                grad_method: str = "auto", theta_dtype: Any = None) -> None:
    """Check the model contract on the data's public shape and dtype; raise naming the culprit.

    Everything here is traced with :func:`jax.eval_shape` on abstract values, so it reads no
    data value and draws no noise: a refusal depends only on the model and on ``data.shape`` and
    ``data.dtype``, which are public.

    Parameters
    ----------
    model : Model
    data_shape : tuple of int
        Shape of the data array, ``(n, *record_shape)``.
    dtype : dtype
        Floating dtype the data have when they reach the model.
    gradients : bool, default False
        Also check that ``log_likelihood`` can be differentiated with respect to ``theta``
        (for samplers that use gradients), by the route ``grad_method`` names.
    grad_method : {"auto", "reverse", "forward", "vmap"}, default "auto"
        How the sampler differentiates: ``"auto"`` uses ``grad_log_likelihood_batch`` when the
        model supplies one (then only its shape is checked), else reverse mode.
    theta_dtype : dtype, optional
        Floating dtype of ``theta``; default JAX's default float.

    Raises
    ------
    ValueError
        ``data`` whose rows do not have the model's ``record_shape``; a function that raises on
        ``theta`` of shape ``(dim,)`` and one record of shape ``data_shape[1:]`` (the message names
        ``data``, the function and the shapes, and chains the original error); a function whose
        output has the wrong shape: ``log_likelihood`` and ``log_prior`` must be scalars,
        ``log_likelihood_batch`` ``(n,)``, ``grad_log_likelihood_batch`` and the gradient of
        ``log_likelihood`` ``(dim,)`` per record.
    TypeError
        A function whose output is not a single real floating array (integer, boolean, complex,
        tuple).
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a dpmcmc.Model, got {type(model).__name__}")
    data_shape = tuple(int(k) for k in data_shape)
    if len(data_shape) < 1 or data_shape[0] < 1:
        raise ValueError(f"data must have shape (n, ...) with n >= 1, got {data_shape}")
    n, record = data_shape[0], data_shape[1:]
    if model.record_shape is not None and record != model.record_shape:
        hint = ""
        size = math.prod(model.record_shape)
        if len(data_shape) == 1 and model.record_shape != () and data_shape[0] % size == 0:
            hint = (f"; if these are {data_shape[0] // size} records flattened, pass "
                    f"data.reshape(-1, {', '.join(map(str, model.record_shape))})")
        raise ValueError(
            f"data: model {model.name!r} takes records of shape {model.record_shape} (one row per "
            f"person), but data of shape {data_shape} has rows of shape {record}{hint}"
        )
    dtype = jnp.dtype(dtype)
    tdt = jnp.dtype(theta_dtype) if theta_dtype is not None else jnp.result_type(float)
    # What follows traces the model's functions on abstract values (0.1–0.5 s a call): a model
    # that passed on these shapes and dtypes passes again, so the pass is remembered under the
    # key the chain programs use for the model (what its functions compute, never the data).
    from ..runtime.compile_cache import CHECKED

    passed_key = _passed_key(model, data_shape, dtype, tdt, gradients, grad_method)
    if passed_key is not None and CHECKED.get(passed_key):
        return
    theta = jax.ShapeDtypeStruct((model.dim,), tdt)
    x = jax.ShapeDtypeStruct(record, dtype)
    rows = jax.ShapeDtypeStruct(data_shape, dtype)
    at_theta = f"theta {_describe(theta)}"
    at_record = f"{at_theta} and one record x {_describe(x)} (data shape {data_shape})"
    at_data = f"{at_theta} and data {_describe(rows)}"

    # The prior involves no data: an error in it names log_prior and theta, not data.
    _expect(_abstract(model.log_prior, (theta,), "log_prior(theta)", "log_prior", at_theta),
            (), "log_prior(theta)", at_theta, "log_prior")
    _expect(_abstract(model.log_likelihood, (theta, x), "log_likelihood(theta, x)", "data", at_record),
            (), "log_likelihood(theta, x)", at_record, "log_likelihood")
    if model.log_likelihood_batch is not None:
        _expect(_abstract(model.log_likelihood_batch, (theta, rows), "log_likelihood_batch(theta, data)",
                          "data", at_data),
                (n,), "log_likelihood_batch(theta, data)", at_data, "log_likelihood_batch")
    if model.grad_log_likelihood_batch is not None:
        _expect(_abstract(model.grad_log_likelihood_batch, (theta, rows),
                          "grad_log_likelihood_batch(theta, data)", "data", at_data),
                (n, model.dim), "grad_log_likelihood_batch(theta, data)", at_data,
                "grad_log_likelihood_batch")
    _check_pool_safe(model, theta, x, rows)
    if gradients and not (grad_method == "auto" and model.grad_log_likelihood_batch is not None):
        if grad_method == "forward":
            grad, what = jax.jacfwd(model.log_likelihood), "jax.jacfwd(log_likelihood)(theta, x)"
        else:
            grad, what = jax.grad(model.log_likelihood), "jax.grad(log_likelihood)(theta, x)"
        _expect(_abstract(grad, (theta, x), what, "log_likelihood", at_record),
                (model.dim,), what, at_record, "log_likelihood")
    if passed_key is not None:
        CHECKED.put(passed_key, True)


def _passed_key(model: Model, data_shape: tuple, dtype: Any, theta_dtype: Any, gradients: bool,
                grad_method: str) -> Optional[Hashable]:
    """The key of one check_model pass, or None where the model cannot be keyed (then every
    call checks afresh)."""
    from ..runtime.compile_cache import model_key

    try:
        return ("check_model", model_key(model), data_shape, str(dtype), str(theta_dtype),
                bool(gradients), grad_method, jax.default_backend())
    except TypeError:
        return None
