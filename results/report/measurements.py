"""Series as measurements: a benchmark's timing and the rates computed from it (tokens/s, TFLOP/s, MFU, which
are K / the timing: results/judgement/reciprocal.py) are one measurement, and the dashboard draws it once,
with its rates a toggle away, rather than as four plots that move together. Pure.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_dashboard_pages.py -k measurement
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from jaxbench.results.judgement.reciprocal import TIMING_METRICS
from jaxbench.results.report.model import SeriesView

METRIC_TITLES = {
    "perf/step_time_s": "step time",
    "perf/time_s": "time",
    "perf/tokens_per_s": "tokens/s",
    "perf/tokens_per_s_per_device": "tokens/s per device",
    "perf/images_per_s": "images/s",
    "perf/images_per_s_per_device": "images/s per device",
    "perf/model_tflops_per_device": "TFLOP/s per device",
    "perf/tflops": "TFLOP/s",
    "perf/mfu": "MFU",
    "perf/fraction_of_peak": "% of peak",
}
"""A metric's name on a toggle, in the order the toggles show them; another metric is named by itself."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One measurement's series, the one drawn first (its timing) leading."""

    title: str
    series: list[SeriesView]


def metric_title(metric: str) -> str:
    return METRIC_TITLES.get(metric, metric.removeprefix("perf/"))


def measurement_key(series: SeriesView) -> tuple[object, ...]:
    """Everything but the metric (as reciprocal.measurement_of: the benchmark names its kind)."""
    settings = tuple(sorted(series.settings.items()))
    return (series.benchmark, settings, series.hardware, series.flavor, series.backend, series.ad_hoc)


def _timing_or_rate(series: SeriesView) -> bool:
    """A timing (lower is better) or a rate of one (a perf/ metric where higher is better)."""
    if series.metric in TIMING_METRICS:
        return not series.higher_is_better
    return series.metric.startswith("perf/") and series.higher_is_better


def _order(series: SeriesView) -> tuple[int, str]:
    if series.metric in TIMING_METRICS:
        return (-1, series.metric)
    titles = list(METRIC_TITLES)
    return (titles.index(series.metric) if series.metric in titles else len(titles), series.metric)


def measurements(members: Iterable[SeriesView], every: Iterable[SeriesView]) -> list[Measurement]:
    """`members` (an incident's series) as one entry per measurement, in the order of their first member: a
    timing or rate brings its measurement's other timing and rates from `every` (the report's series), the
    timing first; any other series (a loss, a memory peak, a compile time) is an entry of its own."""
    related: dict[tuple[object, ...], list[SeriesView]] = {}
    for s in every:
        if _timing_or_rate(s):
            related.setdefault(measurement_key(s), []).append(s)
    entries: list[Measurement] = []
    seen: set[tuple[object, ...]] = set()
    for s in members:
        if not _timing_or_rate(s):
            entries.append(Measurement(s.metric, [s]))
            continue
        key = measurement_key(s)
        if key in seen:
            continue
        seen.add(key)
        group = {each.key: each for each in [*related.get(key, []), s]}
        ordered = sorted(group.values(), key=_order)
        entries.append(Measurement(" · ".join(metric_title(each.metric) for each in ordered), ordered))
    return entries
