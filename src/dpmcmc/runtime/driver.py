"""The chain driver: every sampler runs through :func:`run_chains`.

Iterations are a ``lax.scan`` inside ``jit``, chains a ``vmap``; the Python loop runs over
chunks of iterations only, so a progress bar can be updated between compiled chunks. The key of
iteration ``t`` of chain ``c`` is ``fold_in(split(key, chains)[c], t)``: the draws do not depend
on the chunk size.

Two additions serve :func:`dpmcmc.sample`: a run can start from a saved point
(``resume``, a :class:`RunProgress`) and report its progress after every compiled chunk
(``on_chunk``), which is how checkpointing works; since the draws depend only on the key, the
iteration index and the carried state, a resumed run yields exactly the draws of an uninterrupted
one. In secure mode (``secure_secret``) the privacy noise of every step is drawn from ChaCha20
keyed by the secret (see :mod:`dpmcmc.kernels.mechanisms`): the driver builds each step's
kernel with a :class:`~dpmcmc.kernels.mechanisms.NoiseSource` holding the secret (a traced
argument of the compiled run) and the step's (chain, iteration). Nothing is read from
process-global state, so runs traced at the same time in different threads stay apart.

A run is traced and executed with 64-bit JAX types enabled (``jax.enable_x64``, scoped to the
call and to its thread: the user's setting is left as it was), so the privacy noise is always
float64.

Data as an argument
-------------------
A kernel takes its data as an argument (``init(theta, data)``, ``step(key, state, data)``;
see :class:`~dpmcmc.kernels.types.Kernel`), and :func:`run_chains` passes ``data=`` to the
compiled chunk program (and to the compiled state initialisation) as a parameter: the data
(a :class:`~dpmcmc.records.layout.PreparedData`, a
:class:`~dpmcmc.records.sharding.ShardedRows` or a raw array, as the algorithm's
``layout`` made them) reach the program sharded as they were placed, and are never a constant
copied into it (``jax.jit`` embeds every concrete array a traced function closes over as a
constant of full size: twice the memory, a compile time that grows with ``n`` and, under a
device mesh, all rows on every device).

Chunk-local caches
------------------
A kernel with a :class:`~dpmcmc.kernels.types.ChunkCache` (``Kernel.cached``: DP penalty's
per-record log-likelihoods at θ) is stepped through it: each compiled chunk builds the cache
from the states when it starts, carries it through its ``lax.scan`` beside them and drops it at
its end. The cache is computed from the raw data and is not private, so it is never an output of
the program: the states, draws and infos a run returns and checkpoints never hold it. A kernel's
cached step gives the draws of its plain step bit for bit, so the draws still depend only on the
key, the iteration and the carried state (not on where chunks begin).

Secure mode
-----------
The driver also accepts a kernel *builder* ``build(noise) -> Kernel`` (a private algorithm's
builder with everything but its noise source fixed). Without a secret it runs ``build(None)``
(``jax.random`` noise); with ``secure_secret`` it builds the step of chain ``c`` at iteration
``t`` inside the compiled scan body, ``build(NoiseSource(secret).at(c, t)).step(key, state,
data)``, so the secret is a traced argument of the program and each step draws from its own
position. A ready ``Kernel`` cannot carry the secret and is refused in secure mode.

Compiled once
-------------
A run given a ``cache_key`` (``dpmcmc.sample`` gives one: algorithm, model key, prepared
parameters, warm-up) has its jitted functions kept in :data:`dpmcmc.runtime.compile_cache.PROGRAMS`,
keyed also on the chunk length, secure mode and the shapes, dtypes, shardings and static layout
of the state, keys and data (the chain count is in the keys' shape): a repeated call with new
data of the same shape neither traces nor compiles again. Two runs with equal keys must run the
same kernel. Such a run also turns on JAX's persistent compilation cache
(:func:`dpmcmc.runtime.compile_cache.ensure_persistent_cache`), so a new process loads the program
instead of compiling it; the program holds no data, key or secret, which are all arguments. The
chunk program is compiled before the first chunk runs, so the progress output shows a
"compiling" phase apart from the sampling bar.
"""
from __future__ import annotations

import inspect
import numbers
import time
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpmcmc.runtime import compile_cache as _compile_cache
from dpmcmc.kernels.mechanisms import NoiseSource
from dpmcmc.kernels.types import Kernel

Array = Any

__all__ = ["run_chains", "init_states", "compiled_chunk", "RunProgress", "DEFAULT_PROGRESS_CHUNKS"]


class RunProgress(NamedTuple):
    """Where a run stands after ``done`` iterations per chain.

    Attributes
    ----------
    state : pytree
        The kernel state of every chain (leading axis ``chains``), as returned by the last step.
        For ``resume``, either that pytree or the list of its leaves (``jax.tree.leaves`` order).
    positions : array (chains, done, dim)
        The draws so far.
    infos : Info pytree or list of leaves
        Per-iteration diagnostics so far, leading axes ``(chains, done)``. Their clip fractions
        are NOT private (see :class:`~dpmcmc.kernels.types.Info` for which fields are).
    done : int
        Iterations completed per chain.
    """

    state: Any
    positions: Any
    infos: Any
    done: int

# With a progress bar the run is cut into about this many chunks.
DEFAULT_PROGRESS_CHUNKS = 20


class _Build:
    """``build(noise) -> Kernel`` of a ``Kernel`` (which ignores ``noise``) or of a builder,
    checked; ``cached`` records whether the kernel has a :class:`ChunkCache` (None until a
    kernel has been built).

    Builders are called inside traces only (a builder may run JAX operations, which a trace
    records, so a kernel built in one trace must not be used in another); what is kept between
    calls is that Python bool of the kernel's structure, never the kernel.
    """

    def __init__(self, kernel, what: str):
        if not isinstance(kernel, Kernel) and not callable(kernel):
            raise TypeError(f"{what} must be a Kernel(init, step) or a callable build(noise) -> "
                            f"Kernel, got {type(kernel).__name__}")
        self.kernel, self.what = kernel, what
        self.cached = None if not isinstance(kernel, Kernel) else kernel.cached is not None

    def __call__(self, noise=None) -> Kernel:
        if isinstance(self.kernel, Kernel):
            return self.kernel
        built = self.kernel(noise)
        if not isinstance(built, Kernel):
            raise TypeError(f"{self.what}: build(noise) must return a Kernel(init, step), got "
                            f"{type(built).__name__}")
        if self.cached is None:
            self.cached = built.cached is not None
        return built

    def has_cache(self) -> bool:
        """Whether the kernel has a chunk-local cache (built once in a throwaway trace if no
        kernel has been built yet)."""
        if self.cached is None:
            jax.make_jaxpr(lambda: (self(None), jnp.zeros(()))[1])()
        return self.cached


def _builder(kernel, what: str = "kernel") -> _Build:
    """``build(noise) -> Kernel`` of a ``Kernel`` (which ignores ``noise``) or of a builder."""
    return kernel if isinstance(kernel, _Build) else _Build(kernel, what)


def _check_cache_key(cache_key) -> None:
    if cache_key is not None:
        try:
            hash(cache_key)
        except TypeError:
            raise TypeError(f"cache_key must be hashable, got {type(cache_key).__name__}") from None


def _replicated_sharding(data):
    """A replicated sharding over the devices of data placed on several devices, else None.

    The chunk program's output state is replicated over the data's mesh; the first chunk must
    receive its state placed the same way, or the second chunk would compile the program again.
    """
    from jax.sharding import NamedSharding, PartitionSpec

    for leaf in jax.tree.leaves(data):
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, NamedSharding) and len(sharding.device_set) > 1:
            return NamedSharding(sharding.mesh, PartitionSpec())
    return None


def init_states(kernel: Any, theta0: Array, data: Any = None, *, cache_key: Any = None):
    """The initial kernel states of a run: ``vmap(init)`` over the rows of ``theta0``.

    Compiled with the data as an argument (through the program cache when a ``cache_key`` is
    given), under 64-bit JAX types like :func:`run_chains`: the states are exactly those a run
    starts from, and what a checkpoint stores for a run not yet begun.

    Parameters
    ----------
    kernel : Kernel or callable ``build(noise) -> Kernel``
    theta0 : array (chains, dim)
        Starting points, one row per chain.
    data : pytree, optional
        The kernel's data (as for :func:`run_chains`).
    cache_key : hashable, optional
        As for :func:`run_chains`.

    Returns
    -------
    pytree
        The kernel state of every chain (leading axis ``chains``).
    """
    _check_cache_key(cache_key)
    build = _builder(kernel)
    with jax.enable_x64(True):
        theta0 = jnp.asarray(theta0, dtype=jnp.result_type(float))
        init = None if cache_key is None else _compile_cache.PROGRAMS.get(("init", cache_key))
        if init is None:
            # The initial states draw no privacy noise: the kernel of the default source.
            init = jax.jit(lambda d, th: jax.vmap(build(None).init, in_axes=(0, None))(th, d))
            if cache_key is not None:
                # jit itself keys its executables on the arguments' shapes and dtypes.
                _compile_cache.PROGRAMS.put(("init", cache_key), init)
        return init(data, theta0)


class _Chunk:
    """A run's chunk program: the jitted function, its Info shape, the argument signatures
    already compiled."""

    __slots__ = ("run", "info_shape", "compiled")

    def __init__(self, run, info_shape):
        self.run = run
        self.info_shape = info_shape
        self.compiled = set()


def _chunk_program(build, length: int, state, chain_keys, secure: bool, data,
                   cache_key) -> _Chunk:
    """The chunk program of a run, from :data:`PROGRAMS` when the run has a cache key.

    The key holds everything the traced function depends on: the run's ``cache_key``
    (algorithm, model, parameters), the chunk length, secure mode, and the static signatures of
    the state, the chain keys and the data (the chain count is in the keys' shape). Never the
    values.
    """
    key = None
    if cache_key is not None:
        key = ("chunk", cache_key, int(length), bool(secure), _compile_cache.signature(state),
               _compile_cache.signature(chain_keys), _compile_cache.signature(data))
        hit = _compile_cache.PROGRAMS.get(key)
        if hit is not None:
            return hit
    chunk = _Chunk(*_make_chunk_runner(build, length, state, chain_keys, secure, data))
    if key is not None:
        _compile_cache.PROGRAMS.put(key, chunk)
    return chunk


def _make_chunk_runner(build, length: int, state, chain_keys, secure: bool, data):
    """One compiled function for every chunk of a run: ``length`` static, the bounds dynamic.

    Iterations ``t >= end`` (the tail of the last chunk) are skipped by a ``lax.cond`` whose
    predicate is shared by all chains, so XLA executes no step for them; their outputs are
    sliced away by the caller. A run therefore compiles exactly once, whatever its length.

    ``build`` is ``build(noise) -> Kernel``. The compiled function is ``run(state, chain_keys,
    start, end, secret, data)``: the data are a parameter of the program, with the sharding they
    were placed with (``data`` here gives only their shapes, for the Info shape).

    With ``secure`` the compiled function takes the secret ChaCha20 key as an argument
    (never a constant of the program), and each step's kernel is built (at trace time, inside
    the scan body) with ``noise=NoiseSource(secret).at(chain, iteration)``.
    Returns ``(run, info_shape)``.
    """
    chains = chain_keys.shape[0]
    chain_ids = jnp.arange(chains, dtype=jnp.uint32)
    # A kernel with a chunk-local cache (ChunkCache) is stepped through it: the scan carries
    # (state, cache), the cache built from the state when the chunk starts and dropped when it
    # ends, so it never leaves the program (no output, checkpoint or Info holds it). Whether a
    # kernel has one is part of its structure, the same for every noise source.
    cached = build.has_cache()

    def one_step(kernel, k, carry, d):
        if not cached:
            return kernel.step(k, carry, d)
        s, cache, info = kernel.cached.step(k, carry[0], carry[1], d)
        return (s, cache), info

    def stepper(secret):
        if secure:
            source = NoiseSource(secret)

            def step_one(k, carry, c, t, d):
                # The kernel of this chain and iteration carries its own noise source.
                return one_step(build(source.at(c, t)), k, carry, d)

            def step_all(keys, carry, t, d):
                return jax.vmap(step_one, in_axes=(0, 0, 0, None, None))(keys, carry, chain_ids,
                                                                         t, d)
        else:
            kernel = build(None)

            def step_all(keys, carry, t, d):
                return jax.vmap(lambda k, c, d: one_step(kernel, k, c, d),
                                in_axes=(0, 0, None))(keys, carry, d)
        return step_all

    def start_carry(s, d):
        if not cached:
            return s
        # The cache reads the data exactly as the steps do; it draws no noise.
        return s, jax.vmap(build(None).cached.init, in_axes=(0, None))(s, d)

    def position(carry):
        return (carry[0] if cached else carry).position

    def iteration_keys(keys, t):
        return jax.vmap(lambda k: jax.random.fold_in(k, t))(keys)

    # One jitted step of all chains, traced once: for the Info shape below and, from jit's trace
    # cache (same function, same argument types), again inside the scan. The second trace cost
    # ~0.1 s per chain program (0.14 s for DP-HMC on the banana), ~10 s over the test suite; the
    # nested call is inlined when the run is compiled (the draws are bit for bit the same).
    step_all = jax.jit(lambda keys, c, t, d, secret: stepper(secret)(keys, c, t, d))
    info_shape = jax.eval_shape(
        lambda k, s, d, secret: step_all(iteration_keys(k, jnp.uint32(0)), start_carry(s, d),
                                         jnp.uint32(0), d, secret)[1],
        chain_keys, state, data, jax.ShapeDtypeStruct((8,), jnp.uint32))

    def run(st, keys, start, end, secret, d):
        def body(c, t):
            def do(c):
                c, info = step_all(iteration_keys(keys, t), c, t, d, secret)
                return c, (position(c), info)

            def skip(c):
                zeros = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), info_shape)
                return c, (position(c), zeros)

            return jax.lax.cond(t < end, do, skip, c)

        ts = start + jnp.arange(length, dtype=jnp.uint32)
        carry, (pos, info) = jax.lax.scan(body, start_carry(st, d), ts)
        st = carry[0] if cached else carry
        # (length, chains, ...) -> (chains, length, ...)
        return st, (jnp.swapaxes(pos, 0, 1), jax.tree.map(lambda a: jnp.swapaxes(a, 0, 1), info))

    return jax.jit(run), info_shape


def run_chains(kernel: Any, theta0: Array, key: Array, num_iterations: int, *,
               data: Any = None, progress: bool = True, chunk_size: Optional[int] = None,
               secure_secret: Optional[Array] = None, resume: Optional[RunProgress] = None,
               on_chunk: Optional[Callable[[RunProgress], None]] = None,
               cache_key: Any = None):
    """Run independent chains of ``kernel`` on ``data``.

    Parameters
    ----------
    kernel : Kernel, or callable ``build(noise) -> Kernel``
        ``Kernel(init, step)`` of one chain (``init(theta, data)``, ``step(key, state, data)``),
        or a builder of it from its privacy-noise source (``noise``: a
        :class:`~dpmcmc.kernels.mechanisms.NoiseSource`, or ``None`` for ``jax.random``).
        Secure mode needs a builder (see the module docstring).
    theta0 : array (chains, dim)
        Starting points, one row per chain.
    key : PRNG key
        Split into one key per chain; iteration ``t`` of chain ``c`` uses
        ``fold_in(chain_key[c], t)``.
    num_iterations : int
        Iterations per chain (≥ 1).
    data : pytree, optional
        The kernel's data, passed to ``init`` and ``step`` as an argument of the compiled
        program (never a constant in it): laid out by the algorithm
        (``ALGORITHMS[name].layout``: a ``PreparedData`` or ``ShardedRows``, possibly split over
        a mesh), or raw rows. ``None`` for a kernel that reads none.
    progress : bool, default True
        Show a progress bar (iteration count only) updated between compiled chunks.
    chunk_size : int, optional
        Iterations per compiled chunk. Default: the whole run in one chunk without a progress bar,
        about ``num_iterations / 20`` with one, rounded up by :func:`chunk_length` so that runs
        of nearby lengths share one compiled program. The draws do not depend on it.
    secure_secret : uint32 array (8,), optional
        Secure mode: the run's secret 256-bit ChaCha20 key. Every privacy-noise draw
        (:func:`dpmcmc.kernels.mechanisms.noise_normal`) is then ChaCha20 output under this key
        with the chain index, the iteration and the release's JAX key as public inputs. The
        secret is an argument of the compiled program, never a constant in it: it reaches the
        kernels through their ``noise`` source, built per step by the driver.
    resume : RunProgress, optional
        Continue a run that stopped after ``resume.done`` iterations (same kernel, data,
        ``theta0``, ``key``, ``num_iterations`` and ``secure_secret``): iterations ``done,
        done+1, ...`` are run from ``resume.state`` and appended to
        ``resume.positions``/``resume.infos``. The result equals that of the uninterrupted run.
    on_chunk : callable, optional
        Called as ``on_chunk(RunProgress(state, positions, infos, done))`` with everything so far
        (NumPy arrays) after each compiled chunk; used for checkpoints. An exception raised by it
        stops the run.
    cache_key : hashable, optional
        What the kernel depends on besides the data's static layout (``dpmcmc.sample``:
        :func:`dpmcmc.runtime.compile_cache.kernel_cache_key` of the algorithm, model and prepared
        parameters). Runs with equal keys must run the same kernel; they then share their
        compiled programs (see the module docstring). ``None`` (default): compiled afresh.

    Returns
    -------
    positions : array (chains, num_iterations, dim)
        The state after each iteration (``theta0`` itself is not included): the chunk's JAX
        array for a run of one chunk of exactly its length, a NumPy array otherwise (and the
        infos likewise).
    infos : Info pytree
        Each field with leading axes ``(chains, num_iterations)``. Its clip fractions are NOT
        private; for a private sampler ``accepted``/``diverged`` are covered by the guarantee
        (see :class:`~dpmcmc.kernels.types.Info`).

    Notes
    -----
    The run is traced and executed under ``jax.enable_x64(True)`` (thread-local, restored on
    return): privacy noise is drawn in float64 whatever the global ``jax_enable_x64``, and the
    positions and infos come back in float64.
    """
    with jax.enable_x64(True):
        return _run_chains_x64(kernel, theta0, key, num_iterations, data, progress, chunk_size,
                               secure_secret, resume, on_chunk, cache_key)


def _secure_builder(kernel, what: str):
    """Refuse secure mode for a kernel that cannot receive a noise source per step."""
    if isinstance(kernel, Kernel) or not callable(kernel):
        raise TypeError(f"{what} needs a kernel builder build(noise) -> Kernel: a ready Kernel "
                        "cannot carry the run's secret, which must be an argument of the compiled "
                        "run")
    try:
        inspect.signature(kernel).bind(None)
    except TypeError:
        raise TypeError(f"{what}: the kernel builder must take the noise source as its one "
                        "argument (build(noise) -> Kernel) to carry the run's secret") from None
    except ValueError:
        pass  # no signature to inspect (a builtin): let the call itself decide


def chunk_length(iterations: int) -> int:
    """The compiled chunk length for ``iterations`` per chunk: the smallest ``m * 2**k >=
    iterations`` with ``m`` in 4..7 (1..8 as they are).

    The chunk program skips the iterations past a run's end (see :func:`_make_chunk_runner`),
    so runs whose lengths fall in one bucket share one program: the same model and parameters
    at another ε (another run length) are not compiled again. At most a quarter of a chunk is
    skipped: one predicate per skipped iteration, and its unused rows of the output buffer.
    """
    iterations = int(iterations)
    if iterations <= 8:
        return iterations
    k = iterations.bit_length() - 3
    return -(-iterations >> k) << k


def default_chunk(num_iterations: int, progress: bool) -> int:
    """The chunk length ``run_chains`` compiles when given no ``chunk_size``: the whole run
    without a progress bar, about ``num_iterations / DEFAULT_PROGRESS_CHUNKS`` with one, each
    rounded up by :func:`chunk_length`."""
    per = max(1, -(-num_iterations // DEFAULT_PROGRESS_CHUNKS)) if progress else num_iterations
    return chunk_length(per)


def _run_chains_x64(kernel, theta0, key, num_iterations, data, progress, chunk_size,
                    secure_secret, resume, on_chunk, cache_key):
    build = _builder(kernel)
    _check_cache_key(cache_key)
    if (isinstance(num_iterations, bool) or not isinstance(num_iterations, numbers.Integral)
            or num_iterations < 1):
        raise ValueError(f"num_iterations must be a positive integer, got {num_iterations!r}")
    # The canonical float dtype: float64 under x64, so acceptance tests run in double precision.
    theta0 = jnp.asarray(theta0, dtype=jnp.result_type(float))
    num_iterations = int(num_iterations)
    if theta0.ndim != 2:
        raise ValueError(f"theta0 must have shape (chains, dim), got shape {theta0.shape}")
    chains = theta0.shape[0]
    if chains < 1:
        raise ValueError("theta0 must hold at least one chain")
    if chunk_size is None:
        chunk_size = default_chunk(num_iterations, progress)
    elif (isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral)
          or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    else:
        chunk_size = min(int(chunk_size), num_iterations)
    secure = secure_secret is not None
    if secure:
        secure_secret = jnp.asarray(secure_secret)
        if secure_secret.shape != (8,) or secure_secret.dtype != jnp.uint32:
            raise ValueError("secure_secret must be a uint32 array of shape (8,) (256 bits), got "
                             f"{secure_secret.dtype}{list(secure_secret.shape)}")
        _secure_builder(kernel, "secure_secret")
    return _run_chains(build, theta0, key, num_iterations, chains, chunk_size, progress,
                       secure, secure_secret, resume, on_chunk, data, cache_key)


def _as_device_array(a):
    """``jnp.asarray(a)``, a NumPy array (a checkpoint read from disk) by ``jax.device_put``:
    jnp.asarray lifts it through lax.stage, which compiles a program per shape and dtype (the
    same array, dtype and sharding either way)."""
    return jax.device_put(a) if isinstance(a, np.ndarray) else jnp.asarray(a)


def _restore(template, given, what):
    """``given`` (pytree or list of leaves) as a pytree shaped like ``template``, checked."""
    leaves_t, treedef = jax.tree.flatten(template)
    leaves = given if isinstance(given, list) else jax.tree.leaves(given)
    if len(leaves) != len(leaves_t):
        raise ValueError(f"resume.{what} has {len(leaves)} arrays, the kernel's has {len(leaves_t)}")
    out = []
    for a, t in zip(leaves, leaves_t):
        a = _as_device_array(a)
        if a.shape != t.shape or a.dtype != t.dtype:
            raise ValueError(f"resume.{what}: array of {a.dtype}{list(a.shape)} where the kernel has "
                             f"{t.dtype}{list(t.shape)}")
        out.append(a)
    return jax.tree.unflatten(treedef, out)


def _run_chains(build, theta0, key, num_iterations, chains, chunk_size, progress, secure,
                secret, resume, on_chunk, data, cache_key):
    if cache_key is not None:
        # A dpmcmc.sample run (its programs hold no data): let a new process load them.
        _compile_cache.ensure_persistent_cache()
    chain_keys = jax.random.split(key, chains)
    state = init_states(build, theta0, data, cache_key=cache_key)
    chunk = _chunk_program(build, chunk_size, state, chain_keys, secure, data, cache_key)
    runner, info_shape = chunk.run, chunk.info_shape
    secret_arg = secret if secure else jnp.zeros(8, jnp.uint32)
    positions, infos = [], []
    done = 0
    if resume is not None:
        done = int(resume.done)
        if not 0 <= done <= num_iterations:
            raise ValueError(f"resume.done must lie in [0, {num_iterations}], got {done}")
        state = _restore(state, resume.state, "state")
        if done > 0:  # at 0 there are no draws yet, and positions/infos are ignored
            pos0 = _as_device_array(resume.positions)
            if pos0.shape != (chains, done, theta0.shape[1]) or pos0.dtype != theta0.dtype:
                raise ValueError(f"resume.positions must be {theta0.dtype}"
                                 f"{[chains, done, theta0.shape[1]]}, got {pos0.dtype}{list(pos0.shape)}")
            info_template = jax.tree.map(
                lambda a: jax.ShapeDtypeStruct((a.shape[0], done) + a.shape[1:], a.dtype), info_shape)
            positions.append(pos0)
            infos.append(_restore(info_template, resume.infos, "infos"))

    replicated = _replicated_sharding(data)
    if replicated is not None:
        state = jax.device_put(state, replicated)

    def so_far():
        if not positions:
            empty = jax.tree.map(lambda a: np.zeros((a.shape[0], 0) + a.shape[1:], a.dtype), info_shape)
            return np.zeros((chains, 0, theta0.shape[1]), theta0.dtype), empty
        pos = np.concatenate([np.asarray(p) for p in positions], axis=1)
        info = jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs], axis=1), *infos)
        return pos, info

    if done < num_iterations:
        # Compiled before the first chunk runs, so that compiling is shown (and timed) apart
        # from sampling; jit reuses this executable when the chunk is called.
        args = (state, chain_keys, jnp.uint32(done), jnp.uint32(done + chunk_size), secret_arg, data)
        _compile(chunk, args, progress)

    bar = None
    if progress:
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        bar = Progress(TextColumn("sampling "), BarColumn(), MofNCompleteColumn(),
                       TextColumn("iterations"), TimeElapsedColumn(), TimeRemainingColumn(),
                       transient=False)
        bar.start()
        task = bar.add_task("sampling", total=num_iterations, completed=done)
    try:
        while done < num_iterations:
            length = min(chunk_size, num_iterations - done)
            state, (pos, info) = runner(state, chain_keys, jnp.uint32(done),
                                        jnp.uint32(done + length), secret_arg, data)
            if length < chunk_size:
                # Sliced in NumPy: an eager JAX slice compiles a program per shape.
                pos = np.asarray(pos)[:, :length]
                info = jax.tree.map(lambda a: np.asarray(a)[:, :length], info)
            positions.append(pos)
            infos.append(info)
            done += length
            if bar is not None:
                jax.block_until_ready(pos)
                bar.update(task, completed=done)
            if on_chunk is not None:
                pos_all, info_all = so_far()
                on_chunk(RunProgress(jax.tree.map(np.asarray, state), pos_all, info_all, done))
    finally:
        if bar is not None:
            bar.stop()

    if len(positions) == 1:
        return positions[0], infos[0]
    # Joined on the host (the draws go there anyway): jnp.concatenate would compile per shape.
    return so_far()


def _compile(chunk: _Chunk, args: tuple, progress: bool) -> None:
    """Compile ``chunk.run`` for ``args`` unless already done, showing "compiling…" with
    ``progress``."""
    sig = _compile_cache.signature(args)
    if sig in chunk.compiled:
        return
    if not progress:
        chunk.run.lower(*args).compile()
    else:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        phase = Progress(TextColumn("{task.description}"), SpinnerColumn(finished_text=" "),
                         TimeElapsedColumn(), transient=False)
        with phase:
            task = phase.add_task("compiling…", total=1)
            start = time.perf_counter()
            chunk.run.lower(*args).compile()
            phase.update(task, completed=1,
                         description=f"compiled  ({time.perf_counter() - start:.1f} s)")
    chunk.compiled.add(sig)


def compiled_chunk(kernel: Any, theta0: Array, key: Array, length: int, *, data: Any = None,
                   secure_secret: Optional[Array] = None, cache_key: Any = None):
    """The compiled chunk program of a run, as ``run_chains`` would compile it (not run).

    For inspection: ``compiled_chunk(...).as_text()`` is the optimised HLO, where one can check
    that no data array is a constant of the program. Arguments as in :func:`run_chains`. A run
    of ``length`` iterations without progress bar, with the same ``cache_key``, reuses the
    program.

    Returns
    -------
    jax.stages.Compiled
    """
    with jax.enable_x64(True):
        return _compiled_chunk_x64(kernel, theta0, key, length, data, secure_secret, cache_key)


def _compiled_chunk_x64(kernel, theta0, key, length, data, secure_secret, cache_key):
    build = _builder(kernel)
    _check_cache_key(cache_key)
    theta0 = jnp.asarray(theta0, dtype=jnp.result_type(float))
    chain_keys = jax.random.split(key, theta0.shape[0])
    state = init_states(build, theta0, data, cache_key=cache_key)
    secure = secure_secret is not None
    if secure:
        _secure_builder(kernel, "secure_secret")
    # Through the program cache: with a cache key (``dpmcmc.sample``'s) the program is compiled
    # here exactly as a run of ``length`` iterations without progress bar compiles it, and such
    # a run then reuses this executable.
    length = int(length)
    chunk = _chunk_program(build, default_chunk(length, False), state, chain_keys, secure, data,
                           cache_key)
    secret = jnp.asarray(secure_secret) if secure else jnp.zeros(8, jnp.uint32)
    args = (state, chain_keys, jnp.uint32(0), jnp.uint32(length), secret, data)
    compiled = chunk.run.lower(*args).compile()
    chunk.compiled.add(_compile_cache.signature(args))
    return compiled
