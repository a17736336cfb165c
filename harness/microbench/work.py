"""Arithmetic and checks shared by the kernel and collective microbenchmarks in harness/microbench/suite/.

Pure functions: the work each benchmark does (FLOPs, bytes), the rates derived from a measured time,
bus bandwidth as nccl-tests defines it, the fraction of the device's peak, and the comparison against a
float64 reference that every benchmark runs once before it is timed, so a fast wrong kernel fails
instead of being timed.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import numpy as np

from jaxbench.harness.measure import peaks

GIGA = 1e9  # GB/s as nccl-tests and NVIDIA's datasheets count them: 10^9 bytes


class Collective(enum.StrEnum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    BROADCAST = "broadcast"


def bus_bandwidth_factor(collective: Collective, ranks: int) -> float:
    """busbw / algbw, per nccl-tests' doc/PERFORMANCE.md.

    The factor turns the algorithm bandwidth (bytes / time) into the bandwidth each link must carry with
    an optimal algorithm, comparable to the hardware's peak whatever the number of ranks: all-reduce
    moves 2(n-1)/n of the data over every link, all-gather, reduce-scatter and all-to-all (n-1)/n, and a
    broadcast 1.
    """
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    if collective is Collective.ALL_REDUCE:
        return 2 * (ranks - 1) / ranks
    if collective is Collective.BROADCAST:
        return 1.0
    return (ranks - 1) / ranks


def collective_bytes(collective: Collective, elements_per_rank: int, itemsize: int, ranks: int) -> int:
    """The `size` nccl-tests divides by the time: the per-rank buffer for all-reduce, all-to-all and
    broadcast; the gathered output (all ranks' parts) for all-gather; the input for reduce-scatter, which
    is also all ranks' parts. `elements_per_rank` is each rank's own part: its input for all-reduce,
    all-to-all, broadcast and all-gather, its output for reduce-scatter."""
    per_rank = elements_per_rank * itemsize
    if collective in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        return per_rank * ranks
    return per_rank


def matmul_flops(m: int, n: int, k: int) -> float:
    """(m x k) @ (k x n): one multiply and one add per output element and reduction step."""
    return 2.0 * m * n * k


def attention_flops(
    batch: int, heads: int, q_len: int, kv_len: int, head_dim: int, *, causal: bool, backward: bool = False
) -> float:
    """The two attention matmuls (QK^T and PV) over the (query, key) pairs the mask keeps.

    Softmax and masking are not counted (the usual convention, e.g. FlashAttention's). Causal attention
    with equal lengths keeps q(q+1)/2 of the q^2 pairs. The backward pass does 2.5x the forward matmul
    work (dV, dP, dQ, dK, plus recomputing P), so forward + backward is 3.5x.
    """
    if causal and q_len != kv_len:
        raise ValueError(f"causal attention is counted for equal lengths only, got {q_len} and {kv_len}")
    pairs = q_len * (q_len + 1) / 2 if causal else q_len * kv_len
    forward = 4.0 * batch * heads * pairs * head_dim
    return forward * 3.5 if backward else forward


def norm_bytes(rows: int, features: int, itemsize: int, *, backward: bool) -> int:
    """The least memory traffic of a LayerNorm/RMSNorm over `features`: the forward pass reads x and the
    scale and writes y; forward + backward (what a gradient call runs) reads x, the scale and dy and
    writes dx and the scale's gradient. Intermediate statistics are per row and negligible."""
    activations = rows * features * itemsize
    parameter = features * itemsize
    if backward:
        return 3 * activations + 2 * parameter
    return 2 * activations + parameter


@dataclasses.dataclass(frozen=True)
class Work:
    """What one call of a benchmarked function does, per device."""

    flops: float = 0.0
    bytes: float = 0.0
    precision: str | None = None
    """fp32, bf16 or fp8 for matmul-bound work: selects the peak in harness/measure/peaks.py."""
    collective: Collective | None = None
    ranks: int = 1
    memory_bound: bool = True
    """Bytes-only work is judged against the device's memory (HBM) bandwidth; False for traffic bound by
    another link (host transfers over PCIe or NVLink-C2C), which gets no fraction of peak."""

    def __post_init__(self) -> None:
        if self.ranks < 1:
            raise ValueError(f"ranks must be at least 1, got {self.ranks}")


def rates(work: Work, seconds: float, device_kind: str) -> dict[str, Any]:
    """The figures a benchmark reports in pytest-benchmark's extra_info (ingested by results/ingest.py)."""
    if not seconds > 0:
        raise ValueError(f"a measured time must be positive, got {seconds}")
    info: dict[str, Any] = {"seconds": seconds}
    if work.flops:
        info["flops"] = work.flops
        info["tflops"] = work.flops / seconds / peaks.TERA
        peak = peaks.peak_flops_per_device(device_kind, work.precision) if work.precision else None
        if peak:
            info["fraction_of_peak"] = work.flops / seconds / peak
    if work.bytes:
        info["bytes"] = work.bytes
        info["gb_per_s"] = work.bytes / seconds / GIGA
        if work.collective is not None:
            info["algorithm_bandwidth_gb_per_s"] = info["gb_per_s"]
            info["bus_bandwidth_gb_per_s"] = info["gb_per_s"] * bus_bandwidth_factor(
                work.collective, work.ranks
            )
        elif (
            not work.flops
            and work.memory_bound
            and (bandwidth := peaks.memory_bandwidth_per_device(device_kind))
        ):
            info["fraction_of_peak"] = work.bytes / seconds / bandwidth
    return info


# Largest error allowed relative to the reference's largest magnitude, by the dtype the kernel computes
# in: float32 matmuls may run on TF32 tensor cores (10-bit mantissa) on GPUs, bfloat16 keeps 8 bits, and
# FP8 results are compared against the product of the already-rounded FP8 inputs, so only the
# accumulation and the bf16 output rounding remain.
TOLERANCE = {"float64": 1e-10, "float32": 5e-3, "bfloat16": 3e-2, "float16": 5e-3, "float8": 3e-2}


class ReferenceMismatch(AssertionError):
    """A kernel gave a wrong answer: the benchmark fails instead of timing it."""


def relative_error(actual: Any, expected: Any) -> float:
    """max |actual - expected| / max |expected| (normwise, so values near zero do not dominate)."""
    got = np.asarray(actual, dtype=np.float64)
    want = np.asarray(expected, dtype=np.float64)
    if got.shape != want.shape:
        raise ReferenceMismatch(f"shape {got.shape}, expected {want.shape}")
    if not np.all(np.isfinite(got)):
        return float("inf")
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    return float(np.max(np.abs(got - want))) / (scale or 1.0) if want.size else 0.0


# Rows (or columns) of a large output a check compares. The check used to recompute every output element
# in float64 on the host, which at the full sizes (attention over 8192 tokens, 8192^3 matmuls, 32768 x 8192
# norms) took from seconds to tens of seconds per case, longer than the timing itself: the full suite had
# not got past its attention cases after six minutes on an H200. The references compute the sampled rows
# exactly, so a sampled element that is wrong fails as it did before.
SAMPLED_ROWS = 256


def sample_indices(size: int, count: int = SAMPLED_ROWS) -> np.ndarray:
    """Sorted indices into range(size) for a check to compare: all of them up to `count`, else the first,
    the last (where edge and tail handling go wrong) and count - 2 others drawn with a fixed seed, so that
    every run checks the same ones and, unlike an even stride, they fall at varied offsets within tiles."""
    if size < 0 or count < 2:
        raise ValueError(f"need a size of at least 0 and a count of at least 2, got {size} and {count}")
    if size <= count:
        return np.arange(size)
    inner = np.random.default_rng(0).choice(size - 2, count - 2, replace=False) + 1
    return np.sort(np.concatenate(([0, size - 1], inner)))


def check_close(what: str, actual: Any, expected: Any, dtype: str) -> float:
    """Raise ReferenceMismatch unless `actual` matches the float64 reference within the dtype's tolerance."""
    key = "float8" if dtype.startswith("float8") else dtype
    if key not in TOLERANCE:
        raise ValueError(
            f"no tolerance for dtype {dtype!r}; expected one of {', '.join(TOLERANCE)} or float8_*"
        )
    tolerance = TOLERANCE[key]
    error = relative_error(actual, expected)
    if not error <= tolerance:
        raise ReferenceMismatch(
            f"{what}: relative error {error:.3g} against the float64 reference exceeds {tolerance:g} "
            f"for {dtype}"
        )
    return error
