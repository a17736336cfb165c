"""Microbenchmark results in the store: `jaxbench microbench` end to end, and the pytest-benchmark reader."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import select

from jaxbench.core.errors import ExitCode
from jaxbench.harness import commands
from jaxbench.results import commands as store_commands
from jaxbench.results import schema, store
from jaxbench.results.ingest import parse_file
from jaxbench.results.records import IngestError


@pytest.fixture(scope="module")
def microbench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real run of the tiny matmul suite, ingested into its own SQLite store."""
    folder = tmp_path_factory.mktemp("microbench")
    url = f"sqlite:///{folder / 'store.sqlite'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAXBENCH_DB", url)
        code = commands.microbench(
            commands.MicrobenchOptions("tiny", "matmul", folder),
            store_commands.ingest_result,
            Console(width=200),
        )
    assert code == ExitCode.OK
    (report,) = folder.glob("microbench-*.json")
    return report, url


@pytest.mark.slow
def test_microbench_writes_rates_provenance_and_flags(microbench_run: tuple[Path, str]) -> None:
    report, _ = microbench_run
    document = json.loads(report.read_text())
    entries = {entry["name"]: entry for entry in document["benchmarks"]}
    bf16 = entries["test_matmul[bfloat16-512-256-1024]"]
    assert bf16["params"] == {"dtype": "bfloat16", "m": 512, "n": 256, "k": 1024}
    info = bf16["extra_info"]
    assert info["flops"] == 2 * 512 * 256 * 1024
    # The rate is derived from the same median pytest-benchmark reports.
    assert info["tflops"] == pytest.approx(info["flops"] / bf16["stats"]["median"] / 1e12)
    assert info["device_kind"] == "cpu" and info["sizes"] == "tiny"
    jaxbench = document["machine_info"]["jaxbench"]
    assert jaxbench["flags"]["profile"] == "cpu"
    assert info["flags"] == jaxbench["flags"]["identity"][:16]
    assert jaxbench["provenance"]["versions"]["jaxlib"]
    assert jaxbench["failed"] == []
    assert jaxbench["schedule"] == "ad-hoc"  # by hand: `jaxbench microbench --nightly` for the nightly's


def test_microbench_results_are_stored_and_reported(microbench_run: tuple[Path, str]) -> None:
    _, url = microbench_run
    engine = store.connect(url)
    with engine.connect() as connection:
        names = set(connection.scalars(select(schema.Series.benchmark)))
        components = set(connection.scalars(select(schema.Component.name)))
    assert "micro/matmul[bfloat16-512-256-1024]" in names
    assert {"jax", "jaxlib"} <= components  # from the suite's provenance, as for recipe runs
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAXBENCH_DB", url)
        console = Console(record=True, width=250)
        assert store_commands.show_report("table", None, None, console) == ExitCode.OK
    assert "micro/matmul[bfloat16-512-256-1024]" in console.export_text()


def test_microbench_files_without_a_schedule_are_nightly(
    microbench_run: tuple[Path, str], tmp_path: Path
) -> None:
    """Files written before schedules (and other suites' files) count as the nightly's, as they did."""
    document = copy.deepcopy(_document(microbench_run[0]))
    assert parse_file(microbench_run[0]).schedule == "ad-hoc"
    del document["machine_info"]["jaxbench"]["schedule"]
    path = tmp_path / "before-schedules.json"
    path.write_text(json.dumps(document))
    assert parse_file(path).schedule == "nightly"


def _document(report: Path) -> dict[str, Any]:
    return json.loads(report.read_text())  # type: ignore[no-any-return]


def test_failed_benchmarks_become_failed_results(microbench_run: tuple[Path, str], tmp_path: Path) -> None:
    report, _ = microbench_run
    document = _document(report)
    passed = document["benchmarks"][0]
    document["machine_info"]["jaxbench"]["failed"] = [
        {
            "fullname": passed["fullname"],
            "name": passed["name"],
            "params": passed["params"],
            "extra_info": {k: passed["extra_info"][k] for k in ("device_kind", "device_count", "flags")},
            "status": "failed",
            "reason": "ReferenceMismatch: matmul: relative error 1 against the float64 reference",
        }
    ]
    document["benchmarks"] = document["benchmarks"][1:]
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(document))
    run = parse_file(path)
    (failure,) = [r for r in run.results if r.status == "failed"]
    assert failure.value is None and "relative error" in (failure.reason or "")
    ok = [r for r in parse_file(report).results if r.series.metric == "perf/time_s"]
    # The failure lands in the same series as that benchmark's successful nights.
    assert failure.series == next(r.series for r in ok if r.series.benchmark == failure.series.benchmark)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda d: d["machine_info"]["jaxbench"].pop("provenance"),
            r"machine_info.jaxbench.provenance: missing",
        ),
        (
            lambda d: d["machine_info"]["jaxbench"]["provenance"]["devices"].pop("kind"),
            r"machine_info.jaxbench.provenance.devices.kind: Field required",
        ),
        (
            lambda d: d["machine_info"]["jaxbench"].update(
                failed=[{"fullname": "x", "name": "x", "status": "ok"}]
            ),
            r"failed\[0\].status: expected a failure status",
        ),
        (
            lambda d: d["benchmarks"][0]["stats"].update(median=-1),
            r"benchmarks\[0\].stats.median: expected a positive",
        ),
        (
            lambda d: d["machine_info"]["jaxbench"].update(schedule="weekly"),
            r"machine_info.jaxbench.schedule: 'weekly'; expected nightly, ad-hoc",
        ),
    ],
)
def test_malformed_microbench_files_are_rejected_with_the_field(
    microbench_run: tuple[Path, str], tmp_path: Path, edit: Any, message: str
) -> None:
    document = copy.deepcopy(_document(microbench_run[0]))
    edit(document)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(IngestError, match=message):
        parse_file(path)
