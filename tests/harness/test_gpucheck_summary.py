"""`jaxbench gpu-check`'s summary (harness/gpucheck/summary.py) against a fake H100 machine
(tests/harness/gpucheck_fake.py): each run's figures and each kernel's fraction of peak, the JSON round trip,
a failed run, an fp8 run without FP8 GEMMs, a run without a result and a failed kernel each failing the
check with the later checks still run, and an interrupt keeping the summary of what ran.

    JAX_PLATFORMS=cpu python -m pytest -q tests/harness/test_gpucheck_summary.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxbench.core.errors import ExitCode
from jaxbench.harness.gpucheck import DEFAULT_STEPS
from jaxbench.harness.gpucheck.summary import Summary
from jaxbench.harness.runtime.result import Status
from tests.harness.gpucheck_fake import H100, FakeMachine, benchmark_report, gpu_check, written_summary


def test_the_summary_holds_each_runs_figures_and_each_kernels_fraction_of_peak(tmp_path: Path) -> None:
    assert gpu_check(FakeMachine(), tmp_path) == ExitCode.OK
    folder, summary = written_summary(tmp_path)
    assert summary.ok and summary.device == H100 and summary.device_count == 1
    assert summary.auto_profiles == ["hopper"] and summary.steps == DEFAULT_STEPS
    assert summary.wall_s == 4 * 90 + 120 and summary.budget_s == 9 * 60
    runs = {row.check: row for row in summary.runs}
    assert list(runs) == ["llama2 1b bf16 cudnn", "llama2 1b fp8", "gpt3 1.3b", "vit b16"]
    bf16, fp8, vit = runs["llama2 1b bf16 cudnn"], runs["llama2 1b fp8"], runs["vit b16"]
    assert (bf16.precision, bf16.attention, fp8.precision) == ("bf16", "cudnn", "fp8")
    assert bf16.step_time_s == pytest.approx(0.25, rel=0.01) and bf16.per_s == pytest.approx(
        64 * 4096 / 0.25, rel=0.01
    )
    assert (bf16.unit, vit.unit, bf16.mfu, bf16.compile_s) == ("token", "image", 0.4, 30.0)
    assert bf16.peak_bytes_per_device == 60 * 2**30 and bf16.wall_s == 90
    assert all(
        row.status == "ok" and row.result_file and (folder / row.result_file).is_file()
        for row in runs.values()
    )
    (suite,) = summary.microbench
    kernels = {kernel.name: kernel for kernel in suite.kernels}
    matmul = kernels["matmul[bfloat16-8192-8192-8192]"]
    assert (matmul.fraction_of_peak, matmul.rate, matmul.rate_unit) == (0.6946, 687.2, "TFLOP/s")
    assert kernels["norm[rms_norm-forward-bfloat16-16384-4096]"].fraction_of_peak == 0.7164
    assert kernels["host_to_device[1024]"].fraction_of_peak is None
    assert kernels["host_to_device[1024]"].rate_unit == "GB/s"

    text = (folder / "summary.md").read_text()
    assert text.startswith(f"# GPU check passed: 1 x {H100}\n")
    assert "- XLA flag profile (auto): hopper" in text and "took 8 min 0 s (budget 9 min 0 s)\n" in text
    assert (
        "| llama2 1b bf16 cudnn | ok | 250.00 ms | 1,048,576 tokens/s | 40.0% | 60.00 GiB | 30.0 s "
        "| 1 min 30 s |" in text
    )
    # Brackets escaped, as every Markdown writer escapes them: shown as brackets, never a link.
    assert "| matmul\\[bfloat16-8192-8192-8192\\] | ok | 69.5% | 687.2 TFLOP/s | 1.60 ms |" in text
    assert "Failures:" not in text


def test_the_json_summary_round_trips(tmp_path: Path) -> None:
    gpu_check(FakeMachine(fail={"fp8": Status.OOM}), tmp_path)
    (folder,) = tmp_path.glob("gpu-check-*")
    text = (folder / "summary.json").read_text()
    summary = Summary.model_validate_json(text)
    assert summary.model_dump_json(indent=2) + "\n" == text
    assert Summary.model_validate(json.loads(summary.model_dump_json())) == summary


def test_a_failed_run_fails_the_check_and_the_later_checks_still_run(tmp_path: Path) -> None:
    machine = FakeMachine(fail={"fp8": Status.OOM})
    assert gpu_check(machine, tmp_path) == ExitCode.FAILED
    assert len(machine.commands) == 5
    folder, summary = written_summary(tmp_path)
    fp8 = summary.runs[1]
    assert not summary.ok and (fp8.check, fp8.status, fp8.reason) == (
        "llama2 1b fp8",
        "oom",
        "oom in the test",
    )
    assert fp8.exit_code == ExitCode.FAILED and fp8.step_time_s is None and fp8.per_s is None
    assert [row.status for row in summary.runs[2:]] == ["ok", "ok"] and summary.microbench[0].status == "ok"
    text = (folder / "summary.md").read_text()
    assert text.startswith("# GPU check FAILED") and "| llama2 1b fp8 | oom | - | - | - |" in text
    assert "- llama2 1b fp8: oom: oom in the test" in text


def test_an_fp8_run_without_fp8_gemms_fails_the_check(tmp_path: Path) -> None:
    """As on an H200 with jax 0.11.2: the fp8 recipe trained, but on bf16 GEMMs behind its quantization."""
    assert gpu_check(FakeMachine(fp8_gemms=False), tmp_path) == ExitCode.FAILED
    folder, summary = written_summary(tmp_path)
    runs = {row.check: row for row in summary.runs}
    fp8 = runs["llama2 1b fp8"]
    assert fp8.status == "failed" and fp8.step_time_s is not None
    assert fp8.reason == (
        "precision fp8 compiled no FP8 GEMM (no custom call *$f8); cuBLAS calls: __cublas$lt$matmul x35"
    )
    assert fp8.gemm_calls == {"__cublas$lt$matmul": 35}
    assert all(row.status == "ok" for name, row in runs.items() if name != "llama2 1b fp8")
    assert "no FP8 GEMM" in (folder / "summary.md").read_text()


def test_each_run_row_names_its_program(tmp_path: Path) -> None:
    assert gpu_check(FakeMachine(), tmp_path) == ExitCode.OK
    _, summary = written_summary(tmp_path)
    fp8 = next(row for row in summary.runs if row.check == "llama2 1b fp8")
    assert fp8.gemm_calls == {"__cublas$lt$matmul$f8": 35}
    fingerprints = [row.fingerprint for row in summary.runs]
    assert all(fingerprints) and len(set(fingerprints)) == len(fingerprints)


def test_a_check_that_writes_no_result_is_listed_with_its_exit_code(tmp_path: Path) -> None:
    machine = FakeMachine()

    def crashing_gpt3(argv: list[str]) -> int:
        return 1 if argv[4:5] == ["gpt3"] else machine(argv)

    assert gpu_check(machine, tmp_path, runner=crashing_gpt3) == ExitCode.FAILED
    _, summary = written_summary(tmp_path)
    gpt3 = summary.runs[2]
    assert (gpt3.status, gpt3.reason, gpt3.result_file) == (
        "no_result",
        "exited with code 1 and wrote no result",
        None,
    )
    assert summary.runs[3].status == "ok"


def test_a_failed_kernel_fails_the_suite_and_is_listed(tmp_path: Path) -> None:
    failed = {
        "name": "test_matmul[float8_e4m3fn-8192-8192-8192]",
        "status": "failed",
        "reason": "ReferenceMismatch in @jax.jit: 0.2",
    }
    assert gpu_check(FakeMachine(failed_kernels=[failed]), tmp_path) == ExitCode.FAILED
    folder, summary = written_summary(tmp_path)
    (suite,) = summary.microbench
    assert (
        suite.status == "failed"
        and suite.reason == "1 of 4 kernels failed: matmul[float8_e4m3fn-8192-8192-8192]"
    )
    assert suite.kernels[-1].status == "failed"
    assert suite.kernels[-1].reason == "ReferenceMismatch in @jax.jit: 0.2"
    # Escaped Markdown: brackets make no link, and the decorator mentions no GitHub user called jax.
    assert (
        "- matmul\\[float8_e4m3fn-8192-8192-8192\\]: failed: ReferenceMismatch in @\u200bjax.jit: 0.2"
        in (folder / "summary.md").read_text()
    )


def test_an_interrupt_stops_the_check_and_keeps_the_summary_of_what_ran(tmp_path: Path) -> None:
    machine = FakeMachine()

    def interrupted_at_the_second(argv: list[str]) -> int:
        if len(machine.commands) == 1:
            machine.commands.append(argv)
            raise KeyboardInterrupt
        return machine(argv)

    assert gpu_check(machine, tmp_path, runner=interrupted_at_the_second) == ExitCode.INTERRUPTED
    assert len(machine.commands) == 2
    _, summary = written_summary(tmp_path)
    assert [row.status for row in summary.runs] == ["ok", "no_result", "not_run", "not_run"]
    assert summary.microbench[0].status == "not_run" and summary.microbench[0].exit_code is None


def test_an_interrupted_suite_keeps_the_kernels_it_timed(tmp_path: Path) -> None:
    """Ctrl-C (or a time limit's SIGINT) during the microbenchmarks: the suite's report holds the kernels
    timed before it, and the summary lists them under an interrupted suite."""
    machine = FakeMachine()

    def interrupted_suite(argv: list[str]) -> int:
        code = machine(argv)
        if argv[3] == "microbench":
            raise KeyboardInterrupt
        return code

    assert gpu_check(machine, tmp_path, runner=interrupted_suite) == ExitCode.INTERRUPTED
    folder, summary = written_summary(tmp_path)
    (suite,) = summary.microbench
    timed = len(benchmark_report([])["benchmarks"])
    assert (suite.status, suite.reason) == ("interrupted", f"interrupted after {timed} kernels")
    assert len(suite.kernels) == timed and all(kernel.status == "ok" for kernel in suite.kernels)
    assert (
        f"- microbench full: interrupted: interrupted after {timed} kernels"
        in (folder / "summary.md").read_text()
    )
