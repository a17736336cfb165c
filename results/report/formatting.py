"""Text shared by the renderers: numbers with units, percent changes, the order of states, safe file names
and links. Pure functions over the report model; exercised by `pytest tests/results/test_report_render.py`."""

from __future__ import annotations

import hashlib
import math
import re
import urllib.parse
from collections.abc import Iterable

from jaxbench.harness.runtime.options import NATIVE_BACKEND
from jaxbench.results.detection.settings import DEFAULT_SETTINGS
from jaxbench.results.judgement.vocabulary import SeriesState
from jaxbench.results.report.model import SeriesPoint, SeriesView

SEVERITY: dict[SeriesState, int] = {
    SeriesState.INSUFFICIENT_HISTORY: 0,
    SeriesState.OK: 1,
    SeriesState.TOO_NOISY: 2,
    SeriesState.IMPROVEMENT: 3,
    SeriesState.SUSPECTED: 4,
    SeriesState.INVALID: 5,
    SeriesState.REGRESSION: 6,
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
    SeriesState.TOO_NOISY: "too noisy to judge",
}

_SAFE_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}")


_BYTE_UNITS = ((1e9, "GB"), (1e6, "MB"), (1e3, "kB"))


PERCENT_UNIT = "fraction"
"""The unit stored as a fraction of 1 (MFU, a fraction of a peak) and shown in percent, everywhere."""


def format_value(value: float | None, unit: str = "") -> str:
    """4 significant digits, with thousands separators from 1,000 to 999,999; "-" for a missing value.
    Bytes (image sizes) in decimal GB, MB or kB, as registries and `docker images` show them; a fraction
    (MFU) in percent, as format_percent."""
    if value is None or not math.isfinite(value):
        return "-"
    if unit == PERCENT_UNIT:
        return format_percent(value)
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
    """A fraction (MFU) as a percentage, to a tenth of a percent, and to three significant digits below one
    percent (a CPU run's MFU): 0.412 -> "41.2%", 0.00123 -> "0.123%"."""
    if fraction is None or not math.isfinite(fraction):
        return "-"
    percent = fraction * 100
    return f"{percent:.1f}%" if abs(percent) >= 1 or percent == 0 else f"{percent:.3g}%"


def format_ratio(ratio: float | None) -> str:
    """One value over another, e.g. a backend's over native's: "0.87x"; "-" when unknown."""
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{ratio:.2f}x"


def series_name(series: SeriesView) -> str:
    """The benchmark, who trained it where that is not jaxbench's own model, the settings that differ from
    the benchmark's default, and whether only runs by hand made it: "llama2-7b by maxtext · global_batch=16
    (ad hoc)"."""
    name = series.benchmark if series.backend == NATIVE_BACKEND else f"{series.benchmark} by {series.backend}"
    name += f" · {series.variant}" if series.variant else ""
    return name + (" (ad hoc)" if series.ad_hoc else "")


def state_text(series: SeriesView) -> str:
    """The state in words, with what makes it so where the label alone would not say: the noise of a
    series too noisy to judge, and a drift that is still going on."""
    text = STATE_LABELS[series.state]
    if series.state is SeriesState.TOO_NOISY and series.noise is not None:
        text += f" ({too_noisy_text(series)})"
    newest = series.points[-1].night if series.points else None
    drifts = [m for m in series.markers if m.kind == "drift"]
    if drifts and newest is not None and (newest - drifts[-1].end).days <= DRIFT_STILL_GOING_DAYS:
        text += f"; {drifts[-1].label}"
    return text


def too_noisy_text(series: SeriesView) -> str:
    """Why a series is too noisy to judge, in figures that answer the question its newest night raises:
    how far it moved against how far a single night may move, and what would confirm a change."""
    assert series.noise is not None
    parts = [f"night-to-night noise {series.noise * 100:.1f}%"]
    baseline, newest = series.baseline, series.change_vs_baseline
    if baseline is not None and baseline.median and newest is not None:
        edge = (baseline.low if series.higher_is_better else baseline.high) / baseline.median - 1
        beyond = newest < edge if series.higher_is_better else newest > edge
        parts.append(
            f"the newest night, {format_change(newest)}, is {'beyond' if beyond else 'within'} the "
            f"{format_change(edge)} a single night may move"
        )
    if series.resolvable:
        nights = len(DEFAULT_SETTINGS.screen.window_z)
        worse = -series.resolvable if series.higher_is_better else series.resolvable
        parts.append(f"a change is confirmed only by {nights} nights in a row beyond {format_change(worse)}")
    return "; ".join(parts)


DRIFT_STILL_GOING_DAYS = 30
"""A drift whose trend moved within this many days of the newest night is part of the series' state."""


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
    return format_value(point.value, series.unit) + runs_text(point)


def runs_text(point: SeriesPoint) -> str:
    """ " (median of 3 runs)" where a night had several runs (of which ad hoc, where any); "" for one."""
    if point.runs <= 1:
        return ""
    ad_hoc = f", {point.ad_hoc_runs} ad hoc" if point.ad_hoc_runs and point.ad_hoc_runs < point.runs else ""
    return f" (median of {point.runs} runs{ad_hoc})"


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
