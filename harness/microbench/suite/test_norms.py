"""LayerNorm and RMSNorm over the last axis of a (rows, features) activation, forward and forward + backward.

Written in jax.numpy and jitted, which is how the recipes' models get them: XLA fuses each pass into a few
reductions and elementwise loops, so the figure to watch is the memory bandwidth reached
(`harness.microbench.work.norm_bytes`). As in production kernels, statistics and arithmetic are in float32
whatever the activations' dtype, and the result is rounded back to it once. `pass_` "backward" times the
jitted gradient of sum(norm(x) * dy) with respect to x and the norm's parameters, which runs the forward
pass too. Parameters have the activations' dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.harness.microbench.suite import reference
from jaxbench.harness.microbench.work import Work, check_close, norm_bytes, sample_indices

CASES = {
    "tiny": [
        {"norm": norm, "pass_": pass_, "dtype": dtype, "rows": rows, "features": features}
        for norm in ("layer_norm", "rms_norm")
        for pass_ in ("forward", "backward")
        for dtype in ("float32", "bfloat16")
        for rows, features in ((2048, 256), (2048, 512))
    ],
    "full": [
        {"norm": norm, "pass_": pass_, "dtype": dtype, "rows": rows, "features": features}
        for norm in ("layer_norm", "rms_norm")
        for pass_ in ("forward", "backward")
        for dtype in ("float32", "bfloat16")
        # 8 sequences of 2048 tokens at LLaMA-2-7B's width, and 16 of 2048 at LLaMA-2-70B's
        for rows, features in ((16384, 4096), (32768, 8192))
    ],
}

EPS = 1e-5  # PyTorch's LayerNorm default and LLaMA-2's RMSNorm


def _layer_norm(x: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    centred = x32 - jnp.mean(x32, axis=-1, keepdims=True)
    # Two passes (mean, then the mean square of the centred values) rather than E[x^2] - E[x]^2, which
    # cancels catastrophically when the mean is large against the spread.
    variance = jnp.mean(jnp.square(centred), axis=-1, keepdims=True)
    normalized = centred * jax.lax.rsqrt(variance + EPS)
    return (normalized * scale.astype(jnp.float32) + bias.astype(jnp.float32)).astype(x.dtype)


def _rms_norm(x: jax.Array, scale: jax.Array) -> jax.Array:
    x32 = x.astype(jnp.float32)
    normalized = x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + EPS)
    return (normalized * scale.astype(jnp.float32)).astype(x.dtype)


NORMS: dict[str, Callable[..., jax.Array]] = {"layer_norm": _layer_norm, "rms_norm": _rms_norm}


def _kernel(norm: str, backward: bool) -> Callable[..., Any]:
    forward = NORMS[norm]
    if not backward:
        return jax.jit(forward)

    def loss(*operands: jax.Array) -> jax.Array:
        *inputs, dy = operands
        return jnp.sum(forward(*inputs).astype(jnp.float32) * dy.astype(jnp.float32))

    parameters = 2 if norm == "layer_norm" else 1
    return jax.jit(jax.grad(loss, argnums=tuple(range(1 + parameters))))


def _operands(norm: str, rows: int, features: int, dtype: str) -> tuple[np.ndarray, ...]:
    """x, scale, (bias,) and dy, rounded to `dtype`. x has a mean of 0.5, so that a LayerNorm that did not
    centre would be wrong by far more than the tolerance, and the parameters are far from 1 and 0, so
    that a norm that ignored them would be too."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, features), dtype=np.float32) + 0.5
    scale = rng.uniform(0.5, 1.5, features).astype(np.float32)
    bias = 0.5 * rng.standard_normal(features, dtype=np.float32)
    dy = rng.standard_normal((rows, features), dtype=np.float32)
    operands = (x, scale, bias, dy) if norm == "layer_norm" else (x, scale, dy)
    return tuple(operand.astype(jnp.dtype(dtype)) for operand in operands)


def _expected(
    norm: str, backward: bool, operands: tuple[np.ndarray, ...], rows: np.ndarray
) -> tuple[np.ndarray, ...]:
    """The float64 output, or dx, at `rows`, and the parameters' gradients whole (they sum over every
    row, which reference.py does a cache-sized chunk at a time). Rows are independent, so the sampled
    rows are exactly those of the full reference, whose float64 temporaries at 32768 x 8192 took over
    20 s of host time and 12 GB of memory per case."""
    *inputs, dy = operands
    if norm == "layer_norm":
        x, scale, bias = inputs
        if backward:
            return reference.layer_norm_grad(x, scale, bias, EPS, dy, rows=rows)
        return (reference.layer_norm(x[rows], scale, bias, EPS),)
    x, scale = inputs
    if backward:
        return reference.rms_norm_grad(x, scale, EPS, dy, rows=rows)
    return (reference.rms_norm(x[rows], scale, EPS),)


def _check(
    what: str, norm: str, backward: bool, dtype: str, operands: tuple[np.ndarray, ...], result: Any
) -> None:
    rows = sample_indices(len(operands[0]))
    expected = _expected(norm, backward, operands, rows)
    if not backward:
        check_close(what, np.asarray(result[rows]), expected[0], dtype)
        return
    names = ("dx", "dscale", "dbias")[: len(expected)]
    for name, actual, want in zip(names, result, expected, strict=True):
        check_close(f"{what} {name}", np.asarray(actual[rows] if name == "dx" else actual), want, dtype)


def test_norm(
    benchmark: Any, measure: Any, norm: str, pass_: str, dtype: str, rows: int, features: int
) -> None:
    backward = pass_ == "backward"
    host = _operands(norm, rows, features, dtype)
    operands = tuple(jnp.asarray(operand) for operand in host)
    args = operands if backward else operands[:-1]
    itemsize = jnp.dtype(dtype).itemsize
    what = f"{norm} {pass_} {dtype} {rows}x{features}"
    measure(
        _kernel(norm, backward),
        *args,
        work=Work(bytes=norm_bytes(rows, features, itemsize, backward=backward)),
        check=lambda result: _check(what, norm, backward, dtype, host, result),
    )
