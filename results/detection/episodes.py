"""Findings over a stretch of nights: transients and drifts, which a pass that only knows steps cuts into
change points (a transient into two; a slow drift into a chain, each blamed on an unrelated commit range).

A transient is a short block far from the agreeing levels on both its sides, scored for every block length
at once; a change point a line explains as well as its step is a stretch of a short drift; a drift is a
low-degree polynomial trend under the steps that an F-test says is needed. A drift has no night it began,
so it is shown and never bisected. The criteria: docs/design.md, "Transients and drifts".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_episodes.py
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from numpy.polynomial import legendre
from scipy import stats

from results.detection.despike import night_noise
from results.detection.findings import ChangePoint, Span, SpanKind
from results.detection.scale import Scale, practical
from results.detection.settings import ChangePointSettings, EpisodeSettings

Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

NAME = "episodes"

_MEDIAN_VARIANCE = math.pi / 2
"""Variance of the median of n normal values, times n / sigma^2."""

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
    return max(night_noise(y), scale.margin(float(np.median(y)), settings.spike_floor))


def _explains(span: Span, index: int) -> bool:
    """Whether a change point at `index` is one of this transient's ends (or inside it)."""
    return span.start - _END_TOLERANCE <= index <= span.stop + _END_TOLERANCE


def _transients(y: Array, noise: float, settings: EpisodeSettings, scale: Scale) -> list[Span]:
    w = settings.transient_context
    n = y.size
    sums = np.concatenate([[0.0], np.cumsum(y)])
    medians = np.median(np.lib.stride_tricks.sliding_window_view(y, w), axis=1)  # medians[i]: y[i:i + w]
    candidates: list[Candidate] = []
    tested = 0
    for length in range(2, settings.transient_max_nights + 1):
        starts = np.arange(w, n - length - w + 1)
        if starts.size == 0:
            continue
        tested += starts.size
        before, after = medians[starts - w], medians[starts + length]
        around = (before + after) / 2
        level = (sums[starts + length] - sums[starts]) / length
        shift = level - around
        smallest = scale.margin(around, settings.transient_min_change)
        # The two sides agree within their medians' noise, or within a quarter of the shift.
        sides = np.abs(after - before) <= np.maximum(
            3 * noise * math.sqrt(2 * _MEDIAN_VARIANCE / w), 0.25 * np.abs(shift)
        )
        z = np.abs(shift) / (noise * math.sqrt(1 / length + _MEDIAN_VARIANCE / (2 * w)))
        nights = np.lib.stride_tricks.sliding_window_view(y, length)[starts] - around[:, None]
        same_side = np.all(nights * np.sign(shift)[:, None] > 0, axis=1)
        agree = np.abs(nights).min(axis=1) >= settings.transient_agreement * np.abs(shift)
        found = sides & (z >= settings.transient_z) & (np.abs(shift) >= smallest) & same_side & agree
        for i in np.flatnonzero(found):
            candidates.append((float(z[i]), int(starts[i]), length, float(level[i]), float(around[i])))
    chosen: list[Span] = []
    taken = np.zeros(n, dtype=bool)
    # The strongest block of each group of overlapping ones, then oldest first: a block measured against
    # nights of an earlier transient is skipped (between a transient and a later step, the normal nights
    # look like a transient the other way).
    for score, start, length, mean, ambient in sorted(_strongest_of_overlaps(candidates), key=lambda c: c[1]):
        if taken[max(start - w, 0) : start + length + w].any():
            continue
        taken[start : start + length] = True
        pvalue = min(1.0, 2 * float(stats.norm.sf(score)) * tested)  # Bonferroni over every block scored
        magnitude = scale.relative_one(mean, ambient)
        chosen.append(Span(SpanKind.TRANSIENT, start, start + length, magnitude, pvalue, NAME))
    return sorted(chosen, key=lambda s: s.start)


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
    trends = np.asarray(
        legendre.legvander(np.linspace(-1.0, 1.0, y.size), settings.drift_max_degree)[:, 1:], dtype=np.float64
    )
    level = float(np.median(y[:fitted]))
    step_threshold = scale.margin(level, change_settings.min_magnitude)
    kept = [cp for cp in steps if 0 < cp.index < fitted]

    def design(chosen: list[ChangePoint], degree: int) -> Array:
        return _design(trends[:fitted, :degree], chosen)[use]

    target = y[:fitted][use]
    most = settings.drift_max_degree
    while kept:  # backward elimination of the steps the most flexible trend explains
        full = _Fit(design(kept, most), target)
        worst, worst_p = None, -1.0
        for i in range(len(kept)):
            reduced = _Fit(design(kept[:i] + kept[i + 1 :], most), target)
            p = _f_pvalue(reduced, full)
            if abs(full.coefficients[1 + most + i]) < step_threshold:
                p = 1.0
            if p > worst_p:
                worst, worst_p = i, p
        if worst is None or worst_p <= change_settings.max_pvalue:
            break
        kept.pop(worst)
    # The trend's degree by BIC: a line for a linear drift, more for a cycle, never more than the data need.
    fits = {degree: _Fit(design(kept, degree), target) for degree in range(1, most + 1)}
    degree = min(fits, key=lambda d: fits[d].bic)
    with_trend = fits[degree]
    without = _Fit(design(kept, 0), target)
    pvalue = _f_pvalue(without, with_trend)
    if pvalue > settings.drift_pvalue or _one_step_fits_better(design(kept, 0), target, with_trend):
        return None
    curve = trends[:fitted, :degree] @ with_trend.coefficients[1 : 1 + degree]
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


def _steps_beyond_the_trend(
    y: Array, fresh: list[ChangePoint], kept: list[ChangePoint], trend: Array, use: BoolArray, pvalue: float
) -> list[ChangePoint]:
    """The change points among the newest nights (left out of the trend's fit) that stand out, at the
    change-point pass's own level, from the trend carried on through them: on a drift, a fresh "step" is
    often its next few nights."""
    if not fresh:
        return []
    without = _Fit(_design(trend, kept)[use], y[use])
    return [
        cp for cp in fresh if _f_pvalue(without, _Fit(_design(trend, [*kept, cp])[use], y[use])) <= pvalue
    ]


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
    for k, cp in enumerate(steps):
        first, stop = bounds[k], bounds[k + 2]
        size = stop - first
        if size < _LINE_MIN_NIGHTS:
            kept.append(cp)
            continue
        segment = y[first:stop]
        step = (np.arange(first, stop) >= cp.index).astype(np.float64)
        stepped = _Fit(np.column_stack([np.ones(size), step]), segment)
        step_bic = size * math.log(max(stepped.rss, 1e-300) / size) + 3 * math.log(size)
        trend = np.column_stack([np.ones(size), np.linspace(-1.0, 1.0, size)])
        line = _Fit(trend, segment)
        if step_bic < line.bic or _f_pvalue(line, _Fit(np.column_stack([trend, step]), segment)) <= pvalue:
            kept.append(cp)
    return kept


def _design(trend: Array, steps: Sequence[ChangePoint]) -> Array:
    """Columns of a level, the trend's (one per degree) and a step per change point, one row per night."""
    nights = np.arange(trend.shape[0])
    steps_columns = [(nights >= cp.index).astype(np.float64) for cp in steps]
    return np.column_stack([np.ones(trend.shape[0]), *trend.T, *steps_columns])


def _one_step_fits_better(base: Array, target: Array, trend: _Fit) -> bool:
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


class _Fit:
    def __init__(self, x: Array, y: Array) -> None:
        self.coefficients, *_ = np.linalg.lstsq(x, y, rcond=None)
        residual = y - x @ self.coefficients
        self.rss = float(residual @ residual)
        self.parameters = x.shape[1]
        self.size = y.size

    @property
    def bic(self) -> float:
        """Schwarz's criterion for a Gaussian fit: lower is better."""
        return self.size * math.log(max(self.rss, 1e-300) / self.size) + self.parameters * math.log(self.size)


def _f_pvalue(reduced: _Fit, full: _Fit) -> float:
    """The F-test of the full model's extra columns against the reduced model."""
    extra = full.parameters - reduced.parameters
    df = full.size - full.parameters
    if extra <= 0 or df <= 0:
        return 1.0
    if full.rss <= 0:
        return 0.0 if reduced.rss > 0 else 1.0
    f = ((reduced.rss - full.rss) / extra) / (full.rss / df)
    return float(stats.f.sf(max(f, 0.0), extra, df))
