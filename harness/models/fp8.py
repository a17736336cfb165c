"""FP8 matmuls for the fp8 precision: an einsum whose operands are quantised to E4M3 forward and whose
output gradient is quantised to E5M2 backward, each with per-tensor current scaling (its absolute maximum
mapped onto the format's largest value), as a custom VJP. `Dense` (layers.py) uses it where `fp8` is set.

    JAX_PLATFORMS=cpu python -m pytest -q tests/harness/test_fp8.py
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

# Largest finite values of the FP8 formats (OCP 8-bit floating point spec, 2023).
E4M3_MAX = float(jnp.finfo(jnp.float8_e4m3fn).max)  # 448
E5M2_MAX = float(jnp.finfo(jnp.float8_e5m2).max)  # 57344


def _scale_for(x: jax.Array, format_max: float) -> jax.Array:
    """Per-tensor current scaling: map the tensor's absolute maximum onto the format's largest value."""
    amax = jnp.max(jnp.abs(x)).astype(jnp.float32)
    return jnp.maximum(amax, 1e-12) / format_max


def _quantize_dequantize(x: jax.Array, fp8_dtype: Any, format_max: float) -> jax.Array:
    # XLA's GPU compiler rewrites convert(f8 -> T) -> multiply(scale) -> dot into a cuBLASLt FP8 GEMM
    # only when the dequantized value goes straight into the dot: dequantizing in float32 and then
    # converting to bf16 put a convert between them, and on an H200 the "fp8" LLaMA 2 1B then ran plain
    # bf16 GEMMs plus the quantization work (272.6 ms a step against bf16's 247.6 ms).
    scale = _scale_for(x, format_max)
    q = (x.astype(jnp.float32) / scale).clip(-format_max, format_max).astype(fp8_dtype)
    return q.astype(x.dtype) * scale.astype(x.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def fp8_einsum(spec: str, x: jax.Array, w: jax.Array) -> jax.Array:
    """einsum with FP8 operands: E4M3 inputs and weights forward, E5M2 output gradients backward."""
    return _fp8_einsum_fwd(spec, x, w)[0]


def _fp8_einsum_fwd(spec: str, x: jax.Array, w: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    xq = _quantize_dequantize(x, jnp.float8_e4m3fn, E4M3_MAX)
    wq = _quantize_dequantize(w, jnp.float8_e4m3fn, E4M3_MAX)
    return jnp.einsum(spec, xq, wq), (xq, wq)


def _fp8_einsum_bwd(
    spec: str, residuals: tuple[jax.Array, jax.Array], grad: jax.Array
) -> tuple[jax.Array, jax.Array]:
    xq, wq = residuals
    # E5M2 trades mantissa for range: gradients span more orders of magnitude than activations.
    gq = _quantize_dequantize(grad, jnp.float8_e5m2, E5M2_MAX)
    _, pullback = jax.vjp(lambda a, b: jnp.einsum(spec, a, b), xq, wq)
    dx, dw = pullback(gq)
    return dx, dw


fp8_einsum.defvjp(_fp8_einsum_fwd, _fp8_einsum_bwd)
