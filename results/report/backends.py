"""The backends view: one recipe and size on one hardware class across every backend that trained it
(native, MaxText, Levanter), its headline numbers side by side with the ratio to native. Pure: built from
the report's series, each at its newest night with a valid value.

    jaxbench report        # the "Backends" tables; the dashboard's backends.html
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable

from results.report.formatting import format_value
from results.report.model import BackendCell, BackendRow, BackendsTable, SeriesView

NATIVE = "native"
BACKEND_METRICS: dict[str, str] = {
    "perf/tokens_per_s": "tokens/s",
    "perf/images_per_s": "images/s",
    "perf/mfu": "MFU",
    "perf/step_time_s": "step time",
    "perf/compile_time_s": "compile time",
    "loss/final_window": "loss at the end",
}
"""Metric -> column title, in the order the view shows them."""


def newest_valid(series: SeriesView) -> tuple[dt.date, float] | None:
    return next(((p.night, p.value) for p in reversed(series.points) if p.value is not None), None)


def backends_tables(series: Iterable[SeriesView]) -> list[BackendsTable]:
    """A table per (recipe, hardware) that a backend other than native trained, sorted by both."""
    groups: dict[tuple[str, str], dict[str, dict[str, tuple[dt.date, float]]]] = defaultdict(dict)
    for view in series:
        if view.metric not in BACKEND_METRICS:
            continue
        newest = newest_valid(view)
        by_metric = groups[(view.benchmark, view.hardware)].setdefault(view.backend, {})
        if newest is not None:
            by_metric[view.metric] = newest
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
                value = values[metric][1] if metric in values else None
                base = native[metric][1] if metric in native else None
                ratio = value / base if value is not None and base else None
                cells[metric] = BackendCell(value, ratio)
            night = max((night for night, _ in values.values()), default=None)
            rows.append(BackendRow(backend, night, cells))
        tables.append(BackendsTable(benchmark, hardware, rows))
    return tables


def shown_metrics(table: BackendsTable) -> list[str]:
    """The columns with a value in some row (tokens/s or images/s, whichever the recipe counts)."""
    return [m for m in BACKEND_METRICS if any(row.cells[m].value is not None for row in table.rows)]


def format_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def format_cell(metric: str, cell: BackendCell) -> str:
    """The value in the metric's everyday unit, and its ratio to native: "163.5 ms (0.99x)"."""
    value = cell.value
    if value is None:
        return "-"
    if metric == "perf/mfu":
        text = f"{value:.1%}"
    elif metric == "perf/step_time_s":
        text = f"{value * 1e3:.4g} ms"
    elif metric == "perf/compile_time_s":
        text = f"{value:.3g} s"
    elif metric == "loss/final_window":
        text = f"{value:.4f}"
    else:
        text = format_value(value)
    return text if cell.vs_native is None else f"{text} ({format_ratio(cell.vs_native)})"
