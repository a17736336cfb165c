"""One-night spikes out of a series before the retrospective pass and the trend fit look at it: a lone slow
night is no change, and neither a t-test nor a least-squares fit should see it as one.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection.py -k spike
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from jaxbench.results.detection.levels import holds_a_level
from jaxbench.results.detection.medians import median, row_medians, sliding_medians
from jaxbench.results.detection.scale import Scale
from jaxbench.results.detection.settings import MAD_TO_SIGMA, ChangePointSettings

Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


END_NEIGHBOURS = 3
"""Nights beside the first and the last night that judge them (one side only): a new level's third night
already agrees with the two before it."""


def despike(x: Array, settings: ChangePointSettings, scale: Scale = Scale.LINEAR) -> Array:
    """A copy of x (on `scale`) with every isolated one-night spike replaced by the median of its
    neighbours."""
    h = settings.spike_neighbours
    n = x.size
    out = x.copy()
    noise = night_noise(x)
    # Interior nights have h neighbours on each side: one vectorised pass. The medians of each run of h
    # nights serve twice: as the left neighbours of the night after the run, the right of the one before.
    if n >= 2 * h + 1:
        windows = np.lib.stride_tricks.sliding_window_view(x, 2 * h + 1)
        runs = sliding_medians(x, h)  # runs[i]: the median of x[i:i + h]
        middle = row_medians(np.concatenate([windows[:, :h], windows[:, h + 1 :]], axis=1))
        spikes = _spikes(windows[:, h], runs[: n - 2 * h], runs[h + 1 :], middle, noise, settings, scale)
        spikes &= ~_short_level(windows[:, h], windows[:, h - 1], windows[:, h + 1], middle, noise, settings)
        out[h : n - h][spikes] = middle[spikes]
    # Nights near the ends, with fewer than h neighbours on a side: the first and last night are judged by
    # one side alone. That cannot tell a spike from the start of a step, but a change needs nights on both
    # sides (min_points_after, _MIN_SIDE), so a lone end night could only ever inflate a variance. Few
    # nights, tiny lists: plain Python is faster here than numpy.
    values = x.tolist()
    for i in sorted({*range(min(h, n)), *range(max(n - h, 0), n)}):
        left, right = values[max(i - h, 0) : i], values[i + 1 : i + 1 + h]
        # The first and the last night are judged by their nearest END_NEIGHBOURS alone: the last night of
        # a new level three nights old would otherwise be judged against older nights, and "despiked".
        if not right:
            left = left[-END_NEIGHBOURS:]
        if not left:
            right = right[:END_NEIGHBOURS]
        if left or right:
            kept = _despiked_night(values[i], left or right, right or left, noise, settings, scale)
            if kept != values[i]:
                around = [values[i - 1] if i else math.nan, values[i + 1] if i + 1 < n else math.nan]
                centre, before, after, middle = np.array(
                    [[values[i]], *([v] for v in around), [_median_of(left + right)]]
                )
                kept = values[i] if _short_level(centre, before, after, middle, noise, settings)[0] else kept
            out[i] = kept
    return out


def night_noise(x: Array) -> float:
    """One night's standard deviation from the median absolute first difference: a level shift moves one
    difference only, and a spike two, so neither inflates it (the difference of two N(0, s^2) nights has
    sd sqrt(2) s)."""
    return MAD_TO_SIGMA * median(np.abs(x[1:] - x[:-1])) / math.sqrt(2) if x.size > 1 else 0.0


def _short_level(
    centre: Array, before: Array, after: Array, middle: Array, noise: float, settings: ChangePointSettings
) -> BoolArray:
    """Which centres are no lone spike, holding one level (settings.LevelAgreement) with the nights next to
    them: with both (inside a block of three or more, which the retrospective pass judges as a level), or
    with one where they are short_segment_z noise widths from their neighbours' `middle` (a segment of two
    nights that the evidence may carry: ChangePointSettings.short_segment_z). `before` or `after` may be
    NaN where a night has no neighbour on that side."""
    shift = centre - middle
    with np.errstate(invalid="ignore"):
        held_before = holds_a_level(np.abs(centre - before), noise, shift, settings.agreement)
        held_after = holds_a_level(np.abs(centre - after), noise, shift, settings.agreement)
    far = np.abs(shift) >= settings.short_segment_z * noise
    return (held_before & held_after) | (far & (held_before | held_after))


def _spikes(
    centre: Array,
    left: Array,
    right: Array,
    middle: Array,
    noise: float,
    settings: ChangePointSettings,
    scale: Scale,
) -> BoolArray:
    """Which centres are far from both `left` and `right`, the medians of their neighbours on each side,
    and on the same side of both; `middle` (the median of all their neighbours) sets the noise floor."""
    from_left = centre - left
    from_right = centre - right
    limit = settings.spike_threshold * np.maximum(noise, scale.margin(middle, settings.spike_floor))
    return (np.abs(from_left) > limit) & (np.abs(from_right) > limit) & (from_left * from_right > 0)


def _despiked_night(
    centre: float,
    left: list[float],
    right: list[float],
    noise: float,
    settings: ChangePointSettings,
    scale: Scale,
) -> float:
    """_spikes for one night: the median of its neighbours if it is a spike, else the night itself."""
    middle = _median_of(left + right) if left is not right else _median_of(left)
    limit = settings.spike_threshold * max(noise, scale.margin(float(middle), settings.spike_floor))
    from_left, from_right = centre - _median_of(left), centre - _median_of(right)
    far = abs(from_left) > limit and abs(from_right) > limit and from_left * from_right > 0
    return middle if far else centre


def _median_of(values: list[float]) -> float:
    """statistics.median of a few floats, without its type handling (a dozen calls per series)."""
    ordered = sorted(values)
    half = len(ordered) // 2
    return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2
