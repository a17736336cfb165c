"""The arithmetic behind the microbenchmarks' reported figures (harness/microbench/work.py) and the collective
references in harness/microbench/suite/reference.py.

Expected numbers are worked out by hand from nccl-tests' doc/PERFORMANCE.md (algbw = S/t; busbw = algbw x
2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast; S the
per-rank buffer, or all ranks' parts for all-gather and reduce-scatter) and from the datasheet peaks,
never by calling the function under test a second way.

    pytest tests/harness/test_microbench_arith.py -q
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from jaxbench.harness.measure import peaks
from jaxbench.harness.microbench.suite import reference
from jaxbench.harness.microbench.work import (
    Collective,
    ReferenceMismatch,
    Work,
    attention_flops,
    bus_bandwidth_factor,
    check_close,
    collective_bytes,
    matmul_flops,
    norm_bytes,
    rates,
    relative_error,
    sample_indices,
)

H100 = "NVIDIA H100 80GB HBM3"

# --- bus bandwidth and collective sizes ------------------------------------------------------------------


def test_all_reduce_of_1_gb_in_10_ms_on_8_ranks() -> None:
    # 1e9 bytes / 0.01 s = 100 GB/s; every link carries 2 * 7/8 of it: 175 GB/s.
    size = collective_bytes(Collective.ALL_REDUCE, 250_000_000, 4, 8)
    assert size == 1_000_000_000  # all-reduce's size is the per-rank buffer, not 8 of them
    info = rates(Work(bytes=size, collective=Collective.ALL_REDUCE, ranks=8), 0.010, "cpu")
    assert info["gb_per_s"] == pytest.approx(100.0)
    assert info["algorithm_bandwidth_gb_per_s"] == pytest.approx(100.0)
    assert info["bus_bandwidth_gb_per_s"] == pytest.approx(175.0)
    assert "fraction_of_peak" not in info  # a link's peak is not the device's memory bandwidth


def test_all_gather_size_is_the_gathered_output_and_busbw_is_seven_eighths() -> None:
    # 8 ranks each contribute 2^20 float32 (4 MiB): S = 32 MiB = 33,554,432 bytes; in 1 ms that is
    # 33.554432 GB/s of algorithm bandwidth and 7/8 of it, 29.360128 GB/s, on the bus.
    size = collective_bytes(Collective.ALL_GATHER, 2**20, 4, 8)
    assert size == 33_554_432
    info = rates(Work(bytes=size, collective=Collective.ALL_GATHER, ranks=8), 0.001, "cpu")
    assert info["algorithm_bandwidth_gb_per_s"] == pytest.approx(33.554432)
    assert info["bus_bandwidth_gb_per_s"] == pytest.approx(29.360128)


def test_reduce_scatter_size_is_all_ranks_parts() -> None:
    # Each of 4 ranks ends with 1000 bfloat16 elements: the reduced input is 4 x 1000 x 2 = 8000 bytes.
    size = collective_bytes(Collective.REDUCE_SCATTER, 1000, 2, 4)
    assert size == 8000
    info = rates(Work(bytes=size, collective=Collective.REDUCE_SCATTER, ranks=4), 1e-6, "cpu")
    assert info["algorithm_bandwidth_gb_per_s"] == pytest.approx(8.0)
    assert info["bus_bandwidth_gb_per_s"] == pytest.approx(6.0)


@pytest.mark.parametrize("collective", [Collective.ALL_TO_ALL, Collective.BROADCAST, Collective.ALL_REDUCE])
def test_per_rank_buffer_collectives_do_not_scale_with_ranks(collective: Collective) -> None:
    assert collective_bytes(collective, 1024, 4, 2) == 4096
    assert collective_bytes(collective, 1024, 4, 8) == 4096


@pytest.mark.parametrize(
    ("collective", "ranks", "factor"),
    [
        (Collective.ALL_REDUCE, 8, 1.75),
        (Collective.ALL_REDUCE, 4, 1.5),
        (Collective.ALL_REDUCE, 2, 1.0),
        (Collective.ALL_REDUCE, 1, 0.0),  # nothing crosses a link when there is no other rank
        (Collective.ALL_GATHER, 8, 0.875),
        (Collective.ALL_GATHER, 1, 0.0),
        (Collective.REDUCE_SCATTER, 4, 0.75),
        (Collective.ALL_TO_ALL, 16, 0.9375),
        (Collective.BROADCAST, 8, 1.0),
        (Collective.BROADCAST, 2, 1.0),
    ],
)
def test_bus_bandwidth_factor(collective: Collective, ranks: int, factor: float) -> None:
    assert bus_bandwidth_factor(collective, ranks) == pytest.approx(factor)


def test_broadcast_bus_bandwidth_equals_algorithm_bandwidth() -> None:
    info = rates(Work(bytes=2e9, collective=Collective.BROADCAST, ranks=8), 0.1, "cpu")
    assert info["algorithm_bandwidth_gb_per_s"] == pytest.approx(20.0)
    assert info["bus_bandwidth_gb_per_s"] == pytest.approx(20.0)


@pytest.mark.parametrize("ranks", [0, -1])
def test_fewer_than_one_rank_is_rejected(ranks: int) -> None:
    with pytest.raises(ValueError, match="ranks"):
        bus_bandwidth_factor(Collective.ALL_REDUCE, ranks)
    with pytest.raises(ValueError, match="ranks"):
        rates(Work(bytes=1e6, collective=Collective.ALL_GATHER, ranks=ranks), 1.0, "cpu")


# --- rates -----------------------------------------------------------------------------------------------


def test_tflops_and_fraction_of_the_bf16_peak() -> None:
    # 2e12 FLOPs in 0.5 s = 4 TFLOP/s; H100 SXM's dense BF16 peak is 989.4 TFLOP/s.
    info = rates(Work(flops=2e12, precision="bf16"), 0.5, H100)
    assert info["seconds"] == 0.5
    assert info["flops"] == 2e12
    assert info["tflops"] == pytest.approx(4.0)
    assert info["fraction_of_peak"] == pytest.approx(4e12 / 989.4e12)


def test_fraction_of_the_fp32_peak_uses_tf32() -> None:
    info = rates(Work(flops=494.7e12, precision="fp32"), 1.0, H100)  # exactly the dense TF32 peak
    assert info["fraction_of_peak"] == pytest.approx(1.0)


@pytest.mark.parametrize(("device_kind", "precision"), [("cpu", "bf16"), (H100, None)])
def test_no_fraction_of_peak_without_a_known_peak(device_kind: str, precision: str | None) -> None:
    info = rates(Work(flops=1e12, precision=precision), 1.0, device_kind)
    assert info["tflops"] == pytest.approx(1.0)
    assert "fraction_of_peak" not in info


def test_memory_bound_fraction_of_hbm_bandwidth() -> None:
    # 3.35e9 bytes in 10 ms = 335 GB/s, a tenth of H100 SXM's 3.35 TB/s.
    info = rates(Work(bytes=3.35e9), 0.010, H100)
    assert info["gb_per_s"] == pytest.approx(335.0)
    assert info["fraction_of_peak"] == pytest.approx(0.1)
    bandwidth = peaks.memory_bandwidth_per_device(H100)
    assert bandwidth is not None
    assert info["fraction_of_peak"] == pytest.approx(3.35e9 / 0.010 / bandwidth)
    assert "fraction_of_peak" not in rates(Work(bytes=3.35e9), 0.010, "cpu")
    # A host transfer is bound by PCIe or NVLink-C2C, not HBM: no fraction of peak for it.
    host = rates(Work(bytes=3.35e9, memory_bound=False), 0.010, H100)
    assert host["gb_per_s"] == pytest.approx(335.0) and "fraction_of_peak" not in host


def test_unknown_dtype_and_rank_count_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="no tolerance for dtype 'int32'"):
        check_close("x", [1.0], [1.0], "int32")
    with pytest.raises(ValueError, match="ranks must be at least 1"):
        Work(bytes=1.0, ranks=0)


def test_compute_bound_work_is_not_also_judged_against_memory_bandwidth() -> None:
    # With both FLOPs and bytes, the fraction is of the FLOP peak only (1e12 / 0.01 s = 100 TFLOP/s).
    info = rates(Work(flops=1e12, bytes=1e9, precision="bf16"), 0.01, H100)
    assert info["fraction_of_peak"] == pytest.approx(100e12 / 989.4e12)
    assert info["gb_per_s"] == pytest.approx(100.0)


@pytest.mark.parametrize("seconds", [0.0, -1e-3, math.nan])
def test_a_time_must_be_positive(seconds: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        rates(Work(flops=1.0), seconds, "cpu")


# --- FLOPs and bytes -------------------------------------------------------------------------------------


def test_matmul_flops() -> None:
    assert matmul_flops(2, 3, 4) == 48  # 6 outputs x 4 multiply-adds x 2
    assert matmul_flops(4096, 4096, 4096) == 137_438_953_472


def test_attention_flops_full_mask() -> None:
    # QK^T and PV: 2 matmuls x 2 FLOPs x (5 x 7) pairs x 11 dims, for 2 x 3 (batch, head) pairs.
    assert attention_flops(2, 3, 5, 7, 11, causal=False) == 4 * 2 * 3 * 5 * 7 * 11


def test_attention_flops_causal_keeps_half_plus_the_diagonal() -> None:
    kept = sum(1 for query in range(4) for key in range(4) if key <= query)  # 10 of 16 pairs
    assert attention_flops(1, 1, 4, 4, 8, causal=True) == 4 * kept * 8 == 320
    assert attention_flops(1, 1, 4, 4, 8, causal=True, backward=True) == 3.5 * 320
    assert attention_flops(2, 2, 6, 6, 4, causal=False, backward=True) == 3.5 * 4 * 2 * 2 * 36 * 4


def test_causal_attention_needs_equal_lengths() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        attention_flops(1, 1, 4, 8, 8, causal=True)


def test_norm_bytes() -> None:
    # 4 rows x 8 features in bfloat16: activations 64 bytes, scale 16 bytes.
    assert norm_bytes(4, 8, 2, backward=False) == 64 + 16 + 64  # read x and scale, write y
    assert norm_bytes(4, 8, 2, backward=True) == 3 * 64 + 2 * 16  # read x, dy, scale; write dx, dscale


# --- check_close and relative_error ----------------------------------------------------------------------


def test_relative_error_is_normwise() -> None:
    assert relative_error([1.0, 2.0], [1.0, 2.5]) == pytest.approx(0.5 / 2.5)
    assert relative_error([1e-3, 0.0], [0.0, 0.0]) == pytest.approx(1e-3)  # all-zero reference: absolute
    assert relative_error(np.zeros((0, 3)), np.zeros((0, 3))) == 0.0


@pytest.mark.parametrize(
    ("dtype", "tolerance"), [("float32", 5e-3), ("bfloat16", 3e-2), ("float8_e4m3fn", 3e-2)]
)
def test_check_close_accepts_within_and_rejects_beyond_the_tolerance(dtype: str, tolerance: float) -> None:
    expected = np.array([100.0, -1.0, 0.5])
    within = expected + np.array([0.9 * tolerance * 100, 0.0, 0.0])
    beyond = expected + np.array([0.0, 1.1 * tolerance * 100, 0.0])
    assert check_close("within", within, expected, dtype) == pytest.approx(0.9 * tolerance)
    with pytest.raises(ReferenceMismatch, match="beyond"):
        check_close("beyond", beyond, expected, dtype)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_check_close_rejects_non_finite_results(bad: float) -> None:
    with pytest.raises(ReferenceMismatch):
        check_close("non-finite", [1.0, bad], [1.0, 2.0], "float32")


def test_check_close_rejects_a_non_finite_reference() -> None:
    with pytest.raises(ReferenceMismatch):
        check_close("nan reference", [1.0, 2.0], [1.0, math.nan], "float32")


def test_shape_mismatch_is_a_reference_mismatch() -> None:
    with pytest.raises(ReferenceMismatch, match="shape"):
        relative_error(np.zeros((2, 3)), np.zeros((3, 2)))
    with pytest.raises(ReferenceMismatch, match="shape"):
        check_close("transposed", np.zeros((2, 3)), np.zeros((3, 2)), "float32")


def test_a_mismatch_fails_like_an_assertion() -> None:
    assert issubclass(ReferenceMismatch, AssertionError)


def test_sample_indices_are_every_index_of_a_small_output() -> None:
    np.testing.assert_array_equal(sample_indices(10), np.arange(10))
    np.testing.assert_array_equal(sample_indices(256), np.arange(256))
    assert sample_indices(0).size == 0


@pytest.mark.parametrize("size", [257, 8192, 32768])
def test_sample_indices_of_a_large_output_are_fixed_and_spread(size: int) -> None:
    picked = sample_indices(size)
    assert len(picked) == 256 == len(np.unique(picked))
    assert picked[0] == 0 and picked[-1] == size - 1  # the edges, where tails and masks go wrong
    assert np.all(np.diff(picked) > 0)
    np.testing.assert_array_equal(picked, sample_indices(size))  # every run checks the same ones
    if size >= 8192:  # spread over the whole axis, not bunched at one end
        assert np.histogram(picked, bins=4, range=(0, size))[0].min() > 32


def test_sample_indices_count_and_refusals() -> None:
    assert len(sample_indices(100, count=6)) == 6
    with pytest.raises(ValueError):
        sample_indices(100, count=1)
    with pytest.raises(ValueError):
        sample_indices(-1)


# --- collective references -------------------------------------------------------------------------------

Reference = Callable[..., np.ndarray]


def test_references_by_hand_on_two_ranks() -> None:
    parts = [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    np.testing.assert_array_equal(reference.all_reduce(parts), [[4, 6], [4, 6]])
    np.testing.assert_array_equal(reference.all_gather(parts), [[1, 2, 3, 4], [1, 2, 3, 4]])
    np.testing.assert_array_equal(reference.reduce_scatter(parts), [[4], [6]])
    np.testing.assert_array_equal(reference.all_to_all(parts), [[1, 3], [2, 4]])
    np.testing.assert_array_equal(reference.broadcast(parts, source=1), [[3, 4], [3, 4]])
    np.testing.assert_array_equal(reference.broadcast(parts), [[1, 2], [1, 2]])


def test_references_compute_in_float64() -> None:
    parts = [np.array([2**24], np.float32), np.array([1], np.float32)]  # 2^24 + 1 is not a float32
    assert reference.all_reduce(parts).dtype == np.float64
    assert reference.all_reduce(parts)[0, 0] == 2**24 + 1


@pytest.mark.parametrize(
    "collective",
    [
        reference.all_reduce,
        reference.all_gather,
        reference.reduce_scatter,
        reference.all_to_all,
        reference.broadcast,
    ],
)
def test_references_commute_with_slicing_later_axes(collective: Reference) -> None:
    # harness/microbench/suite/test_collectives.py checks huge outputs a slice of columns at a time, which is
    # right only if slicing axis 1 of every input slices axis 1 of every output the same way.
    parts = np.random.default_rng(1).standard_normal((4, 8, 10))
    np.testing.assert_array_equal(collective(parts[:, :, 3:7]), collective(parts)[:, :, 3:7])


def test_reference_input_errors() -> None:
    with pytest.raises(ValueError):
        reference.all_reduce([np.zeros(2), np.zeros(3)])  # ragged
    with pytest.raises(ValueError, match="divide"):
        reference.reduce_scatter([np.zeros(3), np.zeros(3)])
    with pytest.raises(ValueError, match="divide"):
        reference.all_to_all([np.zeros(3), np.zeros(3)])
    with pytest.raises(ValueError, match="source"):
        reference.broadcast([np.zeros(2), np.zeros(2)], source=2)
    with pytest.raises(ValueError, match="axis"):
        reference.all_gather([1.0, 2.0])  # scalars have no axis to join along
    with pytest.raises(ValueError, match="at least one"):
        reference.all_reduce([])


def _on_mesh(body: Callable[[jax.Array], jax.Array], parts: np.ndarray) -> np.ndarray:
    """Run `body` on every rank's part under shard_map; every rank's output, ranks on axis 0."""
    ranks = parts.shape[0]
    mesh = jax.make_mesh((ranks,), ("x",))
    global_input = jax.device_put(parts.reshape(-1, *parts.shape[2:]), NamedSharding(mesh, P("x")))
    sharded = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=P("x")))
    out = np.asarray(sharded(global_input))
    return out.reshape(ranks, -1, *out.shape[1:])


@pytest.fixture
def parts() -> np.ndarray:
    """float32 parts for every fake device: 16 rows (two per rank for the pieces) by 3 columns."""
    ranks = jax.device_count()
    assert ranks == 8, "tests/conftest.py provides 8 fake CPU devices"
    return np.random.default_rng(0).standard_normal((ranks, 2 * ranks, 3), dtype=np.float32)


def test_all_reduce_reference_matches_psum(parts: np.ndarray) -> None:
    actual = _on_mesh(lambda block: jax.lax.psum(block, "x"), parts)
    np.testing.assert_allclose(actual, reference.all_reduce(parts), rtol=1e-5, atol=1e-5)


def test_reduce_scatter_reference_matches_psum_scatter(parts: np.ndarray) -> None:
    actual = _on_mesh(lambda block: jax.lax.psum_scatter(block, "x", tiled=True), parts)
    np.testing.assert_allclose(actual, reference.reduce_scatter(parts), rtol=1e-5, atol=1e-5)


def test_all_gather_reference_matches_all_gather(parts: np.ndarray) -> None:
    actual = _on_mesh(lambda block: jax.lax.all_gather(block, "x", tiled=True), parts)
    np.testing.assert_array_equal(actual, reference.all_gather(parts))


def test_all_to_all_reference_matches_all_to_all(parts: np.ndarray) -> None:
    actual = _on_mesh(lambda block: jax.lax.all_to_all(block, "x", 0, 0, tiled=True), parts)
    np.testing.assert_array_equal(actual, reference.all_to_all(parts))


@pytest.mark.parametrize("source", [0, 5])
def test_broadcast_reference_matches_jax_broadcast(parts: np.ndarray, source: int) -> None:
    # XLA:CPU has no CollectiveBroadcast, so pbroadcast cannot run here; its docstring defines it as this
    # psum of the input masked to the source rank, which runs anywhere.
    def masked_sum(block: jax.Array) -> jax.Array:
        is_source = jax.lax.axis_index("x") == source
        return jax.lax.psum(jnp.where(is_source, block, jnp.zeros_like(block)), "x")

    np.testing.assert_array_equal(_on_mesh(masked_sum, parts), reference.broadcast(parts, source=source))
