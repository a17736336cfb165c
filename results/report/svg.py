"""The overview's sparklines: the newest nights of a series as a tiny inline SVG.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_dashboard.py -k spark

Hand-written: a thousand of them go on one page, where a charting library's plot apiece would make the
overview heavy, and an inline SVG needs no JavaScript to show. The series pages draw their interactive plots
with plotly.js (results/report/charts.py, static/dashboard.js).
"""

from __future__ import annotations

import math

from jaxbench.results.report.model import SeriesView

LINE = "#1f5fa8"


SPARK_NIGHTS = 90
"""Nights a sparkline on the overview shows: the newest ones."""


def render_sparkline(series: SeriesView, *, width: int = 84, height: int = 18) -> str:
    """The newest SPARK_NIGHTS nights as a tiny inline SVG for the overview: one polyline per stretch of
    nights with a value (a night without one breaks the line), the newest value as a dot."""
    points = series.points[-SPARK_NIGHTS:]
    values = [p.value for p in points if p.value is not None and math.isfinite(p.value)]
    parts = [
        f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'aria-hidden="true">'
    ]
    if values:
        low, high = min(values), max(values)
        span, step = (high - low) or 1.0, (width - 4) / max(len(points) - 1, 1)
        run: list[str] = []
        coords: list[list[str]] = [run]
        for i, point in enumerate(points):
            if point.value is None or not math.isfinite(point.value):
                run = []
                coords.append(run)
                continue
            y = height - 2 - (height - 4) * (point.value - low) / span
            run.append(f"{2 + i * step:.1f},{y:.1f}")
        for stretch in coords:
            if len(stretch) > 1:
                parts.append(f'<polyline points="{" ".join(stretch)}" fill="none" stroke="{LINE}"/>')
            elif stretch:  # a night alone between two without a value: a line of one point draws nothing
                cx, cy = stretch[0].split(",")
                parts.append(f'<circle cx="{cx}" cy="{cy}" r="1" fill="{LINE}"/>')
        if coords[-1]:
            cx, cy = coords[-1][-1].split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="1.8" fill="{LINE}"/>')
    parts.append("</svg>")
    return "".join(parts)
