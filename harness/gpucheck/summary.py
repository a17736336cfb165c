"""The summary of a GPU check, built from what each check wrote (a run's result, the suite's pytest-benchmark
JSON) without reading or running anything: one JSON document (`Summary`) and its Markdown rendering.

    jaxbench gpu-check      # writes summary.json and summary.md next to the result files, prints the .md
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from jaxbench.core.errors import ExitCode
from jaxbench.core.schema import Strict
from jaxbench.harness.gpucheck.plan import Check, MicrobenchCheck
from jaxbench.harness.runtime.result import RunResult, Status

BUDGET_S = 9 * 60
"""The time a GPU check may take on one H100."""

NOT_RUN = "not_run"
"""A check that never started: an earlier one was interrupted."""
NO_RESULT = "no_result"
"""A check whose process ended without writing its result file (invalid input, a crash)."""

FP8_GEMM = "$f8"
"""How XLA names a cuBLASLt FP8 GEMM's custom-call target (__cublas$lt$matmul$f8)."""

RATES = (("tflops", "TFLOP/s"), ("bus_bandwidth_gb_per_s", "GB/s bus"), ("gb_per_s", "GB/s"))
"""The rate a kernel is shown with, by preference: compute, then a collective's bus bandwidth (as in
nccl-tests), then bytes moved."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one check did: how its process ended and the document it wrote, already parsed."""

    check: Check
    argv: list[str]
    exit_code: int | None
    """None: never started."""
    wall_s: float
    result_file: Path | None
    run: RunResult | None = None
    """A recipe check's result."""
    report: dict[str, Any] | None = None
    """The microbenchmark check's pytest-benchmark JSON."""
    problem: str | None = None
    """Why a file that was written could not be read."""


class CheckRow(Strict):
    check: str
    command: list[str]
    exit_code: int | None
    wall_s: float
    result_file: str | None
    """Relative to the summary's folder."""
    status: str
    """The result's status (ok, compile_error, oom, nan, interrupted, failed), no_result or not_run."""
    reason: str | None
    flag_profile: str | None = None
    """The XLA flag profile `auto` resolved to in this check's process."""


class RunRow(CheckRow):
    """The figures are None where the run did not get far enough to measure them."""

    recipe: str | None = None
    precision: str | None = None
    attention: str | None = None
    step_time_s: float | None = None
    """Median of the timed steps."""
    per_s: float | None = None
    unit: str | None = None
    """What per_s counts: token or image."""
    mfu: float | None = None
    model_tflops_per_device: float | None = None
    peak_bytes_per_device: int | None = None
    compile_s: float | None = None
    fingerprint: str | None = None
    """The compiled step's fingerprint (harness/measure/hlo_text.py): two checks compare by it."""
    gemm_calls: dict[str, int] = Field(default_factory=dict)
    """The compiled step's cuBLAS custom calls by target: which GEMMs the library ran."""


class KernelRow(Strict):
    name: str
    """The benchmark's test id without `test_`, e.g. matmul[bfloat16-8192-8192-8192]."""
    status: str
    reason: str | None = None
    median_s: float | None = None
    fraction_of_peak: float | None = None
    """Of the device's dense peak at the kernel's precision, or of its memory bandwidth; None for work
    bound by another link (collectives, host transfers) and for devices missing from the peak table."""
    rate: float | None = None
    rate_unit: str | None = None


class MicrobenchRow(CheckRow):
    kernels: list[KernelRow] = Field(default_factory=list)


class Summary(Strict):
    ok: bool
    """Every check ran and succeeded."""
    device: str
    device_count: int | None
    auto_profiles: list[str]
    """The profiles `auto` resolved to over all checks; one on a healthy machine."""
    steps: int
    """Steps per recipe run, warmup included."""
    folder: str
    started_at: str
    wall_s: float
    budget_s: float
    runs: list[RunRow]
    microbench: list[MicrobenchRow]


def _status(outcome: Outcome, written: str | None, reason: str | None) -> tuple[str, str | None]:
    """The check's status: the written document's, unless the process says otherwise or wrote nothing."""
    if outcome.exit_code is None:
        return NOT_RUN, "an earlier check was interrupted"
    if written is None:
        return NO_RESULT, outcome.problem or f"exited with code {outcome.exit_code} and wrote no result"
    if written == Status.OK.value and outcome.exit_code != 0:
        return Status.FAILED.value, reason or f"exited with code {outcome.exit_code}"
    return written, reason


def _common(outcome: Outcome, folder: Path, written: str | None, reason: str | None) -> dict[str, Any]:
    status, why = _status(outcome, written, reason)
    return {
        "check": outcome.check.label,
        "command": outcome.argv,
        "exit_code": outcome.exit_code,
        "wall_s": outcome.wall_s,
        "result_file": str(outcome.result_file.relative_to(folder)) if outcome.result_file else None,
        "status": status,
        "reason": why,
    }


def fp8_without_fp8_gemms(run: RunResult) -> str | None:
    """Why an fp8 run that trained did not check out: its program has no FP8 GEMM, so its matmuls ran in
    bf16 behind the quantization (on an H200 with jax 0.11.2 the fp8 LLaMA 2 1B compiled to bf16 cuBLAS
    GEMMs only and ran 11 % slower than bf16). None when it has one, or when it is not an fp8 run."""
    if run.recipe.resolved.get("train", {}).get("precision") != "fp8" or run.status is not Status.OK:
        return None
    if run.program is None:
        return None
    gemms = _gemm_calls(run)
    if any(FP8_GEMM in target for target in gemms):
        return None
    found = ", ".join(f"{target} x{count}" for target, count in sorted(gemms.items())) or "none"
    return f"precision fp8 compiled no FP8 GEMM (no custom call *{FP8_GEMM}); cuBLAS calls: {found}"


def _gemm_calls(run: RunResult) -> dict[str, int]:
    calls = run.program.summary.custom_calls if run.program else {}
    return {target: count for target, count in calls.items() if "cublas" in target}


def run_row(outcome: Outcome, folder: Path) -> RunRow:
    run = outcome.run
    if run is None:
        return RunRow(**_common(outcome, folder, None, None))
    train = run.recipe.resolved.get("train", {})
    throughput = run.throughput
    fp8_problem = fp8_without_fp8_gemms(run)
    status, reason = (Status.FAILED.value, fp8_problem) if fp8_problem else (run.status.value, run.reason)
    return RunRow(
        **_common(outcome, folder, status, reason),
        flag_profile=run.flags.profile if run.flags else None,
        recipe=run.recipe.name,
        precision=train.get("precision"),
        attention=train.get("attention"),
        step_time_s=run.timing.step_time_s.median if run.timing.step_time_s else None,
        per_s=throughput.per_s if throughput else None,
        unit=throughput.unit if throughput else None,
        mfu=throughput.mfu if throughput else None,
        model_tflops_per_device=throughput.model_tflops_per_device if throughput else None,
        peak_bytes_per_device=run.memory.peak_bytes_per_device,
        compile_s=run.timing.compile_s,
        fingerprint=run.program.summary.fingerprint if run.program else None,
        gemm_calls=_gemm_calls(run),
    )


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _suite_info(report: dict[str, Any]) -> dict[str, Any]:
    """What our suites record about themselves (harness/microbench/suite/conftest.py): flags, provenance,
    the benchmarks that failed."""
    return report.get("machine_info", {}).get("jaxbench") or {}


def kernel_rows(report: dict[str, Any]) -> list[KernelRow]:
    """Every benchmark the suite timed, then every one that failed (machine_info.jaxbench.failed)."""
    rows = []
    for entry in report.get("benchmarks", []):
        extra = entry.get("extra_info") or {}
        rate, unit = next(
            ((extra[key], unit) for key, unit in RATES if _number(extra.get(key))), (None, None)
        )
        rows.append(
            KernelRow(
                name=str(entry.get("name", "?")).removeprefix("test_"),
                status=Status.OK.value,
                median_s=_number((entry.get("stats") or {}).get("median")),
                fraction_of_peak=_number(extra.get("fraction_of_peak")),
                rate=_number(rate),
                rate_unit=unit,
            )
        )
    for entry in _suite_info(report).get("failed", []):
        name = str(entry.get("name", "?")).removeprefix("test_")
        status = str(entry.get("status", Status.FAILED.value))
        rows.append(KernelRow(name=name, status=status, reason=entry.get("reason")))
    return rows


def microbench_row(outcome: Outcome, folder: Path) -> MicrobenchRow:
    report = outcome.report
    if report is None:
        return MicrobenchRow(**_common(outcome, folder, None, None))
    kernels = kernel_rows(report)
    failed = [kernel.name for kernel in kernels if kernel.status != Status.OK.value]
    if failed:
        written, reason = (
            Status.FAILED.value,
            f"{len(failed)} of {len(kernels)} kernels failed: {', '.join(failed)}",
        )
    elif outcome.exit_code == ExitCode.INTERRUPTED:
        written, reason = Status.INTERRUPTED.value, f"interrupted after {len(kernels)} kernels"
    elif outcome.exit_code != 0:
        written, reason = Status.FAILED.value, f"the suite exited with code {outcome.exit_code}"
    else:
        written, reason = Status.OK.value, None
    return MicrobenchRow(
        **_common(outcome, folder, written, reason),
        flag_profile=(_suite_info(report).get("flags") or {}).get("profile"),
        kernels=kernels,
    )


def _device(outcomes: Sequence[Outcome]) -> tuple[str, int] | None:
    """The devices as the checks' own provenance recorded them."""
    for outcome in outcomes:
        if outcome.run is not None:
            return outcome.run.provenance.devices.kind, outcome.run.provenance.devices.count
        devices = (_suite_info(outcome.report or {}).get("provenance") or {}).get("devices")
        if devices:
            return str(devices["kind"]), int(devices["count"])
    return None


def build_summary(
    outcomes: Sequence[Outcome],
    *,
    steps: int,
    folder: Path,
    started_at: str,
    wall_s: float,
    device_hint: str,
) -> Summary:
    """`device_hint` (nvidia-smi's name) stands in for the device when no check recorded one."""
    runs = [run_row(o, folder) for o in outcomes if not isinstance(o.check, MicrobenchCheck)]
    microbench = [microbench_row(o, folder) for o in outcomes if isinstance(o.check, MicrobenchCheck)]
    rows: list[CheckRow] = [*runs, *microbench]
    device, count = _device(outcomes) or (device_hint, None)
    return Summary(
        ok=all(row.status == Status.OK.value for row in rows),
        device=device,
        device_count=count,
        auto_profiles=sorted({row.flag_profile for row in rows if row.flag_profile}),
        steps=steps,
        folder=str(folder),
        started_at=started_at,
        wall_s=wall_s,
        budget_s=BUDGET_S,
        runs=runs,
        microbench=microbench,
    )
