"""Correctness of a training run from its loss curve: pure functions, no statistics library needed.

Hard failures need no history: a non-finite loss, a loss that ends higher than it started (divergence), or a
final loss below the synthetic data's known optimum (impossible for a correct model: a leak of the targets or
a broken loss). Against recent history, the loss at fixed checkpoints (25, 50, 75 and 100 % of the run) and
the final-window loss must stay inside a robust band, in both directions: a loss that suddenly drops is as
suspicious as one that rises.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics
from collections.abc import Sequence

from jaxbench.harness.measure.stats import final_window
from jaxbench.results.detection.settings import MAD_TO_SIGMA

CHECKPOINT_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
# Runs with an identical configuration are bit-for-bit repeatable on one device but not across reductions
# of different order; the band is the larger of 6 robust standard deviations and 2 % of the median loss.
BAND_MADS = 6.0
BAND_RELATIVE_FLOOR = 0.02
HISTORY_RUNS = 20
"""How many previous runs (same series, same configuration) make the band."""
MIN_HISTORY_RUNS = 3
OPTIMUM_TOLERANCE = 0.01
"""Nats below the optimum that still count as noise of the final-window average."""


class Severity(enum.StrEnum):
    HARD = "hard"
    """Wrong regardless of history."""
    BAND = "band"
    """Outside what recent runs of the same configuration produced."""


@dataclasses.dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    detail: str


def checkpoints(curve: Sequence[float | None]) -> dict[str, float | None]:
    """Loss at the checkpoint steps and over the final window; None where a value is not finite."""
    points: dict[str, float | None] = {}
    for fraction in CHECKPOINT_FRACTIONS:
        index = max(0, math.ceil(fraction * len(curve)) - 1)
        value = curve[index] if curve else None
        points[f"step {index + 1}"] = value if value is not None and math.isfinite(value) else None
    # The harness's own final-window loss, from the curve as stored (a non-finite loss is stored as None).
    points["final window"] = final_window([math.nan if v is None else v for v in curve])
    return points


def hard_failures(curve: Sequence[float | None], optimum: float | None) -> list[Finding]:
    if not curve:
        return [Finding("loss", Severity.HARD, "no loss was recorded")]
    if any(v is None or not math.isfinite(v) for v in curve):
        step = next(i for i, v in enumerate(curve) if v is None or not math.isfinite(v))
        return [Finding("non-finite loss", Severity.HARD, f"loss is NaN/Inf at step {step}")]
    findings = []
    final = checkpoints(curve)["final window"]
    first = curve[0]
    assert first is not None
    if final is not None and final > first:
        findings.append(
            Finding("divergence", Severity.HARD, f"final-window loss {final:.4f} > initial {first:.4f}")
        )
    if final is not None and optimum is not None and final < optimum - OPTIMUM_TOLERANCE:
        findings.append(
            Finding(
                "below optimum",
                Severity.HARD,
                f"final-window loss {final:.4f} < the data's optimum {optimum:.4f}",
            )
        )
    return findings


def band_findings(curve: Sequence[float | None], history: Sequence[Sequence[float | None]]) -> list[Finding]:
    """The newest curve against the previous runs of the same configuration (oldest first)."""
    previous = [checkpoints(c) for c in history[-HISTORY_RUNS:] if len(c) == len(curve)]
    if len(previous) < MIN_HISTORY_RUNS:
        return []
    findings = []
    for name, value in checkpoints(curve).items():
        past = [x for p in previous if (x := p[name]) is not None]
        if value is None or len(past) < MIN_HISTORY_RUNS:
            continue
        median = statistics.median(past)
        mad = statistics.median(abs(x - median) for x in past) * MAD_TO_SIGMA
        half_width = max(BAND_MADS * mad, BAND_RELATIVE_FLOOR * abs(median))
        if abs(value - median) > half_width:
            direction = "above" if value > median else "below"
            findings.append(
                Finding(
                    f"loss at {name}",
                    Severity.BAND,
                    f"{value:.4f} is {direction} the band {median - half_width:.4f} .. "
                    f"{median + half_width:.4f} of the last {len(past)} runs",
                )
            )
    return findings


def check_run(
    curve: Sequence[float | None] | None, optimum: float | None, history: Sequence[Sequence[float | None]]
) -> list[Finding]:
    if curve is None:
        return []
    return hard_failures(curve, optimum) or band_findings(curve, history)


def flagged_since(
    curves: Sequence[Sequence[float | None] | None], optimums: Sequence[float | None]
) -> int | None:
    """Where the newest streak of failing runs began: the index of the first of the newest consecutive runs
    that each fail `check_run` against the runs before them (oldest first), None when the newest passes.
    A regression that persists is one finding from its first night on, not a new one each night."""
    first = None
    for index in range(len(curves) - 1, -1, -1):
        history = [c for c in curves[max(0, index - HISTORY_RUNS) : index] if c is not None]
        if not check_run(curves[index], optimums[index], history):
            break
        first = index
    return first
