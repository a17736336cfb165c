"""Ingest against SQLite and PostgreSQL: a batch is checked whole against the store's limits and written in
one transaction, a run is identified by its run id (not the file's bytes), non-finite numbers are refused,
and a run that stopped early stores no partial loss as a measurement.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_ingest_atomic.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from jaxbench.harness.runtime.options import Schedule
from jaxbench.harness.runtime.result import Status, metric_values
from jaxbench.results import commands, schema, store, synthetic, writes
from jaxbench.results.ingest import parse_file
from jaxbench.results.records import IngestError

NIGHT = dt.date(2026, 11, 1)
VALID_FILES = 60
"""More than one of the old write batches (50 files): a refusal must leave even the first batch unwritten."""

Document = dict[str, Any]


def count(engine: Engine, table: type[schema.Base]) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def run_document(day: int = 0, step_time: float = 0.5, **options: Any) -> Document:
    return synthetic.run_result(NIGHT + dt.timedelta(days=day), step_time, **options)


def benchmark_document(*test_ids: str) -> Document:
    """A pytest-benchmark file of another project's suite (no machine_info.jaxbench): one entry a test id."""
    return {
        "machine_info": {"node": "bench-host", "python_version": "3.12.1"},
        "datetime": "2026-11-01T02:00:00",
        "benchmarks": [
            {"fullname": test_id, "stats": {"median": 0.1, "iqr": 0.01, "data": [0.09, 0.1, 0.11]}}
            for test_id in test_ids
        ],
    }


def write_json(path: Path, document: Document, **dump_options: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, **dump_options))
    return path


def valid_batch(folder: Path) -> list[Path]:
    return [synthetic.write(folder, run_document(day)) for day in range(VALID_FILES)]


# --- case 1: checked whole, written in one transaction -----------------------------------------------------


def _over_long_test_id(folder: Path) -> tuple[Path, str]:
    path = write_json(folder / "long-id.json", benchmark_document("tests/test_x.py::test_" + "a" * 200))
    return path, r"benchmarks\[0\]\.fullname: expected at most 200 characters .*series\.benchmark.*got 222"


def _over_long_run_id(folder: Path) -> tuple[Path, str]:
    document = run_document(day=VALID_FILES)
    document["run_id"] = "f" * 65
    return synthetic.write(folder, document, "long-run-id.json"), r"run_id: expected at most 64 characters"


def _over_long_unit(folder: Path) -> tuple[Path, str]:
    document = run_document(day=VALID_FILES)
    document["metrics"][0]["unit"] = "seconds" * 6
    return (
        synthetic.write(folder, document, "long-unit.json"),
        r"metrics\[0\]\.unit: expected at most 40 characters",
    )


def _nul_in_host_name(folder: Path) -> tuple[Path, str]:
    document = run_document(day=VALID_FILES)
    document["provenance"]["devices"]["hostname"] = "node\x001"
    return (
        synthetic.write(folder, document, "nul.json"),
        r"provenance\.devices\.hostname: expected text without NUL characters",
    )


def _hosts_beyond_an_integer(folder: Path) -> tuple[Path, str]:
    document = run_document(day=VALID_FILES)
    document["provenance"]["devices"]["process_count"] = 2**31
    return (
        synthetic.write(folder, document, "hosts.json"),
        r"provenance\.devices\.process_count: expected an integer from",
    )


def _empty_pytest_benchmark_file(folder: Path) -> tuple[Path, str]:
    return write_json(folder / "empty.json", benchmark_document()), r"benchmarks: expected at least one"


def _one_test_twice(folder: Path) -> tuple[Path, str]:
    path = write_json(folder / "twice.json", benchmark_document("tests/t.py::test_a", "tests/t.py::test_a"))
    return path, r"benchmarks\[1\]: the same series as benchmarks\[0\]"


@pytest.mark.parametrize(
    "bad_file",
    [
        _empty_pytest_benchmark_file,
        _over_long_test_id,
        _over_long_run_id,
        _over_long_unit,
        _nul_in_host_name,
        _hosts_beyond_an_integer,
        _one_test_twice,
    ],
)
def test_a_batch_with_one_file_the_store_would_refuse_writes_nothing(
    store_url: str, tmp_path: Path, bad_file: Callable[[Path], tuple[Path, str]]
) -> None:
    """SQLite accepts any length and integer, PostgreSQL does not: both refuse the batch, by name, before
    writing any of it."""
    engine = store.connect(store_url)
    good = valid_batch(tmp_path / "good")
    bad, message = bad_file(tmp_path / "bad")
    with pytest.raises(IngestError, match=rf"^{re.escape(str(bad))}: {message}"):
        commands.ingest(engine, [*good, bad])
    assert count(engine, schema.Run) == 0 and count(engine, schema.Series) == 0


def test_an_ok_run_without_metrics_is_refused_by_name(tmp_path: Path) -> None:
    document = run_document()
    document["metrics"] = []
    path = synthetic.write(tmp_path, document)
    with pytest.raises(
        IngestError, match=rf"^{re.escape(str(path))}: metrics: expected the metrics of a run with status ok"
    ):
        parse_file(path)


# --- case 6: a run is identified by its run id --------------------------------------------------------------


def test_a_re_serialised_run_is_the_same_run(store_url: str, tmp_path: Path) -> None:
    engine = store.connect(store_url)
    document = run_document()
    compact = write_json(tmp_path / "compact.json", document)
    indented = write_json(tmp_path / "indented.json", document, indent=4, sort_keys=True)
    again = write_json(tmp_path / "again.json", document, indent=1)
    first = commands.ingest(engine, [compact, indented])  # in one batch
    second = commands.ingest(engine, [again])  # and in a later one
    assert len(first.added) == 1 and first.skipped == [indented] and second.skipped == [again]
    assert count(engine, schema.Run) == 1


def test_a_re_serialised_pytest_benchmark_file_is_stored_once(store_url: str, tmp_path: Path) -> None:
    engine = store.connect(store_url)
    document = benchmark_document("tests/t.py::test_a")
    commands.ingest(engine, [write_json(tmp_path / "a.json", document)])
    summary = commands.ingest(engine, [write_json(tmp_path / "b.json", document, indent=2, sort_keys=True)])
    assert summary.added == [] and count(engine, schema.Run) == 1


def _byte_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "document",
    [run_document(), benchmark_document("tests/t.py::test_a")],
    ids=["harness", "pytest-benchmark"],
)
def test_a_file_stored_under_its_byte_hash_is_recognised(
    store_url: str, tmp_path: Path, document: Document
) -> None:
    """Stores ingested before runs were identified by content hold each file's sha256: the same file, or the
    same run written again, is still known."""
    engine = store.connect(store_url)
    stored = write_json(tmp_path / "stored.json", document)
    with store.transaction(engine) as session:
        writes.write_runs(session, [dataclasses.replace(parse_file(stored), source_hash=_byte_hash(stored))])
    rewritten = write_json(tmp_path / "rewritten.json", document, indent=2)
    summary = commands.ingest(engine, [stored, rewritten])
    assert summary.added == [] and summary.skipped == [stored, rewritten]
    assert count(engine, schema.Run) == 1


def test_another_result_under_a_stored_run_id_is_refused(store_url: str, tmp_path: Path) -> None:
    engine = store.connect(store_url)
    document = run_document()
    commands.ingest(engine, [synthetic.write(tmp_path, document, "first.json")])
    document["metrics"][0]["value"] *= 2
    changed = synthetic.write(tmp_path, document, "changed.json")
    with pytest.raises(
        IngestError,
        match=rf"^{re.escape(str(changed))}: run_id: {document['run_id']} is already in the store \(run 1\), "
        r"with another outcome \(llama2-7b perf/step_time_s: 1 \(ok\) here, 0\.5 \(ok\) there\)",
    ):
        commands.ingest(engine, [changed])
    assert count(engine, schema.Run) == 1


def test_two_files_with_one_run_id_and_different_results_are_refused(store_url: str, tmp_path: Path) -> None:
    engine = store.connect(store_url)
    document = run_document()
    first = synthetic.write(tmp_path, document, "first.json")
    document["status"], document["reason"] = "interrupted", "SIGTERM"
    second = synthetic.write(tmp_path, document, "second.json")
    with pytest.raises(
        IngestError,
        match=rf"^{re.escape(str(second))}: run_id: \w+ is also the run id of {re.escape(str(first))}, "
        r"with another outcome \(status interrupted here, ok there; reason SIGTERM here, none there; ",
    ):
        commands.ingest(engine, [first, second])
    assert count(engine, schema.Run) == 0


# --- case 7: non-finite numbers -----------------------------------------------------------------------------


def _metric_value(document: Document, value: float) -> str:
    document["metrics"][0]["value"] = value
    return "metrics[0].value"


def _sample(document: Document, value: float) -> str:
    document["benchmarks"][0]["stats"]["data"][1] = value
    return "benchmarks[0].stats.data[1]"


def _rate(document: Document, value: float) -> str:
    document["benchmarks"][0]["extra_info"] = {"tflops": value}
    return "benchmarks[0].extra_info.tflops"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["NaN", "inf", "-inf"])
@pytest.mark.parametrize(
    ("make", "edit"),
    [
        (run_document, _metric_value),
        (lambda: benchmark_document("tests/t.py::test_a"), _sample),
        (lambda: benchmark_document("tests/t.py::test_a"), _rate),
    ],
    ids=["result", "pytest-benchmark-sample", "pytest-benchmark-rate"],
)
def test_non_finite_numbers_are_refused_with_the_field(
    store_url: str,
    tmp_path: Path,
    value: float,
    make: Callable[[], Document],
    edit: Callable[[Document, float], str],
) -> None:
    engine = store.connect(store_url)
    document = make()
    field = edit(document, value)
    path = write_json(tmp_path / "x.json", document)  # Python's json writes NaN, Infinity, -Infinity
    written = json.dumps(value)
    expected = rf"^{re.escape(str(path))}: {re.escape(field)}: expected a finite number, got {written}$"
    with pytest.raises(IngestError, match=expected):
        commands.ingest(engine, [path])
    assert count(engine, schema.Run) == 0


# --- case 12: a run that stopped early ----------------------------------------------------------------------


def test_an_interrupted_run_stores_its_partial_loss_as_interrupted(store_url: str, tmp_path: Path) -> None:
    """The harness reports the mean loss of the last steps it ran; after an interruption those are early
    steps, so that loss is no measurement of the recipe. Compile time is whole once compiled."""
    engine = store.connect(store_url)
    document = run_document(status=Status.INTERRUPTED)
    partial: dict[str, float | None] = {
        "perf/compile_time_s": 30.0,
        "loss/final_window": 3.1,
        "loss/excess_over_optimal": 1.3,
    }
    document["metrics"] = [m.model_dump(mode="json") for m in metric_values(partial)]
    commands.ingest(engine, [synthetic.write(tmp_path, document)])
    with engine.connect() as connection:
        rows = connection.execute(
            select(schema.Series.metric, schema.Result.status, schema.Result.value).join(schema.Series)
        ).all()
    stored = {metric: (status, value) for metric, status, value in rows}
    assert stored["perf/compile_time_s"] == ("ok", 30.0)
    assert stored["loss/final_window"] == ("interrupted", None)
    assert stored["loss/excess_over_optimal"] == ("interrupted", None)


# --- one run id, one run: its variants and another outcome under it ---------------------------------------


@pytest.mark.parametrize(
    "variant",
    [str.upper, lambda uid: uid + " ", lambda uid: "\u200b" + uid, lambda uid: "\ufeff" + uid.upper() + "\t"],
    ids=["upper-case", "space-suffixed", "zero-width-prefixed", "bom-upper-tab"],
)
def test_a_run_id_written_another_way_is_the_same_run(
    store_url: str, tmp_path: Path, variant: Callable[[str], str]
) -> None:
    """Run ids are compared in their canonical form (NFKC, format characters removed, stripped, lower
    case): a variant counts once, in the same batch and in a later one."""
    engine = store.connect(store_url)
    document = run_document()
    first = synthetic.write(tmp_path, document, "first.json")
    changed = dict(document, run_id=variant(document["run_id"]))
    again = write_json(tmp_path / "again.json", changed)
    later = write_json(tmp_path / "later.json", changed, indent=2)
    summary = commands.ingest(engine, [first, again])
    assert len(summary.added) == 1 and summary.skipped == [again]
    assert commands.ingest(engine, [later]).skipped == [later]
    with engine.connect() as connection:
        assert connection.execute(select(schema.Run.run_uid)).scalars().all() == [document["run_id"]]


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda d: d.update(schedule="ad-hoc"), "schedule ad-hoc here, nightly there"),
        (
            lambda d: d["provenance"]["devices"].update(hostname="node-2"),
            "hostname node-2 here, node-1 there",
        ),
        (
            lambda d: d.update(reason="the node was rebooted"),
            "reason 'the node was rebooted' here, none there",
        ),
    ],
    ids=["schedule", "host", "reason"],
)
def test_one_run_id_with_another_schedule_host_or_reason_is_refused_naming_it(
    store_url: str, tmp_path: Path, edit: Callable[[Document], None], named: str
) -> None:
    engine = store.connect(store_url)
    document = run_document(schedule=Schedule.NIGHTLY)
    commands.ingest(engine, [synthetic.write(tmp_path, document, "first.json")])
    edit(document)
    other = synthetic.write(tmp_path, document, "other.json")
    with pytest.raises(
        IngestError, match=rf"already in the store \(run 1\), with another outcome \({named}\)"
    ):
        commands.ingest(engine, [other])
    assert count(engine, schema.Run) == 1


@pytest.mark.parametrize(
    "run_id",
    ["\u200b\u200d", "  ", "run 1", "ru\u043d-1"],
    ids=["zero-width", "blank", "inner-space", "cyrillic"],
)
def test_a_run_id_that_is_no_plain_id_is_refused(tmp_path: Path, run_id: str) -> None:
    document = run_document()
    document["run_id"] = run_id
    path = write_json(tmp_path / "x.json", document)
    with pytest.raises(
        IngestError, match=rf"^{re.escape(str(path))}: run_id: .* is no run id; expected printable"
    ):
        parse_file(path)
