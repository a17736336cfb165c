"""Peak table: every claimed device string resolves, dense figures stay dense, unknowns stay unknown.

Run with `pytest tests/harness/test_peaks.py -q`; no accelerator needed.
"""

from __future__ import annotations

import pytest

from jaxbench.harness.measure import peaks
from jaxbench.harness.measure.peaks import (
    PEAKS,
    PRECISIONS,
    DevicePeak,
    known_device_kinds,
    peak_flops_per_device,
    supports_fp8,
)

# The CUDA device names jaxbench must cover (NVIDIA open-gpu-kernel-modules README, supported GPUs). Listed
# here independently of the table so that dropping or misspelling one fails a test: Levanter's H200 key never
# matched "NVIDIA H200" and its MFU silently vanished.
REQUIRED_KINDS = (
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-PCIE-40GB",
    "NVIDIA A100 80GB PCIe",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL",
    "NVIDIA H200",
    "NVIDIA H200 NVL",
    "NVIDIA GH200 480GB",
    "NVIDIA GH200 144G HBM3e",
    "NVIDIA B200",
)

UNKNOWN_KINDS = (
    "cpu",
    "TFRT_CPU_0",
    "NVIDIA GeForce RTX 4090",
    "",
    # Real NVIDIA names that a substring or prefix match would wrongly map onto a table entry.
    "NVIDIA H100",  # a different H100 SKU (PCI 2339) whose figures are not in the table
    "NVIDIA H20",
    "NVIDIA H800",
    "NVIDIA GB200",
    "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
)


def test_required_kinds_are_all_claimed() -> None:
    assert set(REQUIRED_KINDS) <= set(known_device_kinds())


def test_known_kinds_are_unique() -> None:
    kinds = known_device_kinds()
    assert len(kinds) == len({" ".join(kind.split()).casefold() for kind in kinds})


@pytest.mark.parametrize("kind", known_device_kinds())
def test_every_known_kind_resolves(kind: str) -> None:
    bf16 = peak_flops_per_device(kind, "bf16")
    fp32 = peak_flops_per_device(kind, "fp32")
    assert bf16 is not None and bf16 > 0
    assert fp32 is not None and 0 < fp32 < bf16
    assert bf16 > 1e14, "returns FLOP/s, not TFLOP/s"


@pytest.mark.parametrize("kind", known_device_kinds())
def test_fp8_is_none_exactly_without_fp8_support(kind: str) -> None:
    fp8 = peak_flops_per_device(kind, "fp8")
    assert (fp8 is None) == (not supports_fp8(kind))


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_unknown_devices_have_no_peak(kind: str) -> None:
    for precision in PRECISIONS:
        assert peak_flops_per_device(kind, precision) is None
    assert not supports_fp8(kind)


@pytest.mark.parametrize("kind", known_device_kinds())
def test_case_and_whitespace_variants_resolve(kind: str) -> None:
    expected = peak_flops_per_device(kind, "bf16")
    variants = (kind.upper(), kind.lower(), f"  {kind}\n", kind.replace(" ", "   "))
    for variant in variants:
        assert peak_flops_per_device(variant, "bf16") == expected, variant
        assert supports_fp8(variant) == supports_fp8(kind), variant


def test_h100_pcie_does_not_get_sxm_figures() -> None:
    for precision in PRECISIONS:
        pcie = peak_flops_per_device("NVIDIA H100 PCIe", precision)
        sxm = peak_flops_per_device("NVIDIA H100 80GB HBM3", precision)
        assert pcie is not None and sxm is not None
        assert pcie < sxm, precision
    assert peak_flops_per_device("NVIDIA H100 PCIe", "bf16") == pytest.approx(756e12)


@pytest.mark.parametrize(
    ("kind", "tf32", "bf16", "fp8"),
    [
        ("NVIDIA A100-SXM4-80GB", 156, 312, None),
        ("NVIDIA A100 80GB PCIe", 156, 312, None),
        ("NVIDIA H100 80GB HBM3", 494.7, 989.4, 1978.9),
        ("NVIDIA H100 PCIe", 378, 756, 1513),
        ("NVIDIA H200", 494.7, 989.4, 1978.9),
        ("NVIDIA B200", 1100, 2250, 4500),
    ],
)
def test_reference_dense_values(kind: str, tf32: float, bf16: float, fp8: float | None) -> None:
    assert peak_flops_per_device(kind, "fp32") == pytest.approx(tf32 * 1e12)
    assert peak_flops_per_device(kind, "bf16") == pytest.approx(bf16 * 1e12)
    expected_fp8 = None if fp8 is None else pytest.approx(fp8 * 1e12)
    assert peak_flops_per_device(kind, "fp8") == expected_fp8


def test_a100_has_no_fp8() -> None:
    assert peak_flops_per_device("NVIDIA A100-SXM4-40GB", "fp8") is None
    assert not supports_fp8("NVIDIA A100-SXM4-40GB")


HOPPER_KINDS = [kind for peak in PEAKS if peak.compute_capability == (9, 0) for kind in peak.device_kinds]


@pytest.mark.parametrize("kind", HOPPER_KINDS)
def test_hopper_rates_double_per_precision_step(kind: str) -> None:
    # Hopper tensor cores double throughput from TF32 to BF16 to FP8. A sparse (2x) figure mixed into a
    # dense row breaks one of these ratios by a factor of 2; datasheet rounding moves them by < 0.1%.
    tf32 = peak_flops_per_device(kind, "fp32")
    bf16 = peak_flops_per_device(kind, "bf16")
    fp8 = peak_flops_per_device(kind, "fp8")
    assert tf32 is not None and bf16 is not None and fp8 is not None
    assert fp8 == pytest.approx(2 * bf16, rel=1e-3)
    assert bf16 == pytest.approx(2 * tf32, rel=1e-3)


def test_hopper_kinds_cover_h100_h200_gh200() -> None:
    assert {"NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA GH200 480GB"} <= set(HOPPER_KINDS)


@pytest.mark.parametrize("precision", ["tf32", "fp16", "float32", "BF16", ""])
def test_unknown_precision_raises_naming_accepted_values(precision: str) -> None:
    with pytest.raises(ValueError, match=r"fp32, bf16, fp8"):
        peak_flops_per_device("NVIDIA H100 80GB HBM3", precision)


def test_unknown_precision_raises_even_for_unknown_device() -> None:
    with pytest.raises(ValueError):
        peak_flops_per_device("cpu", "fp64")


def test_every_entry_cites_a_datasheet() -> None:
    for peak in PEAKS:
        assert "datasheet" in peak.source, peak.name


def test_table_rejects_fp8_on_hardware_without_it() -> None:
    with pytest.raises(ValueError, match="contradicts compute capability"):
        DevicePeak(
            name="A100 with a sparse FP8 typo",
            device_kinds=("NVIDIA A100-SXM4-40GB",),
            compute_capability=(8, 0),
            tf32=156.0,
            bf16=312.0,
            fp8=624.0,
            source="none",
        )


def test_memory_bandwidth_table_names_only_known_devices() -> None:
    known = set(peaks.known_device_kinds())
    assert set(peaks.MEMORY_BANDWIDTH_GB_PER_S) <= known
    assert peaks.memory_bandwidth_per_device("NVIDIA  H100 80GB HBM3") == 3350e9  # same normalisation
    assert peaks.memory_bandwidth_per_device("NVIDIA GH200 120GB") is None
    assert peaks.memory_bandwidth_per_device("cpu") is None
