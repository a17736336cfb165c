"""Text shared by the renderers: numbers with units, percent changes, the order of states, safe file names
and links. Pure functions over the report model; exercised by `pytest tests/test_report_render.py`."""

from __future__ import annotations

import hashlib
import math
import re
import urllib.parse
from collections.abc import Iterable

from harness.run.options import NATIVE_BACKEND
from results.judgement.vocabulary import SeriesState
from results.report.model import SeriesView

SEVERITY: dict[SeriesState, int] = {
    SeriesState.INSUFFICIENT_HISTORY: 0,
    SeriesState.OK: 1,
    SeriesState.IMPROVEMENT: 2,
    SeriesState.SUSPECTED: 3,
    SeriesState.INVALID: 4,
    SeriesState.REGRESSION: 5,
}
"""How much a state asks for attention; the worst state of a group is the one with the highest rank."""

QUIET_STATES = frozenset({SeriesState.OK, SeriesState.INSUFFICIENT_HISTORY})
"""States that need nobody's attention: listed after (or folded below) the others."""

STATE_LABELS: dict[SeriesState, str] = {
    SeriesState.OK: "ok",
    SeriesState.IMPROVEMENT: "improvement",
    SeriesState.SUSPECTED: "suspected",
    SeriesState.REGRESSION: "regression",
    SeriesState.INVALID: "invalid",
    SeriesState.INSUFFICIENT_HISTORY: "no baseline yet",
}

_SAFE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}")


_BYTE_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"))


def format_value(value: float | None, unit: str = "") -> str:
    """4 significant digits, with thousands separators from 1,000 to 999,999; "-" for a missing value.
    Bytes (image sizes) in decimal GB, MB or kB, as registries and `docker images` show them."""
    if value is None or not math.isfinite(value):
        return "-"
    if unit == "bytes":
        scale, name = next(((s, n) for s, n in _BYTE_UNITS if abs(value) >= s), (1.0, "bytes"))
        return f"{value / scale:.4g} {name}"
    text = f"{value:,.0f}" if 1000 <= abs(value) < 1e6 else f"{value:.4g}"
    return f"{text} {unit}".strip()


def format_seconds(seconds: float | None) -> str:
    """A duration in ms below a second, else in s, 4 significant digits: "163.5 ms", "41.27 s"."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e3:.4g} ms" if abs(seconds) < 1 else f"{seconds:.4g} s"


def format_percent(fraction: float | None) -> str:
    """A fraction (MFU) as a percentage: 0.412 -> "41.2%"."""
    if fraction is None or not math.isfinite(fraction):
        return "-"
    return f"{fraction:.1%}"


def format_ratio(ratio: float | None) -> str:
    """One value over another, e.g. a backend's over native's: "0.87x"; "-" when unknown."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{ratio:.2f}x"


def series_name(series: SeriesView) -> str:
    """The benchmark, and who trained it where that is not jaxbench's own model: "llama2-7b by maxtext"."""
    return series.benchmark if series.backend == NATIVE_BACKEND else f"{series.benchmark} by {series.backend}"


def format_change(change: float | None) -> str:
    """A relative change (after / before - 1) as a signed percentage, e.g. "+4.2%"; "-" when unknown."""
    if change is None or not math.isfinite(change):
        return "-"
    return f"{change * 100:+.1f}%"


def newest_text(series: SeriesView) -> str:
    """The newest night's value with its unit, or the failure status when the newest night has no value."""
    if not series.points:
        return "-"
    point = series.points[-1]
    if point.value is None:
        return f"failed ({point.status})" if point.status != "ok" else "-"
    return format_value(point.value, series.unit)


def worst_state(states: Iterable[SeriesState]) -> SeriesState:
    return max(states, key=SEVERITY.__getitem__, default=SeriesState.INSUFFICIENT_HISTORY)


def by_attention(series: Iterable[SeriesView]) -> list[SeriesView]:
    """Worst state first, then by name, so the same report always lists series in the same order."""
    return sorted(series, key=lambda s: (-SEVERITY[s.state], s.benchmark, s.metric, s.hardware, s.key))


def safe_file_stem(name: str) -> str:
    """A file name stem that is the same on every file system and URL-safe without quoting.

    Names already made of [A-Za-z0-9._-] (not starting with "." or "_", which GitHub Pages' Jekyll and
    shells treat specially) are kept; any other name is cleaned and given a short hash of the original, so
    that two different names never share a file.
    """
    if _SAFE_STEM.fullmatch(name):
        return name
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("._-")[:80] or "x"
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{cleaned}-{digest}"


def safe_url(url: str | None) -> str | None:
    """The URL if it is an absolute http(s) link, else None: a stored link must never become `javascript:`."""
    if not url:
        return None
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    # Quote what a Markdown link or an HTML attribute could trip over; keep what URLs legitimately use.
    return urllib.parse.quote(url.strip(), safe=":/?#@!$&*+,;=%-._~")
