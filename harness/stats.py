"""Summary statistics of per-step times: pure numpy, no JAX.

The headline step time is the median of the timed steps (robust to the occasional slow step from a host
hiccup); p10/p90 and the interquartile range describe the spread. Warmup steps are dropped by the caller.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness.config import Strict


class StepTimeStats(Strict):
    count: int
    median: float
    p10: float
    p90: float
    iqr: float
    """75th minus 25th percentile."""
    mean: float
    min: float
    max: float


def summarize(times: Sequence[float]) -> StepTimeStats:
    if not times:
        raise ValueError("no step times to summarize")
    values = np.asarray(times, dtype=np.float64)
    p10, p25, p50, p75, p90 = np.percentile(values, [10, 25, 50, 75, 90])
    return StepTimeStats(
        count=len(values),
        median=float(p50),
        p10=float(p10),
        p90=float(p90),
        iqr=float(p75 - p25),
        mean=float(values.mean()),
        min=float(values.min()),
        max=float(values.max()),
    )


def final_window(losses: Sequence[float], window: int) -> float | None:
    """Mean loss over the last `window` steps; None if any of them is not finite."""
    tail = list(losses)[-window:]
    if not tail or not all(math.isfinite(x) for x in tail):
        return None
    return float(np.mean(tail))
