"""The backends view: one recipe and size on one hardware class across every backend that trained it
(native, MaxText, Levanter, Pax), its headline numbers side by side with the ratio to native. Pure: built from
the report's series, each at its newest night with a valid value.

    jaxbench report        # the "Backends" tables; the dashboard's backends.html
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable

from jaxbench.harness.runtime.options import NATIVE_BACKEND
from jaxbench.results.report.formatting import format_percent, format_ratio, format_seconds, format_value
from jaxbench.results.report.model import BackendCell, BackendRow, BackendsTable, SeriesView

NATIVE = NATIVE_BACKEND
BACKEND_METRICS: dict[str, str] = {
    "perf/tokens_per_s": "tokens/s",
    "perf/images_per_s": "images/s",
    "perf/mfu": "MFU",
    "perf/step_time_s": "step time",
    "perf/compile_time_s": "compile time",
    "loss/final_window": "loss at the end",
}
"""Metric -> column title, in the order the view shows them."""


def newest_valid(series: SeriesView) -> tuple[dt.date, float, int] | None:
    """The series' newest night with a valid value, that value and the night's newest run (-1: unknown);
    None if it has none."""
    return next(
        ((p.night, p.value, p.run_id or -1) for p in reversed(series.points) if p.value is not None), None
    )


def backends_tables(series: Iterable[SeriesView]) -> list[BackendsTable]:
    """A table per (recipe, hardware) that a backend other than native trained, sorted by both.

    Where several series give one backend's metric (a change of XLA flags or settings starts a new series,
    and the old one stays in the store), the one with the newest valid night counts; of two with the same
    night, the one whose run is newer, so that a row's metrics come from one run, not from whichever series
    of each metric sorts first."""
    groups: dict[tuple[str, str], dict[str, dict[str, tuple[dt.date, float, str]]]] = defaultdict(dict)
    ranks: dict[tuple[str, str, str, str], tuple[dt.date, int, str]] = {}
    for view in series:
        if view.metric not in BACKEND_METRICS:
            continue
        by_metric = groups[(view.benchmark, view.hardware)].setdefault(view.backend, {})
        newest = newest_valid(view)
        if newest is None:
            continue
        valid_night, valid_value, run = newest
        rank = (valid_night, run, view.key)  # the key: the same choice whatever the input order
        slot = (view.benchmark, view.hardware, view.backend, view.metric)
        if slot not in ranks or rank > ranks[slot]:
            ranks[slot] = rank
            by_metric[view.metric] = (valid_night, valid_value, view.key)
    tables = []
    for (benchmark, hardware), by_backend in sorted(groups.items()):
        if set(by_backend) <= {NATIVE}:
            continue
        native = by_backend.get(NATIVE, {})
        order = [b for b in (NATIVE,) if b in by_backend] + sorted(b for b in by_backend if b != NATIVE)
        rows = []
        for backend in order:
            values = by_backend[backend]
            cells = {}
            for metric in BACKEND_METRICS:
                night, value, key = values.get(metric, (None, None, None))
                base = native[metric][1] if metric in native else None
                ratio = value / base if value is not None and base else None
                cells[metric] = BackendCell(value, ratio, night, key)
            newest_night = max((night for night, _, _ in values.values()), default=None)
            rows.append(BackendRow(backend, newest_night, cells))
        tables.append(BackendsTable(benchmark, hardware, rows))
    return tables


def shown_metrics(table: BackendsTable) -> list[str]:
    """The columns with a value in some row (tokens/s or images/s, whichever the recipe counts)."""
    return [m for m in BACKEND_METRICS if any(row.cells[m].value is not None for row in table.rows)]


def format_cell(metric: str, cell: BackendCell, row_night: dt.date | None = None) -> str:
    """The value in the metric's everyday unit, and its ratio to native: "163.5 ms (0.99x)"; with the
    cell's own night where that is older than its row's (`row_night`): "163.5 ms (0.99x) on 2025-10-29"."""
    value = cell.value
    if value is None:
        return "-"
    if metric == "perf/mfu":
        text = format_percent(value)
    elif metric in ("perf/step_time_s", "perf/compile_time_s"):
        text = format_seconds(value)
    elif metric == "loss/final_window":
        text = f"{value:.4f}"  # four decimals: the backends' losses differ in the second or third
    else:
        text = format_value(value)
    if cell.vs_native is not None:
        text += f" ({format_ratio(cell.vs_native)})"
    if cell.night is not None and row_night is not None and cell.night != row_night:
        text += f" on {cell.night.isoformat()}"
    return text
