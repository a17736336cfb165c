"""`jaxbench pr-check` with its expensive steps replaced by fakes that record their calls: every option, the
CPUs and both output folders are refused before a side is made; each run's folder lies under --work, also for
a recipe given as a path; and a check whose runs all failed is no `ok`. Real runs:
tests/prcheck/test_pr_check.py.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/prcheck/test_pr_check_options.py
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jaxbench.core.cpus import cpu_list, ranges
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.main import main
from jaxbench.prcheck import commands
from jaxbench.prcheck.sides import Side
from jaxbench.triage.stacks import Measurement
from tests.conftest import REPO


class Fakes:
    """The two sides and every run, recorded; `status` is what each run ends with."""

    def __init__(self, status: str = "ok") -> None:
        self.status = status
        self.sides_made = 0
        self.outs: list[Path] = []

    def make_sides(self, *args: Any) -> tuple[Side, Side]:
        self.sides_made += 1
        return Side("base", "jaxbench@base", "b" * 40, {}), Side("head", "jaxbench@head", "h" * 40, {})

    def run_measured(self, arguments: list[str], *, out: Path, **kwargs: Any) -> Measurement:
        self.outs.append(out)
        if self.status != "ok":
            return Measurement(self.status, reason="exit 1")
        # Equal sides, a little noise: a verdict in the first round.
        step_s = 0.1 * (1 + 0.001 * (len(self.outs) % 3))
        return Measurement("ok", median_step_s=step_s, cpu_per_wall=1.0)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fakes]:
    recorded = Fakes()
    monkeypatch.setattr(commands, "make_sides", recorded.make_sides)
    monkeypatch.setattr(commands, "run_measured", recorded.run_measured)
    yield recorded


def pr_check(tmp_path: Path, *args: str, out: Path | None = None) -> int:
    out = tmp_path / "out" if out is None else out
    folders = ["--out", str(out), "--work", str(tmp_path / "work")]
    return main(
        [
            "pr-check",
            "--base",
            "HEAD",
            "--head",
            "HEAD",
            "--repeats",
            "2",
            "--max-rounds",
            "1",
            *args,
            *folders,
        ]
    )


@pytest.mark.parametrize("where", ["file", "file/below"])
def test_an_out_that_cannot_be_written_is_refused_before_any_run(
    where: str, fakes: Fakes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("not a folder")
    assert pr_check(tmp_path, out=tmp_path / where) == ExitCode.INVALID_INPUT
    err = capsys.readouterr().err
    assert f"--out {tmp_path / where}: expected a folder" in err, err
    assert fakes.sides_made == 0 and fakes.outs == []
    assert not (tmp_path / "work").exists()


@pytest.mark.parametrize(
    ("cpus", "refusal"),
    [
        ("99999", "CPU 99999 is not one this process may run on"),
        ("0-99999999999999999999999", "is not one this process may run on"),
        ("²", "expected a CPU list as taskset takes it"),
        ("١", "expected a CPU list as taskset takes it"),
        ("0-", "expected a CPU list"),
        ("1,,0", "expected a CPU list"),
        ("3-1", "3-1 runs backwards"),
    ],
)
def test_cpus_are_ascii_and_this_machines_before_any_run(
    cpus: str, refusal: str, fakes: Fakes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert pr_check(tmp_path, "--cpus", cpus) == ExitCode.INVALID_INPUT
    err = capsys.readouterr().err
    assert f"--cpus {cpus!r}: {refusal}" in err or refusal in err, err
    assert len(err.strip().splitlines()) == 1
    assert fakes.sides_made == 0 and fakes.outs == []


def test_a_cpu_list_comes_back_in_taskset_form() -> None:
    assert cpu_list("0-3,6", range(8)) == "0-3,6"
    assert cpu_list("1,0", {0, 1}) == "0-1"
    assert ranges({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    with pytest.raises(InvalidInput, match=r"CPU 1 is not one this process may run on \(it may use 0,2-3\)"):
        cpu_list("0-2", {0, 2, 3})


def test_the_runs_of_a_recipe_given_as_a_path_stay_under_work(fakes: Fakes, tmp_path: Path) -> None:
    beside = tmp_path / "recipes"
    beside.mkdir()
    recipe = beside / "mine.yaml"
    shutil.copy(REPO / "recipes" / "llama2.yaml", recipe)
    (beside / "keep.json").write_text("{}")
    assert pr_check(tmp_path, "--recipes", f"{recipe}:tiny", "--threshold", "0.5") == ExitCode.OK
    work = (tmp_path / "work").resolve()
    assert fakes.outs and all(out.resolve().is_relative_to(work) for out in fakes.outs), fakes.outs
    assert sorted(p.name for p in beside.iterdir()) == ["keep.json", "mine.yaml"]


def test_two_recipe_files_of_one_name_keep_their_runs_apart(tmp_path: Path) -> None:
    first = commands.run_folder(tmp_path, str(tmp_path / "a" / "llama2.yaml"), "tiny")
    second = commands.run_folder(tmp_path, str(tmp_path / "b" / "llama2.yaml"), "tiny")
    assert first != second and first.parent == second.parent == tmp_path / "runs"
    assert commands.run_folder(tmp_path, "llama2", "tiny") == tmp_path / "runs" / "llama2-tiny"


def test_a_check_whose_runs_all_failed_is_not_ok(
    fakes: Fakes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes.status = "no-result"
    assert pr_check(tmp_path) == ExitCode.FAILED
    verdict = json.loads((tmp_path / "out" / "pr-check.json").read_text())
    assert verdict["verdict"] == "unmeasured"
    [benchmark] = verdict["benchmarks"]
    assert benchmark["verdict"] == "unmeasured" and benchmark["pairs"] == 0
    assert "unmeasured" in (tmp_path / "out" / "pr-check.md").read_text()
