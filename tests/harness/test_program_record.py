"""Every native run records its compiled step: the fingerprint and summary of the optimized HLO
and XLA's cost analysis in the result, the HLO itself kept beside it for nightly runs (or --keep-hlo), and
`jaxbench hlo-diff` telling "same program" from "program changed" on two real runs."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.measure import hlo, hlo_text
from jaxbench.harness.run import runner
from jaxbench.harness.runtime.options import RunOptions, Schedule
from jaxbench.harness.runtime.reporter import SilentReporter
from jaxbench.harness.runtime.result import HLO_SUFFIX, Program, RunResult, read_program_text
from jaxbench.main import main
from jaxbench.results import comparison_commands, store
from tests.support.processes import jaxbench


def run(out: Path, *overrides: str, schedule: Schedule = Schedule.AD_HOC, keep: bool | None = None) -> Path:
    options = RunOptions(
        "llama2",
        steps=3,
        overrides=("train.warmup_steps=1", *overrides),
        out_dir=out,
        schedule=schedule,
        keep_hlo=keep,
    )
    _, path = runner.execute(options, SilentReporter())
    assert path is not None
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two nightly runs of one recipe, and an ad-hoc one with a wider feed-forward layer."""
    out = tmp_path_factory.mktemp("runs")
    return {
        "first": run(out, schedule=Schedule.NIGHTLY),
        "again": run(out, schedule=Schedule.NIGHTLY),
        "wider": run(out, "model.ffn_dim=256"),
    }


def result_of(path: Path) -> RunResult:
    return RunResult.model_validate_json(path.read_text())


@pytest.mark.slow
def test_a_nightly_run_keeps_its_hlo_and_the_result_holds_its_fingerprint(runs: dict[str, Path]) -> None:
    path = runs["first"]
    program = result_of(path).program
    assert program is not None and program.hlo_file is not None
    assert program.hlo_file.endswith(HLO_SUFFIX) and (path.parent / program.hlo_file).is_file()
    text = read_program_text(path, program)
    assert text is not None and text.startswith("HloModule")
    assert program.summary == hlo.summarize(text)
    assert program.summary.fingerprint == hlo_text.fingerprint(text)
    assert program.summary.ops.get("matmul", 0) + sum(program.summary.fusions.values()) > 0
    assert program.cost.get("flops", 0) > 0 and program.cost.get("bytes accessed", 0) > 0
    # gzip without a timestamp (bytes 4-7 of its header): the same text is the same bytes.
    assert (path.parent / program.hlo_file).read_bytes()[4:8] == bytes(4)


@pytest.mark.slow
def test_an_ad_hoc_run_keeps_only_the_summary_unless_asked(runs: dict[str, Path], tmp_path: Path) -> None:
    program = result_of(runs["wider"]).program
    assert program is not None and program.hlo_file is None
    kept = result_of(run(tmp_path, keep=True)).program
    assert kept is not None and kept.hlo_file is not None
    assert gzip.decompress((tmp_path / kept.hlo_file).read_bytes()).decode().startswith("HloModule")


def test_two_runs_of_one_recipe_compile_the_same_program(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Run ids, times and file names differ between the two runs; the program does not."""
    assert main(["hlo-diff", str(runs["first"]), str(runs["again"]), "--json"]) == ExitCode.OK
    report = json.loads(capsys.readouterr().out)["data"]
    assert report["same_program"] is True and report["counts"] == []
    assert len(set(report["fingerprints"])) == 1
    flops = next(q for q in report["quantities"] if q["name"] == "flops")
    assert flops["ratio"] == 1.0


def test_a_wider_model_is_another_program_with_more_flops(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hlo-diff", str(runs["first"]), str(runs["wider"]), "--json"]) == ExitCode.OK
    report = json.loads(capsys.readouterr().out)["data"]
    assert report["same_program"] is False and report["same_input"] is False
    flops = next(q for q in report["quantities"] if q["name"] == "flops")
    assert flops["ratio"] > 1.0
    assert main(["hlo-diff", str(runs["first"]), str(runs["wider"])]) == ExitCode.OK
    shown = capsys.readouterr().out
    assert "program changed, from its input" in shown and "XLA's cost analysis" in shown


def test_runs_of_the_store_are_compared_by_id(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store keeps each run's program: `hlo-diff` of two run ids says what the result files say."""
    monkeypatch.setenv(store.DB_ENV, f"sqlite:///{tmp_path / 'store.sqlite'}")
    assert main(["ingest", str(runs["first"]), str(runs["wider"])]) == ExitCode.OK
    capsys.readouterr()
    assert main(["hlo-diff", "1", "2", "--json"]) == ExitCode.OK
    from_store = json.loads(capsys.readouterr().out)["data"]
    assert main(["hlo-diff", str(runs["first"]), str(runs["wider"]), "--json"]) == ExitCode.OK
    from_files = json.loads(capsys.readouterr().out)["data"]
    assert from_store["same_program"] is False
    assert from_store["fingerprints"] == from_files["fingerprints"]
    assert from_store["counts"] == from_files["counts"]
    store_names = {q["name"] for q in from_store["quantities"]}
    assert store_names == {"bytes accessed", "flops", "transcendentals"}  # no memory plan in the store
    assert main(["hlo-diff", "1", "99"]) == ExitCode.INVALID_INPUT
    assert capsys.readouterr().err.strip() == "error: run 99: no such run in the store"


def run_in_a_process(out: Path, xla_flags: str = "") -> Path:
    before = set(out.glob("*.json"))
    done = jaxbench(
        "run", "llama2", "--steps", "3", "--set", "train.warmup_steps=1", out=out, xla_flags=xla_flags
    )
    assert done.returncode == ExitCode.OK, done.stderr
    [path] = set(out.glob("*.json")) - before
    return path


@pytest.mark.slow
def test_three_processes_compile_one_program_and_a_flag_changes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's check: the same configuration in three processes gives one fingerprint; an XLA flag that
    changes the program (fast math on the CPU) gives another, and `hlo-diff` names the flag and the counts.
    The flag acts inside XLA: the program JAX handed it (the input fingerprint) is the same, and the verdict
    says so."""
    same = [run_in_a_process(tmp_path) for _ in range(3)]
    fingerprints = {program_of(path).summary.fingerprint for path in same}
    assert len(fingerprints) == 1
    inputs = {program_of(path).input_fingerprint for path in same}
    assert len(inputs) == 1 and None not in inputs
    fast = run_in_a_process(tmp_path, "--xla_cpu_enable_fast_math=true")
    assert program_of(fast).summary.fingerprint not in fingerprints
    assert program_of(fast).input_fingerprint in inputs
    assert main(["hlo-diff", str(same[0]), str(fast), "--json"]) == ExitCode.OK
    report = json.loads(capsys.readouterr().out)["data"]
    assert report["same_program"] is False and report["same_input"] is True
    assert report["flag_changes"] == [{"name": "xla_cpu_enable_fast_math", "a": None, "b": "true"}]
    assert report["counts"]  # fast math folds elementwise ops away: the counts say which
    assert main(["hlo-diff", str(same[0]), str(fast)]) == ExitCode.OK
    assert "same input program, compiled differently" in capsys.readouterr().out


def program_of(path: Path) -> Program:
    program = result_of(path).program
    assert program is not None
    return program


def test_a_result_without_a_program_is_refused_naming_it(runs: dict[str, Path], tmp_path: Path) -> None:
    document = json.loads(runs["first"].read_text())
    del document["program"]
    older = tmp_path / "older.json"
    older.write_text(json.dumps(document))
    with pytest.raises(InvalidInput, match=rf"^{older}: program: this run recorded no compiled program"):
        comparison_commands.hlo_diff(str(runs["first"]), str(older), False, Console())
