"""The report in a terminal: one table of series per hardware class, then the open incidents.

    pytest tests/results/test_report_render.py -k terminal -s

Fits 100 columns: the long hardware name is each table's title rather than a column. Links, commit ranges
and failure statuses are printed unwrapped (`soft_wrap`), so that they can be copied whole; text from the
store goes into `rich.text.Text` (made printable: core/terminal.py), never into markup, so brackets in a
name cannot restyle the output and an escape sequence in one reaches the terminal escaped.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from jaxbench.core.terminal import safe_text
from jaxbench.results.judgement.vocabulary import ComponentRange, IncidentState, SeriesState
from jaxbench.results.report.backends import BACKEND_METRICS, format_cell, shown_metrics
from jaxbench.results.report.formatting import (
    QUIET_STATES,
    STATE_LABELS,
    by_attention,
    format_change,
    newest_text,
    safe_url,
    series_name,
    state_text,
)
from jaxbench.results.report.model import BackendsTable, IncidentView, Report, SeriesView

STATE_STYLES: dict[SeriesState, str] = {
    SeriesState.REGRESSION: "bold red",
    SeriesState.SUSPECTED: "yellow",
    SeriesState.IMPROVEMENT: "green",
    SeriesState.INVALID: "bold magenta",
    SeriesState.OK: "",
    SeriesState.INSUFFICIENT_HISTORY: "dim",
    SeriesState.TOO_NOISY: "cyan",
}


def render_terminal(report: Report, console: Console) -> None:
    """Print `report` to `console`: a headline, the series tables, then the open incidents."""
    console.print(_headline(report), soft_wrap=True)
    hardware_classes = sorted({s.hardware for s in report.series})
    for hardware in hardware_classes:
        console.print()
        console.print(_series_table(hardware, [s for s in report.series if s.hardware == hardware]))
    for backends in report.backends:
        console.print()
        heading = f"Backends: {backends.benchmark} on {backends.hardware}"
        console.print(safe_text(heading, style="bold"), soft_wrap=True)  # whole, however narrow the table
        console.print(_backends_table(backends))
    open_incidents = [i for i in report.incidents if i.state == IncidentState.OPEN]
    if open_incidents:
        console.print()
        console.print(safe_text(f"Open incidents ({len(open_incidents)})", style="bold"))
    for incident in open_incidents:
        _print_incident(incident, console)


def _headline(report: Report) -> Text:
    counts = {state: sum(s.state == state for s in report.series) for state in SeriesState}
    open_incidents = sum(i.state == IncidentState.OPEN for i in report.incidents)
    text = safe_text(
        f"jaxbench report of {report.generated_at.isoformat(timespec='minutes')} from {report.store}\n"
    )
    pieces = [
        (f"{counts[SeriesState.REGRESSION]} regressions", STATE_STYLES[SeriesState.REGRESSION]),
        (f"{counts[SeriesState.SUSPECTED]} suspected", STATE_STYLES[SeriesState.SUSPECTED]),
        (f"{counts[SeriesState.INVALID]} invalid", STATE_STYLES[SeriesState.INVALID]),
        (f"{counts[SeriesState.IMPROVEMENT]} improvements", STATE_STYLES[SeriesState.IMPROVEMENT]),
        (f"{open_incidents} open incidents", "bold"),
        (f"{len(report.series)} series", ""),
    ]
    for i, (piece, style) in enumerate(pieces):
        text.append(piece, style=style if not piece.startswith("0 ") else "")
        text.append(", " if i < len(pieces) - 1 else "")
    return text


def _series_table(hardware: str, series: list[SeriesView]) -> Table:
    # No vertical rules (SIMPLE_HEAD): at 100 columns every character goes to the names.
    # Only the benchmark (and flavor) column may wrap: metric names and numbers stay whole.
    table = Table(title=safe_text(hardware, style="bold"), title_justify="left", box=box.SIMPLE_HEAD)
    with_flavor = any(s.flavor for s in series)
    table.add_column("benchmark", overflow="fold", min_width=10)
    if with_flavor:
        table.add_column("flavor", overflow="fold", min_width=6)
    table.add_column("metric", overflow="fold", min_width=12)
    table.add_column("newest", justify="right", no_wrap=True)
    table.add_column("vs baseline", justify="right", no_wrap=True)
    table.add_column("state", no_wrap=True)
    ordered = by_attention(series)
    for quiet, group in itertools.groupby(ordered, key=lambda s: s.state in QUIET_STATES):
        if quiet and table.row_count:
            table.add_section()
        for s in group:
            style = STATE_STYLES[s.state]
            cells = (
                [safe_text(series_name(s))]
                + ([safe_text(s.flavor)] if with_flavor else [])
                + [safe_text(s.metric)]
            )
            cells += [
                safe_text(newest_text(s), style=style if s.state == SeriesState.INVALID else ""),
                safe_text(format_change(s.change_vs_baseline), style=style),
                safe_text(state_text(s), style=style),
            ]
            table.add_row(*cells)
    return table


def _backends_table(backends: BackendsTable) -> Table:
    # A column per backend and a row per metric: five metrics with their ratios side by side would not fit
    # 100 columns, while three or four backends do.
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("", no_wrap=True)
    for row in backends.rows:
        table.add_column(safe_text(row.backend), justify="right", overflow="fold")
    table.add_row("night", *(row.night.isoformat() if row.night else "-" for row in backends.rows))
    for metric in shown_metrics(backends):
        cells = (format_cell(metric, row.cells[metric], row.night) for row in backends.rows)
        table.add_row(BACKEND_METRICS[metric], *cells)
    return table


def _print_incident(incident: IncidentView, console: Console) -> None:
    console.print()
    verdict = f", verdict: {incident.verdict.value}" if incident.verdict else ""
    console.print(
        safe_text(f"#{incident.id} {incident.kind.value} on {incident.hardware}", style="bold red")
        + safe_text(f"  first bad {incident.night.isoformat()}, last good {_night(incident)}{verdict}"),
        soft_wrap=True,
    )
    if incident.summary:
        console.print(safe_text(f"  {incident.summary}"), soft_wrap=True)
    for s in incident.series:
        console.print(
            safe_text(f"  {s.benchmark} {s.metric}: ")
            + safe_text(f"{format_change(s.magnitude)} {STATE_LABELS[s.state]}", style=STATE_STYLES[s.state]),
            soft_wrap=True,
        )
    for described in (incident.program, incident.time):
        if described:
            console.print(safe_text(f"  {described.describe()}"), soft_wrap=True)
    _print_components(incident.components, console)
    for label, changes in (("flag", incident.flag_changes), ("env", incident.env_changes)):
        for change in changes:
            line = f"  {label} {change.name}: {change.before or '(unset)'} -> {change.after or '(unset)'}"
            console.print(safe_text(line), soft_wrap=True)
    if incident.recovery:
        console.print(
            safe_text(f"  recovered on {incident.recovery.recovered_night.isoformat()} (a transient)")
        )
        _print_components(incident.recovery.components, console)


def _print_components(components: Sequence[ComponentRange], console: Console) -> None:
    for c in components:
        link = safe_url(c.compare_url)
        line = f"  {c.name}: {c.last_good or '?'} .. {c.first_bad or '?'}" + (f"  {link}" if link else "")
        console.print(safe_text(line), soft_wrap=True)


def _night(incident: IncidentView) -> str:
    return incident.last_good_night.isoformat() if incident.last_good_night else "unknown"
