"""Dense matmul (m x k) @ (k x n) in fp32, bf16 and, on GPUs with FP8 tensor cores, fp8.

fp8 is timed the way the recipes use it (harness/models/layers.py): E4M3 operands with per-tensor scales,
dequantized inside the jitted function, which XLA rewrites into one FP8 GEMM with a bf16 output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbench.harness.measure import peaks
from jaxbench.harness.microbench.work import Work, check_close, matmul_flops, sample_indices

CASES = {
    "tiny": [
        {"dtype": dtype, "m": m, "n": n, "k": k}
        for dtype in ("float32", "bfloat16", "float8_e4m3fn")
        for m, n, k in ((256, 256, 256), (512, 256, 1024))
    ],
    "full": [
        {"dtype": dtype, "m": m, "n": n, "k": k}
        for dtype in ("float32", "bfloat16", "float8_e4m3fn")
        # square, and LLaMA2-7B's MLP up-projection for 8 sequences of 2048 tokens (d 4096 -> ffn 11008)
        for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 11008, 4096))
    ],
}

PRECISION = {"float32": "fp32", "bfloat16": "bf16", "float8_e4m3fn": "fp8"}


def _operands(m: int, n: int, k: int, dtype: str) -> tuple[Any, ...]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    if dtype != "float8_e4m3fn":
        return jnp.asarray(a, dtype), jnp.asarray(b, dtype)
    # Per-tensor scales put each operand's largest magnitude at E4M3's largest finite value (448).
    limit = float(jnp.finfo(jnp.float8_e4m3fn).max)
    scale_a, scale_b = float(np.abs(a).max()) / limit, float(np.abs(b).max()) / limit
    return (
        jnp.asarray(a / scale_a, jnp.float8_e4m3fn),
        jnp.asarray(b / scale_b, jnp.float8_e4m3fn),
        jnp.float32(scale_a),
        jnp.float32(scale_b),
    )


@jax.jit
def _matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    return a @ b


@jax.jit
def _fp8_matmul(a: jax.Array, b: jax.Array, scale_a: jax.Array, scale_b: jax.Array) -> jax.Array:
    dequantized_a = a.astype(jnp.bfloat16) * scale_a.astype(jnp.bfloat16)
    dequantized_b = b.astype(jnp.bfloat16) * scale_b.astype(jnp.bfloat16)
    return jnp.dot(dequantized_a, dequantized_b, preferred_element_type=jnp.bfloat16)


def _reference(operands: tuple[Any, ...], rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """float64 product of exactly the values the kernel sees (FP8 inputs already rounded and rescaled), at
    the given rows and columns of the output: each entry is one row of a times one column of b, so the
    sampled entries are exact and cost nothing else. The whole product would redo the kernel's entire work
    in float64 on the host, 12 s on two cores at 8192^3."""
    a, b = (
        np.asarray(operands[0][rows], dtype=np.float64),
        np.asarray(operands[1][:, columns], dtype=np.float64),
    )
    if len(operands) == 4:
        a, b = a * float(operands[2]), b * float(operands[3])
    return a @ b


def _checker(operands: tuple[Any, ...], m: int, n: int, k: int, dtype: str) -> Callable[[Any], float]:
    """The check of the kernel's product, its reference computed once, at rows and columns sampled over
    the whole output so that a wrong tile, transpose, stride or scale shows."""
    rows, columns = sample_indices(m), sample_indices(n)
    expected = _reference(operands, rows, columns)

    def check(product: Any) -> float:
        sampled = np.asarray(product[rows][:, columns])  # gathered on the device: 256 x 256 comes back
        return check_close(f"matmul {dtype} {m}x{n}x{k}", sampled, expected, dtype)

    return check


def test_matmul(benchmark: Any, measure: Any, device_kind: str, dtype: str, m: int, n: int, k: int) -> None:
    if dtype == "float8_e4m3fn" and not peaks.supports_fp8(device_kind):
        pytest.skip(f"fp8 matmuls need a GPU with FP8 tensor cores; this is {device_kind!r}")
    operands = _operands(m, n, k, dtype)
    kernel = _fp8_matmul if len(operands) == 4 else _matmul
    itemsize = jnp.dtype(dtype).itemsize
    output_itemsize = 2 if dtype == "float8_e4m3fn" else itemsize
    moved = (m * k + k * n) * itemsize + m * n * output_itemsize
    measure(
        kernel,
        *operands,
        work=Work(flops=matmul_flops(m, n, k), bytes=moved, precision=PRECISION[dtype]),
        check=_checker(operands, m, n, k, dtype),
    )
