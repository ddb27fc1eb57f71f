"""The one place where privacy noise is drawn.

Convention (both papers' reference code, and ``dpmcmc.accounting``): a released statistic is a
sum over the n records of terms each bounded in norm by ``bound`` (a log-likelihood ratio clipped
to ``[-b‖θ−θ'‖, b‖θ−θ'‖]``, or a gradient clipped to norm ``b_g``). Under the substitute
relation its sensitivity is ``2 * bound``. The noise scale is not defined here: it is the
``noise_std(bound)`` of the release event the accountant composes
(:class:`dpmcmc.accounting.ReleaseEvent`; e.g. σ = 2 τ √n · bound for a full-data Gaussian release,
which costs ``μ = sensitivity² / (2 σ²) = 1 / (2 τ² n)`` in the Gaussian composition of 000
Thm 2.4 and 001 Thms 6, 12), so the σ drawn and the μ charged come from one constructor.
``τ`` is the thesis' parametrisation (001 §4.2); the paper's τ (000 §3) equals ours times √n.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import jax
import jax.numpy as jnp

Array = Any

__all__ = ["sensitivity", "gaussian_mechanism", "knorm_mechanism", "noise_normal",
           "noise_uniform", "noise_permutation", "NoiseSource", "DEFAULT_NOISE"]


def sensitivity(bound: Array) -> Array:
    """L2 sensitivity, under the substitute relation, of a sum of terms each of norm ≤ ``bound``.

    Parameters
    ----------
    bound : float or array
        Per-term bound (``b‖θ−θ'‖`` for log-likelihood ratios, ``b_g`` for gradients).

    Returns
    -------
    float or array
        ``2 * bound``.
    """
    return 2.0 * bound


def gaussian_mechanism(key: Array, value: Array, sigma: Array,
                       noise: Optional["NoiseSource"] = None) -> Array:
    """Release ``value + N(0, sigma² I)``, in float64.

    Parameters
    ----------
    key : PRNG key
        Fresh key for this release (never reused).
    value : array
        The (clipped) statistic to release; its shape is kept.
    sigma : float or array
        Noise standard deviation, broadcast against ``value``; from the release event's
        :meth:`dpmcmc.accounting.ReleaseEvent.noise_std`.
    noise : NoiseSource, optional
        Where the noise comes from: the kernel's own source (default: :data:`DEFAULT_NOISE`,
        ``jax.random.normal(key)``; ChaCha20 under the run's secret in secure mode).

    Returns
    -------
    float64 array
        The noisy statistic. Always float64, whatever the dtype of ``value``: the float32 normal
        sampler never exceeds about 5.3σ, a truncation δ does not account for.
    """
    return (DEFAULT_NOISE if noise is None else noise).gaussian(key, value, sigma)


def knorm_mechanism(key: Array, value: Array, widths: Array, epsilon: float,
                    noise: Optional["NoiseSource"] = None) -> Array:
    """Release ``value + z`` by the ℓ∞ K-norm mechanism: pure ``epsilon``-DP, in float64.

    ``z`` has density ∝ ``exp(−ε · max_j |z_j| / w_j)`` (Hardt & Talwar 2010, with K the box of
    half-widths ``w``): for neighbouring data sets whose statistics differ by ``v`` with every
    ``|v_j| ≤ w_j`` the density ratio is at most ``e^ε``. So ``widths`` is the *sensitivity box*
    (the largest change of each coordinate between neighbours, e.g. twice the per-record bound
    under replace-one), not the per-record bound. Drawn as ``z = r · u`` with
    ``r ~ Gamma(m + 1, 1/ε)`` (a sum of ``m + 1`` exponentials) and ``u`` uniform on the box,
    ``m = value.size``; each coordinate then has variance ``(m+1)(m+2) w_j² / (3ε²)``.

    Parameters
    ----------
    key : PRNG key
        Fresh key for this release.
    value : array
        The (clipped) statistic; its shape is kept.
    widths : float or array
        Sensitivity box half-widths, broadcast against ``value`` (each > 0).
    epsilon : float
        ε > 0 of this release.
    noise : NoiseSource, optional
        As in :func:`gaussian_mechanism`.

    Returns
    -------
    float64 array
    """
    return (DEFAULT_NOISE if noise is None else noise).knorm(key, value, widths, epsilon)


# ---------------------------------------------------------------- the noise source

# Domain-separation tag of the per-(chain, iteration) key derivation: ASCII "dpnz".
_NOISE_TAG = int.from_bytes(b"dpnz", "little")


def _require_x64() -> None:
    # Privacy noise is float64 or nothing: a silent float32 draw would truncate its tails.
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            "privacy noise is drawn in float64, which needs 64-bit JAX types while the kernel is "
            "traced: run it through dpmcmc.sample or run_chains (both enable them for the run "
            "only), or inside `with jax.enable_x64(True):`")


def _positive_factor(name: str, value: Any) -> float:
    if not (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


@jax.tree_util.register_pytree_node_class
class NoiseSource:
    """Where a kernel's privacy noise comes from. Frozen; a JAX pytree.

    Every private kernel is built with one (``build_*(..., noise=...)``) and draws all its privacy
    noise from it; nothing is read from process-global state, so kernels of different runs,
    traced at the same time in different threads, cannot see each other's source.

    Parameters
    ----------
    secret : uint32 array (8,), optional
        Secure mode: the run's 256-bit ChaCha20 key. A leaf of the pytree, so under ``jit`` it is
        a traced argument of the compiled run, never a constant in it. ``None``: JAX's generator
        (``jax.random``) keyed by the release's JAX key.
    chain, iteration : uint32 scalars, optional
        The position of the step the noise belongs to (public inputs of the secure key
        derivation, :func:`_release_key`); ``None`` reads as 0. The chain driver sets them.
    noise_scale, sensitivity_factor : float, default 1.0
        TESTING ONLY, for the privacy audit (:mod:`dpmcmc.audit`), which builds deliberately
        miscalibrated kernels to show it has power; no public function, option or CLI flag sets
        them. ``noise_scale`` multiplies the Gaussian noise of :meth:`gaussian` while the σ that
        callers report stays the claimed one; with ``sensitivity_factor`` ``f`` the samplers
        clip to ``bound / f`` (:meth:`clip_bound`) while the noise stays calibrated to ``bound``.

    Notes
    -----
    Every draw is float64 (it needs ``jax_enable_x64`` at trace time; ``run_chains`` and
    ``dpmcmc.sample`` enable it for the run only). A narrower requested dtype is a rounding of the
    float64 draw, which keeps its tails.
    """

    __slots__ = ("secret", "chain", "iteration", "noise_scale", "sensitivity_factor")

    def __init__(self, secret: Optional[Array] = None, chain: Optional[Array] = None,
                 iteration: Optional[Array] = None, *, noise_scale: float = 1.0,
                 sensitivity_factor: float = 1.0):
        if secret is not None:
            shape, dtype = getattr(secret, "shape", None), getattr(secret, "dtype", None)
            if shape is None:
                secret = jnp.asarray(secret)
                shape, dtype = secret.shape, secret.dtype
            if tuple(shape) != (8,) or dtype != jnp.uint32:
                raise ValueError(f"secret must be uint32[8] (256 bits), got {dtype}{list(shape)}")
        setattr_ = object.__setattr__
        setattr_(self, "secret", secret)
        setattr_(self, "chain", chain)
        setattr_(self, "iteration", iteration)
        setattr_(self, "noise_scale", _positive_factor("noise_scale", noise_scale))
        setattr_(self, "sensitivity_factor",
                 _positive_factor("sensitivity_factor", sensitivity_factor))

    def __setattr__(self, name, value):
        raise AttributeError("NoiseSource is frozen")

    def tree_flatten(self):
        return ((self.secret, self.chain, self.iteration),
                (self.noise_scale, self.sensitivity_factor))

    @classmethod
    def tree_unflatten(cls, aux, children):
        out = object.__new__(cls)
        for name, value in zip(cls.__slots__, tuple(children) + tuple(aux)):
            object.__setattr__(out, name, value)
        return out

    def __repr__(self) -> str:
        mode = "secure" if self.secure else "jax.random"
        extra = ("" if self.calibrated else
                 f", noise_scale={self.noise_scale}, sensitivity_factor={self.sensitivity_factor}")
        return f"NoiseSource({mode}{extra})"  # never the secret

    @property
    def secure(self) -> bool:
        """Whether the noise is ChaCha20 output under a secret (static: known at trace time)."""
        return self.secret is not None

    @property
    def calibrated(self) -> bool:
        """False only for the audit's deliberately miscalibrated sources."""
        return self.noise_scale == 1.0 and self.sensitivity_factor == 1.0

    def at(self, chain: Array, iteration: Array) -> "NoiseSource":
        """The same source at position ``(chain, iteration)`` of a run."""
        return NoiseSource(self.secret, chain, iteration, noise_scale=self.noise_scale,
                           sensitivity_factor=self.sensitivity_factor)

    def clip_bound(self, bound: Array) -> Array:
        """The bound the samplers clip to: ``bound`` itself, except in the audit's
        miscalibrated sources (``bound / sensitivity_factor``)."""
        f = self.sensitivity_factor
        return bound if f == 1.0 else bound / f

    def normal(self, key: Array, shape: tuple = (), dtype: Any = None) -> Array:
        """Standard normals of ``shape``, drawn in float64 (then cast to ``dtype`` if given)."""
        # Looked up at call time: the secure-mode tests count executions of this one draw.
        return self._float64_draw(
            key, shape, dtype, jax.random.normal,
            lambda k, s: _secure_standard_normal(self.secret, k, s, jnp.float64, self))

    def uniform(self, key: Array, shape: tuple = (), dtype: Any = None) -> Array:
        """Uniforms on [0, 1) of ``shape``, drawn in float64 (then cast to ``dtype`` if given)."""
        from dpmcmc.secure import secure_uniform

        return self._float64_draw(
            key, shape, dtype, jax.random.uniform,
            lambda k, s: secure_uniform(self._release_key(k), s, jnp.float64))

    def _float64_draw(self, key: Array, shape: tuple, dtype: Any, plain, secure) -> Array:
        """The secure-mode branch of every float draw: ``secure(key, shape)`` (ChaCha20 under the
        secret) in secure mode, else ``plain(key, shape, dtype=float64)`` (``jax.random``);
        float64 either way, then cast to ``dtype`` if one is given."""
        _require_x64()
        shape = tuple(shape)
        if self.secret is not None:
            z = secure(key, shape)
        else:
            z = plain(key, shape, dtype=jnp.float64)
        return z if dtype is None else z.astype(dtype)

    def permutation(self, key: Array, n: int) -> Array:
        """A uniformly random permutation of ``0..n-1``, secret in secure mode."""
        if self.secret is not None:
            from dpmcmc.secure import secure_permutation

            return secure_permutation(self._release_key(key), int(n))
        return jax.random.permutation(key, int(n))

    def gaussian(self, key: Array, value: Array, sigma: Array) -> Array:
        """``value + sigma · N(0, I)`` in float64 (see :func:`gaussian_mechanism`)."""
        value = jnp.asarray(value)
        z = self.normal(key, value.shape)
        if self.noise_scale != 1.0:  # the audit's miscalibrated sources only
            z = self.noise_scale * z
        return value.astype(jnp.float64) + jnp.asarray(sigma, jnp.float64) * z

    def knorm(self, key: Array, value: Array, widths: Array, epsilon: float) -> Array:
        """``value + z`` with z from the ℓ∞ K-norm distribution (see :func:`knorm_mechanism`)."""
        value = jnp.asarray(value)
        m = value.size
        # One draw of 2m + 1 uniforms (one generator call compiles and runs faster than two):
        # the first m + 1 give Gamma(m + 1, 1/ε) as a sum of exponentials −log(1 − U)
        # (U ∈ [0, 1), so 1 − U > 0), the other m the point of the box.
        u = self.uniform(key, (2 * m + 1,))
        radius = -jnp.sum(jnp.log1p(-u[:m + 1])) / epsilon
        box = (2.0 * u[m + 1:] - 1.0).reshape(value.shape)
        z = radius * box * jnp.asarray(widths, jnp.float64)
        if self.noise_scale != 1.0:  # the audit's miscalibrated sources only
            z = self.noise_scale * z
        return value.astype(jnp.float64) + z

    def _release_key(self, key: Array):
        return _release_key(self.secret, key, self.chain, self.iteration)


#: The default source: ``jax.random`` keyed by each release's JAX key, calibrated.
DEFAULT_NOISE = NoiseSource()


# ---------------------------------------------------------------- privacy-noise generators

def noise_normal(key: Array, shape: tuple = (), dtype: Any = None,
                 noise: Optional[NoiseSource] = None) -> Array:
    """Standard normal privacy noise of ``shape`` from ``noise`` (default :data:`DEFAULT_NOISE`).

    Drawn in float64 (``jax.random.normal(key, shape, float64)``, or ChaCha20 under the secret
    of a secure source, :func:`_secure_standard_normal`) and cast to ``dtype`` if one is given.
    A sampler whose privacy noise is not a single Gaussian (e.g. a correction distribution)
    should build it from this function and :func:`noise_uniform` with its kernel's source.

    Parameters
    ----------
    key : PRNG key
        Fresh JAX key for this draw (never reused).
    shape : tuple of int
    dtype : floating dtype, optional
        Default float64.
    noise : NoiseSource, optional

    Returns
    -------
    array of ``shape``
    """
    return (DEFAULT_NOISE if noise is None else noise).normal(key, shape, dtype)


def noise_uniform(key: Array, shape: tuple = (), dtype: Any = None,
                  noise: Optional[NoiseSource] = None) -> Array:
    """Uniform privacy noise on [0, 1) from ``noise``, drawn like :func:`noise_normal`."""
    return (DEFAULT_NOISE if noise is None else noise).uniform(key, shape, dtype)


def noise_permutation(key: Array, n: int, noise: Optional[NoiseSource] = None) -> Array:
    """A uniformly random permutation of ``0..n-1`` that a secure source keeps secret.

    For secret minibatch selection (privacy amplification by subsampling assumes the adversary
    cannot tell which records were used): ``jax.random.permutation(key, n)`` by default,
    :func:`dpmcmc.secure.secure_permutation` under the secret of a secure source.

    Parameters
    ----------
    key : PRNG key
    n : int
        Static length.
    noise : NoiseSource, optional

    Returns
    -------
    int array (n,)
    """
    return (DEFAULT_NOISE if noise is None else noise).permutation(key, n)


# ---------------------------------------------------------------- secure mode

def _key_words(key: Array) -> Array:
    """The raw uint32 words of a JAX key (typed or legacy), flattened."""
    key = jnp.asarray(key) if not hasattr(key, "dtype") else key
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return jnp.asarray(key).astype(jnp.uint32).reshape(-1)


def _release_key(secret: Array, key: Array, chain: Optional[Array] = None,
                 iteration: Optional[Array] = None):
    """The per-release ChaCha20 key: a PRF of public inputs under the secret run key.

    Two evaluations of ChaCha20 (RFC 8439 block function, first eight output words as the next
    key):

    1. ``k1 = ChaCha20(secret; counter = iteration, nonce = ("dpnz", chain, 0))``: one key per
       (chain, iteration) of the run; (0, 0) outside the driver.
    2. ``k2 = ChaCha20(k1; counter = g, nonce = words 3g..3g+2 of the JAX key)`` for each group
       ``g`` of three raw words of ``key`` (one group for the default threefry key of two words;
       missing words are zero).

    The noise is then drawn from ``k2``'s stream (:func:`dpmcmc.secure.secure_normal`).

    Notes
    -----
    Security. ChaCha20 under a secret uniformly random key is a pseudorandom function of
    (counter, nonce), so each k2 is indistinguishable from an independent uniform key for anyone
    who knows every public input — the JAX run key included. Leaking the JAX key (a published
    seed) therefore reveals the proposals and accept/reject uniforms but not the privacy noise.

    Collisions. Distinct (chain, iteration) pairs give distinct inputs to step 1. Two releases of
    the same chain and iteration get the same noise only if their JAX keys have the same raw
    bits: the samplers derive them by ``split``/``fold_in`` from the iteration key, so for ``r``
    releases in one iteration (``r = L + 2`` for DP-HMC) the probability is at most
    ``r(r-1)/2 · 2^-64`` per iteration, and ``C k r² / 2^65`` over ``C`` chains of ``k``
    iterations (about 1.6e-11 for C = 4, k = 10⁶, L = 10). The default (non-secure) mode has the
    same failure probability for its own noise, since equal JAX keys give equal
    ``jax.random.normal`` output; secure mode adds no further collision. A sampler that reuses a
    key deliberately gets equal noise in both modes — that is a sampler bug either way.
    """
    from dpmcmc._chacha import chacha20_block
    from dpmcmc.secure import SecureKey

    chain = jnp.uint32(0) if chain is None else jnp.asarray(chain).astype(jnp.uint32)
    iteration = jnp.uint32(0) if iteration is None else jnp.asarray(iteration).astype(jnp.uint32)
    nonce = jnp.stack([jnp.uint32(_NOISE_TAG), chain, jnp.uint32(0)])
    k = chacha20_block(secret, iteration, nonce)[:8]
    words = _key_words(key)
    pad = (-words.shape[0]) % 3
    words = jnp.concatenate([words, jnp.zeros((pad,), jnp.uint32)])
    for g in range(words.shape[0] // 3):
        k = chacha20_block(k, jnp.uint32(g), words[3 * g:3 * g + 3])[:8]
    return SecureKey(k)


def _secure_standard_normal(secret: Array, key: Array, shape: tuple, dtype: Any,
                            source: Optional[NoiseSource] = None) -> Array:
    """Standard normals from ChaCha20 keyed by ``secret``, with ``key`` as public PRF input.

    Drawn by inversion on an open grid (:func:`dpmcmc.secure.secure_normal`) from the stream of
    the per-release key of :func:`_release_key` at the position of ``source``.
    """
    from dpmcmc.secure import secure_normal

    chain = None if source is None else source.chain
    iteration = None if source is None else source.iteration
    return secure_normal(_release_key(secret, key, chain, iteration), shape, jnp.dtype(dtype))
