"""One verdict per measurement: a benchmark's rates (tokens/s, TFLOP/s, MFU, GB/s) are its timing seen through
a reciprocal, so their verdicts are derived from the timing's judgement instead of judged again. Pure.

Every rate is K/t for a constant K of the measurement; judged on their own, a step time and its throughput
could disagree. Where a rate's valued nights are exactly the timing's, its analysis maps every finding
through r = K/t (levels to K/level, the band swapped, z to -z); otherwise it keeps its own judgement.
Details: docs/design.md, "One verdict per measurement".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_reciprocal.py
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence

from jaxbench.results.detection import ChangePoint, ScreenResult, Span
from jaxbench.results.history import History
from jaxbench.results.identity import SeriesIdentity
from jaxbench.results.judgement.verdicts import SeriesAnalysis
from jaxbench.results.judgement.vocabulary import SeriesState

TIMING_METRICS = ("perf/step_time_s", "perf/time_s")
"""What a benchmark measures directly, lower is better: its rates are derived from these."""

CONSTANT_TOLERANCE = 1e-6
"""How far rate × timing may wander (relative) across nights and still be one constant: rounding in the
result file, never a change of batch or FLOPs counting (which start a new series anyway)."""

Measurement = tuple[object, ...]


def measurement_of(identity: SeriesIdentity) -> Measurement:
    """Everything but the metric: series that share it are one measurement seen through different metrics."""
    return (
        identity.benchmark,
        identity.kind,
        identity.settings,
        identity.hardware,
        identity.flavor,
        identity.backend,
    )


def is_rate(identity: SeriesIdentity) -> bool:
    return identity.metric.startswith("perf/") and identity.higher_is_better


def reciprocal_change(change: float | None) -> float | None:
    """The relative change of K/x when x changes by `change`: +355 % becomes -78.0 %."""
    if change is None or change <= -1:
        return None
    return 1.0 / (1.0 + change) - 1.0


def judge_measurements(
    histories: Sequence[History], judge: Callable[[History, bool], SeriesAnalysis]
) -> list[SeriesAnalysis]:
    """Every history's analysis, in order. `judge(history, detecting)` analyses one; a rate that is K / its
    measurement's timing on every night is not run through the detectors again (detecting=False: its
    validity alone) but takes the timing's verdict through the reciprocal."""
    timings: dict[Measurement, History] = {}
    for history in histories:
        if history.identity.metric in TIMING_METRICS and not history.identity.higher_is_better:
            timings.setdefault(measurement_of(history.identity), history)
    judged = {key: judge(history, True) for key, history in timings.items()}
    analyses = []
    for history in histories:
        key = measurement_of(history.identity)
        timing = timings.get(key)
        if timing is history:
            analyses.append(judged[key])
            continue
        constant = _constant(history, timing) if timing is not None and is_rate(history.identity) else None
        # A timing invalid on its own (its metric went missing) says nothing of the rate: judged itself.
        if constant is None or judged[key].state is SeriesState.INVALID:
            analyses.append(judge(history, True))
        else:
            analyses.append(derive(judge(history, False), judged[key], constant))
    return analyses


def derive(rate: SeriesAnalysis, timing: SeriesAnalysis, constant: float) -> SeriesAnalysis:
    """The rate's analysis (its validity) completed from the timing's, where rate = constant / timing."""
    at = timing.history.positions_in(rate.history)
    change_points = [
        (at[index], _reciprocal_point(cp, constant)) for index, cp in timing.change_points if index in at
    ]
    segments = [
        (at[start], at[stop], constant / mean)
        for start, stop, mean in timing.segments
        if start in at and stop in at and mean > 0
    ]
    spans = [
        (at[start], at[stop], _reciprocal_span(span))
        for start, stop, span in timing.spans
        if start in at and stop in at
    ]
    state, first_bad, magnitude = timing.state, timing.first_bad, reciprocal_change(timing.magnitude)
    if rate.state is SeriesState.INVALID:
        # The rate's own validity problems (a lost metric, a failed run) stand: they are not the timing's.
        state, first_bad, magnitude = rate.state, rate.first_bad, rate.magnitude
    elif first_bad is not None:
        first_bad = at.get(first_bad, first_bad)
    return dataclasses.replace(
        rate,
        change_points=change_points,
        segments=segments,
        screen=_reciprocal_screen(timing.screen, constant),
        state=state,
        first_bad=first_bad,
        magnitude=magnitude,
        spans=spans,
    )


def _constant(rate: History, timing: History) -> float | None:
    """K with rate = K / timing on every valued night of both, or None where the nights or K differ."""
    rates = {n.night: n.value for n in rate.nights if n.value is not None}
    times = {n.night: n.value for n in timing.nights if n.value is not None}
    if not rates or rates.keys() != times.keys():
        return None
    products = [rates[night] * times[night] for night in rates]
    constant = statistics.median(products)
    if not constant > 0 or not math.isfinite(constant):
        return None
    if any(abs(p / constant - 1) > CONSTANT_TOLERANCE for p in products):
        return None
    return constant


def _reciprocal_point(cp: ChangePoint, constant: float) -> ChangePoint:
    magnitude = reciprocal_change(cp.magnitude)
    return dataclasses.replace(
        cp,
        magnitude=magnitude if magnitude is not None else math.inf,
        mean_before=constant / cp.mean_before if cp.mean_before else math.inf,
        mean_after=constant / cp.mean_after if cp.mean_after else math.inf,
    )


def _reciprocal_span(span: Span) -> Span:
    magnitude = reciprocal_change(span.magnitude)
    if magnitude is None:
        return span
    slope = None if span.slope is None else magnitude / max(span.stop - span.start - 1, 1)
    return dataclasses.replace(span, magnitude=magnitude, slope=slope)


def _reciprocal_screen(screen: ScreenResult, constant: float) -> ScreenResult:
    def reciprocal_level(level: float | None) -> float | None:
        return constant / level if level else None

    return dataclasses.replace(
        screen,
        baseline_median=reciprocal_level(screen.baseline_median),
        band_low=reciprocal_level(screen.band_high),
        band_high=reciprocal_level(screen.band_low),
        change=reciprocal_change(screen.change),
        zscore=-screen.zscore if screen.zscore is not None else None,
    )
