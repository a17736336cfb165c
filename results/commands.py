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

import csv
import dataclasses
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from sqlalchemy import Engine

from core.dates import parse_date
from core.errors import ExitCode, InvalidInput
from core.files import read_text
from results import store
from results.batch import ingest
from results.judgement.detect import Detection, detect, record_verdict
from results.judgement.vocabulary import HumanVerdict, IncidentDetail
from results.report.badges import write_badges
from results.report.build import build_report, load_runs, referenced_runs
from results.report.github_markdown import render_markdown
from results.report.html import replace_refusal, write_dashboard
from results.report.json_report import render_json
from results.report.terminal import render_terminal


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
    detection = detect(engine)
    runs = None
    if fmt == "html":  # the dashboard's run pages
        with store.transaction(engine) as session:
            runs = load_runs(session, referenced_runs(detection))
    document = build_report(detection, engine.url.render_as_string(hide_password=True), runs)
    if fmt == "table":
        render_terminal(document, console)
    elif fmt == "markdown":
        console.print(render_markdown(document), markup=False, highlight=False, soft_wrap=True)
    elif fmt == "json":
        console.print(render_json(document), markup=False, highlight=False, soft_wrap=True)
    elif fmt == "html" and out is not None:
        index = write_dashboard(document, out)
        console.print(f"dashboard: {index}")
    else:
        raise InvalidInput(f"--format {fmt}: expected table, markdown, json or html")
    if badges is not None:
        paths = write_badges(document, badges)
        console.print(f"{len(paths)} badges in {badges}")
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


def detect_series(path: Path) -> str:
    """Change points of one series from anyone's data, as JSON: steps ("kind": "step") and transients (one
    entry from `index` to `end`, "kind": "transient"); a drift is no change point and is listed apart."""
    from results.detection import SpanKind, retrospective  # numpy and scipy: only where a series is judged

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
    return json.dumps({"points": len(values), "change_points": points, "drifts": drifts}, indent=2)


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


LISTED_FILES = 20
"""An ingest of up to this many files names each one; a larger one (a backfill) prints its summary alone."""


def ingest_files(options: IngestOptions, console: Console) -> int:
    when = None if options.night is None else parse_date(options.night, "--night")
    paths = result_files(options.paths, options.allow_empty)
    if not paths:
        console.print("no result files: nothing to ingest", markup=False)
        return ExitCode.OK
    url = store.database_url()
    summary = ingest(store.connect(url), paths, night=when, ci_job_url=options.ci_job_url)
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


def detect_regressions(console: Console) -> int:
    """Judge every series; exit REGRESSION while an incident is open."""
    detection = run_detection(store.connect())
    open_incidents = detection.open_incidents
    for incident in open_incidents:
        series = len(IncidentDetail.from_json(incident.details).series)
        console.print(
            f"open {incident.kind} incident {incident.id}: {incident.hardware}, "
            f"first bad night {incident.night}, {series} series",
            markup=False,
            soft_wrap=True,
        )
    console.print(
        f"{len(detection.analyses)} series judged; {len(open_incidents)} open incidents", markup=False
    )
    return ExitCode.REGRESSION if open_incidents else ExitCode.OK


def show_report(fmt: str, out: Path | None, badges: Path | None, console: Console) -> int:
    report(store.connect(), fmt, console, out=out, badges=badges)
    return ExitCode.OK


def print_series_change_points(path: Path, console: Console) -> int:
    console.print(detect_series(path), markup=False, highlight=False, soft_wrap=True)
    return ExitCode.OK


def record_human_verdict(
    incident: int, decision: str, author: str | None, note: str | None, console: Console
) -> int:
    fingerprint = verdict(store.connect(), incident, decision, author, note)
    console.print(f"incident {incident} ({fingerprint[:12]}): {decision}", markup=False)
    return ExitCode.OK
