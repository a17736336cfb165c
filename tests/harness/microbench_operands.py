"""What the tests of the microbenchmarks' float64 references share (harness/microbench/suite/reference.py):
the tolerances of agreement, the attention layouts and their operands, and a value with its gradients
computed as one compiled program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

FLOAT32_AGREEMENT = 1e-5  # float32 kernels against the float64 reference: a few float32 roundings


FLOAT64_AGREEMENT = 1e-12


# (batch, q_len, kv_len, heads, kv_heads, head_dim, causal)
ATTENTION_LAYOUTS = {
    "multi-head": (2, 16, 16, 4, 4, 8, False),
    "multi-head causal": (2, 16, 16, 4, 4, 8, True),
    "grouped-query": (2, 16, 16, 8, 2, 8, False),
    "grouped-query causal": (2, 16, 16, 8, 2, 8, True),
    "multi-query causal": (1, 12, 12, 3, 1, 16, True),
    "cross lengths": (2, 6, 10, 4, 2, 8, False),
    # jax aligns the causal mask at the top left when the lengths differ: query i sees keys 0..i
    "causal, more keys": (1, 6, 10, 4, 2, 8, True),
}


def attention_operands(
    batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int, seed: int = 0
) -> tuple[np.ndarray, ...]:
    """q, k, v and a cotangent for the output, float32."""
    rng = np.random.default_rng(seed)
    query_shape, kv_shape = (batch, q_len, heads, head_dim), (batch, kv_len, kv_heads, head_dim)
    return tuple(
        rng.standard_normal(shape, dtype=np.float32)
        for shape in (query_shape, kv_shape, kv_shape, query_shape)
    )


def value_and_vjp(fn: Callable[..., jax.Array], primals: tuple[Any, ...], cotangent: Any) -> tuple[Any, ...]:
    """fn(*primals) and its gradients against `cotangent`, as one compiled program: op-by-op autodiff
    would compile every primitive separately and take seconds per test."""

    def run(primals: tuple[Any, ...], cotangent: Any) -> tuple[Any, ...]:
        out, vjp = jax.vjp(fn, *primals)
        return (out, *vjp(cotangent))

    return tuple(jax.jit(run)(primals, cotangent))
