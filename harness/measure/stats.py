"""Summary statistics of per-step times, and the A/B ratio interval: pure numpy/scipy, no JAX.

The headline step time is the median of the timed steps (robust to the occasional slow step from a host
hiccup); p10/p90 and the interquartile range describe the spread. Warmup steps are dropped by the caller.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from jaxbench.core.schema import Strict


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
    # numpy here and below, not at the top: the result model imports this module for StepTimeStats, and
    # commands that only read or list (recipes, flops, backends, report) need no numerics to start.
    import numpy as np

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


LOSS_WINDOW_STEPS = 10
"""Steps averaged into the final-window loss: long enough to smooth batch-to-batch noise."""


def final_window(losses: Sequence[float], window: int = LOSS_WINDOW_STEPS) -> float | None:
    """Mean loss over the last `window` steps; None if any of them is not finite."""
    tail = list(losses)[-window:]
    if not tail or not all(math.isfinite(x) for x in tail):
        return None
    import numpy as np

    return float(np.mean(tail))


def counterbalanced[Side](index: int, first: Side, second: Side) -> tuple[Side, Side]:
    """The order of the `index`-th pair of runs of two sides: (first, second), then (second, first), ...

    Back to back, a pair's second run can be faster or slower than its first for reasons of neither side
    (caches the first warmed, a machine whose load eases or grows); a fixed order hands that to one side as
    if the change had done it. Alternating hands it to each side in turn: it cancels in the mean of the
    pairs and widens their spread, as noise should.

    >>> [counterbalanced(i, "a", "b") for i in range(3)]
    [('a', 'b'), ('b', 'a'), ('a', 'b')]
    """
    return (first, second) if index % 2 == 0 else (second, first)


def check_rounds(repeats: int, max_rounds: int, confidence: float) -> None:
    """A comparison in rounds of `repeats` pairs, at most `max_rounds` of them, at `confidence` (pr-check's,
    triage's reproduction)."""
    for name, count in (("repeats", repeats), ("max_rounds", max_rounds)):
        if count < 1:
            raise ValueError(f"{name}: needs at least 1, got {count}")
    check_confidence(confidence)


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: must lie strictly between 0 and 1, got {confidence}")


@dataclasses.dataclass(frozen=True)
class RatioEstimate:
    """B/A from paired runs: the geometric mean of the per-pair ratios and its confidence interval."""

    ratio: float
    low: float
    high: float
    pairs: int
    confidence: float


def paired_ratio(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> RatioEstimate:
    """Student-t interval on the mean log ratio of pairs (a_i, b_i) run back to back, in `counterbalanced`
    order.

    Pairing cancels slow drift of the machine between pairs, the order's alternation what favours a
    pair's first or second run; logs make a 2x faster and a 2x slower arm symmetric. With one pair the
    interval is unbounded.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"need the same positive number of A and B values, got {len(a)} and {len(b)}")
    # Here, not at the top: scipy.stats takes about a second to import, and every `jaxbench` command and
    # run imports this module; only A/B needs the t distribution.
    import numpy as np
    from scipy.stats import t as student_t

    logs = np.log(np.asarray(b, dtype=np.float64) / np.asarray(a, dtype=np.float64))
    mean = float(logs.mean())
    if len(logs) < 2:
        return RatioEstimate(math.exp(mean), 0.0, math.inf, 1, confidence)
    half = float(student_t.ppf((1 + confidence) / 2, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs)))
    return RatioEstimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs), confidence)
