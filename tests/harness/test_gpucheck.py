"""`jaxbench gpu-check` on the CPU: it refuses a machine without a GPU before running anything, and with a
fake runner that writes realistic result files it runs every check in order, summarises their figures, keeps
going after a failure and reports it in its exit code.

    JAX_PLATFORMS=cpu python -m pytest -q tests/harness/test_gpucheck.py
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from core.errors import ExitCode, InvalidInput
from harness.flags.environment import DeviceHint
from harness.gpucheck import DEFAULT_STEPS, check
from harness.gpucheck.plan import RecipeCheck
from harness.gpucheck.summary import Summary
from harness.measure.hlo import ProgramSummary
from harness.runtime.result import Program, Status
from jaxbench.main import main
from results import synthetic
from tests.conftest import REPO

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


def _summary(tmp_path: Path) -> tuple[Path, Summary]:
    (folder,) = tmp_path.glob("gpu-check-*")
    return folder, Summary.model_validate_json((folder / "summary.json").read_text())


def test_without_a_gpu_it_says_so_in_one_line_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def must_not_run(argv: list[str]) -> int:
        raise AssertionError(f"ran {argv}")

    monkeypatch.setattr(check, "run_to_its_end", must_not_run)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert main(["gpu-check", "--out", str(tmp_path)]) == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "error: gpu-check needs an NVIDIA GPU, and JAX would run on cpu here: "
        "JAX_PLATFORMS=cpu keeps it off GPUs"
    ]
    assert list(tmp_path.iterdir()) == []


def test_the_command_refuses_in_a_fresh_process_without_importing_jax(tmp_path: Path) -> None:
    probe = (
        "import sys\nfrom jaxbench.main import main\n"
        f"code = main(['gpu-check', '--out', {str(tmp_path)!r}])\n"
        "print(code, 'jax' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == ["2", "False"]
    assert "needs an NVIDIA GPU" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("hint", "jax_platforms", "found"),
    [
        (DeviceHint("cpu", "cpu"), "", "JAX would run on the cpu here: nvidia-smi lists no GPU"),
        (ON_A_GPU, "cpu", "JAX would run on cpu here: JAX_PLATFORMS=cpu keeps it off GPUs"),
        (ON_A_GPU, "cuda", None),
        (ON_A_GPU, "", None),
    ],
)
def test_a_missing_gpu_is_named_with_what_was_found(
    hint: DeviceHint, jax_platforms: str, found: str | None
) -> None:
    message = check.missing_gpu(hint, jax_platforms)
    assert message == (None if found is None else f"gpu-check needs an NVIDIA GPU, and {found}")


def test_every_check_runs_in_order_in_a_fresh_process_into_one_folder(tmp_path: Path) -> None:
    machine = FakeMachine()
    assert gpu_check(machine, tmp_path, steps=25) == ExitCode.OK
    (folder,) = tmp_path.glob("gpu-check-*")
    jaxbench = [sys.executable, "-m", "jaxbench"]
    where = ["--no-ingest", "--out", str(folder)]
    auto = ["--set", "xla_flags=auto"]

    def run(recipe: str, size: str, *sets: str) -> list[str]:
        overrides = [item for override in sets for item in ("--set", override)]
        return [*jaxbench, "run", recipe, "--size", size, "--steps", "25", *overrides, *auto, *where]

    assert machine.commands == [
        run("llama2", "1b", "train.precision=bf16", "train.attention=cudnn"),
        run("llama2", "1b", "train.precision=fp8"),
        run("gpt3", "1.3b"),
        run("vit", "b16"),
        [*jaxbench, "microbench", "--sizes", "full", *where],
    ]


def test_the_summary_holds_each_runs_figures_and_each_kernels_fraction_of_peak(tmp_path: Path) -> None:
    assert gpu_check(FakeMachine(), tmp_path) == ExitCode.OK
    folder, summary = _summary(tmp_path)
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
    folder, summary = _summary(tmp_path)
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
    folder, summary = _summary(tmp_path)
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
    _, summary = _summary(tmp_path)
    fp8 = next(row for row in summary.runs if row.check == "llama2 1b fp8")
    assert fp8.gemm_calls == {"__cublas$lt$matmul$f8": 35}
    fingerprints = [row.fingerprint for row in summary.runs]
    assert all(fingerprints) and len(set(fingerprints)) == len(fingerprints)


def test_a_check_that_writes_no_result_is_listed_with_its_exit_code(tmp_path: Path) -> None:
    machine = FakeMachine()

    def crashing_gpt3(argv: list[str]) -> int:
        return 1 if argv[4:5] == ["gpt3"] else machine(argv)

    assert gpu_check(machine, tmp_path, runner=crashing_gpt3) == ExitCode.FAILED
    _, summary = _summary(tmp_path)
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
    folder, summary = _summary(tmp_path)
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
    _, summary = _summary(tmp_path)
    assert [row.status for row in summary.runs] == ["ok", "no_result", "not_run", "not_run"]
    assert summary.microbench[0].status == "not_run" and summary.microbench[0].exit_code is None


def test_too_few_steps_stop_before_anything_runs(tmp_path: Path) -> None:
    machine = FakeMachine()
    with pytest.raises(
        InvalidInput, match=r"--steps 5: train: .*warmup_steps \(10\) must be smaller than steps \(5\)"
    ):
        gpu_check(machine, tmp_path, steps=5)
    assert machine.commands == [] and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_real_check_runs_in_a_fresh_process_and_is_summarised(tmp_path: Path) -> None:
    """The real runner and command line, with a plan of one tiny run on the CPU (the test's JAX_PLATFORMS)."""
    plan = (RecipeCheck("llama2 tiny", "llama2", "tiny"),)
    options = check.GpuCheckOptions(tmp_path, steps=8)
    code = check.gpu_check(options, Console(width=200), hint=ON_A_GPU, environ={}, plan=plan)
    assert code == ExitCode.OK
    folder, summary = _summary(tmp_path)
    (run,) = summary.runs
    assert (run.status, run.recipe, run.exit_code, run.flag_profile) == ("ok", "llama2-tiny", 0, "cpu")
    assert run.step_time_s and run.per_s and run.compile_s and run.unit == "token"
    assert summary.device == "cpu" and summary.auto_profiles == ["cpu"] and summary.microbench == []
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        [str(run.result_file), "summary.json", "summary.md"]
    )


def test_the_real_runner_returns_the_exit_code() -> None:
    assert check.run_to_its_end([sys.executable, "-c", "raise SystemExit(3)"]) == 3


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
    folder, summary = _summary(tmp_path)
    (suite,) = summary.microbench
    timed = len(benchmark_report([])["benchmarks"])
    assert (suite.status, suite.reason) == ("interrupted", f"interrupted after {timed} kernels")
    assert len(suite.kernels) == timed and all(kernel.status == "ok" for kernel in suite.kernels)
    assert (
        f"- microbench full: interrupted: interrupted after {timed} kernels"
        in (folder / "summary.md").read_text()
    )
