"""The nightly screen: is the newest night (or the newest two or three) out of line with its recent past?

A window of the newest nights is judged, as a t statistic, against the median of the current segment's
baseline, the nights just before it and, under a drift, the trend carried on; the noise of one night comes
from consecutive differences, floored. Two or more nights beyond on the worse side are a REGRESSION, the
newest alone SUSPECTED; a series whose noise hides the smallest change worth finding is TOO_NOISY. Each
default and its reason: settings.ScreenSettings; the full rule: docs/design.md, "The nightly screen".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection.py -k screen
    .venv/bin/python benchmarks/detection_quality.py      # false alarms, recall and delay per noise level
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import special

from jaxbench.results.detection.findings import NOT_SCREENED, Findings, ScreenResult, ScreenStatus, SpanKind
from jaxbench.results.detection.levels import holds_a_level
from jaxbench.results.detection.medians import MEDIAN_VARIANCE, median
from jaxbench.results.detection.scale import Scale
from jaxbench.results.detection.settings import (
    DEFAULT_SETTINGS,
    MAD_TO_SIGMA,
    DetectionSettings,
    ScreenSettings,
)

NAME = "screen"
"""This detector's name in the registry (results/detection/detectors.py) and the settings."""

_CLIP = 3.0
"""Differences beyond 3 robust standard deviations are slow nights, not noise."""

_CLIPPED_VARIANCE = 1 - 2 * _CLIP * math.exp(-(_CLIP**2) / 2) / math.sqrt(2 * math.pi) / math.erf(
    _CLIP / math.sqrt(2)
)
"""Variance of a standard normal truncated to +-3 (0.9733): corrects the clipped RMS back to a standard
deviation."""

_DIFFS_PER_DF = 1.6
"""Consecutive differences share a night, so n of them carry about n / 1.6 degrees of freedom for the
variance (measured: the clipped RMS of 89 differences of normal noise has a relative spread of 0.095,
i.e. 55 degrees of freedom)."""

_TREND_NIGHTS = 3
"""Fewest nights a trend is fitted to."""


@dataclasses.dataclass(frozen=True)
class _Baseline:
    median: float
    """On the series' judging scale (`units`), like every level here."""
    scale: float
    """Standard deviation of one night (noise floor applied)."""
    size: int
    df: float
    """Degrees of freedom of the scale: z is a t-statistic, so thresholds are t quantiles."""
    units: Scale
    extrapolation: float = 0.0
    """Under a drift, the variance (in units of scale^2) of carrying the trend line from the baseline's
    middle to the newest night: the slope is estimated too."""

    @property
    def level_variance(self) -> float:
        """Variance of the baseline level at the newest night, in units of scale^2."""
        return MEDIAN_VARIANCE / self.size + self.extrapolation

    def threshold(self, z: float) -> float:
        """The t quantile with the same tail probability as z for a normal: short histories, whose scale
        is uncertain, need more (z 3.3 is t 4.3 with 13 degrees of freedom, 3.5 with 60)."""
        return float(special.stdtrit(self.df, special.ndtr(z))) if self.df > 0 else math.inf

    def z(self, window: npt.NDArray[np.float64]) -> float:
        """z of the window's mean against the median, counting the median's own variance; +-inf when the
        scale is 0 (a constant series at zero)."""
        spread = self.scale * math.sqrt(1 / window.size + self.level_variance)
        return _ratio(float(window.mean()) - self.median, spread)

    def change(self, value: float) -> float | None:
        """value / median - 1 in the series' units."""
        if self.units is Scale.LINEAR and self.median == 0:
            return None
        return self.units.relative_one(value, self.median)

    def change_size(self, value: float) -> float:
        """The change's size for practical thresholds (Scale.size)."""
        return self.units.size(value, self.median)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.copysign(math.inf, a) if a else 0.0


def segment_start(
    change_points: Sequence[int], count: int, settings: ScreenSettings = DEFAULT_SETTINGS.screen
) -> int:
    """Where the screen's baseline starts in a series of `count` clean values: after the newest change
    point that still leaves it min_history nights (so a fresh shift is judged against the old level until
    the new one has enough nights of its own)."""
    starts = [index for index in change_points if count - index >= settings.min_history + 1]
    return starts[-1] if starts else 0


def screen_latest(
    values: Sequence[float],
    *,
    higher_is_better: bool,
    segment_start: int = 0,
    settings: ScreenSettings = DEFAULT_SETTINGS.screen,
    scale: Scale | None = None,
    drifting: bool = False,
) -> ScreenResult:
    """Judge the newest night(s) of a clean series (no None/NaN), oldest first, on `scale` (by default the
    log scale for a positive series). `drifting`: the series drifts (a drift span), so the newest nights
    are also judged against its trend carried to them, and that trend, not the median (which lags a drift
    by half the baseline), is the baseline reported."""
    units = scale or Scale.for_values(values)
    x = units.forward(values)
    # Judge as many newest nights as the segment allows while keeping min_history nights for the baseline,
    # so that the screen works again one night after min_history nights of a new segment.
    judged = min(len(settings.window_z), x.size - max(segment_start, 0) - settings.min_history)
    if judged < 1:
        return NOT_SCREENED
    stop = x.size - judged
    noise = _noise(x[:stop], settings)
    level = _reference(
        x, max(segment_start, stop - settings.baseline_nights, 0), stop, noise, units, None, settings
    )
    references = [level]
    trend: _Reference | None = None
    trend_start = max(segment_start, stop - settings.drift_baseline_nights, 0) if drifting else level.start
    if stop - trend_start >= _TREND_NIGHTS:
        fit = theil_sen(x[trend_start:stop], settings.trend_confidence)
        if drifting or fit.low > 0 or fit.high < 0:
            # A drifting level, named by the episodes or plain in the baseline's own nights: the newest
            # nights must also be out of line with the trend carried on to them, or they are its next step.
            trend = _reference(x, trend_start, stop, noise, units, fit.slope, settings)
            references.append(trend)
    recent_start = max(segment_start, stop - settings.recent_nights, 0)
    if recent_start > level.start:
        recent = _reference(x, recent_start, stop, noise, units, None, settings)
        references.append(dataclasses.replace(recent, relief=settings.recent_relief))
    # Under a drift its trend is what the newest night is measured and plotted against.
    primary = trend if drifting and trend is not None else level
    worse = -1.0 if higher_is_better else 1.0
    status, nights = _verdict(references, judged, worse, settings)
    resolvable = _resolvable(primary.baseline, settings)
    if status in (ScreenStatus.OK, ScreenStatus.SUSPECTED) and resolvable > settings.max_resolvable:
        status = ScreenStatus.TOO_NOISY
    # A night alarms only when it is beyond every reference, so the quiet band is the union of theirs.
    bands = [_band(each.baseline, settings) for each in references]
    low, high = min(b[0] for b in bands), max(b[1] for b in bands)
    newest = float(primary.x[-1])
    return ScreenResult(
        status,
        units.level_in_units(primary.baseline.median),
        units.level_in_units(low),
        units.level_in_units(high),
        primary.baseline.change(newest),
        primary.baseline.z(primary.x[-1:]),
        nights,
        resolvable,
        _relative_noise(primary.baseline),
    )


@dataclasses.dataclass(frozen=True)
class _Reference:
    """What the newest nights are judged against: the series with a trend taken out (or not), and the
    baseline over its nights start:stop."""

    x: npt.NDArray[np.float64]
    baseline: _Baseline
    start: int
    relief: float = 0.0


@dataclasses.dataclass(frozen=True)
class TheilSen:
    slope: float
    low: float
    high: float
    """The slope's confidence interval (Sen 1968)."""


def theil_sen(y: npt.NDArray[np.float64], confidence: float) -> TheilSen:
    """The median of the slopes between every two nights of `y` (one per night, evenly spaced), and Sen's
    interval at `confidence` from the order statistics of those slopes. scipy.stats.theilslopes computes the
    same (without its tie correction, which continuous timings never need), but its input validation and
    quantile machinery cost 1.6 ms a call over 90 nights (1.6 s of a 1,000-series detection) against
    0.07 ms here."""
    i, j = _pairs(y.size)
    slopes = (y[j] - y[i]) / (j - i)
    count = slopes.size
    n = y.size
    reach = float(special.ndtri(0.5 + confidence / 2)) * math.sqrt(n * (n - 1) * (2 * n + 5) / 18)
    lower = max(round((count - reach) / 2) - 1, 0)
    upper = min(round((count + reach) / 2), count - 1)
    middle = sorted({(count - 1) // 2, count // 2})
    ordered = np.partition(slopes, sorted({lower, upper, *middle}))
    return TheilSen(float(ordered[middle].mean()), float(ordered[lower]), float(ordered[upper]))


@functools.lru_cache(maxsize=64)
def _pairs(nights: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every two nights (i, j), i < j, of `nights`: theil_sen's, the same for every window of that length."""
    i, j = np.triu_indices(nights, 1)
    i.flags.writeable = j.flags.writeable = False
    return i, j


def _reference(
    x: npt.NDArray[np.float64],
    start: int,
    stop: int,
    noise: tuple[float, float],
    units: Scale,
    slope: float | None,
    settings: ScreenSettings,
) -> _Reference:
    """The median of x[start:stop] as the baseline; with a `slope`, of every night carried along that
    slope to the newest night, counting the slope's own variance (a line's, Var(slope) x reach^2)."""
    extrapolation = 0.0
    if slope is not None:
        x = x - slope * (np.arange(x.size) - (x.size - 1))
        size = stop - start
        reach = (x.size - 1) - (start + stop - 1) / 2  # from the baseline's middle night to the newest
        extrapolation = reach**2 / (size * (size**2 - 1) / 12)
    base = x[start:stop]
    level = median(base)
    scale = max(noise[0], units.margin(level, settings.noise_floor))
    return _Reference(x, _Baseline(level, scale, base.size, noise[1], units, extrapolation), start)


class NightlyScreen:
    """The screen as a detector: the newest nights against the segment that the change points found before
    it leave (`segment_start`)."""

    name = NAME

    def detect(
        self,
        values: Sequence[float],
        *,
        higher_is_better: bool,
        found: Findings,
        settings: DetectionSettings,
        scale: Scale,
    ) -> Findings:
        start = segment_start([cp.index for cp in found.change_points], len(values), settings.screen)
        return Findings(
            screen=screen_latest(
                values,
                higher_is_better=higher_is_better,
                segment_start=start,
                settings=settings.screen,
                scale=scale,
                drifting=any(span.kind is SpanKind.DRIFT for span in found.spans),
            )
        )


def _noise(history: npt.NDArray[np.float64], settings: ScreenSettings) -> tuple[float, float]:
    """Standard deviation of one night from the differences of consecutive nights in the last scale_nights,
    and its degrees of freedom.

    A level shift moves one difference and a slow night two, so differences may look across change points
    and over more nights than the baseline. Their RMS within 3 robust standard deviations (1.4826 x MAD)
    ignores slow nights yet keeps most of the efficiency of a plain standard deviation; a MAD of 20 nights
    is uncertain by +-26 % and gives the z-score tails that triple the false alarms."""
    diffs = np.diff(history[-settings.scale_nights :])
    robust = MAD_TO_SIGMA * median(np.abs(diffs)) if diffs.size else 0.0
    kept = diffs[np.abs(diffs) <= _CLIP * robust]
    if kept.size == 0:
        return 0.0, 0.0
    # A difference of two nights has sqrt(2) times the standard deviation of one.
    return math.sqrt(float(np.mean(kept**2)) / _CLIPPED_VARIANCE / 2), kept.size / _DIFFS_PER_DF


def _beyond(
    window: npt.NDArray[np.float64],
    baseline: _Baseline,
    side: float,
    settings: ScreenSettings,
    relief: float = 0.0,
) -> bool:
    """Whether the window of the newest k nights is beyond every threshold on `side` (+1 up, -1 down)."""
    k = window.size
    level = window
    if k > 1:
        # One very slow night must not carry the window: in the mean it counts at most night_cap sigma
        # beyond the window's median night.
        limit = median(window) + side * settings.night_cap * baseline.scale
        level = np.minimum(window, limit) if side > 0 else np.maximum(window, limit)
    if side * baseline.z(level) <= baseline.threshold(settings.window_z[k - 1] - relief):
        return False
    if side * baseline.change_size(float(level.mean())) < baseline.units.threshold(settings.min_change):
        return False
    if k == 1:
        return True
    # Each night must also be beyond night_z on its own, and the nights must agree with each other as a
    # shifted level does (two unrelated slow nights of +8 % and +25 % do not).
    nights = min(side * baseline.z(window[i : i + 1]) for i in range(k))
    spread = float(window.max() - window.min())
    shift = median(window) - baseline.median
    return (
        holds_a_level(spread, baseline.scale, shift, settings.agreement) and nights > settings.night_z[k - 2]
    )


def _verdict(
    references: list[_Reference], judged: int, worse: float, settings: ScreenSettings
) -> tuple[ScreenStatus, int]:
    """The longest window of two or more nights beyond the thresholds of every reference decides; else
    the newest night."""

    def beyond(k: int, side: float) -> bool:
        return all(_beyond(each.x[-k:], each.baseline, side, settings, each.relief) for each in references)

    for side, status in ((worse, ScreenStatus.REGRESSION), (-worse, ScreenStatus.IMPROVEMENT)):
        for k in range(judged, 1, -1):
            if beyond(k, side):
                return status, k
    if beyond(1, worse):
        return ScreenStatus.SUSPECTED, 1
    return ScreenStatus.OK, 1


def _band(baseline: _Baseline, settings: ScreenSettings) -> tuple[float, float]:
    """Values a single night can take without being beyond the statistical or the practical threshold."""
    spread = baseline.scale * math.sqrt(1 + baseline.level_variance)
    practical = baseline.units.margin(baseline.median, settings.min_change)
    half = max(baseline.threshold(settings.window_z[0]) * spread, practical)
    return baseline.median - half, baseline.median + half


def _relative_noise(baseline: _Baseline) -> float:
    """One night's standard deviation relative to the baseline (0.012 for 1.2 %)."""
    return baseline.units.fraction(baseline.scale, baseline.median)


def _resolvable(baseline: _Baseline, settings: ScreenSettings) -> float:
    """The smallest change (after / before - 1, worse or better) that the longest window can confirm at its
    statistical threshold: above settings.max_resolvable the series is too noisy to judge."""
    k = len(settings.window_z)
    spread = baseline.scale * math.sqrt(1 / k + baseline.level_variance)
    edge = baseline.threshold(settings.window_z[-1]) * spread
    return baseline.units.fraction(edge, baseline.median)
