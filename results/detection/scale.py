"""The scale a series is judged on: multiplicative (log) for positive quantities, additive (linear) otherwise.

On the log scale a timing and its reciprocal (step time and throughput) are the same distance from their
baselines, bands are ratios that never reach zero, and "3 % slower" means the same at 10 ms and 10 s. The
detectors work on `forward(values)` and report in the series' units through `level_in_units`, `relative`
and `size`, which saturate rather than overflow, so judging any stored value raises nothing. Why so:
docs/design.md, "The judging scale".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection.py -k scale
"""

from __future__ import annotations

import enum
import math
import sys
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

LOG_LEVEL_LIMIT = math.log(sys.float_info.max)
"""The largest level on the log scale that exp() takes back to a float (709.78)."""
LOG_RATIO_LIMIT = math.log(1e300)
"""The largest ratio, as a log, that a relative change reports: 1e300 times, which a percentage (x 100)
still holds. Beyond it no measurement is meaningful anyway; ingest refuses values that far apart
(results/validity.py)."""
LINEAR_LIMIT = 1e100
"""The largest magnitude the linear scale judges: its squares, summed over a million nights, stay finite.
No quantity judged on the linear scale (a loss in nats) comes anywhere near."""


class Scale(enum.StrEnum):
    LINEAR = "linear"
    LOG = "log"

    @staticmethod
    def for_values(values: Sequence[float] | Array) -> Scale:
        """Log for a series of positive values, linear as soon as one is zero or negative."""
        x = np.asarray(values, dtype=np.float64)
        return Scale.LOG if x.size and bool(np.all(x > 0)) else Scale.LINEAR

    def forward(self, values: Sequence[float] | Array) -> Array:
        x = np.asarray(values, dtype=np.float64)
        if self is Scale.LINEAR:
            return np.clip(x, -LINEAR_LIMIT, LINEAR_LIMIT)
        if x.size and not np.all(x > 0):
            raise ValueError("the log scale needs positive values; judge this series on the linear scale")
        return np.log(x)

    def level_in_units(self, level: float) -> float:
        """A level on this scale in the series' units (on the log scale: a geometric mean or median)."""
        return math.exp(min(level, LOG_LEVEL_LIMIT)) if self is Scale.LOG else level

    def relative(self, after: Array, before: Array) -> Array:
        """after / before - 1 in the series' units, elementwise; infinite on the linear scale where before
        is 0 and after is not (no relative scale exists)."""
        if self is Scale.LOG:
            return np.expm1(np.minimum(after - before, LOG_RATIO_LIMIT))
        # A tiny baseline makes the ratio overflow to an infinity: as at 0, no relative scale exists.
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(before != 0, after / before - 1, np.where(after == before, 0.0, np.inf))

    def relative_one(self, after: float, before: float) -> float:
        """`relative` of two levels."""
        return float(self.relative(np.array([after]), np.array([before]))[0])

    def size(self, after: float, before: float) -> float:
        """Signed size of a change for practical thresholds: log(after / before) on the log scale (so +x %
        of a timing and its reciprocal's change are equally large), after / |before| - 1 on the linear."""
        if self is Scale.LOG:
            return after - before
        if before == 0:
            return 0.0 if after == before else math.copysign(math.inf, after)
        return (after - before) / abs(before)

    def threshold(self, fraction: float) -> float:
        """A relative practical threshold (0.015 for 1.5 %) in the units of `size`."""
        return math.log1p(fraction) if self is Scale.LOG else fraction

    def margin[Level: (float, Array)](self, level: Level, fraction: float) -> Level:
        """A relative amount (0.015 for 1.5 %: a practical threshold, a noise floor) as a distance on this
        scale at `level`, a number or an array of levels."""
        threshold = self.threshold(fraction)
        if self is Scale.LOG:
            return threshold if isinstance(level, float) else np.full_like(level, threshold)
        return abs(level) * threshold if isinstance(level, float) else np.abs(level) * threshold

    def fraction(self, distance: float, level: float) -> float:
        """A distance on this scale at `level` (a noise, a resolvable change) as a relative amount: margin's
        inverse. Infinite at a zero level on the linear scale."""
        if self is Scale.LOG:
            return math.expm1(min(distance, LOG_RATIO_LIMIT))
        return distance / abs(level) if level else math.inf


def practical(magnitude: float, fraction: float) -> bool:
    """Whether a relative change (after / before - 1) is at least `fraction` on the multiplicative scale:
    +1.5 % and its reciprocal -1.48 % both pass 0.015."""
    if magnitude <= -1:
        return True
    return abs(math.log1p(magnitude)) >= math.log1p(fraction) - 1e-12
