"""The store's subcommands as plain functions (results/cli.py parses arguments and calls these; tests call
them too): the store-level operations on an engine, and the commands that connect to the configured store
(JAXBENCH_DB) and print.

jaxbench ingest runs/*.json
jaxbench detect
jaxbench report --format markdown
jaxbench detect-series my-series.csv
jaxbench verdict 12 infrastructure --note "node rebooted mid-run"
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from sqlalchemy import Engine

from jaxbench.core.dates import parse_date
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.core.files import read_text
from jaxbench.core.json_output import Json, plain, print_json
from jaxbench.core.terminal import console_for
from jaxbench.harness.tables import add_plain_row
from jaxbench.results import store
from jaxbench.results.batch import IngestSummary, ingest
from jaxbench.results.judgement.detect import Detection, detect, record_verdict
from jaxbench.results.judgement.vocabulary import HumanVerdict, IncidentDetail
from jaxbench.results.report.badges import write_badges
from jaxbench.results.report.build import build_report, load_run_list, load_runs, referenced_runs
from jaxbench.results.report.github_markdown import render_markdown
from jaxbench.results.report.html import replace_refusal, write_dashboard
from jaxbench.results.report.json_report import report_data
from jaxbench.results.report.terminal import render_terminal


def run_detection(engine: Engine) -> Detection:
    return detect(engine)


def check_report_folders(fmt: str, out: Path | None, badges: Path | None) -> None:
    """Refuse the folders a report would write into before judging anything (that takes seconds): --out,
    which the dashboard replaces whole, and --badges."""
    if fmt == "html" and out is None:
        raise InvalidInput("--format html needs --out DIR (the folder to write the dashboard into)")
    refusal = None if out is None else replace_refusal(out)
    if refusal is not None:
        raise InvalidInput(f"--out {refusal}")
    if badges is not None and badges.exists() and not badges.is_dir():
        raise InvalidInput(f"--badges {badges} is a file; expected a folder for the badges")


def report(
    engine: Engine, fmt: str, console: Console, out: Path | None = None, badges: Path | None = None
) -> Detection:
    check_report_folders(fmt, out, badges)
    messages = console_for(stderr=True) if fmt == "json" else console  # stdout: the document alone
    # What it is doing, on stderr while it does it (a year of a large store takes seconds per step); on a
    # terminal only: rich draws no status into a pipe.
    with console_for(stderr=True).status("judging every series") as status:
        detection = detect(engine)
        runs, run_list = None, None
        if fmt == "html":  # the dashboard's run pages, and its list of every run
            status.update("reading the runs the dashboard shows")
            with store.transaction(engine) as session:
                runs, run_list = load_runs(session, referenced_runs(detection)), load_run_list(session)
        document = build_report(detection, engine.url.render_as_string(hide_password=True), runs, run_list)
        if fmt == "html" and out is not None:
            status.update(
                f"writing the dashboard: {len(document.series):,} series, {len(document.incidents):,} "
                f"incidents, {len(runs or {}):,} run pages"
            )
            index = write_dashboard(document, out)
    if fmt == "table":
        render_terminal(document, console)
    elif fmt == "markdown":
        console.print(render_markdown(document), markup=False, highlight=False, soft_wrap=True)
    elif fmt == "json":
        print_json(console, "report", report_data(document))
    elif fmt == "html" and out is not None:
        console.print(f"dashboard: {index}")
    else:
        raise InvalidInput(f"--format {fmt}: expected table, markdown, json or html")
    if badges is not None:
        paths = write_badges(document, badges)
        messages.print(f"{len(paths)} badges in {badges}", markup=False)
    return detection


def read_series_csv(path: Path) -> tuple[list[float], list[str] | None]:
    """A `value` column (and optionally `date`), rows in time order."""
    rows = list(csv.DictReader(io.StringIO(read_text(path), newline="")))
    if not rows or "value" not in rows[0]:
        raise InvalidInput(f"{path}: expected a header row with a 'value' column")
    values = []
    for number, row in enumerate(rows, start=2):
        try:
            value = float(row["value"])
        except (TypeError, ValueError):
            raise InvalidInput(f"{path}: line {number}: value {row['value']!r} is not a number") from None
        if not math.isfinite(value):
            raise InvalidInput(f"{path}: line {number}: value {row['value']!r} is not finite")
        values.append(value)
    dates = [row.get("date") or "" for row in rows] if "date" in rows[0] else None
    return values, dates


def detect_series(path: Path) -> dict[str, Json]:
    """Change points of one series from anyone's data, as JSON values: steps ("kind": "step") and transients
    (one entry from `index` to `end`, "kind": "transient"); a drift is no change point and is listed apart."""
    from jaxbench.results.detection import (  # numpy and scipy: only where a series is judged
        SpanKind,
        retrospective,
    )

    values, dates = read_series_csv(path)
    found = retrospective(values)

    def dated(point: dict[str, object], *indices: tuple[str, int]) -> dict[str, object]:
        for key, index in indices:
            if dates is not None and index < len(dates):
                point[key] = dates[index]
        return point

    points = [
        dated(
            {
                "index": cp.index,
                "kind": "step",
                "magnitude": cp.magnitude,
                "pvalue": cp.pvalue,
                "mean_before": cp.mean_before,
                "mean_after": cp.mean_after,
            },
            ("date", cp.index),
        )
        for cp in found.change_points
    ]
    points += [
        dated(
            {
                "index": span.start,
                "end": span.stop,
                "kind": "transient",
                "magnitude": span.magnitude,
                "pvalue": span.pvalue,
            },
            ("date", span.start),
            ("end_date", span.stop),
        )
        for span in found.spans
        if span.kind is SpanKind.TRANSIENT
    ]
    drifts = [
        dated(
            {
                "start": span.start,
                "stop": span.stop,
                "magnitude": span.magnitude,
                "slope_per_point": span.slope,
                "pvalue": span.pvalue,
            },
            ("start_date", span.start),
            ("last_date", span.stop - 1),
        )
        for span in found.spans
        if span.kind is SpanKind.DRIFT
    ]
    points.sort(key=lambda point: int(str(point["index"])))
    return {"points": len(values), "change_points": plain(points), "drifts": plain(drifts)}


def verdict(engine: Engine, incident_id: int, decision: str, author: str | None, note: str | None) -> str:
    try:
        choice = HumanVerdict(decision)
    except ValueError:
        raise InvalidInput(
            f"verdict {decision!r}: expected one of {[v.value for v in HumanVerdict]}"
        ) from None
    try:
        return record_verdict(engine, incident_id, choice, author, note)
    except LookupError as error:
        raise InvalidInput(str(error)) from error


# --- the commands, on the configured store ------------------------------------------------------------------


def ingest_result(path: Path, console: Console) -> None:
    """A run's own result lands in the configured store; if the store is unreachable the file still exists
    (the result sink of `jaxbench run` and `microbench`)."""
    url = store.database_url()
    try:
        summary = ingest(store.connect(url), [path])
    except Exception as error:  # the run is done and written: never lose it over the store
        console.print(
            f"warning: result not ingested into {store.display_url(url)}: {error}\n"
            f"         ingest it later with: jaxbench ingest {path}",
            style="yellow",
            markup=False,
            soft_wrap=True,
        )
        return
    if summary.added:
        console.print(f"ingested into {store.display_url(url)} (run {summary.added[0][1]})", markup=False)


def result_files(paths: Sequence[Path], allow_empty: bool) -> list[Path]:
    """Files as given; a folder stands for the JSON files under it. With `allow_empty`, a missing or empty
    folder is nothing to ingest (the nightly's judge job on a night without benchmark jobs)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.rglob("*.json"))
        elif not (allow_empty and not path.exists()):
            files.append(path)
    if not files and not allow_empty:
        raise InvalidInput(f"{' '.join(map(str, paths))}: no result files (*.json)")
    return files


@dataclasses.dataclass(frozen=True)
class IngestOptions:
    paths: tuple[Path, ...]
    """Result files, or folders of them."""
    night: str | None = None
    """YYYY-MM-DD: the night these runs belong to (default: from each file)."""
    ci_job_url: str | None = None
    allow_empty: bool = False
    """A missing or empty folder is not an error."""
    as_json: bool = False
    """Print the files added, already in the store and not taken again as one JSON document
    (core/json_output.py)."""


LISTED_FILES = 20
"""An ingest of up to this many files names each one; a larger one (a backfill) prints its summary alone."""

PROGRESS_FROM = 50
"""An ingest of more files than this shows a progress bar on stderr while it reads and checks them."""


@contextlib.contextmanager
def files_progress(files: int) -> Iterator[Callable[[], None] | None]:
    """A callback that advances a progress bar of reading and checking `files` files on stderr (on a
    terminal; rich draws nothing into a pipe), or None for a handful of files."""
    if files <= PROGRESS_FROM:
        yield None
        return
    with Progress(
        TextColumn("reading and checking result files"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console_for(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("ingest", total=files)
        yield lambda: progress.advance(task)


def ingest_files(options: IngestOptions, console: Console) -> int:
    when = None if options.night is None else parse_date(options.night, "--night")
    paths = result_files(options.paths, options.allow_empty)
    if not paths and not options.as_json:
        console.print("no result files: nothing to ingest", markup=False)
        return ExitCode.OK
    url = store.database_url()
    if not paths:  # --allow-empty: the store is not opened, nor made
        summary = IngestSummary(added=[], skipped=[])
    else:
        engine = store.connect(url)
        with files_progress(len(paths)) as checked:
            summary = ingest(engine, paths, night=when, ci_job_url=options.ci_job_url, checked=checked)
    if options.as_json:
        added = [{"path": path, "run_id": run_id} for path, run_id in summary.added]
        shown = {"store": store.display_url(url), "files": len(paths), "added": added}
        print_json(console, "ingest", shown | {"skipped": summary.skipped, "deleted": summary.deleted})
        return ExitCode.OK
    if len(paths) <= LISTED_FILES:
        for path, run_id in summary.added:
            console.print(f"ingested {path} (run {run_id})", markup=False)
        for path in summary.skipped:
            console.print(f"already in the store: {path}", markup=False)
        for path in summary.deleted:
            console.print(f"deleted from the store, not taken again: {path}", markup=False, soft_wrap=True)
    counts = [f"{len(summary.added)} added", f"{len(summary.skipped)} already in the store"]
    if summary.deleted:
        counts.append(
            f"{len(summary.deleted)} deleted from the store, not taken again (jaxbench runs list --deleted)"
        )
    where = f"{len(paths)} file{'s' if len(paths) != 1 else ''} into {store.display_url(url)}"
    console.print(f"ingest: {', '.join(counts)} ({where})", markup=False, soft_wrap=True)
    return ExitCode.OK


def detect_regressions(console: Console, as_json: bool = False) -> int:
    """Judge every series; exit REGRESSION while an incident is open."""
    detection = run_detection(store.connect())
    incidents = [
        {"id": i.id, "kind": i.kind, "hardware": i.hardware, "night": i.night}
        | {"series": len(IncidentDetail.from_json(i.details).series)}
        for i in detection.open_incidents
    ]
    if as_json:
        print_json(console, "detect", {"series_judged": len(detection.analyses), "open_incidents": incidents})
    else:
        for incident in incidents:
            console.print(
                f"open {incident['kind']} incident {incident['id']}: {incident['hardware']}, "
                f"first bad night {incident['night']}, {incident['series']} series",
                markup=False,
                soft_wrap=True,
            )
        console.print(
            f"{len(detection.analyses)} series judged; {len(incidents)} open incidents", markup=False
        )
    return ExitCode.REGRESSION if incidents else ExitCode.OK


def show_report(fmt: str, out: Path | None, badges: Path | None, console: Console) -> int:
    report(store.connect(), fmt, console, out=out, badges=badges)
    return ExitCode.OK


def print_series_change_points(path: Path, console: Console, as_json: bool = False) -> int:
    found = detect_series(path)
    if as_json:
        print_json(console, "detect-series", found)
        return ExitCode.OK
    points, drifts = found["change_points"], found["drifts"]
    assert isinstance(points, list) and isinstance(drifts, list)
    console.print(
        f"{found['points']} points; change points: {len(points)}, drifts: {len(drifts)}", markup=False
    )
    if points:
        _print_rows(console, points, "index", "date", "kind", "end", "magnitude", "pvalue")
    if drifts:
        columns = ("start", "stop", "start_date", "last_date", "magnitude", "slope_per_point", "pvalue")
        _print_rows(console, drifts, *columns)
    return ExitCode.OK


def _print_rows(console: Console, rows: list[Json], *columns: str) -> None:
    """detect-series' change points or drifts as a table, a column per key (relative changes in %)."""
    table = Table(*(column.replace("_", " ") for column in columns))
    for row in rows:
        assert isinstance(row, dict)
        cells = {key: "" if value is None else str(value) for key, value in row.items()}
        for key in ("magnitude", "slope_per_point"):
            if isinstance(row.get(key), float):
                cells[key] = f"{row[key]:+.2%}"
        if isinstance(row.get("pvalue"), float):
            cells["pvalue"] = f"{row['pvalue']:.2g}"
        add_plain_row(table, *(cells.get(column, "") for column in columns))
    console.print(table)


def record_human_verdict(
    incident: int,
    decision: str,
    author: str | None,
    note: str | None,
    console: Console,
    as_json: bool = False,
) -> int:
    fingerprint = verdict(store.connect(), incident, decision, author, note)
    if as_json:
        recorded = {"incident": incident, "fingerprint": fingerprint, "decision": decision}
        print_json(console, "verdict", recorded | {"author": author, "note": note})
    else:
        console.print(f"incident {incident} ({fingerprint[:12]}): {decision}", markup=False)
    return ExitCode.OK
