"""All per-example computations of the samplers: one pass over the data each.

Every data access of every sampler goes through this module, so that the cost of an iteration
is a known number of data passes:

- :func:`clipped_llr_sum` — Σ_j clip(ℓ_j(θ') − ℓ_j(θ)): the log-likelihood difference and the
  clipping are one fused expression, reduced without storing more than the per-example ratios.
- :func:`clipped_grad_sum` — Σ_j clip(∇ℓ_j(θ)), per-example gradients clipped in L2 norm.
- :func:`loglik_sum`, :func:`loglik_sum_and_grad` — unclipped totals for non-private samplers
  (one forward / one reverse-mode pass, no per-example gradients).

Each function accepts ``block_size``: with ``None`` the whole data set is processed at once
(XLA fuses the per-example expression with the reduction); with an integer the data are scanned
in blocks of that many rows, so per-example intermediates never exceed
``block_size × dim`` per chain. The samplers pick :func:`auto_block_size` unless told otherwise:
on CPU, blocks of 4096 rows kept the per-example gradients in cache and measured 1.5–6× faster
than one pass for n = 10⁵, d ∈ {2, 10}, 1–4 chains; on accelerators one fused pass is used.

Per-example gradients use ``model.grad_log_likelihood_batch`` when the model supplies one;
otherwise ``method`` chooses reverse mode (``vmap(grad)``) or forward mode (``jacfwd`` of the
vectorised log-likelihood: one JVP per parameter dimension). ``"auto"`` means reverse mode:
forward mode measured 1.5–5× slower on CPU for a Gaussian likelihood with d = 2 and d = 10.

Sums are accumulated in the dtype of ``theta`` (float64 when x64 is enabled).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpmcmc.samplers._clip import clip_gradients, clip_ratios

Array = Any

__all__ = [
    "clipped_llr_sum",
    "clipped_grad_sum",
    "loglik_sum",
    "loglik_sum_and_grad",
    "per_example_loglik",
    "per_example_grads",
    "auto_block_size",
    "CPU_BLOCK_SIZE",
]

CPU_BLOCK_SIZE = 4096


def auto_block_size(n: int, block_size: Optional[int] = None) -> Optional[int]:
    """``block_size`` if given, else 4096 on the CPU backend when ``n > 2 * 4096``, else None."""
    if block_size is not None:
        return block_size
    if jax.default_backend() == "cpu" and n > 2 * CPU_BLOCK_SIZE:
        return CPU_BLOCK_SIZE
    return None


def per_example_loglik(model, theta: Array, data: Array) -> Array:
    """Per-example (untempered) log-likelihoods ``(m,)`` of the rows of ``data`` at ``theta``."""
    return model.loglik_per_example(theta, data)


def per_example_grads(model, theta: Array, data: Array, method: str = "auto") -> Array:
    """Per-example gradients ``(m, dim)`` of the untempered log-likelihood at ``theta``.

    Parameters
    ----------
    model : Model
    theta : array (dim,)
    data : array (m, ...)
    method : {"auto", "forward", "reverse"}
        Autodiff mode when the model has no ``grad_log_likelihood_batch``.
    """
    if model.grad_log_likelihood_batch is not None:
        return model.grad_log_likelihood_batch(theta, data)
    if method == "auto":
        method = "reverse"
    if method == "forward":
        return jax.jacfwd(lambda t: model.loglik_per_example(t, data))(theta)
    if method == "reverse":
        return jax.vmap(jax.grad(model.log_likelihood), in_axes=(None, 0))(theta, data)
    raise ValueError(f"method must be 'auto', 'forward' or 'reverse', got {method!r}")


def _acc_dtype(theta: Array):
    return jnp.result_type(theta, jnp.float32)


def _block_sum(fn: Callable[[Array, Optional[Array]], Any], data: Array,
               block_size: Optional[int]) -> Any:
    """Σ over blocks of ``fn(block, mask)`` (a pytree of sums); ``mask`` marks real rows."""
    n = data.shape[0]
    if block_size is None or block_size >= n:
        return fn(data, None)
    num_blocks = math.ceil(n / block_size)
    pad = num_blocks * block_size - n
    if pad:
        # Padding rows repeat row 0 and are masked out of every sum.
        filler = jnp.broadcast_to(data[:1], (pad,) + data.shape[1:])
        data = jnp.concatenate([data, filler], axis=0)
    blocks = data.reshape((num_blocks, block_size) + data.shape[1:])
    mask = (np.arange(num_blocks * block_size) < n).reshape(num_blocks, block_size)
    zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype),
                        jax.eval_shape(fn, blocks[0], mask[0]))

    def body(acc, xs):
        out = fn(*xs)
        return jax.tree.map(jnp.add, acc, out), None

    total, _ = jax.lax.scan(body, zero, (blocks, jnp.asarray(mask)))
    return total


def clipped_llr_sum(model, data: Array, theta: Array, theta_new: Array, bound: Optional[Array], *,
                    nan_to_bound: bool = True, block_size: Optional[int] = None
                    ) -> tuple[Array, Array]:
    """Sum of clipped per-example log-likelihood ratios ``Σ_j clip(ℓ_j(θ') − ℓ_j(θ))``.

    Parameters
    ----------
    model : Model
    data : array (n, ...)
    theta, theta_new : array (dim,)
        Current and proposed parameters.
    bound : float or None
        Clip bound ``c = b‖θ−θ'‖`` (each ratio clipped to ``[-c, c]``); ``None``: no clipping.
    nan_to_bound : bool, default True
        Private samplers: a NaN ratio becomes ``-bound`` and counts as clipped, so the sum keeps
        its sensitivity. ``False`` (non-private samplers): NaN propagates into the sum, so that
        the caller rejects the proposal.
    block_size : int, optional
        Scan the data in blocks of this many rows.

    Returns
    -------
    total : scalar
        The (untempered) clipped sum, in the floating dtype of ``theta``.
    clip_count : scalar int
        Number of ratios clipped (NaN included when ``nan_to_bound``).
    """
    dtype = _acc_dtype(theta)

    def fn(x, mask):
        r = (per_example_loglik(model, theta_new, x) - per_example_loglik(model, theta, x)).astype(dtype)
        if bound is None:
            c, clipped = r, jnp.zeros(r.shape, bool)
        elif nan_to_bound:
            c, clipped = clip_ratios(r, jnp.asarray(bound, dtype))
        else:
            c = jnp.clip(r, -bound, bound)
            clipped = jnp.abs(r) > bound
        if mask is not None:
            c = jnp.where(mask, c, 0.0)
            clipped = clipped & mask
        return jnp.sum(c), jnp.sum(clipped, dtype=jnp.int32)

    return _block_sum(fn, data, block_size)


def clipped_grad_sum(model, data: Array, theta: Array, grad_clip: Array, *,
                     method: str = "auto", block_size: Optional[int] = None
                     ) -> tuple[Array, Array]:
    """Sum of per-example log-likelihood gradients, each clipped to L2 norm ``grad_clip``.

    Parameters
    ----------
    model : Model
    data : array (n, ...)
    theta : array (dim,)
    grad_clip : float
        Clip bound ``b_g``. Non-finite per-example gradients contribute zero.
    method : {"auto", "forward", "reverse"}
        See :func:`per_example_grads`.
    block_size : int, optional
        Scan the data in blocks of this many rows.

    Returns
    -------
    total : array (dim,)
        Σ_j clip(∇ℓ_j(θ)) (untempered), in the floating dtype of ``theta``.
    clip_count : scalar int
        Number of per-example gradients clipped (non-finite ones included).
    """
    dtype = _acc_dtype(theta)

    def fn(x, mask):
        g = per_example_grads(model, theta, x, method).astype(dtype)
        g, clipped = clip_gradients(g, jnp.asarray(grad_clip, dtype))
        if mask is not None:
            g = jnp.where(mask[:, None], g, 0.0)
            clipped = clipped & mask
        return jnp.sum(g, axis=0), jnp.sum(clipped, dtype=jnp.int32)

    return _block_sum(fn, data, block_size)


def loglik_sum(model, data: Array, theta: Array, *, block_size: Optional[int] = None) -> Array:
    """Σ_j ℓ_j(θ), untempered and unclipped (non-private samplers only)."""
    dtype = _acc_dtype(theta)

    def fn(x, mask):
        ll = per_example_loglik(model, theta, x).astype(dtype)
        if mask is not None:
            ll = jnp.where(mask, ll, 0.0)
        return jnp.sum(ll)

    return _block_sum(fn, data, block_size)


def loglik_sum_and_grad(model, data: Array, theta: Array, *, block_size: Optional[int] = None
                        ) -> tuple[Array, Array]:
    """``(Σ_j ℓ_j(θ), ∇_θ Σ_j ℓ_j(θ))`` in one reverse-mode pass (non-private samplers only).

    Uses ``model.grad_log_likelihood_batch`` summed over rows when the model supplies it.
    """
    dtype = _acc_dtype(theta)

    def fn(x, mask):
        if model.grad_log_likelihood_batch is not None:
            ll = per_example_loglik(model, theta, x).astype(dtype)
            g = model.grad_log_likelihood_batch(theta, x).astype(dtype)
            if mask is not None:
                ll = jnp.where(mask, ll, 0.0)
                g = jnp.where(mask[:, None], g, 0.0)
            return jnp.sum(ll), jnp.sum(g, axis=0)

        def total(t):
            ll = per_example_loglik(model, t, x).astype(dtype)
            if mask is not None:
                ll = jnp.where(mask, ll, 0.0)
            return jnp.sum(ll)

        return jax.value_and_grad(total)(theta)

    return _block_sum(fn, data, block_size)
