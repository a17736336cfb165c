"""Dense peak tensor-core throughput per NVIDIA device, the denominator of MFU.

Every figure is dense (a datasheet's "with sparsity" figure halved), since training never uses 2:4
sparsity; the tests check fp8 = 2 x bf16 = 4 x tf32 on Hopper so a sparse number shows up. Lookup is by the
exact `device_kind` string (whitespace and case collapsed, nothing looser), so a PCIe card or a MIG slice
never claims another's peak; an unknown device gives None and no MFU. Sources and matching rules:
docs/design.md, "Peak throughput".

    pytest tests/harness/test_peaks.py -q
    python -c "from harness import peaks; print(peaks.peak_flops_per_device('NVIDIA H100 PCIe', 'bf16'))"
"""

from __future__ import annotations

from dataclasses import dataclass

# Precision names accepted by peak_flops_per_device. "fp32" means float32 inputs to a matmul: JAX's default
# matmul precision lets XLA run those on TF32 tensor cores on Ampere and newer GPUs ("By default, JAX leans
# toward speed: float32 dot products may be computed with ... TF32 on recent GPUs", JAX docs, "Matmul
# precision"), so the fp32 peak is the dense TF32 tensor-core peak, not the much lower CUDA-core FP32 rate.
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp8")

# FP8 tensor cores arrive with compute capability 8.9 (Ada); Hopper is 9.0 and Blackwell B200 10.0.
FP8_MIN_COMPUTE_CAPABILITY = (8, 9)

TERA = 1e12


@dataclass(frozen=True)
class DevicePeak:
    """One product's dense tensor-core peak, in TFLOP/s per GPU, and the device names that select it."""

    name: str
    device_kinds: tuple[str, ...]  # exact CUDA device names, as jax.Device.device_kind reports them
    compute_capability: tuple[int, int]
    tf32: float  # dense TF32 tensor core, TFLOP/s; used for float32 matmuls (see PRECISIONS)
    bf16: float  # dense BF16 tensor core with FP32 accumulate, TFLOP/s
    fp8: float | None  # dense FP8 tensor core, TFLOP/s; None where the hardware has none
    source: str  # the datasheet each figure comes from, and how dense was obtained

    def __post_init__(self) -> None:
        has_fp8_hardware = self.compute_capability >= FP8_MIN_COMPUTE_CAPABILITY
        if (self.fp8 is not None) != has_fp8_hardware:
            raise ValueError(
                f"{self.name}: fp8={self.fp8} contradicts compute capability {self.compute_capability}"
            )
        rates = (self.tf32, self.bf16) if self.fp8 is None else (self.tf32, self.bf16, self.fp8)
        if min(rates) <= 0:
            raise ValueError(f"{self.name}: peaks must be positive, got {rates}")
        if not self.device_kinds:
            raise ValueError(f"{self.name}: no device kinds")


_A100_SOURCE = (
    "NVIDIA A100 Tensor Core GPU datasheet: TF32 156, BF16 312 TFLOPS dense (312 / 624 with sparsity); "
    "no FP8 tensor cores. The 40GB and 80GB, SXM4 and PCIe parts share these figures."
)
_H100_SXM_SOURCE = (
    "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: TF32 989, BF16 1,979, FP8 3,958 TFLOPS with sparsity, "
    "halved; the unrounded dense values are those of the NVIDIA H100 Tensor Core GPU Architecture whitepaper "
    "(H100 SXM5 column)."
)

PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak(
        name="A100 SXM4",
        device_kinds=("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB"),
        compute_capability=(8, 0),
        tf32=156.0,
        bf16=312.0,
        fp8=None,
        source=_A100_SOURCE,
    ),
    DevicePeak(
        name="A100 PCIe",
        device_kinds=("NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe"),
        compute_capability=(8, 0),
        tf32=156.0,
        bf16=312.0,
        fp8=None,
        source=_A100_SOURCE,
    ),
    DevicePeak(
        name="H100 SXM5",
        device_kinds=("NVIDIA H100 80GB HBM3",),
        compute_capability=(9, 0),
        tf32=494.7,
        bf16=989.4,
        fp8=1978.9,
        source=_H100_SXM_SOURCE,
    ),
    DevicePeak(
        name="H100 PCIe",
        device_kinds=("NVIDIA H100 PCIe",),
        compute_capability=(9, 0),
        # The datasheet's sparse 1,513 halves to 756.5; the whitepaper prints 756 dense.
        tf32=378.0,
        bf16=756.0,
        fp8=1513.0,
        source=(
            "NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe: TF32 756, BF16 1,513, FP8 3,026 TFLOPS with "
            "sparsity, halved (dense 378 / 756 / 1,513 as in the H100 architecture whitepaper)."
        ),
    ),
    DevicePeak(
        name="H100 NVL",
        device_kinds=("NVIDIA H100 NVL",),
        compute_capability=(9, 0),
        tf32=417.5,
        bf16=835.5,
        fp8=1670.5,
        source=(
            "NVIDIA H100 Tensor Core GPU datasheet, H100 NVL (94 GB, per GPU): TF32 835, BF16 1,671, "
            "FP8 3,341 TFLOPS with sparsity, halved."
        ),
    ),
    DevicePeak(
        name="H200 SXM",
        device_kinds=("NVIDIA H200",),
        compute_capability=(9, 0),
        tf32=494.7,
        bf16=989.4,
        fp8=1978.9,
        source=(
            "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM: TF32 989, BF16 1,979, FP8 3,958 TFLOPS with "
            "sparsity, halved; same GH100 compute as H100 SXM, so the whitepaper's unrounded values apply."
        ),
    ),
    DevicePeak(
        name="H200 NVL",
        device_kinds=("NVIDIA H200 NVL",),
        compute_capability=(9, 0),
        tf32=417.5,
        bf16=835.5,
        fp8=1670.5,
        source=(
            "NVIDIA H200 Tensor Core GPU datasheet, H200 NVL: TF32 835, BF16 1,671, FP8 3,341 TFLOPS with "
            "sparsity, halved."
        ),
    ),
    DevicePeak(
        name="GH200 Grace Hopper",
        # One GPU product (PCI device 2342 for 120GB and 480GB, 2348 for 144G HBM3e), whose names differ by
        # memory configuration only; the datasheet gives one set of tensor-core figures for all of them.
        device_kinds=("NVIDIA GH200 120GB", "NVIDIA GH200 480GB", "NVIDIA GH200 144G HBM3e"),
        compute_capability=(9, 0),
        tf32=494.7,
        bf16=989.4,
        fp8=1978.9,
        source=(
            "NVIDIA GH200 Grace Hopper Superchip datasheet: TF32 494, BF16 990, FP8 1,979 TFLOPS dense "
            "(989 / 1,979 / 3,958 with sparsity), the H100 SXM figures; whitepaper precision used here."
        ),
    ),
    DevicePeak(
        name="B200 (HGX / DGX B200)",
        device_kinds=("NVIDIA B200",),
        compute_capability=(10, 0),
        tf32=1100.0,
        bf16=2250.0,
        fp8=4500.0,
        source=(
            "NVIDIA HGX B200 datasheet, per GPU (1,000 W): TF32 2.2, FP16/BF16 4.5, FP8 9 PFLOPS with "
            "sparsity, halved; DGX B200 datasheet's 72 PFLOPS FP8 for 8 GPUs agrees. GB200's B200 "
            "('NVIDIA GB200', 1,200 W, higher peaks) is deliberately not matched."
        ),
    ),
)


def _normalise(device_kind: str) -> str:
    """Collapse runs of whitespace and case; nothing looser (see the module docstring)."""
    return " ".join(device_kind.split()).casefold()


def _index(peaks: tuple[DevicePeak, ...]) -> dict[str, DevicePeak]:
    index: dict[str, DevicePeak] = {}
    for peak in peaks:
        for kind in peak.device_kinds:
            key = _normalise(kind)
            if key in index:
                raise ValueError(f"device kind {kind!r} is claimed by {index[key].name} and {peak.name}")
            index[key] = peak
    return index


_BY_KIND = _index(PEAKS)


def _lookup(device_kind: str) -> DevicePeak | None:
    return _BY_KIND.get(_normalise(device_kind))


def peak_flops_per_device(device_kind: str, precision: str) -> float | None:
    """Dense peak FLOP/s (not TFLOP/s) of one device at `precision` ("fp32", "bf16" or "fp8").

    None when the device is not in the table or has no tensor cores for that precision (fp8 on A100).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)}")
    peak = _lookup(device_kind)
    if peak is None:
        return None
    tflops = {"fp32": peak.tf32, "bf16": peak.bf16, "fp8": peak.fp8}[precision]
    return None if tflops is None else tflops * TERA


def supports_fp8(device_kind: str) -> bool:
    """True for table devices with FP8 tensor cores (compute capability >= 8.9); False for unknown ones."""
    peak = _lookup(device_kind)
    return peak is not None and peak.fp8 is not None


def known_device_kinds() -> list[str]:
    """Every device name the table matches, in table order."""
    return [kind for peak in PEAKS for kind in peak.device_kinds]


def compute_capability(device_kind: str) -> tuple[int, int] | None:
    """(major, minor) for devices in the table, None otherwise (used to pick an XLA flag profile)."""
    peak = _lookup(device_kind)
    return peak.compute_capability if peak else None


# Peak memory (HBM) bandwidth in GB/s (10^9 bytes) per device name, from the same datasheets; it differs
# between memory configurations of one product, hence keyed by the exact name. Used as the peak of
# memory-bound microbenchmarks (norms, copies). GH200 120GB is left out: no datasheet figure was found.
MEMORY_BANDWIDTH_GB_PER_S: dict[str, float] = {
    "NVIDIA A100-SXM4-40GB": 1555.0,  # A100 datasheet: 40GB HBM2 1,555 GB/s
    "NVIDIA A100-PCIE-40GB": 1555.0,
    "NVIDIA A100-SXM4-80GB": 2039.0,  # A100 datasheet: 80GB HBM2e SXM 2,039 GB/s
    "NVIDIA A100 80GB PCIe": 1935.0,  # A100 datasheet: 80GB HBM2e PCIe 1,935 GB/s
    "NVIDIA H100 80GB HBM3": 3350.0,  # H100 datasheet: SXM 3.35 TB/s
    "NVIDIA H100 PCIe": 2000.0,  # H100 datasheet: PCIe 2 TB/s
    "NVIDIA H100 NVL": 3900.0,  # H100 datasheet: NVL 3.9 TB/s
    "NVIDIA H200": 4800.0,  # H200 datasheet: 4.8 TB/s
    "NVIDIA H200 NVL": 4800.0,
    "NVIDIA GH200 480GB": 4000.0,  # GH200 datasheet: 96GB HBM3 4 TB/s
    "NVIDIA GH200 144G HBM3e": 4900.0,  # GH200 datasheet: 144GB HBM3e 4.9 TB/s
    "NVIDIA B200": 8000.0,  # HGX B200 datasheet: 8 TB/s per GPU
}
_BANDWIDTH_BY_KIND = {_normalise(kind): value for kind, value in MEMORY_BANDWIDTH_GB_PER_S.items()}


def memory_bandwidth_per_device(device_kind: str) -> float | None:
    """Peak memory bandwidth in bytes/s of one device, None when the device is not in the table."""
    gb_per_s = _BANDWIDTH_BY_KIND.get(_normalise(device_kind))
    return None if gb_per_s is None else gb_per_s * 1e9
