"""Retrospective change points in one nightly series: E-Divisive means with a t-test, in Hunter's two steps.

Matteson & James's energy distance (2014, arXiv:1306.4933) finds candidate splits in sliding windows; a
t-test decides significance instead of permutations (Fleming et al. 2023, doi:10.1145/3578244.3583719),
then a merge keeps only what holds; one-night spikes are filtered, a level must last min_points_after
nights unless the evidence carries a shorter one, and survivors are refined to their least-squares place.
Written from the papers rather than depending on apache-otava, which cannot share jax's environment. The
formulas and the steps: docs/design.md, "Retrospective change points".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection.py
    .venv/bin/python benchmarks/detection_speed.py      # 1,000 series x 365 nights
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import special

from jaxbench.results.detection.despike import despike, night_noise
from jaxbench.results.detection.energy import MIN_SIDE, IndexArray, split_candidates
from jaxbench.results.detection.episodes import find_episodes
from jaxbench.results.detection.findings import ChangePoint, Findings
from jaxbench.results.detection.levels import holds_a_level
from jaxbench.results.detection.medians import median
from jaxbench.results.detection.scale import Scale
from jaxbench.results.detection.settings import (
    DEFAULT_SETTINGS,
    ChangePointSettings,
    DetectionSettings,
)

Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


_TIE = 1e-12
"""Relative difference of two means below which they are equal (rounding of float64 sums)."""

NAME = "e-divisive"
"""This detector's name in the registry (results/detection/detectors.py), the settings and the store."""


def find_change_points(
    values: Sequence[float],
    settings: ChangePointSettings = DEFAULT_SETTINGS.change_points,
    scale: Scale | None = None,
) -> list[ChangePoint]:
    """Change points of a clean (no None/NaN) series in time order, oldest first, judged on `scale` (by
    default the log scale for a positive series, results/detection/scale.py)."""
    x = _checked(values)
    scale = scale or Scale.for_values(x)
    return _steps(despike(scale.forward(x), settings, scale), settings, scale)


def retrospective(
    values: Sequence[float], settings: DetectionSettings = DEFAULT_SETTINGS, scale: Scale | None = None
) -> Findings:
    """The retrospective pass over a whole clean series: its steps, transients and drift."""
    x = _checked(values)
    scale = scale or Scale.for_values(x)
    y = scale.forward(x)
    despiked = despike(y, settings.change_points, scale)  # once, for the steps and the trend
    steps = _steps(despiked, settings.change_points, scale)
    steps, spans = find_episodes(y, despiked, steps, settings.episodes, settings.change_points, scale)
    return Findings(change_points=tuple(steps), spans=tuple(spans))


def _checked(values: Sequence[float]) -> Array:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or not np.all(np.isfinite(x)):
        raise ValueError("values must be a one-dimensional sequence of finite numbers")
    return x


def _steps(y: Array, settings: ChangePointSettings, scale: Scale) -> list[ChangePoint]:
    """The change points of a despiked series on its judging scale, with their levels in its units."""
    if y.size < 2 * MIN_SIDE:
        return []
    noise = max(night_noise(y), scale.margin(median(y), settings.spike_floor))
    sums = _SegmentSums(y, noise, settings.min_points_after)
    cps, _ = _merge(sums, _split(y, sums, settings), settings, scale)
    cps, (before, after, pvalue, _) = _merge(sums, _refine(sums, cps), settings, scale)
    magnitude = scale.relative(after, before)
    return [
        ChangePoint(
            int(i), float(g), float(p), scale.level_in_units(float(mb)), scale.level_in_units(float(ma)), NAME
        )
        for i, g, p, mb, ma in zip(cps, magnitude, pvalue, before, after, strict=True)
    ]


class EDivisive:
    """The retrospective pass as a detector: every change point of the whole history."""

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
        return retrospective(values, settings, scale)


def segments(values: Sequence[float], change_points: Sequence[ChangePoint]) -> list[tuple[int, int, float]]:
    """(start, stop, mean of values[start:stop]) of the stretches between change points."""
    bounds = [0, *sorted(cp.index for cp in change_points), len(values)]
    x = np.asarray(values, dtype=np.float64)
    return [(a, b, float(x[a:b].mean())) for a, b in itertools.pairwise(bounds) if b > a]


def _split(x: Array, sums: _SegmentSums, settings: ChangePointSettings) -> list[int]:
    """Split step: weak candidates from every sliding window (results/detection/energy.py), a split being
    significant at the relaxed split_pvalue."""

    def significant(a: IndexArray, tau: IndexArray, kappa: IndexArray) -> BoolArray:
        return sums.pvalues(a, tau, kappa) < settings.split_pvalue

    return split_candidates(x, settings.window_len, significant)


def _student(
    n1: Array, mean1: Array, var1: Array, n2: Array, mean2: Array, var2: Array, noise: float, short: int
) -> Array:
    """Two-sided p-values of Student's two-sample t-test (pooled variance), elementwise; where a side has
    fewer than `short` nights, against the series' `noise` instead (`_against_the_noise`).

    Pooled, not Welch: a segment of 3-5 nights has an unreliable variance of its own, and Welch would trust a
    small one and call a noise blip significant; a benchmark's nightly noise is a property of the series.
    Equal means give 1, and so does a side of one night; a difference with zero variance on both sides gives
    0 (a step in a constant series)."""
    df = n1 + n2 - 2
    pooled = ((n1 - 1) * var1 + (n2 - 1) * var2) / np.maximum(df, 1)
    se2 = pooled * (1 / n1 + 1 / n2)
    diff = np.abs(mean2 - mean1)
    untestable = (n1 < MIN_SIDE) | (n2 < MIN_SIDE) | (diff <= _TIE * np.maximum(np.abs(mean1), np.abs(mean2)))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * special.stdtr(np.maximum(df, 1), -diff / np.sqrt(se2))
    p = np.where(se2 > 0, p, 0.0)
    shorter = np.flatnonzero((np.minimum(n1, n2) < short) & ~untestable)
    if shorter.size:
        p[shorter] = _against_the_noise(
            n1[shorter], n2[shorter], diff[shorter], se2[shorter], p[shorter], noise
        )
    return np.where(untestable, 1.0, p)


def _against_the_noise(
    n1: Array | IndexArray, n2: Array | IndexArray, diff: Array, se2: Array, p: Array, noise: float
) -> Array:
    """Two-sided p-values of the differences of segments of which one is short, a z-test against the
    series' own `noise` (or the two sides' pooled variance, `se2`, where that is larger); `p` where neither
    has a spread. A t-test there rests on the 3-5 nights' own variance, with so few degrees of freedom that a
    level of 2 nights 60 noise widths away gets p 1e-3; the series' noise, from all its nights, is the
    evidence that carries it."""
    spread2 = np.maximum(se2, noise**2 * (1 / n1 + 1 / n2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(spread2 > 0, 2 * special.ndtr(-diff / np.sqrt(spread2)), p)


def _merge(
    sums: _SegmentSums, candidates: Sequence[int] | IndexArray, settings: ChangePointSettings, scale: Scale
) -> tuple[IndexArray, tuple[Array, ...]]:
    """Merge step: drop the weakest candidate and retest its neighbours until all hold; the change points
    that do, and their `_judge`."""
    cps = np.asarray(candidates, dtype=np.int64)
    while cps.size:
        judged = _judge(sums, cps, settings, scale)
        _, _, pvalue, magnitude = judged
        too_likely = pvalue > settings.max_pvalue
        too_small = np.abs(magnitude) < scale.threshold(settings.min_magnitude)
        if too_likely.any():
            cps = np.delete(cps, int(np.argmax(np.where(too_likely, pvalue, -1.0))))
        elif too_small.any():
            cps = np.delete(cps, int(np.argmin(np.where(too_small, np.abs(magnitude), np.inf))))
        else:
            return cps, judged
    return cps, (np.empty(0),) * 4


def _judge(
    sums: _SegmentSums, cps: IndexArray, settings: ChangePointSettings, scale: Scale
) -> tuple[Array, ...]:
    """Mean before, mean after (on the scale), p-value and size (Scale.size) of each change point between
    its neighbours."""
    bounds = np.concatenate(([0], cps, [sums.size]))
    before, after, pvalue = sums.compare(bounds)
    # A level that lasts fewer than min_points_after nights is not (yet) a change, unless the evidence
    # carries it; a young one (up to young_segment_nights) must hold one level (no slow nights scattered
    # at the end of a series).
    length = bounds[2:] - bounds[1:-1]
    lasting = length >= settings.min_points_after
    for i in np.flatnonzero((length >= MIN_SIDE) & (length <= settings.young_segment_nights)):
        lasting[i] = sums.young_segment_holds(
            int(bounds[i + 1]), int(bounds[i + 2]), float(after[i] - before[i]), settings
        )
    size = after - before if scale is Scale.LOG else scale.relative(after, before)
    return before, after, np.where(lasting, pvalue, 1.0), size


def _refine(sums: _SegmentSums, cps: IndexArray) -> IndexArray:
    """Move each change point, left to right, to the least-squares place between its neighbours.

    E-Divisive's argmax is found in whichever window saw the change first and is a few nights off at
    3-sigma steps; with one change left between two neighbours, the split that minimises the within-segment
    sum of squares (maximises n1 n2 / (n1 + n2) (mean1 - mean2)^2) is the maximum-likelihood place for a
    shift in mean, and also the one with the largest t-statistic. min_points_after is applied afterwards
    (by the merge), so that a change is judged where it is, not where the rule would allow it."""
    cps = cps.copy()
    for i in range(cps.size):
        a = cps[i - 1] if i else 0
        b = cps[i + 1] if i + 1 < cps.size else sums.size
        taus = np.arange(a + MIN_SIDE, b - MIN_SIDE + 1)
        if taus.size:
            cps[i] = taus[int(np.argmax(sums.between_squares(a, taus, b)))]
    return cps


class _SegmentSums:
    """Mean and variance of any segment in O(1) from prefix sums of the series, centred on its median so
    that the variance keeps its precision for series far from zero."""

    def __init__(self, x: Array, noise: float, short: int) -> None:
        self.x = x
        self.noise = noise
        """One night's standard deviation (despike's estimate, floored)."""
        self.short = short
        """Segments shorter than this are tested against `noise` (`_against_the_noise`)."""
        self.size = x.size
        self.centre = median(x)
        c = x - self.centre
        self.s1 = np.concatenate([[0.0], np.cumsum(c)])
        self.s2 = np.concatenate([[0.0], np.cumsum(c * c)])

    def young_segment_holds(self, a: int, b: int, shift: float, settings: ChangePointSettings) -> bool:
        """Whether x[a:b], at most young_segment_nights long and `shift` from the segment before it, is a
        level of its own: its nights hold one level (settings.LevelAgreement) and, shorter than
        min_points_after, it moved short_segment_z noise widths."""
        nights = self.x[a:b]
        if b - a < settings.min_points_after and abs(shift) < settings.short_segment_z * self.noise:
            return False
        return holds_a_level(float(nights.max() - nights.min()), self.noise, shift, settings.agreement)

    def pvalues(self, a: IndexArray, tau: IndexArray, kappa: IndexArray) -> Array:
        """t-test p-values between x[a:tau] and x[tau:kappa] (both at least 2 nights), elementwise: the split
        step's test of each candidate."""
        s1, s2 = self.s1, self.s2
        n1, n2 = tau - a, kappa - tau
        sum1, sum2 = s1[tau] - s1[a], s1[kappa] - s1[tau]
        mean1, mean2 = sum1 / n1, sum2 / n2
        squares = (s2[tau] - s2[a]) - sum1 * mean1 + (s2[kappa] - s2[tau]) - sum2 * mean2
        se2 = np.maximum(squares, 0.0) / (n1 + n2 - 2) * (1 / n1 + 1 / n2)
        diff = np.abs(mean2 - mean1)
        tie = diff <= _TIE * np.maximum(np.abs(mean1 + self.centre), np.abs(mean2 + self.centre))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = 2 * special.stdtr(n1 + n2 - 2, -diff / np.sqrt(se2))
        short = np.flatnonzero(np.minimum(n1, n2) < self.short)
        if short.size:
            p[short] = _against_the_noise(n1[short], n2[short], diff[short], se2[short], p[short], self.noise)
        return np.where(tie, 1.0, np.where(se2 > 0, p, 0.0))

    def between_squares(self, a: int, taus: IndexArray, b: int) -> Array:
        """Between-group sum of squares n1 n2 / (n1 + n2) (mean1 - mean2)^2 of x[a:tau], x[tau:b] per tau."""
        n1, n2 = taus - a, b - taus
        mean1 = (self.s1[taus] - self.s1[a]) / n1
        mean2 = (self.s1[b] - self.s1[taus]) / n2
        return n1 * n2 / (n1 + n2) * (mean1 - mean2) ** 2

    def compare(self, bounds: IndexArray) -> tuple[Array, Array, Array]:
        """Mean before, mean after and t-test p-value of each change point bounds[1:-1] between its
        neighbours (bounds: 0, the change points, the series' length)."""
        count = (bounds[1:] - bounds[:-1]).astype(np.float64)
        s1, s2 = self.s1[bounds], self.s2[bounds]
        total = s1[1:] - s1[:-1]
        mean = total / count
        var = np.maximum((s2[1:] - s2[:-1]) - total * mean, 0.0) / np.maximum(count - 1, 1)
        pvalue = _student(
            count[:-1], mean[:-1], var[:-1], count[1:], mean[1:], var[1:], self.noise, self.short
        )
        return mean[:-1] + self.centre, mean[1:] + self.centre, pvalue
