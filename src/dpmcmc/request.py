"""A request: one call of ``dpmcmc.sample``, ``dpmcmc.plan`` or ``dpmcmc.glm``, validated.

:meth:`Request.create` is the one definition of the options every entry point takes and of
their defaults; it checks each of them (naming the argument) without data, model or n. What
follows is the same for every entry point: one planner turns the request, n and the model's
dimension into a :class:`dpmcmc.Plan` (``dpmcmc._plan.make_plan``: public inputs only), the run
draws noise on the data (``dpmcmc.api.run``), and the draws are packaged into a ``Result``.
"""
from __future__ import annotations

import numbers
import types
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import numpy as np

__all__ = ["Request"]


@dataclass(frozen=True)
class Request:
    """What the user asked for, validated; immutable.

    Attributes
    ----------
    algorithm : str
        A name in ``dpmcmc.samplers.ALGORITHMS``, or ``"auto"`` (:mod:`dpmcmc.auto`: the
        planner picks the settings from public inputs).
    params : Mapping
        The algorithm's own parameters as given (``SPEC.prepare`` fills defaults at plan time,
        when n and the model are known).
    epsilon, delta : float or None
    chains : int
    iterations : int or None
    accountant : str or None
    relation : str
    theta0 : None, "private" or ndarray
        Starting points as given (their shape is checked against the model at plan time).
    init_share : float
    init_steps : int
    warmup : int or "auto"
    secure : None, dpmcmc._keys.OS_ENTROPY or dpmcmc.secure.SecureKey
        Secure mode: off, a secret to draw from OS entropy, or the user's secret.
    force : bool
        Run a plan that says it cannot give a usable posterior, or with δ ≥ 1/n.
    key : typed PRNG key or None
        The user's key (``None``: fresh OS entropy when the run starts). Secret.
    progress : bool
    checkpoint : str or None
    checkpoint_every : int or None
    mesh : jax.sharding.Mesh or None
    ledger : dpmcmc.Ledger or None
    """

    algorithm: str
    params: Mapping = field(default_factory=dict)
    epsilon: Optional[float] = None
    delta: Optional[float] = None
    chains: int = 4
    iterations: Optional[int] = None
    accountant: Optional[str] = None
    relation: str = "substitute"
    theta0: Any = field(default=None, repr=False)
    init_share: float = 0.1
    init_steps: int = 30
    warmup: Any = 0
    secure: Any = field(default=None, repr=False)
    force: bool = False
    key: Any = field(default=None, repr=False)
    progress: bool = True
    checkpoint: Optional[str] = None
    checkpoint_every: Optional[int] = None
    mesh: Any = field(default=None, repr=False)
    ledger: Any = field(default=None, repr=False)

    @classmethod
    def create(cls, algorithm: str = "dp-hmc", *, epsilon: Optional[float] = None,
               delta: Optional[float] = None, chains: int = 4, key: Any = None,
               theta0: Any = None, iterations: Optional[int] = None,
               accountant: Optional[str] = None, relation: str = "substitute",
               progress: bool = True, secure: Any = False, force: bool = False,
               checkpoint: Any = None, checkpoint_every: Optional[int] = None, mesh: Any = None,
               ledger: Any = None, init_share: float = 0.1, init_steps: int = 30,
               warmup: Any = 0, **params: Any) -> "Request":
        """Validate every option that needs no data, naming the argument on error.

        The options are :func:`dpmcmc.sample`'s (its docstring says what each means); the
        remaining keyword arguments are the algorithm's parameters.

        Raises
        ------
        ValueError, TypeError
            Naming the argument.
        """
        from .runtime.checkpoint import validate_path
        from ._keys import resolve_key
        from .accounting._checks import check_int, check_positive, check_probability
        from .ledger import open_ledger
        from .samplers import ALGORITHMS

        from .auto import AUTO, AUTO_CARD, check_request

        if algorithm == AUTO:
            # The rule plans these itself (dpmcmc.auto): refused by name when given.
            check_request(dict(iterations=iterations, accountant=accountant, relation=relation,
                               theta0=theta0, checkpoint=checkpoint,
                               checkpoint_every=checkpoint_every, mesh=mesh, warmup=warmup,
                               init_share=init_share, init_steps=init_steps), params)
        elif not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {sorted([*ALGORITHMS, AUTO])}, got "
                             f"{algorithm!r}")
        spec = ALGORITHMS[AUTO_CARD if algorithm == AUTO else algorithm]
        chains = check_int("chains", chains, minimum=1)
        for name, value in (("progress", progress), ("force", force)):
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        if epsilon is not None:
            epsilon = check_positive("epsilon", epsilon)
        if delta is not None:
            delta = check_probability("delta", delta)
        if iterations is not None:
            iterations = check_int("iterations", iterations, minimum=1)
        secure = _secure(secure)
        checkpoint = validate_path(checkpoint)
        if checkpoint_every is not None:
            if checkpoint is None:
                raise ValueError("checkpoint_every needs checkpoint (a file path)")
            checkpoint_every = check_int("checkpoint_every", checkpoint_every, minimum=1)
        ledger = open_ledger(ledger)
        if ledger is not None and not spec.private:
            raise ValueError(f"ledger: algorithm {algorithm!r} is not private; a ledger records "
                             "private runs only")
        theta0 = _theta0(theta0)
        if isinstance(init_share, bool) or not isinstance(init_share, numbers.Real) \
                or not 0.0 < init_share < 1.0:
            raise ValueError(f"init_share must lie in (0, 1), got {init_share!r}")
        init_steps = check_int("init_steps", init_steps, minimum=1)
        warmup = _warmup(warmup, spec)
        if mesh is not None:
            from .samplers.registry import check_mesh

            check_mesh(mesh, algorithm)
        return cls(algorithm=algorithm, params=types.MappingProxyType(dict(params)),
                   epsilon=epsilon, delta=delta, chains=chains, iterations=iterations,
                   accountant=accountant, relation=relation, theta0=theta0,
                   init_share=float(init_share), init_steps=init_steps, warmup=warmup,
                   secure=secure, force=bool(force), key=None if key is None else resolve_key(key),
                   progress=bool(progress), checkpoint=checkpoint,
                   checkpoint_every=checkpoint_every, mesh=mesh, ledger=ledger)

    @property
    def spec(self):
        """The algorithm's card (``dpmcmc.samplers.ALGORITHMS[algorithm]``; for ``"auto"`` the
        card of the chain it runs, DP-SGLD's, :data:`dpmcmc.auto.AUTO_CARD`)."""
        from .auto import AUTO, AUTO_CARD
        from .samplers import ALGORITHMS

        return ALGORITHMS[AUTO_CARD if self.algorithm == AUTO else self.algorithm]

    @property
    def private_start_asked(self) -> bool:
        """``theta0="private"``."""
        return isinstance(self.theta0, str)

    @property
    def start_given(self) -> bool:
        """Starting points the user passes."""
        return isinstance(self.theta0, np.ndarray)


def _secure(secure: Any):
    """``None`` (off), :data:`~dpmcmc._keys.OS_ENTROPY` (a secret to draw from OS entropy) or
    the user's SecureKey."""
    from ._keys import OS_ENTROPY

    if isinstance(secure, (bool, np.bool_)):
        return OS_ENTROPY if secure else None
    from .secure import SecureKey, resolve_secure_key

    if isinstance(secure, SecureKey):
        return resolve_secure_key(secure)  # checks it is a single 256-bit key
    raise TypeError(
        f"secure must be True, False or a dpmcmc.secure.SecureKey, got {type(secure).__name__}")


def _theta0(theta0: Any):
    if theta0 is None:
        return None
    if isinstance(theta0, str):
        if theta0 != "private":
            raise ValueError(f"theta0 must be an array of starting points or 'private', got {theta0!r}")
        return theta0
    try:
        arr = np.array(theta0, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"theta0 must be a real array of starting points: {exc}") from None
    if not np.all(np.isfinite(arr)):
        raise ValueError("theta0 contains NaN or inf")
    arr.setflags(write=False)
    return arr


def _warmup(warmup: Any, spec):
    from .accounting._checks import check_int
    from .samplers import ALGORITHMS
    from .kernels.warmup import MIN_DIAGONAL_WARMUP

    if not (isinstance(warmup, str) and warmup == "auto"):
        warmup = check_int("warmup", warmup, minimum=0)
    if warmup and spec.adaptation is None:
        raise ValueError(f"warmup: {spec.name!r} has nothing to adapt; warmup applies to "
                         f"{sorted(k for k, v in ALGORITHMS.items() if v.adaptation)}")
    # Without an accept step only the preconditioner is adapted, from ≥ MIN_DIAGONAL_WARMUP draws.
    if (warmup and warmup != "auto" and spec.adaptation.target is None
            and warmup < MIN_DIAGONAL_WARMUP):
        raise ValueError(f"warmup: {spec.name!r} has no accept step to adapt a step size to; its "
                         f"warm-up sets a preconditioner from the warm-up draws and needs warmup "
                         f">= {MIN_DIAGONAL_WARMUP}, got {warmup}")
    return warmup
