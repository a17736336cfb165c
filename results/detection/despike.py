"""One-night spikes out of a series before the retrospective pass and the trend fit look at it: a lone slow
night is no change, and neither a t-test nor a least-squares fit should see it as one.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection.py -k spike
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from jaxbench.results.detection.medians import median, row_medians, sliding_medians
from jaxbench.results.detection.scale import Scale
from jaxbench.results.detection.settings import MAD_TO_SIGMA, ChangePointSettings

Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


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
        out[h : n - h][spikes] = middle[spikes]
    # Nights near the ends, with fewer than h neighbours on a side: the first and last night are judged by
    # one side alone. That cannot tell a spike from the start of a step, but a change needs nights on both
    # sides (min_points_after, _MIN_SIDE), so a lone end night could only ever inflate a variance. Few
    # nights, tiny lists: plain Python is faster here than numpy.
    values = x.tolist()
    for i in sorted({*range(min(h, n)), *range(max(n - h, 0), n)}):
        left, right = values[max(i - h, 0) : i], values[i + 1 : i + 1 + h]
        if left or right:
            out[i] = _despiked_night(values[i], left or right, right or left, noise, settings, scale)
    return out


def night_noise(x: Array) -> float:
    """One night's standard deviation from the median absolute first difference: a level shift moves one
    difference only, and a spike two, so neither inflates it (the difference of two N(0, s^2) nights has
    sd sqrt(2) s)."""
    return MAD_TO_SIGMA * median(np.abs(x[1:] - x[:-1])) / math.sqrt(2) if x.size > 1 else 0.0


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
