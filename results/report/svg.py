"""A small SVG line chart of one series: its nights, segment means, baseline band and change points.

    pytest tests/test_report_render.py -k svg      # the shapes, parsed back as XML
    .venv/bin/python benchmarks/dashboard_speed.py  # its speed, within the whole dashboard

Hand-written rather than drawn with matplotlib because the dashboard draws every series every night:
matplotlib 3.11 took 77 ms per figure of this kind (365 nights, SVG output; 101 ms as PNG) on the project's
2-core build machine, i.e. over a minute for 1,000 series, where this renderer takes about a millisecond.
Inline SVG also needs no JavaScript, no fonts and no network when the page is viewed, and text in it stays
selectable. Every piece of text (titles, units, statuses) is escaped with `html.escape`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
import math
from collections.abc import Iterator

from results.report.formatting import format_change, format_value
from results.report.model import SeriesView

LINE = "#1f5fa8"
REGRESSION = "#c62828"
NOT_REGRESSION = "#2e7d32"
FAILED = "#8e24aa"
MEAN = "#6d6d6d"
BAND = "#f2b84b"
AXIS = "#444444"


@dataclasses.dataclass(frozen=True)
class _Frame:
    """Maps nights and values to pixels inside the plot area."""

    left: float
    top: float
    width: float
    height: float
    first: dt.date
    days: int
    low: float
    high: float

    def x(self, night: dt.date) -> float:
        return self.left + self.width * (night - self.first).days / max(self.days, 1)

    def y(self, value: float) -> float:
        return self.top + self.height * (self.high - value) / (self.high - self.low)

    @property
    def bottom(self) -> float:
        return self.top + self.height

    @property
    def right(self) -> float:
        return self.left + self.width


def render_series_svg(series: SeriesView, *, width: int = 720, height: int = 260) -> str:
    """A standalone SVG document (with xmlns, so it also works inline in HTML) charting `series`."""
    title = f"{series.benchmark} · {series.metric} · {series.hardware}"
    if series.flavor:
        title = f"{series.benchmark} ({series.flavor}) · {series.metric} · {series.hardware}"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="series-plot" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(title)}" '
        'font-family="system-ui, sans-serif" font-size="11">',
        f"<title>{_esc(title)}</title>",
        f'<text x="{width / 2:.0f}" y="15" text-anchor="middle" font-size="12" font-weight="600">'
        f"{_esc(_shorten(title, width // 7))}</text>",
    ]
    frame = _frame(series, width, height)
    if frame is None:
        middle = f'x="{width / 2:.0f}" y="{height / 2:.0f}" text-anchor="middle"'
        parts.append(f'<text {middle} fill="{AXIS}">no data</text>')
    else:
        parts += _band(series, frame)
        parts += _axes(series, frame)
        parts += _segment_means(series, frame)
        parts += _change_points(series, frame)
        parts += _runs(series, frame)
        parts += _failures(series, frame)
    parts.append("</svg>")
    return "\n".join(parts)


def _frame(series: SeriesView, width: int, height: int) -> _Frame | None:
    if not series.points:
        return None
    candidates = [p.value for p in series.points] + [s.mean for s in series.segments]
    if series.baseline is not None:
        candidates += [series.baseline.low, series.baseline.high]
    values = [v for v in candidates if v is not None and math.isfinite(v)]
    if not values:
        values = [0.0, 1.0]
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0
    first, last = series.points[0].night, series.points[-1].night
    return _Frame(
        left=64, top=26, width=width - 80, height=height - 62,
        first=first, days=(last - first).days, low=low - pad, high=high + pad,
    )  # fmt: skip


def _band(series: SeriesView, f: _Frame) -> list[str]:
    """The baseline band over the last segment (over every night when there are no segments)."""
    b = series.baseline
    if b is None or not all(math.isfinite(v) for v in (b.median, b.low, b.high)):
        return []
    start = series.segments[-1].start if series.segments else 0
    x0 = f.x(series.points[min(start, len(series.points) - 1)].night)
    top, bottom = f.y(b.high), f.y(b.low)
    low, high = format_value(b.low, series.unit), format_value(b.high, series.unit)
    tip = f"baseline median {format_value(b.median, series.unit)} (band {low} to {high})"
    return [
        f'<rect class="baseline-band" x="{x0:.1f}" y="{top:.1f}" width="{max(f.right - x0, 1):.1f}" '
        f'height="{max(bottom - top, 1):.1f}" fill="{BAND}" fill-opacity="0.25">'
        f"<title>{_esc(tip)}</title></rect>",
        f'<line class="baseline-median" x1="{x0:.1f}" x2="{f.right:.1f}" y1="{f.y(b.median):.1f}" '
        f'y2="{f.y(b.median):.1f}" stroke="{BAND}" stroke-dasharray="4 3"/>',
    ]


def _axes(series: SeriesView, f: _Frame) -> list[str]:
    parts = [
        f'<path class="axes" d="M{f.left:.1f} {f.top:.1f}V{f.bottom:.1f}H{f.right:.1f}" '
        f'fill="none" stroke="{AXIS}"/>',
        f'<text x="14" y="{f.top + f.height / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {f.top + f.height / 2:.1f})">{_esc(series.unit)}</text>',
    ]
    for value in _nice_ticks(f.low, f.high, 5):
        y = f.y(value)
        label = _esc(_tick_label(value, series.unit))
        parts.append(
            f'<line x1="{f.left - 4:.1f}" x2="{f.right:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>'
            f'<text x="{f.left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end">{label}</text>'
        )
    for night in _date_ticks(f.first, f.days, 6):
        x = f.x(night)
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{f.bottom:.1f}" y2="{f.bottom + 4:.1f}" stroke="{AXIS}"/>'
            f'<text x="{x:.1f}" y="{f.bottom + 16:.1f}" text-anchor="middle">{night.isoformat()}</text>'
        )
    return parts


def _segment_means(series: SeriesView, f: _Frame) -> list[str]:
    parts = []
    for segment in series.segments:
        if not (0 <= segment.start < segment.stop <= len(series.points) and math.isfinite(segment.mean)):
            continue  # a NaN coordinate would be an error in the browser's console
        x0, x1 = f.x(series.points[segment.start].night), f.x(series.points[segment.stop - 1].night)
        y = f.y(segment.mean)
        tip = f"mean {format_value(segment.mean, series.unit)}"
        parts.append(
            f'<line class="segment-mean" x1="{x0:.1f}" x2="{max(x1, x0 + 1):.1f}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="{MEAN}" stroke-width="2"><title>{_esc(tip)}</title></line>'
        )
    return parts


def _change_points(series: SeriesView, f: _Frame) -> list[str]:
    parts = []
    for cp in series.change_points:
        x = f.x(cp.night)
        colour, kind = (REGRESSION, "regression") if cp.regression else (NOT_REGRESSION, "improvement")
        tip = f"{cp.night.isoformat()}: {format_change(cp.magnitude)} ({kind}, p = {cp.pvalue:.2g})"
        parts.append(
            f'<line class="change-point {kind}" x1="{x:.1f}" x2="{x:.1f}" y1="{f.top:.1f}" '
            f'y2="{f.bottom:.1f}" stroke="{colour}" stroke-width="1.5"><title>{_esc(tip)}</title></line>'
        )
    return parts


def _runs(series: SeriesView, f: _Frame) -> list[str]:
    """One polyline per run of consecutive nights with a value; a lone night also gets a dot to be seen."""
    parts = []
    for run in _contiguous_runs(series):
        coords = [(f.x(series.points[i].night), f.y(value)) for i, value in run]
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        parts.append(
            f'<polyline class="series-line" points="{points}" fill="none" stroke="{LINE}" '
            'stroke-width="1.5"/>'
        )
        if len(coords) == 1:
            x, y = coords[0]
            parts.append(f'<circle class="series-dot" cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{LINE}"/>')
    return parts


def _failures(series: SeriesView, f: _Frame) -> list[str]:
    """Failed nights as triangles on the x axis, each with its status as a tooltip."""
    parts = []
    for point in series.points:
        if point.value is not None and math.isfinite(point.value):
            continue
        x, y = f.x(point.night), f.bottom
        tip = f"{point.night.isoformat()}: {point.status}"
        parts.append(
            f'<polygon class="failed" points="{x:.1f},{y - 7:.1f} {x - 4:.1f},{y:.1f} {x + 4:.1f},{y:.1f}" '
            f'fill="{FAILED}"><title>{_esc(tip)}</title></polygon>'
        )
    return parts


def _contiguous_runs(series: SeriesView) -> Iterator[list[tuple[int, float]]]:
    run: list[tuple[int, float]] = []
    for i, point in enumerate(series.points):
        if point.value is not None and math.isfinite(point.value):
            run.append((i, point.value))
        elif run:
            yield run
            run = []
    if run:
        yield run


def _nice_ticks(low: float, high: float, count: int) -> list[float]:
    """Round tick values inside [low, high]: steps of 1, 2, 2.5 or 5 x 10^k (after Heckbert, "Nice numbers
    for graph labels", Graphics Gems, 1990)."""
    span = high - low
    if span <= 0 or not math.isfinite(span):
        return [low]
    raw = span / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def _date_ticks(first: dt.date, days: int, count: int) -> list[dt.date]:
    step = max(1, math.ceil(days / max(count - 1, 1)))
    return [first + dt.timedelta(days=d) for d in range(0, days + 1, step)]


def _tick_label(value: float, unit: str) -> str:
    """The axis names the unit; bytes alone read better as MB or GB on each tick."""
    return format_value(0.0 if abs(value) < 1e-12 else value, unit if unit == "bytes" else "")


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _esc(text: str) -> str:
    return html.escape(text, quote=True)
