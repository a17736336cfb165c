"""What a measurement can physically be, checked at ingest before anything is written: each value within the
bounds of its unit (a time is never negative, a step never takes 0 s, nothing is 1e300), counts of at least
one, and a run that finishes no earlier than it starts. Pure functions of plain values; results/records.py
(check_storable) turns what they find into one line naming the file and the field.

A store that held such values judged them wrongly or not at all: a step of -0.018 s put the series on the
linear scale ("-200 %, ok"), a median of 0 divided by zero, and 1e-300 beside 1e300 overflowed the detectors
(which now also survive any finite value: results/detection/scale.py).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_physical_validity.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Sequence
from typing import TypeGuard

MAX_SECONDS = 1e6
"""The longest duration a result may hold (11.6 days): a step, a compilation, an image build. A nightly
job ends within a day; GitHub's longest self-hosted job is 5 days."""
MIN_STEP_SECONDS = 1e-12
"""The shortest time a step or one call of a microbenchmark may take: a picosecond, a thousand times below
any clock's resolution (perf_counter's is a nanosecond); a time of 0 (throughput is units / time) or below
it is no measurement."""


@dataclasses.dataclass(frozen=True)
class Bounds:
    """The values a quantity can take: low to high, inclusive unless `above_low`."""

    low: float
    high: float
    above_low: bool = False

    def contains(self, value: float) -> bool:
        above = value > self.low if self.above_low else value >= self.low
        return above and value <= self.high

    def describe(self) -> str:
        low = f"above {self.low:g}" if self.above_low else f"from {self.low:g}"
        return f"{low} to {self.high:g}"


SECONDS = Bounds(0.0, MAX_SECONDS)
"""A duration: an image build's stage, rounded to 0.1 s, may take 0.0."""
STEP_TIME = Bounds(MIN_STEP_SECONDS, MAX_SECONDS)
"""A step's or a microbenchmark call's time."""

UNIT_BOUNDS: dict[str, Bounds] = {
    "s": SECONDS,
    "tokens/s": Bounds(0.0, 1e12),  # 1,000 times the fastest clusters' training throughput
    "images/s": Bounds(0.0, 1e12),
    "TFLOP/s": Bounds(0.0, 1e6),  # an exaFLOP/s per device: 400 times an H200's dense FP8 peak
    "GB/s": Bounds(0.0, 1e7),  # 2,000 times an H200's memory bandwidth
    "fraction": Bounds(0.0, 1e3),  # MFU or a fraction of a peak (1 at the peak), a spread between hosts
    "bytes": Bounds(0.0, 1e18),  # an exabyte
    "nats": Bounds(-1e6, 1e6),  # a loss, or its excess over the optimum (slightly negative in noise)
    # The self-bench's (benchmarks/self/): its ingest rate, then its counts.
    "results/s": Bounds(0.0, 1e12),
    "modules": Bounds(0.0, 1e7),  # in a process after one command
    "statements/result": Bounds(0.0, 1e6),  # SQL statements an ingest executes per result it stores
    "rows/series": Bounds(0.0, 1e12),  # rows the judgement reads per series it judges
}
"""Each unit the store's series use (harness/measure/metrics.py, results/pytest_benchmark.py,
results/build_record.py) with the values it can take, generous by orders of magnitude: the bounds keep out
what no measurement can be, not what is merely unusual."""
OTHER_UNIT = Bounds(-1e15, 1e15)
"""A unit not listed above."""
METRIC_BOUNDS: dict[str, Bounds] = {"perf/step_time_s": STEP_TIME, "perf/time_s": STEP_TIME}
"""Metrics whose time divides: throughputs are units per step time."""
SPREAD = Bounds(0.0, 1e6)
"""A result's within-run spread, relative to its value."""

Problem = tuple[str, str, str]
"""(the store's table.column, what was expected, what was got): what records.py names in its message."""


def bounds_of(metric: str, unit: str) -> Bounds:
    return METRIC_BOUNDS.get(metric) or UNIT_BOUNDS.get(unit, OTHER_UNIT)


def _got(value: float, metric: str) -> str:
    return f"{value:g} ({metric})"


def result_problems(
    metric: str, unit: str, value: float | None, samples: Sequence[float] | None, spread: float | None
) -> Iterator[Problem]:
    """What one result holds that its metric cannot be: a value or a sample out of its unit's bounds, a
    negative spread. Numbers only: a non-number is the store's type check's to name."""
    bounds = bounds_of(metric, unit)
    if _is_number(value) and not bounds.contains(value):
        yield "results.value", f"a value in {unit} {bounds.describe()}", _got(value, metric)
    found = first_outside(samples, bounds) if isinstance(samples, list) else None
    if found is not None:
        yield "results.samples", f"samples in {unit} {bounds.describe()}", f"[{found[0]}] {found[1]:g}"
    if _is_number(spread) and not SPREAD.contains(spread):
        yield "results.spread", f"a relative spread {SPREAD.describe()}", _got(spread, metric)


def first_outside(values: Sequence[object], bounds: Bounds) -> tuple[int, float] | None:
    """The first (index, number) of `values` outside `bounds`, or None; items that are not numbers are the
    store's type check's to name. Two C-level passes (min, max) clear the usual case."""
    numbers = [value for value in values if _is_number(value)]
    if not numbers or (bounds.contains(min(numbers)) and bounds.contains(max(numbers))):
        return None
    return next((i, v) for i, v in enumerate(values) if _is_number(v) and not bounds.contains(v))


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def count_problem(column: str, count: object, what: str) -> Problem | None:
    """A count of hosts or devices below one (an integer: a non-integer is the store's type check's)."""
    if isinstance(count, int) and not isinstance(count, bool) and count < 1:
        return column, f"at least 1 {what}", str(count)
    return None


def time_order_problem(started: dt.datetime | None, finished: dt.datetime | None) -> Problem | None:
    """A run that finished before it started. A time without an offset is UTC, as the results write it."""
    if started is None or finished is None:
        return None
    if _utc(finished) < _utc(started):
        return (
            "runs.finished_at",
            f"a time at or after started_at ({started.isoformat()})",
            finished.isoformat(),
        )
    return None


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)
