"""The detection quality benchmark's scoring (benchmarks/detection_quality.py runs it): which injected changes
a detector's change points and spans found, the retrospective tally of one detector on a whole series, and
the nightly tally of our verdicts replayed night by night. The rules: docs/design.md, "How detection
quality is scored".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Self

# A sibling module: benchmarks/ is no package, but a script's own folder is on sys.path.
from detection_quality_series import CLASSES, Series

from jaxbench.results.detection import DEFAULT_SETTINGS, Span, SpanKind, run_detectors, segment_start
from jaxbench.results.judgement.verdicts import performance_state
from jaxbench.results.judgement.vocabulary import SeriesState

FIRST_JUDGED = 20
"""The screen needs min_history (10) nights; judging from night 20 on leaves every verdict some history."""
REPLAY_NIGHTS = 40
REPLAY_AFTER = 20
"""Replayed nights per series, and how many of them follow its first injected change: the nightly view
costs one detection per night (about 3 ms for a year), so a 365-night replay would cost a second."""
ATTRIBUTION = 10
"""Nights after a regression's first night during which an alarm is its detection."""
CP_TOLERANCE = 2
"""Nights a change point may lie off an injected change and still be it."""
AS_ONE_NIGHTS = 3


def _near(indices: Sequence[int], night: int) -> bool:
    return any(abs(index - night) <= CP_TOLERANCE for index in indices)


def _overlaps(span: Span, block: tuple[int, int]) -> bool:
    return span.start < block[1] and block[0] < span.stop


def changes_found(series: Series, change_points: Sequence[int], spans: Sequence[Span]) -> set[int]:
    """The injected changes found: a change point near it, or a transient span over a block it ends."""
    transients = [span for span in spans if span.kind is SpanKind.TRANSIENT]
    by_span = {
        end for block in series.blocks if any(_overlaps(s, block) for s in transients) for end in block
    }
    return {change for change in series.changes if _near(change_points, change) or change in by_span}


class Summed:
    """A dataclass of counts (and lists) that adds another of its kind field by field."""

    def add(self, other: Self) -> None:
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass
class Retrospective(Summed):
    """One detector's findings on whole series, counted."""

    series: int = 0
    nights: int = 0
    findings: int = 0
    true: int = 0
    injected: int = 0
    """Changes and drifts to find."""
    found: int = 0
    delays: list[int] = dataclasses.field(default_factory=list)
    transients: int = 0
    """Transients (class transient) of AS_ONE_NIGHTS or more."""
    as_one: int = 0


def score_retrospective(
    series: Series, change_points: Sequence[int], spans: Sequence[Span], reported: dict[int, int]
) -> Retrospective:
    """One detector's findings on the whole series, scored (`reported`: the night each change was first
    found)."""
    true_spans = [
        span
        for span in spans
        if (span.kind is SpanKind.DRIFT and series.drift)
        or (span.kind is SpanKind.TRANSIENT and any(_overlaps(span, block) for block in series.blocks))
    ]
    found = changes_found(series, change_points, spans)
    drift_found = series.drift and any(span.kind is SpanKind.DRIFT for span in spans)
    tally = Retrospective(
        series=1,
        nights=series.values.size,
        findings=len(change_points) + len(spans),
        true=sum(_near(series.changes, c) for c in change_points) + len(true_spans),
        injected=len(series.changes) + series.drift,
        found=len(found) + drift_found,
        delays=[reported[change] - change for change in sorted(found) if change in reported],
    )
    if series.kind == "transient" and series.blocks[0][1] - series.blocks[0][0] >= AS_ONE_NIGHTS:
        block = series.blocks[0]
        covering = [s for s in spans if s.kind is SpanKind.TRANSIENT and _overlaps(s, block)]
        tally.transients = 1
        tally.as_one = int(len(covering) == 1 and not any(_near(change_points, end) for end in block))
    return tally


@dataclasses.dataclass
class Nightly(Summed):
    """Our nightly verdicts on the replayed nights of a set of series, counted."""

    series: int = 0
    nights: int = 0
    true: int = 0
    false: int = 0
    repeat: int = 0
    regressions: int = 0
    delays: list[int] = dataclasses.field(default_factory=list)
    too_noisy: int = 0


@dataclasses.dataclass
class Replay:
    """Our nightly verdicts on the replayed nights and the night before them (to tell an alarm's onset)."""

    states: list[SeriesState]
    lookback: list[int]
    """The oldest night the screen's baseline used, per night."""
    blamed: list[int | None]
    """The first bad night the verdict names (a regression's change point, or the screen's first flagged
    night), per night."""
    reported: dict[int, int]
    """For each injected change, the first replayed night on which the retrospective pass found it."""


def replayed(series: Series) -> range:
    """The nights the nightly view judges."""
    stop = min(series.values.size, series.changes[0] + REPLAY_AFTER) if series.changes else series.values.size
    return range(max(FIRST_JUDGED, stop - REPLAY_NIGHTS), stop)


def replay(series: Series, nights: range) -> Replay:
    out = Replay([], [], [], {})
    reach = len(DEFAULT_SETTINGS.screen.window_z) + DEFAULT_SETTINGS.screen.baseline_nights
    for t in range(nights.start - 1, nights.stop):
        found = run_detectors(series.values[: t + 1].tolist(), higher_is_better=False)
        assert found.screen is not None
        cps = [cp.index for cp in found.change_points]
        for change in changes_found(series, cps, found.spans):
            if change <= t:
                out.reported.setdefault(change, t)
        located = [(cp.index, cp) for cp in found.change_points]
        state, first_bad, _ = performance_state(found.screen, located, list(range(t + 1)), False)
        out.states.append(state)
        out.blamed.append(first_bad)
        out.lookback.append(max(segment_start(cps, t + 1), t + 1 - reach))
    return out


def score_nightly(series: Series, nights: range, run: Replay) -> Nightly:
    """Classify the alarms (onsets of runs of regression verdicts) on the replayed nights."""
    flags = [state is SeriesState.REGRESSION for state in run.states]
    first = nights.start
    onsets = [first + i for i in range(len(flags) - 1) if flags[i + 1] and not flags[i]]
    tally = Nightly(
        series=1,
        nights=len(nights),
        regressions=sum(r in nights for r in series.regressions),
        too_noisy=sum(state is SeriesState.TOO_NOISY for state in run.states[1:]),
    )
    named: set[int | None] = set()
    for night in onsets:
        lookback, blamed = run.lookback[night - first + 1], run.blamed[night - first + 1]
        reopened = blamed is not None and blamed in named
        named.add(blamed)
        if any(r <= night < r + ATTRIBUTION for r in series.regressions):
            tally.true += 1
        elif reopened:
            # The store's incident is keyed by its first bad night: this alarm reopens an earlier one.
            tally.repeat += 1
        elif series.persistent and any(
            r <= night and (lookback < r or (blamed is not None and abs(blamed - r) <= CP_TOLERANCE))
            for r in series.regressions
        ):
            tally.repeat += 1
        else:
            tally.false += 1
    for r in series.regressions:
        if r in nights:
            tally.delays += [night - r for night in onsets if r <= night < r + ATTRIBUTION][:1]
    return tally


def judge_ours(series: Series) -> tuple[Nightly, Retrospective]:
    """Both views of our detection on one series (the worker's job)."""
    nights = replayed(series)
    run = replay(series, nights)
    whole = run_detectors(series.values.tolist(), higher_is_better=False)
    cps = [cp.index for cp in whole.change_points]
    return score_nightly(series, nights, run), score_retrospective(series, cps, whole.spans, run.reported)


def by_class[T: (Nightly, Retrospective)](
    series: list[Series], tallies: list[T], empty: Callable[[], T]
) -> dict[str, T]:
    out = {kind: empty() for kind in CLASSES}
    for s, tally in zip(series, tallies, strict=True):
        out[s.kind].add(tally)
    return out
