"""What the detectors find in one series, as frozen data: change points (each naming the detector that found
it), the nightly screen's verdict on the newest nights, and `Findings`, the record that gathers them as the
detectors run one after another (results/detection/detectors.py).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection.py
"""

from __future__ import annotations

import dataclasses
import enum


@dataclasses.dataclass(frozen=True)
class ChangePoint:
    index: int
    """First night after the change (an index into the values given)."""
    magnitude: float
    """mean_after / mean_before - 1, over the neighbouring segments (spikes replaced)."""
    pvalue: float
    """Student's two-sample t-test between the two neighbouring segments."""
    mean_before: float
    mean_after: float
    detector: str
    """The registry name of the detector that found it (stored with the change point)."""


class SpanKind(enum.StrEnum):
    DRIFT = "drift"
    """A smooth slow change over many nights (linear or cyclic): shown with its slope and total change,
    never an incident on a commit range (no one commit did it) and never a chain of step change points."""
    TRANSIENT = "transient"
    """A block of a few nights away from the level on both sides of it, which agree: a regression (or an
    improvement) that came and went, with a commit range at each end."""


@dataclasses.dataclass(frozen=True)
class Span:
    """A finding over a stretch of nights rather than at one night."""

    kind: SpanKind
    start: int
    """First night of the span (an index into the values given)."""
    stop: int
    """One past its last night."""
    magnitude: float
    """Transient: the span's level / the level around it - 1. Drift: the trend's last / first level - 1
    over the span."""
    pvalue: float
    detector: str
    slope: float | None = None
    """Drift only: the relative change per night at the trend's average pace (magnitude / nights)."""


class ScreenStatus(enum.StrEnum):
    OK = "ok"
    IMPROVEMENT = "improvement"
    """Two or more newest nights beyond the thresholds on the better side."""
    SUSPECTED = "suspected"
    """The newest night alone is beyond the thresholds on the worse side: worth a look, not an alert."""
    REGRESSION = "regression"
    """Two or more consecutive newest nights beyond the thresholds on the worse side."""
    INSUFFICIENT_HISTORY = "insufficient_history"
    """Fewer than min_history nights in the segment before the newest night."""
    TOO_NOISY = "too_noisy"
    """Nothing beyond the thresholds, but the night-to-night noise hides any change smaller than
    max_resolvable: not "ok"."""


@dataclasses.dataclass(frozen=True)
class ScreenResult:
    status: ScreenStatus
    baseline_median: float | None
    band_low: float | None
    """Edges of the band inside which a single night is unremarkable (for plots)."""
    band_high: float | None
    change: float | None
    """Newest value / baseline median - 1."""
    zscore: float | None
    """Robust z of the newest night (positive: above the baseline), with the median's own uncertainty."""
    nights: int
    """How many newest nights the verdict rests on: the first flagged night is len(values) - nights."""
    resolvable: float | None = None
    """The smallest change (relative) the screen's longest window can confirm in this noise."""
    noise: float | None = None
    """One night's standard deviation relative to the baseline (noise floor applied)."""


NOT_SCREENED = ScreenResult(ScreenStatus.INSUFFICIENT_HISTORY, None, None, None, None, None, 0)
"""The screen's verdict where it did not run or had too few nights: nothing to say about the newest night."""


@dataclasses.dataclass(frozen=True)
class Findings:
    """What detectors found in one series: each detector returns its own, and `adding` gathers them."""

    change_points: tuple[ChangePoint, ...] = ()
    """In time order, oldest first."""
    screen: ScreenResult | None = None
    """The nightly screen's verdict; None where no screen ran."""
    spans: tuple[Span, ...] = ()
    """Drifts and transients, by start night."""

    def adding(self, later: Findings) -> Findings:
        """These findings and a later detector's: change points and spans merged in time order (a stable
        sort, so ties keep the order the detectors ran in); a later screen verdict replaces an earlier one."""
        return Findings(
            change_points=tuple(sorted((*self.change_points, *later.change_points), key=lambda cp: cp.index)),
            screen=later.screen if later.screen is not None else self.screen,
            spans=tuple(sorted((*self.spans, *later.spans), key=lambda span: span.start)),
        )
