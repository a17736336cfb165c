"""A backfill shows its progress: more than PROGRESS_FROM files get a bar on stderr while they are read and
checked (where the time goes), a handful none; the summary line is the same either way. And what ingest keeps
of a run for the dashboard: its profile trace's location; and a report that says what it is doing.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_ingest_feedback.py
"""

from __future__ import annotations

import datetime as dt
import io
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import select

from jaxbench.harness.runtime.result import Profile
from jaxbench.results import commands, schema, store, synthetic
from jaxbench.results.batch import ingest
from jaxbench.results.commands import PROGRESS_FROM, IngestOptions, ingest_files

START = dt.date(2026, 9, 1)
TRACE_URL = "https://storage.example/traces/run-7/trace.json.gz"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: int) -> tuple[str, str]:
    folder = tmp_path / f"results-{files}"
    for n in range(files):
        synthetic.write(folder, synthetic.run_result(START + dt.timedelta(days=n), 0.5, recipe="llama2-1b"))
    monkeypatch.setenv("JAXBENCH_DB", f"sqlite:///{tmp_path / f'store-{files}.sqlite'}")
    err = _Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    out = io.StringIO()
    assert ingest_files(IngestOptions((folder,)), Console(file=out, width=200)) == 0
    return out.getvalue(), err.getvalue()


def test_a_backfill_shows_a_progress_bar_while_it_reads_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = PROGRESS_FROM + 10
    out, err = _ingest(tmp_path, monkeypatch, files)
    assert "reading and checking result files" in err and f"{files}/{files}" in err
    assert out.strip().endswith(f"({files} files into sqlite:///{tmp_path / f'store-{files}.sqlite'})")


def test_ingest_reports_each_file_once_it_is_read_and_checked(tmp_path: Path) -> None:
    paths = [
        synthetic.write(tmp_path, synthetic.run_result(START + dt.timedelta(days=n), 0.5)) for n in range(3)
    ]
    seen: list[int] = []
    ingest(store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}"), paths, checked=lambda: seen.append(1))
    assert len(seen) == 3


def test_a_handful_of_files_gets_no_bar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, err = _ingest(tmp_path, monkeypatch, 5)
    assert err == ""
    assert "ingest: 5 added" in out


def test_a_profiled_runs_trace_is_stored_where_it_lies_and_a_url_as_it_is(tmp_path: Path) -> None:
    """The result names its trace's folder relative to its own; the store keeps where that is (the run page
    names it), and a trace uploaded to a URL as given."""
    kept = {"matmul": 0.01}
    documents = {
        "beside": synthetic.run_result(
            START, 0.5, profile=Profile(steps=3, seconds_per_step=kept, trace="t/prof")
        ),
        "uploaded": synthetic.run_result(
            START + dt.timedelta(days=1),
            0.5,
            profile=Profile(steps=3, seconds_per_step=kept, trace=TRACE_URL),
        ),
    }
    paths = [
        synthetic.write(tmp_path / "runs", document, f"{name}.json") for name, document in documents.items()
    ]
    engine = store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")
    ingest(engine, paths)
    with engine.connect() as connection:
        traces: dict[dt.date, Any] = dict(
            connection.execute(select(schema.Run.night, schema.Run.profile)).tuples().all()
        )
    assert traces[START]["trace"] == str((tmp_path / "runs" / "t" / "prof").resolve())
    assert traces[START + dt.timedelta(days=1)]["trace"] == TRACE_URL
    assert traces[START]["seconds_per_step"] == kept


class _Status:
    def __init__(self, said: list[str], first: str) -> None:
        self.said = said
        said.append(first)

    def __enter__(self) -> _Status:
        return self

    def __exit__(self, *exc: object) -> None:
        self.said.append("done")

    def update(self, text: str) -> None:
        self.said.append(text)


def test_a_report_says_what_it_is_doing_while_it_builds_the_dashboard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    console = Console(file=io.StringIO())
    monkeypatch.setattr(console, "status", lambda text: _Status(said, text))
    monkeypatch.setattr(commands, "console_for", lambda stderr=False: console)
    paths = [
        synthetic.write(tmp_path / "r", synthetic.run_result(START + dt.timedelta(days=n), 0.5))
        for n in range(3)
    ]
    engine = store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")
    ingest(engine, paths)
    commands.report(engine, "html", Console(file=io.StringIO()), out=tmp_path / "site")
    assert said[:2] == ["judging every series", "reading the runs the dashboard shows"]
    assert said[2].startswith("writing the dashboard: 7 series, 0 incidents, ") and said[-1] == "done"
    assert (tmp_path / "site" / "index.html").is_file()
