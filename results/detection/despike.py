"""One-night spikes out of a series before the retrospective pass and the trend fit look at it: a lone slow
night is no change, and neither a t-test nor a least-squares fit should see it as one.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection.py -k spike
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import numpy.typing as npt

from results.detection.scale import Scale
from results.detection.settings import MAD_TO_SIGMA, ChangePointSettings

Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def despike(x: Array, settings: ChangePointSettings, scale: Scale = Scale.LINEAR) -> Array:
    """A copy of x (on `scale`) with every isolated one-night spike replaced by the median of its
    neighbours."""
    h = settings.spike_neighbours
    n = x.size
    out = x.copy()
    noise = night_noise(x)
    # Interior nights have h neighbours on each side: one vectorised pass.
    if n >= 2 * h + 1:
        windows = np.lib.stride_tricks.sliding_window_view(x, 2 * h + 1)
        spikes, medians = _spikes(windows[:, h], windows[:, :h], windows[:, h + 1 :], noise, settings, scale)
        out[h : n - h][spikes] = medians[spikes]
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
    return MAD_TO_SIGMA * float(np.median(np.abs(np.diff(x)))) / math.sqrt(2) if x.size > 1 else 0.0


def _spikes(
    centre: Array, left: Array, right: Array, noise: float, settings: ChangePointSettings, scale: Scale
) -> tuple[BoolArray, Array]:
    """Which centres are far from the medians of both their left and right neighbours, on the same side;
    and the median of all their neighbours, to replace them with."""
    from_left = centre - _row_medians(left)
    from_right = centre - _row_medians(right)
    median = _row_medians(np.concatenate([left, right], axis=1))
    limit = settings.spike_threshold * np.maximum(noise, scale.margin(median, settings.spike_floor))
    far = (np.abs(from_left) > limit) & (np.abs(from_right) > limit) & (from_left * from_right > 0)
    return far, median


def _row_medians(rows: Array) -> Array:
    """np.median(rows, axis=1) without its per-call overhead, which dominates for short rows."""
    ordered = np.sort(rows, axis=1)
    k = rows.shape[1]
    return (ordered[:, (k - 1) // 2] + ordered[:, k // 2]) / 2


def _despiked_night(
    centre: float,
    left: list[float],
    right: list[float],
    noise: float,
    settings: ChangePointSettings,
    scale: Scale,
) -> float:
    """_spikes for one night: the median of its neighbours if it is a spike, else the night itself."""
    median = statistics.median(left + right) if left is not right else statistics.median(left)
    limit = settings.spike_threshold * max(noise, scale.margin(float(median), settings.spike_floor))
    from_left, from_right = centre - statistics.median(left), centre - statistics.median(right)
    far = abs(from_left) > limit and abs(from_right) > limit and from_left * from_right > 0
    return median if far else centre
