"""Where runs write, and what a run that stopped early reports: every command that takes --out refuses an
unusable folder before it compiles or starts anything, and an interrupted run's partial loss is no metric.

    JAX_PLATFORMS=cpu python -m pytest -q tests/harness/test_run_outputs.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import writable_folder
from jaxbench.harness import commands
from jaxbench.harness.backends.native import backend as native
from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.gpucheck import check
from jaxbench.harness.launch import no_sink
from jaxbench.harness.run import ab, runner
from jaxbench.harness.runtime.options import RunOptions
from jaxbench.harness.runtime.reporter import SilentReporter
from jaxbench.harness.runtime.result import Status
from jaxbench.results.ingest import parse_file
from tests.conftest import REPO


def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "taken"
    path.write_text("not a folder")
    return path


def under_a_file(tmp_path: Path) -> Path:
    return a_file(tmp_path) / "runs"


UNUSABLE = [a_file, under_a_file]


@pytest.mark.parametrize("unusable", UNUSABLE)
def test_an_unusable_folder_is_invalid_input_naming_the_flag_and_path(
    tmp_path: Path, unusable: Callable[[Path], Path]
) -> None:
    out = unusable(tmp_path)
    with pytest.raises(InvalidInput, match=rf"^--out {out}: expected a folder"):
        writable_folder(out, "--out")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only folder")
def test_a_read_only_folder_is_invalid_input(tmp_path: Path) -> None:
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(InvalidInput, match=r"Permission denied"):
            writable_folder(tmp_path / "runs", "--out")
    finally:
        tmp_path.chmod(0o755)


def test_a_missing_folder_is_made(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    assert writable_folder(out, "--out") == out and out.is_dir() and list(out.iterdir()) == []


class NothingMayStart:
    """Stands in for what a command starts (training, runs, subprocesses): none may be reached."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("started work before checking --out")


def run_command(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "train_and_time", NothingMayStart())
    runner.execute(RunOptions("llama2", steps=6, out_dir=out), SilentReporter())


def ab_command(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ab, "run_ab", NothingMayStart())
    commands.ab_compare(commands.ABOptions(RunOptions("llama2", out_dir=out), "none", "cpu"), Console())


def microbench_command(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands, "run_to_its_end", NothingMayStart())
    commands.microbench(commands.MicrobenchOptions("tiny", out=out), no_sink, Console())


def gpu_check_command(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = check.GpuCheckOptions(out, steps=30)
    hint = DeviceHint("gpu", "NVIDIA H100 80GB HBM3")
    check.gpu_check(options, Console(), hint=hint, environ={}, runner=NothingMayStart())


@pytest.mark.parametrize("unusable", UNUSABLE)
@pytest.mark.parametrize("command", [run_command, ab_command, microbench_command, gpu_check_command])
def test_every_command_checks_its_out_folder_before_starting(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    unusable: Callable[[Path], Path],
    command: Callable[[Path, pytest.MonkeyPatch], None],
) -> None:
    out = unusable(tmp_path)
    with pytest.raises(InvalidInput, match=rf"^--out {out}: expected a folder"):
        command(out, monkeypatch)


def test_jaxbench_run_into_a_file_fails_at_once(tmp_path: Path) -> None:
    out = a_file(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "jaxbench", "run", "llama2", "--steps", "6", "--no-ingest", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 1, done.stderr
    assert f"error: --out {out}: expected a folder for the results, but it is a file" in done.stderr
    assert "compiling" not in done.stderr and "Traceback" not in done.stderr
    assert out.read_text() == "not a folder"


@pytest.mark.slow
def test_an_interrupted_run_reports_no_final_loss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted_after_six_steps(*args: Any, **kwargs: Any) -> None:
        log = args[3]
        log.times.extend([0.01] * 6)
        log.losses.extend([4.0, 3.9, 3.8, 3.7, 3.6, 3.5])
        raise KeyboardInterrupt

    monkeypatch.setattr(native, "run_steps", interrupted_after_six_steps)
    result, path = runner.execute(RunOptions("llama2", steps=100, out_dir=tmp_path), SilentReporter())
    assert result.status is Status.INTERRUPTED and path is not None
    assert result.loss is not None and len(result.loss.per_step) == 6  # the curve is kept as measured
    assert result.loss.final_window is None
    assert not {metric.name for metric in result.metrics} & {"loss/final_window", "loss/excess_over_optimal"}
    # In the store the loss of the run is marked interrupted, never an ok value.
    stored = {r.series.metric: r for r in parse_file(path).results}
    assert (stored["loss/final_window"].status, stored["loss/final_window"].value) == ("interrupted", None)
