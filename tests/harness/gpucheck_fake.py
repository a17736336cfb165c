"""A machine with one H100 for `jaxbench gpu-check`'s tests: a fake runner that records each command line and
writes what the real command would (run results with their compiled step, the microbenchmarks' report),
failing the runs and kernels it is told to, and the check wired to it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from jaxbench.core.errors import ExitCode
from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.gpucheck import DEFAULT_STEPS, check
from jaxbench.harness.gpucheck.summary import Summary
from jaxbench.harness.measure.hlo import ProgramSummary
from jaxbench.harness.runtime.result import Program, Status
from jaxbench.results import synthetic

H100 = "NVIDIA H100 80GB HBM3"


ON_A_GPU = DeviceHint("gpu", H100)


NIGHT = dt.date(2026, 11, 24)


def _options(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, item in enumerate(argv) if item == name]


def _flags_record(profile: str) -> dict[str, Any]:
    return {"profile": profile, "xla_flags": "", "xla": {}, "env": {}, "dropped": [], "identity": "f" * 64}


def compiled_step(label: str, fp8_gemms: bool) -> Program:
    """The compiled step's program record: fp8 runs call cuBLASLt's FP8 GEMM when `fp8_gemms`."""
    gemm = "__cublas$lt$matmul$f8" if "fp8" in label and fp8_gemms else "__cublas$lt$matmul"
    summary = ProgramSummary(
        fingerprint=hashlib.sha256(label.encode()).hexdigest(),
        instructions=4460,
        fusions={"kLoop": 134},
        ops={"matmul": 37},
        collectives={},
        custom_calls={gemm: 35, "__cudnn$fmhaSoftmax": 4},
    )
    return Program(summary=summary, cost={"flops": 3.1e11})


def run_result(argv: list[str], status: Status, step_time: float, fp8_gemms: bool = True) -> dict[str, Any]:
    """What `jaxbench run` writes for this command line on one H100 (figures from synthetic)."""
    recipe, size = argv[4], _options(argv, "--size")[0]
    label = " ".join([recipe, size, *_options(argv, "--set")])
    document = synthetic.run_result(
        NIGHT,
        step_time,
        recipe=f"{recipe}-{size}",
        device_kind=H100,
        devices=1,
        status=status,
        program=compiled_step(label, fp8_gemms),
    )
    train = document["recipe"]["resolved"]["train"]
    for override in _options(argv, "--set"):
        key, value = override.split("=", 1)
        if key.startswith("train."):
            train[key.removeprefix("train.")] = value
    document["recipe"]["overrides"] = _options(argv, "--set")
    document["flags"] = _flags_record("hopper")
    if recipe == "vit" and document["throughput"]:
        document["throughput"]["unit"] = "image"
    return document


def benchmark_report(failed: list[dict[str, Any]]) -> dict[str, Any]:
    """The suite's pytest-benchmark JSON, trimmed to the fields the summary reads and a few more."""

    def entry(name: str, median_s: float, **rates: float) -> dict[str, Any]:
        extra = {"device_kind": H100, "device_count": 1, "sizes": "full", "seconds": median_s, **rates}
        return {
            "name": name,
            "fullname": f"suite::{name}",
            "params": {},
            "stats": {"median": median_s},
            "extra_info": extra,
        }

    devices = {
        "platform": "gpu",
        "kind": H100,
        "count": 1,
        "local_count": 1,
        "process_count": 1,
        "hostname": "h",
    }
    return {
        "machine_info": {
            "node": "gpu-1",
            "jaxbench": {
                "sizes": "full",
                "failed": failed,
                "flags": _flags_record("hopper"),
                "provenance": {"devices": devices},
            },
        },
        "benchmarks": [
            entry(
                "test_matmul[bfloat16-8192-8192-8192]",
                1.6e-3,
                tflops=687.2,
                gb_per_s=251.7,
                fraction_of_peak=0.6946,
            ),
            entry(
                "test_norm[rms_norm-forward-bfloat16-16384-4096]",
                7.0e-5,
                gb_per_s=2400.0,
                fraction_of_peak=0.7164,
            ),
            entry("test_host_to_device[1024]", 4.3e-2, gb_per_s=25.0),
        ],
        "datetime": "2026-11-24T02:00:00",
        "version": "5.1.0",
    }


class FakeMachine:
    """Stands in for the subprocess: records each command line and writes what the real command would."""

    def __init__(
        self,
        fail: dict[str, Status] | None = None,
        failed_kernels: list[dict[str, Any]] | None = None,
        fp8_gemms: bool = True,
    ):
        self.fail = fail or {}
        self.fp8_gemms = fp8_gemms
        self.failed_kernels = failed_kernels or []
        self.commands: list[list[str]] = []
        self.now = 0.0
        """The clock the check reads: each recipe run takes 90 s, the suite 2 minutes."""

    def __call__(self, argv: list[str]) -> int:
        self.commands.append(argv)
        out = Path(_options(argv, "--out")[0])
        self.now += 120.0 if argv[3] == "microbench" else 90.0
        if argv[3] == "microbench":
            report = out / "microbench-20261124T020000.json"
            report.write_text(json.dumps(benchmark_report(self.failed_kernels)))
            return ExitCode.FAILED if self.failed_kernels else ExitCode.OK
        label = " ".join([argv[4], *_options(argv, "--size"), *_options(argv, "--set")])
        status = next((s for key, s in self.fail.items() if key in label), Status.OK)
        step_time = {"llama2": 0.25, "gpt3": 0.62, "vit": 0.06}[argv[4]]
        synthetic.write(out, run_result(argv, status, step_time, self.fp8_gemms))
        return ExitCode.OK if status is Status.OK else ExitCode.FAILED


def gpu_check(
    machine: FakeMachine,
    tmp_path: Path,
    steps: int = DEFAULT_STEPS,
    runner: check.CheckCommandRunner | None = None,
) -> int:
    """The check on an H100, its processes replaced by `runner` (default: the fake machine itself)."""
    options = check.GpuCheckOptions(tmp_path, steps)
    return check.gpu_check(
        options,
        Console(width=200),
        hint=ON_A_GPU,
        environ={},
        runner=runner or machine,
        clock=lambda: machine.now,
    )


def written_summary(tmp_path: Path) -> tuple[Path, Summary]:
    (folder,) = tmp_path.glob("gpu-check-*")
    return folder, Summary.model_validate_json((folder / "summary.json").read_text())
