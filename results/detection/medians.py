"""Medians of the short arrays detection works on, equal bit for bit to np.median's, without its per-call
overhead: np.median of a year of nights costs about 15 us, a partition about 4, and a retrospective pass
takes half a dozen of them per series (the series, its first differences, the trend's level).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection_numerics.py -k median
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]

MEDIAN_VARIANCE = math.pi / 2
"""Variance of the median of n normal values is about (pi/2) sigma^2 / n (asymptotic relative efficiency
2/pi of the median against the mean)."""


def median(x: Array) -> float:
    """np.median of a non-empty one-dimensional array of finite numbers: the middle value, or the mean of
    the two middle values (their sum halved, as np.mean takes it)."""
    half = x.size // 2
    if x.size % 2:
        return float(np.partition(x, half)[half])
    ordered = np.partition(x, (half - 1, half))
    return float((ordered[half - 1] + ordered[half]) / 2)


def row_medians(rows: Array) -> Array:
    """np.median(rows, axis=1) for short rows, where sorting them all at once beats its per-call overhead."""
    ordered = np.sort(rows, axis=1)
    k = rows.shape[1]
    return (ordered[:, (k - 1) // 2] + ordered[:, k // 2]) / 2


def sliding_medians(x: Array, k: int) -> Array:
    """The median of every k consecutive values of x (x.size - k + 1 of them): `row_medians` of x's sliding
    windows, a strided view made directly (sliding_window_view's argument checks cost as much as its sort)."""
    step = x.strides[0]
    return row_medians(np.lib.stride_tricks.as_strided(x, (x.size - k + 1, k), (step, step), writeable=False))
