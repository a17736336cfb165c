"""The data behind the dashboard's interactive plots: plain JSON-able dicts, embedded in each page and drawn
in the browser by static/dashboard.js with plotly.js (copied into the site, never fetched from a CDN).

One chart is a list of lines (a series, or one per settings variant or backend) plus what is drawn over
them: the segment means, the baseline band over the nights it was taken from (clamped at zero for a metric
that is never negative) and the markers (results.report.model.Marker: steps as vertical lines, drifts and
transients as shaded spans); a run's page has charts of its loss and step times per training step. A night
without a value is a null, which breaks the line. Values are formatted in the browser (as
formatting.format_value does), so a page carries numbers, not 365 strings.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_dashboard.py
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from markupsafe import Markup

from jaxbench.harness.measure.metrics import STEP_TIME
from jaxbench.harness.runtime.options import NATIVE_BACKEND, Schedule
from jaxbench.results.report.backends import BACKEND_METRICS as BACKEND_TITLES
from jaxbench.results.report.formatting import format_value, series_name
from jaxbench.results.report.model import BackendsTable, RunView, SeriesView

COMMITS_SHOWN = 4
"""Components named in one point's hover text; the rest are counted."""
STEP_TIME_METRIC = STEP_TIME
"""The result whose raw samples are a run's step times (its run page plots them)."""


@dataclasses.dataclass(frozen=True)
class VariantGroup:
    """Series of one benchmark, backend, flavor, metric and hardware class that differ only in settings."""

    key: str
    """Stable identifier (file name of its page)."""
    title: str
    series: list[SeriesView]
    labels: list[str]
    """Per series, the settings that set it apart from the others: "train.precision=fp8"."""


def series_chart(series: SeriesView, runs: Mapping[int, RunView], *, root: str) -> dict[str, Any]:
    """One series with its baseline band, segment means and markers."""
    return {
        "unit": series.unit,
        "higherIsBetter": series.higher_is_better,
        "runBase": f"{root}runs/" if runs else None,
        "lines": [_line(series, series_name(series), runs)],
        "segments": [
            {"start": _iso(series, s.start), "end": _iso(series, s.stop - 1), "mean": s.mean}
            for s in series.segments
            if 0 <= s.start < s.stop <= len(series.points) and math.isfinite(s.mean)
        ],
        "band": _band(series),
        "markers": [
            {"kind": m.kind, "start": m.start.isoformat(), "end": m.end.isoformat(), "label": m.label}
            for m in series.markers
        ],
    }


def variants_chart(group: VariantGroup, runs: Mapping[int, RunView], *, root: str) -> dict[str, Any]:
    """Every variant of a group as its own line, named by its settings."""
    first = group.series[0]
    return {
        "unit": first.unit,
        "higherIsBetter": first.higher_is_better,
        "runBase": f"{root}runs/" if runs else None,
        "lines": [_line(s, label, runs) for s, label in zip(group.series, group.labels, strict=True)],
        "segments": [],
        "band": None,
        "markers": [],
    }


def run_charts(run: RunView) -> list[tuple[str, str, dict[str, Any]]]:
    """A run's own plots, as (id, title, chart): its loss at every step beside the data's optimal loss, and
    the time of each timed step beside the run's step time (their median)."""
    charts = []
    loss = [v if isinstance(v, int | float) and math.isfinite(v) else None for v in run.loss_curve or []]
    if any(v is not None for v in loss):
        optimum = run.loss_optimum
        reference = None
        if optimum is not None and math.isfinite(optimum):
            reference = {"value": optimum, "name": f"optimal loss {format_value(optimum, 'nats')}"}
        charts.append(("chart-loss", "Loss at every step", _steps_chart("nats", "loss", 1, loss, reference)))
    if run.step_times:
        train = run.config.get("train")
        warmup = train.get("warmup_steps") if isinstance(train, dict) else None
        first = warmup + 1 if isinstance(warmup, int) and warmup >= 0 else 1
        value = next((r.value for r in run.results if r.metric == STEP_TIME_METRIC), None)
        reference = None
        if value is not None and math.isfinite(value):
            reference = {"value": value, "name": f"step time {format_value(value, 's')} (the median)"}
        title = "Time of each timed step" + (f" (after {first - 1} warm-up steps)" if first > 1 else "")
        times = [v if math.isfinite(v) else None for v in run.step_times]
        charts.append(("chart-step-times", title, _steps_chart("s", "step time", first, times, reference)))
    return charts


def _steps_chart(
    unit: str, name: str, first: int, values: list[float | None], reference: dict[str, Any] | None
) -> dict[str, Any]:
    """A quantity per training step (x: the step's number, from `first`), drawn as "steps" charts are."""
    return {
        "kind": "steps",
        "unit": unit,
        "lines": [{"name": name, "x": list(range(first, first + len(values))), "y": values}],
        "reference": reference,
        "runBase": None,
    }


def backend_trends(
    table: BackendsTable,
    metrics: list[str],
    series: Mapping[str, SeriesView],
    runs: Mapping[int, RunView],
    *,
    root: str,
) -> list[tuple[str, SeriesView, dict[str, Any]]]:
    """Per metric of a backends table, as (title, the first backend's series, chart): every backend's series
    of that metric over the nights, one line each, named by the backend."""
    trends = []
    for metric in metrics:
        members = [
            (row.backend, series[key]) for row in table.rows
            if (key := row.cells[metric].series_key) is not None and key in series
        ]  # fmt: skip
        if not members:
            continue
        labels, shown = [backend for backend, _ in members], [s for _, s in members]
        group = VariantGroup(f"{table.benchmark}.{metric}", table.benchmark, shown, labels)
        trends.append((BACKEND_TITLES.get(metric, metric), shown[0], variants_chart(group, runs, root=root)))
    return trends


def variant_groups(series: Iterable[SeriesView]) -> list[VariantGroup]:
    """Groups of two or more series that differ only in their settings, each labelled by what differs."""
    groups: dict[tuple[str, str, str, str, str], list[SeriesView]] = defaultdict(list)
    for s in series:
        groups[(s.benchmark, s.backend, s.flavor, s.metric, s.hardware)].append(s)
    result = []
    for (_, _, flavor, metric, hardware), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        members = sorted(members, key=lambda s: sorted(s.settings.items()))
        names = sorted({name for s in members for name in s.settings})
        differing = [n for n in names if len({s.settings.get(n) for s in members}) > 1]
        labels = [
            ", ".join(f"{n}={s.settings.get(n, '(unset)')}" for n in differing) or s.key for s in members
        ]
        first = members[0]
        # Not series_name: that names the first member's own variant, and the group is all of them.
        name = first.benchmark if first.backend == NATIVE_BACKEND else f"{first.benchmark} by {first.backend}"
        name += f" ({flavor})" if flavor else ""
        key = f"{first.benchmark}.{first.backend}.{flavor}.{metric}.{hardware}"
        result.append(VariantGroup(key, f"{name} · {metric} · {hardware}", members, labels))
    return result


def shared_range(charts: Iterable[dict[str, Any]]) -> list[float] | None:
    """One value range for charts shown side by side (5 % padding), so that their heights compare; it
    starts at zero at the lowest for values that are all non-negative."""
    values = [v for chart in charts for line in chart["lines"] for v in line["y"] if v is not None]
    if not values:
        return None
    low, high = min(values), max(values)
    pad = (high - low) * 0.05 or abs(high) * 0.05 or 1.0
    return [max(low - pad, 0.0) if low >= 0 else low - pad, high + pad]


def chart_json(chart: dict[str, Any]) -> Markup:
    """JSON safe inside <script type="application/json">: no "</script>", no HTML comment."""
    text = json.dumps(chart, separators=(",", ":"), allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _line(series: SeriesView, name: str, runs: Mapping[int, RunView]) -> dict[str, Any]:
    values = [p.value if p.value is not None and math.isfinite(p.value) else None for p in series.points]
    return {
        "name": name,
        "x": [p.night.isoformat() for p in series.points],
        "y": values,
        # Only the nights that are not "ok": a year of "ok" would be a sixth of the page.
        "status": {str(i): p.status for i, p in enumerate(series.points) if p.status != "ok"},
        "run": [p.run_id for p in series.points],
        "noPage": sorted({p.run_id for p in series.points if p.run_id is not None and p.run_id not in runs})
        if runs
        else [],
        "commits": _commit_notes(series, values, runs) if runs else None,
        # Only where a night had several runs: most series have one a night, and 365 ones would be noise.
        "runs": [p.runs for p in series.points] if any(p.runs > 1 for p in series.points) else None,
        "backfill": _backfilled(series, runs),
    }


def _backfilled(series: SeriesView, runs: Mapping[int, RunView]) -> list[int] | None:
    """The points whose run was backfilled (a published release run later, on the night it came out): drawn
    apart from the nights that ran then. None where there are none."""
    indices = [
        i
        for i, point in enumerate(series.points)
        if point.run_id is not None
        and point.run_id in runs
        and runs[point.run_id].schedule == Schedule.BACKFILL.value
    ]
    return indices or None


def _band(series: SeriesView) -> dict[str, Any] | None:
    """The baseline band over the baseline's own nights (where the view does not know them, the last
    segment), and its median carried on to the newest night, which is judged against it; the band's low edge
    never below zero for a non-negative metric."""
    b = series.baseline
    if b is None or not all(math.isfinite(v) for v in (b.median, b.low, b.high)) or not series.points:
        return None
    values = [p.value for p in series.points if p.value is not None]
    low = max(b.low, 0.0) if all(v >= 0 for v in values) and b.median >= 0 else b.low
    if b.first is not None and b.last is not None:
        start, end = b.first.isoformat(), b.last.isoformat()
    else:
        segment = series.segments[-1].start if series.segments else 0
        start = _iso(series, min(max(segment, 0), len(series.points) - 1))
        end = series.points[-1].night.isoformat()
    unit, nights = series.unit, f"the {b.nights} nights" if b.nights else "the nights"
    taken = f"the trend of {nights}" if b.trend else f"the median of {nights}"
    return {
        "start": start,
        "end": end,
        "newest": series.points[-1].night.isoformat(),
        "trend": b.trend,
        "median": b.median,
        "low": low,
        "high": b.high,
        "label": f"baseline {format_value(b.median, unit)}: {taken} from {start} to {end}; a night from "
        f"{format_value(low, unit)} to {format_value(b.high, unit)} is unremarkable",
    }


def _commit_notes(series: SeriesView, values: list[float | None], runs: Mapping[int, RunView]) -> list[str]:
    """Per point, the components whose commit (or version) moved since the previous night with a value
    ("moved: jax 1a2b3c4 → 5d6e7f8", "moved: flax 0.12.3 → 0.12.4"); the first valued night names its
    run's; "" where nothing moved."""
    notes, previous = [], None
    for point, value in zip(series.points, values, strict=True):
        run = runs.get(point.run_id) if point.run_id is not None else None
        if run is None:
            notes.append("")
            continue
        # A commit where the run recorded one, else the version (a component installed from its wheels).
        pins = {
            c.name: c.commit[:7] if c.commit else str(c.version)
            for c in run.components
            if c.commit or c.version
        }
        if previous is None:
            moved = [f"{name} {pin}" for name, pin in pins.items()]
        else:
            moved = [
                f"{name} {previous.get(name) or '?'} → {pin}"
                for name, pin in pins.items()
                if previous.get(name) != pin
            ]
        extra = f"; {len(moved) - COMMITS_SHOWN} more" if len(moved) > COMMITS_SHOWN else ""
        heading = "commits" if previous is None else "moved"
        notes.append(f"{heading}: " + "; ".join(moved[:COMMITS_SHOWN]) + extra if moved else "")
        if value is not None:
            previous = pins
    return notes


def _iso(series: SeriesView, index: int) -> str:
    return series.points[index].night.isoformat()
