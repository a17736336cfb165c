"""Findings over a stretch of nights: transients and drifts, which a pass that only knows steps cuts into
change points (a transient into two; a slow drift into a chain, each blamed on an unrelated commit range).

A transient is a short block far from the agreeing levels on both its sides, its nights holding one level,
scored for every block length at once; slow nights that scatter, or come back to one level again and again,
are outliers and a mode of the series, not a transient (nor a step and its way back); a change point a line
explains as well as its step is a stretch of a short drift; a drift is a low-degree polynomial trend under
the steps that an F-test says is needed. A drift has no night it began, so it is shown and never bisected.
The criteria: docs/design.md, "Transients and drifts".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_episodes.py
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from numpy.polynomial import legendre
from scipy import special

from jaxbench.results.detection.despike import night_noise
from jaxbench.results.detection.findings import ChangePoint, Span, SpanKind
from jaxbench.results.detection.least_squares import Fit, LeastSquares, f_pvalue, step_or_line
from jaxbench.results.detection.medians import MEDIAN_VARIANCE, median, sliding_medians
from jaxbench.results.detection.outliers import (
    are_outliers,
    holds_one_level,
    sides_agree,
    without_outlier_blocks,
)
from jaxbench.results.detection.scale import Scale, practical
from jaxbench.results.detection.settings import ChangePointSettings, EpisodeSettings

Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NAME = "episodes"


_END_TOLERANCE = 2
"""A change point this close to a transient's end is that end, found a night or two off."""

_LINE_MIN_NIGHTS = 10
"""Fewest nights in a change point's two segments to weigh its step against a line (as
`_one_step_fits_better` needs): fewer cannot tell the two apart."""


def find_episodes(
    y: Array,
    despiked: Array,
    change_points: Sequence[ChangePoint],
    settings: EpisodeSettings,
    change_settings: ChangePointSettings,
    scale: Scale,
) -> tuple[list[ChangePoint], list[Span]]:
    """The change points that remain steps, and the transients and drift found in `y` (a clean series on
    its judging scale, oldest first; `despiked`: the same with its one-night spikes out) with the
    retrospective pass's `change_points`."""
    if y.size < 2 * settings.transient_context + 2:
        return list(change_points), []
    noise = _noise(y, scale, change_settings)
    transients = _transients(y, noise, settings, scale)
    steps = [cp for cp in change_points if not any(_explains(span, cp.index) for span in transients)]
    steps = without_outlier_blocks(y, steps, noise, settings)
    steps = _steps_not_a_line(despiked, steps, change_settings.max_pvalue)
    covered = np.zeros(y.size, dtype=bool)
    for span in transients:
        covered[span.start : span.stop] = True
    drift = _drift(despiked, steps, covered, settings, change_settings, scale)
    if drift is not None:
        span, kept = drift
        return kept, sorted([*transients, span], key=lambda s: s.start)
    return steps, transients


def _noise(y: Array, scale: Scale, settings: ChangePointSettings) -> float:
    """One night's standard deviation (despike's estimate, with its floor)."""
    return max(night_noise(y), scale.margin(median(y), settings.spike_floor))


def _explains(span: Span, index: int) -> bool:
    """Whether a change point at `index` is one of this transient's ends (or inside it)."""
    return span.start - _END_TOLERANCE <= index <= span.stop + _END_TOLERANCE


def _transients(y: Array, noise: float, settings: EpisodeSettings, scale: Scale) -> list[Span]:
    w = settings.transient_context
    candidates, tested = _transient_candidates(y, noise, settings, scale)
    chosen: list[Span] = []
    taken = np.zeros(y.size, dtype=bool)
    # The strongest block of each group of overlapping ones, then oldest first: a block measured against
    # nights of an earlier transient is skipped (between a transient and a later step, the normal nights
    # look like a transient the other way).
    for score, start, length, mean, ambient in sorted(_strongest_of_overlaps(candidates), key=lambda c: c[1]):
        if taken[max(start - w, 0) : start + length + w].any():
            continue
        taken[start : start + length] = True
        pvalue = min(1.0, 2 * float(special.ndtr(-score)) * tested)  # Bonferroni over every block scored
        magnitude = scale.relative_one(mean, ambient)
        chosen.append(Span(SpanKind.TRANSIENT, start, start + length, magnitude, pvalue, NAME))
    return sorted(chosen, key=lambda s: s.start)


def _transient_candidates(
    y: Array, noise: float, settings: EpisodeSettings, scale: Scale
) -> tuple[list[Candidate], int]:
    """The blocks that pass every test of a transient, and how many blocks were scored. Every block of every
    length is scored at once, as (lengths, starts) arrays; the few far enough from the level around them
    are then checked one criterion after another."""
    w = settings.transient_context
    n = y.size
    lengths = np.arange(2, settings.transient_max_nights + 1)[:, None]
    starts = np.arange(w, n - 2 - w + 1)  # those of the shortest blocks; longer ones stop sooner
    fits = starts <= n - lengths - w
    tested = int(np.count_nonzero(fits))
    if tested == 0:
        return [], 0
    stops = np.minimum(starts + lengths, n - w)  # blocks that do not fit are scored on other nights, unused
    sums = np.concatenate([[0.0], np.cumsum(y)])
    medians = sliding_medians(y, w)  # medians[i]: the median of y[i:i + w]
    around = (medians[starts - w] + medians[stops]) / 2
    level = (sums[stops] - sums[starts]) / lengths
    z = np.abs(level - around) / (noise * np.sqrt(1 / lengths + MEDIAN_VARIANCE / (2 * w)))
    row, column = np.nonzero(fits & (z >= settings.transient_z))
    if row.size == 0:  # most series: no block stands out at all
        return [], tested
    start, length, stop = starts[column], lengths[row, 0], stops[row, column]
    before, after, around, level = medians[start - w], medians[stop], around[row, column], level[row, column]
    shift = level - around
    sides = sides_agree(before, after, shift, noise, w)
    found = sides & (np.abs(shift) >= scale.margin(around, settings.transient_min_change))
    found &= holds_one_level(y, start, length, around, shift, noise, settings)
    kept = np.flatnonzero(found)  # the few blocks left: the outlier tests look around and across the series
    found[kept] = ~are_outliers(y, start[kept], stop[kept], around[kept], shift[kept], noise, settings)
    candidates = [
        (float(z[row[i], column[i]]), int(start[i]), int(length[i]), float(level[i]), float(around[i]))
        for i in np.flatnonzero(found)
    ]
    return candidates, tested


Candidate = tuple[float, int, int, float, float]
"""(z, start, length, level, level around) of a block that passed every test."""


def _strongest_of_overlaps(candidates: list[Candidate]) -> list[Candidate]:
    """The highest-z block of each group of blocks that overlap one another (in chains)."""
    best: list[Candidate] = []
    group: list[Candidate] = []
    reach = -1
    for candidate in sorted(candidates, key=lambda c: c[1]):
        if group and candidate[1] >= reach:
            best.append(max(group))
            group = []
        group.append(candidate)
        reach = max(reach, candidate[1] + candidate[2]) if len(group) > 1 else candidate[1] + candidate[2]
    if group:
        best.append(max(group))
    return best


def _drift(
    y: Array,
    steps: list[ChangePoint],
    covered: BoolArray,
    settings: EpisodeSettings,
    change_settings: ChangePointSettings,
    scale: Scale,
) -> tuple[Span, list[ChangePoint]] | None:
    """The drift and the steps that stand on top of it, or None where no trend is needed."""
    fitted = y.size - settings.drift_guard_nights
    if fitted < settings.drift_min_nights:
        return None
    use = ~covered[:fitted]
    most = settings.drift_max_degree
    trends = _trends(y.size, most)
    level = median(y[:fitted])
    step_threshold = scale.margin(level, change_settings.min_magnitude)
    kept = [cp for cp in steps if 0 < cp.index < fitted]
    target = y[:fitted][use]

    def fits(chosen: list[ChangePoint]) -> LeastSquares:
        """Fits of the level, the steps and the trend up to any degree d: the first 1 + steps + d columns."""
        return LeastSquares(_design([cp.index for cp in chosen], trends[:fitted])[use], target)

    models = fits(kept)
    while kept:  # backward elimination of the steps the most flexible trend explains
        full = models.leading(models.columns)
        coefficients = models.coefficients(models.columns)
        worst, worst_p = None, -1.0
        for i in range(len(kept)):
            p = f_pvalue(models.without(1 + i), full)
            if abs(coefficients[1 + i]) < step_threshold:
                p = 1.0
            if p > worst_p:
                worst, worst_p = i, p
        if worst is None or worst_p <= change_settings.max_pvalue:
            break
        kept.pop(worst)
        models = fits(kept)
    # The trend's degree by BIC: a line for a linear drift, more for a cycle, never more than the data need.
    level_and_steps = 1 + len(kept)
    by_degree = {degree: models.leading(level_and_steps + degree) for degree in range(1, most + 1)}
    degree = min(by_degree, key=lambda d: by_degree[d].bic)
    with_trend = by_degree[degree]
    pvalue = f_pvalue(models.leading(level_and_steps), with_trend)
    if pvalue > settings.drift_pvalue or _one_step_fits_better(
        models.design[:, :level_and_steps], target, with_trend
    ):
        return None
    curve = trends[:fitted, :degree] @ models.coefficients(level_and_steps + degree)[level_and_steps:]
    # The window is the trend's swing, from its lowest to its highest night (or back): all of a line,
    # half a cycle of an oscillation.
    low, high = int(np.argmin(curve)), int(np.argmax(curve))
    first, last = (low, high) if low < high else (high, low)
    magnitude = scale.relative_one(float(curve[last]) + level, float(curve[first]) + level)
    if not practical(magnitude, settings.drift_min_change):
        return None
    span = Span(SpanKind.DRIFT, first, last + 1, magnitude, pvalue, NAME, magnitude / max(last - first, 1))
    fresh = [cp for cp in steps if cp.index >= fitted]
    later = _steps_beyond_the_trend(y, fresh, kept, trends[:, :degree], ~covered, change_settings.max_pvalue)
    return span, sorted([*kept, *later], key=lambda cp: cp.index)


@functools.lru_cache(maxsize=64)
def _trends(nights: int, degree: int) -> Array:
    """Legendre polynomials of degree 1 to `degree` over `nights` evenly spaced nights from -1 to 1, one
    column each: the same for every series of that length."""
    trends = np.asarray(legendre.legvander(np.linspace(-1.0, 1.0, nights), degree)[:, 1:], dtype=np.float64)
    trends.flags.writeable = False
    return trends


def _steps_beyond_the_trend(
    y: Array, fresh: list[ChangePoint], kept: list[ChangePoint], trend: Array, use: BoolArray, pvalue: float
) -> list[ChangePoint]:
    """The change points among the newest nights (left out of the trend's fit) that stand out, at the
    change-point pass's own level, from the trend carried on through them: on a drift, a fresh "step" is
    often its next few nights."""
    later = []
    for cp in fresh:
        models = LeastSquares(_design([cp.index, *(step.index for step in kept)], trend)[use], y[use])
        if f_pvalue(models.without(1), models.leading(models.columns)) <= pvalue:
            later.append(cp)
    return later


def _steps_not_a_line(y: Array, steps: list[ChangePoint], pvalue: float) -> list[ChangePoint]:
    """The change points that are steps rather than a stretch of trend, each judged over its two
    neighbouring segments: a short or young drift is cut into a "step" wherever the split fits best (and
    `_one_step_fits_better` then sides with it), which the nightly verdict blames on a commit range. One
    goes when a line explains its segments at least as well as the step does, by Schwarz's criterion (a
    step costs two parameters, its night and its size, as in `_one_step_fits_better`: where the two fit
    about as well, the line wins), and the step is not significant on top of the line either (at the
    pass's own max_pvalue), so that a real step on a drift stays, as in `_drift`. A parabola would also
    take the bend of a cycle turning, but it bends to the few newest nights of a fresh step as well."""
    bounds = [0, *(cp.index for cp in steps), y.size]
    kept = []
    for cp, fits in zip(steps, step_or_line(y, bounds, _LINE_MIN_NIGHTS), strict=True):
        if fits is None:
            kept.append(cp)
            continue
        stepped, line, both = fits
        size = stepped.size
        step_bic = size * math.log(max(stepped.rss, 1e-300) / size) + 3 * math.log(size)
        if step_bic < line.bic or f_pvalue(line, both) <= pvalue:
            kept.append(cp)
    return kept


def _design(steps: Sequence[int], trend: Array) -> Array:
    """Columns of a level, a step at each of the nights `steps` and the trend's (one per degree), one row
    per night."""
    nights, degree = trend.shape
    design = np.empty((nights, 1 + len(steps) + degree))
    design[:, 0] = 1.0
    design[:, 1 : 1 + len(steps)] = np.arange(nights)[:, None] >= np.array(steps, dtype=np.int64)
    design[:, 1 + len(steps) :] = trend
    return design


def _one_step_fits_better(base: Array, target: Array, trend: Fit) -> bool:
    """Whether one more step, wherever it fits best, explains the series better than the trend does, by
    Schwarz's criterion (a step costs two parameters, its night and its size; the trend one per degree):
    then the retrospective pass missed a step, and it is no drift. Where the two fit about as well (a short
    or noisy linear drift), the line wins: a step there would be blamed on a commit range."""
    size = target.size
    if size < 10:
        return False
    residual = target - base @ np.linalg.lstsq(base, target, rcond=None)[0]
    # For a single step added to a fit, the RSS drops by (sum of the residuals after tau)^2 scaled by the
    # step column's own residual variance; with the base holding a constant this is the two-sample form.
    after = np.cumsum(residual[::-1])[::-1]
    taus = np.arange(5, size - 5)
    counts = size - taus
    gain = after[taus] ** 2 * size / (counts * (size - counts))
    step_rss = max(float(residual @ residual - gain.max()), 1e-300)
    step_bic = size * math.log(step_rss / size) + (base.shape[1] + 2) * math.log(size)
    return step_bic < trend.bic
