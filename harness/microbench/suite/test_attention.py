"""Scaled dot-product attention through `jax.nn.dot_product_attention`, XLA's implementation against
cuDNN's fused flash attention, forward and forward + backward.

The layout is jax's BTNH, with multi-head and grouped-query cases, causal and not. The full sizes keep
batch x seq at 16384 tokens, as FlashAttention's benchmarks do, so longer sequences show the quadratic cost.
The float64 check covers the first and last (batch, kv head) groups at 256 sampled rows, which still
catches a wrong offset or stride while keeping host time bounded. Why those samples: docs/design.md,
"Attention".

    python -m pytest harness/microbench/suite/test_attention.py --sizes tiny
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

from jaxbench.harness.microbench.suite import reference
from jaxbench.harness.microbench.work import Work, attention_flops, check_close, sample_indices

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
# (batch, kv head) group and, in each, dk and dv; a float64 reference of 2^26 entries takes a few seconds
# of host time.
CHECK_ALL_UP_TO = 2**26


@functools.lru_cache(maxsize=1)
def _operands(
    batch: int, seq: int, heads: int, kv_heads: int, head_dim: int, dtype: str
) -> tuple[np.ndarray, ...]:
    """Problem.operands, cached and read-only: the test and its check's reference both need them, and so
    do consecutive cases (the two implementations), while at the full sizes drawing them takes seconds."""
    rng = np.random.default_rng(0)
    query_shape = (batch, seq, heads, head_dim)
    kv_shape = (batch, seq, kv_heads, head_dim)
    operands = tuple(
        rng.standard_normal(shape, dtype=np.float32).astype(jnp.dtype(dtype))
        for shape in (query_shape, kv_shape, kv_shape, query_shape)
    )
    for operand in operands:
        operand.flags.writeable = False
    return operands


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

    @property
    def checked_whole(self) -> bool:
        """Whether the check covers every group, and dk and dv in each."""
        return self.batch * self.heads * self.seq * self.seq <= CHECK_ALL_UP_TO

    def operands(self) -> tuple[np.ndarray, ...]:
        """q, k, v and the output's cotangent dout, already rounded to the kernel's dtype, so that the
        reference sees exactly the values the kernel does."""
        return _operands(self.batch, self.seq, self.heads, self.kv_heads, self.head_dim, self.dtype)

    def checked_groups(self) -> list[tuple[int, int]]:
        """(batch, kv head) pairs whose output or dq the check covers: all of them while the reference is
        cheap, else the first and the last."""
        if self.checked_whole:
            return [(b, g) for b in range(self.batch) for g in range(self.kv_heads)]
        return sorted({(0, 0), (self.batch - 1, self.kv_heads - 1)})

    def gradient_groups(self) -> list[tuple[int, int]]:
        """The checked groups whose dk and dv the check covers too: all while the reference is cheap, else
        the last, where a wrong batch or head offset lands furthest from the right data."""
        groups = self.checked_groups()
        return groups if self.checked_whole else groups[-1:]

    def checked_rows(self) -> np.ndarray:
        """The query rows of the output and dq, and the key rows of dk and dv, that the check compares:
        every one up to 256 tokens, else 256 spread over the sequence."""
        return sample_indices(self.seq)

    def group(self, array: Any, b: int, g: int, *, per_kv_head: bool) -> np.ndarray:
        """Group (b, g) of a q-shaped (or, per_kv_head, k-shaped) array, batch axis kept: a self-contained
        attention problem with one kv head. A device array is sliced before it is copied to the host."""
        width = 1 if per_kv_head else self.group_size
        return np.asarray(array[b : b + 1, :, g * width : (g + 1) * width])


@functools.lru_cache(maxsize=1)
def _expected(problem: Problem, backward: bool) -> dict[tuple[int, int], tuple[np.ndarray, ...]]:
    """For each checked group, the float64 output (forward) or (dq, dk, dv) (backward) at the checked
    rows; dk and dv have no rows outside the gradient groups."""
    q, k, v, dout = problem.operands()
    rows = problem.checked_rows()
    expected: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}
    for b, g in problem.checked_groups():
        q_group, dout_group = (problem.group(x, b, g, per_kv_head=False) for x in (q, dout))
        k_group, v_group = (problem.group(x, b, g, per_kv_head=True) for x in (k, v))
        if backward:
            key_rows = rows if (b, g) in problem.gradient_groups() else rows[:0]
            expected[b, g] = reference.attention_grad(
                q_group,
                k_group,
                v_group,
                dout_group,
                causal=problem.causal,
                query_rows=rows,
                key_rows=key_rows,
            )
        else:
            expected[b, g] = (
                reference.attention(q_group, k_group, v_group, causal=problem.causal, rows=rows),
            )
    return expected


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
    rows = problem.checked_rows()
    names, outputs = (("dq", "dk", "dv"), result) if backward else (("output",), (result,))
    for (b, g), expected in _expected(problem, backward).items():
        for name, actual, want in zip(names, outputs, expected, strict=True):
            if not want.shape[1]:  # dk or dv outside the gradient groups
                continue
            got = problem.group(actual, b, g, per_kv_head=name in ("dk", "dv"))[:, rows]
            check_close(f"{what} {name} of batch {b} kv head {g}", got, want, problem.dtype)


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
