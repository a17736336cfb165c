"""Two runs side by side: per metric the ratio B/A and whether the difference is significant.

Significance needs samples: a metric measured once per run (compile time, peak memory, final loss) gets a
ratio but no verdict. Step time has one sample per timed step; the throughput metrics are the step time
inverted, so they share its test.

    jaxbench compare runs/a.json runs/b.json
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

from scipy.stats import mannwhitneyu

from jaxbench.harness.measure.metrics import STEP_TIME
from jaxbench.results.records import ParsedResult

MAX_PVALUE = 0.01
"""Two-sided Mann-Whitney U; strict because a compare is often run on many metrics at once."""
MIN_RELATIVE_CHANGE = 0.01
"""Differences under 1 % are not worth acting on even when significant (long runs make everything so)."""
MIN_SAMPLES = 5


class Difference(enum.StrEnum):
    BETTER = "better"
    WORSE = "worse"
    NONE = "no significant difference"
    UNKNOWN = "single value: no test"


@dataclasses.dataclass(frozen=True)
class MetricComparison:
    metric: str
    unit: str
    a: float | None
    b: float | None
    ratio: float | None
    pvalue: float | None
    difference: Difference


def _test(a: Sequence[float] | None, b: Sequence[float] | None) -> float | None:
    if not a or not b or len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return None
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def compare_runs(a: Sequence[ParsedResult], b: Sequence[ParsedResult]) -> list[MetricComparison]:
    """Every metric present in either run, in A's order then B's extras."""
    by_metric_a = {r.series.metric: r for r in a}
    by_metric_b = {r.series.metric: r for r in b}
    step_a, step_b = by_metric_a.get(STEP_TIME), by_metric_b.get(STEP_TIME)
    step_pvalue = _test(step_a.samples if step_a else None, step_b.samples if step_b else None)
    rows = []
    for metric in [*by_metric_a, *(m for m in by_metric_b if m not in by_metric_a)]:
        ra, rb = by_metric_a.get(metric), by_metric_b.get(metric)
        reference = ra or rb
        assert reference is not None
        value_a, value_b = (ra.value if ra else None), (rb.value if rb else None)
        ratio = value_b / value_a if value_a and value_b is not None else None
        samples_a, samples_b = (ra.samples if ra else None), (rb.samples if rb else None)
        pvalue = _test(samples_a, samples_b)
        if pvalue is None and metric.startswith("perf/") and "_per_s" in metric:
            pvalue = step_pvalue  # throughput = units / step time
        rows.append(
            MetricComparison(
                metric,
                reference.series.unit,
                value_a,
                value_b,
                ratio,
                pvalue,
                _difference(ratio, pvalue, reference.series.higher_is_better),
            )
        )
    return rows


def _difference(ratio: float | None, pvalue: float | None, higher_is_better: bool) -> Difference:
    if ratio is None or pvalue is None:
        return Difference.UNKNOWN
    if pvalue >= MAX_PVALUE or abs(ratio - 1) < MIN_RELATIVE_CHANGE:
        return Difference.NONE
    return Difference.BETTER if (ratio > 1) == higher_is_better else Difference.WORSE
