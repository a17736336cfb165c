"""`jaxbench gpu-check` on the CPU: it refuses a machine without a GPU before running anything, and with a
fake runner that writes realistic result files (tests/harness/gpucheck_fake.py) it runs every check in order
in a fresh process into one folder; a real check of one tiny run is summarised. What the summary says:
tests/harness/test_gpucheck_summary.py.

    JAX_PLATFORMS=cpu python -m pytest -q tests/harness/test_gpucheck.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.gpucheck import check
from jaxbench.harness.gpucheck.plan import RecipeCheck
from jaxbench.main import main
from tests.conftest import REPO
from tests.harness.gpucheck_fake import ON_A_GPU, FakeMachine, gpu_check, written_summary


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
    folder, summary = written_summary(tmp_path)
    (run,) = summary.runs
    assert (run.status, run.recipe, run.exit_code, run.flag_profile) == ("ok", "llama2-tiny", 0, "cpu")
    assert run.step_time_s and run.per_s and run.compile_s and run.unit == "token"
    assert summary.device == "cpu" and summary.auto_profiles == ["cpu"] and summary.microbench == []
    assert sorted(path.name for path in folder.iterdir()) == sorted(
        [str(run.result_file), "summary.json", "summary.md"]
    )


def test_the_real_runner_returns_the_exit_code() -> None:
    assert check.run_to_its_end([sys.executable, "-c", "raise SystemExit(3)"]) == 3
