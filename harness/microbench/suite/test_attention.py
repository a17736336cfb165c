"""Scaled dot-product attention through `jax.nn.dot_product_attention`, XLA's implementation against
cuDNN's fused flash attention, forward and forward + backward.

The layout is jax's BTNH: q (batch, seq, heads, head_dim), k and v (batch, seq, kv_heads, head_dim), with
multi-head (kv_heads == heads) and grouped-query (kv_heads < heads) cases, causal and not, self-attention
(one length for queries and keys). `pass_` "backward" times one call of the jitted gradient of
sum(attention(q, k, v) * dout) with respect to q, k and v, which runs the forward pass too.

The full sizes keep batch x seq at 16384 tokens, as FlashAttention's own benchmarks do, so that the
longer sequences show the quadratic cost rather than more memory: XLA's implementation materializes the
(seq x seq) logits in float32 for every head, which at 8192 tokens and batch 2 is already 17 GB.

The check compares with the float64 references in reference.py. Attention never mixes batch elements or
kv-head groups, so at large sizes the check covers two (batch, kv head) groups, the first and the last,
which still catches a wrong offset or stride along either axis; the float64 reference for every group
would take minutes of host time per case.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Literal, cast

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from harness.microbench.suite import reference
from harness.microbench.work import Work, attention_flops, check_close

# (batch, seq, heads, kv_heads, head_dim)
TINY_SHAPES = ((2, 128, 4, 4, 64), (2, 256, 8, 2, 32))
FULL_SHAPES = tuple(
    (16384 // seq, seq, heads, kv_heads, 128)
    for seq in (2048, 4096, 8192)
    # multi-head, and LLaMA-3-8B's grouped-query layout (32 query heads sharing 8 kv heads)
    for heads, kv_heads in ((32, 32), (32, 8))
)
# cuDNN's flash attention takes bfloat16 and float16 only; float32 runs through XLA, on the CPU as well.
TINY_KERNELS = (("xla", "float32"), ("xla", "bfloat16"), ("cudnn", "bfloat16"))
FULL_KERNELS = (("xla", "bfloat16"), ("cudnn", "bfloat16"))


def _cases(shapes: tuple[tuple[int, ...], ...], kernels: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    # The implementation varies fastest so that consecutive cases share one cached float64 reference.
    return [
        {
            "pass_": pass_,
            "causal": causal,
            "batch": batch,
            "seq": seq,
            "heads": heads,
            "kv_heads": kv_heads,
            "head_dim": head_dim,
            "dtype": dtype,
            "implementation": implementation,
        }
        for pass_ in ("forward", "backward")
        for causal in (False, True)
        for batch, seq, heads, kv_heads, head_dim in shapes
        for implementation, dtype in kernels
    ]


CASES = {"tiny": _cases(TINY_SHAPES, TINY_KERNELS), "full": _cases(FULL_SHAPES, FULL_KERNELS)}

Implementation = Literal["xla", "cudnn"]

PRECISION = {"float32": "fp32", "bfloat16": "bf16"}

# Up to this many (query, key) score entries over all batch elements and heads the check covers every
# (batch, kv head) group; a float64 reference of 2^26 entries takes a few seconds of host time.
CHECK_ALL_UP_TO = 2**26


@dataclasses.dataclass(frozen=True)
class Problem:
    batch: int
    seq: int
    heads: int
    kv_heads: int
    head_dim: int
    dtype: str
    causal: bool

    @property
    def group_size(self) -> int:
        return self.heads // self.kv_heads

    def operands(self) -> tuple[np.ndarray, ...]:
        """q, k, v and the output's cotangent dout, already rounded to the kernel's dtype, so that the
        reference sees exactly the values the kernel does."""
        rng = np.random.default_rng(0)
        query_shape = (self.batch, self.seq, self.heads, self.head_dim)
        kv_shape = (self.batch, self.seq, self.kv_heads, self.head_dim)
        return tuple(
            rng.standard_normal(shape, dtype=np.float32).astype(jnp.dtype(self.dtype))
            for shape in (query_shape, kv_shape, kv_shape, query_shape)
        )

    def checked_groups(self) -> list[tuple[int, int]]:
        """(batch, kv head) pairs the check covers: all of them while the reference is cheap, else the
        first and the last."""
        if self.batch * self.heads * self.seq * self.seq <= CHECK_ALL_UP_TO:
            return [(b, g) for b in range(self.batch) for g in range(self.kv_heads)]
        return sorted({(0, 0), (self.batch - 1, self.kv_heads - 1)})

    def gather(self, array: Any, *, per_kv_head: bool) -> np.ndarray:
        """The checked groups' slices of a q-shaped (or, per_kv_head, k-shaped) array, stacked on axis 0:
        each slice is a self-contained attention problem with one kv head."""
        host = np.asarray(array)
        width = 1 if per_kv_head else self.group_size
        return np.concatenate(
            [host[b : b + 1, :, g * width : (g + 1) * width] for b, g in self.checked_groups()]
        )


@functools.lru_cache(maxsize=1)
def _expected(problem: Problem, backward: bool) -> tuple[np.ndarray, ...]:
    """The float64 output (forward) or (dq, dk, dv) (backward) of the checked groups."""
    q, k, v, dout = problem.operands()
    q, dout = (problem.gather(x, per_kv_head=False) for x in (q, dout))
    k, v = (problem.gather(x, per_kv_head=True) for x in (k, v))
    if backward:
        return reference.attention_grad(q, k, v, dout, causal=problem.causal)
    return (reference.attention(q, k, v, causal=problem.causal),)


def _kernel(implementation: Implementation, causal: bool, backward: bool) -> Callable[..., Any]:
    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation=implementation)

    if not backward:
        return jax.jit(attend)

    def loss(q: jax.Array, k: jax.Array, v: jax.Array, dout: jax.Array) -> jax.Array:
        # A random cotangent rather than sum(output), which is blind to where each output element lands:
        # a kernel that wrote its results to the wrong positions would get the right gradients.
        return jnp.sum(attend(q, k, v).astype(jnp.float32) * dout.astype(jnp.float32))

    return jax.jit(jax.grad(loss, argnums=(0, 1, 2)))


def _check(problem: Problem, backward: bool, result: Any, what: str) -> None:
    expected = _expected(problem, backward)
    if not backward:
        check_close(what, problem.gather(result, per_kv_head=False), expected[0], problem.dtype)
        return
    for name, actual, want in zip(("dq", "dk", "dv"), result, expected, strict=True):
        actual_groups = problem.gather(actual, per_kv_head=name != "dq")
        check_close(f"{what} {name}", actual_groups, want, problem.dtype)


def test_attention(
    benchmark: Any,
    measure: Any,
    platform: str,
    pass_: str,
    causal: bool,
    batch: int,
    seq: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    dtype: str,
    implementation: str,
) -> None:
    if implementation == "cudnn" and platform != "gpu":
        pytest.skip(f"cuDNN flash attention needs an NVIDIA GPU; this platform is {platform!r}")
    backward = pass_ == "backward"
    problem = Problem(batch, seq, heads, kv_heads, head_dim, dtype, causal)
    q, k, v, dout = (jnp.asarray(x) for x in problem.operands())
    args = (q, k, v, dout) if backward else (q, k, v)
    flops = attention_flops(batch, heads, seq, seq, head_dim, causal=causal, backward=backward)
    # The least traffic: q, k and v read and the output written; backward also reads the output's
    # cotangent and writes dq, dk and dv (a fused backward rereads the output, not counted here).
    moved = 2 * (q.nbytes + k.nbytes) + (dout.nbytes + q.nbytes + 2 * k.nbytes if backward else 0)
    what = (
        f"attention {implementation} {pass_} {dtype} causal={causal} "
        f"{batch}x{seq} heads {heads}/{kv_heads}x{head_dim}"
    )
    measure(
        _kernel(cast(Implementation, implementation), causal, backward),
        *args,
        work=Work(flops=flops, bytes=moved, precision=PRECISION[dtype]),
        check=lambda result: _check(problem, backward, result, what),
    )
