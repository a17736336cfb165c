"""Outliers or a level: whether a few nights that moved hold one level away from the level around them, or
are slow nights that scatter, come in clusters or keep returning to one level (a mode of the series). The
transients (episodes.py) keep only blocks that hold a level and are no outliers; a pair of change points
that brackets outliers goes. The criteria: docs/design.md, "Transients and drifts".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection_evidence.py
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import numpy.typing as npt

from jaxbench.results.detection.energy import IndexArray
from jaxbench.results.detection.findings import ChangePoint
from jaxbench.results.detection.levels import holds_a_level
from jaxbench.results.detection.medians import MEDIAN_VARIANCE, median, sliding_medians
from jaxbench.results.detection.settings import EpisodeSettings

Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def without_outlier_blocks(
    y: Array, steps: list[ChangePoint], noise: float, settings: EpisodeSettings
) -> list[ChangePoint]:
    """The change points less each pair that brackets slow nights which scatter: a step and its way back
    within transient_max_nights, the levels on both sides agreeing, whose nights do not hold one level or
    are outliers (`are_outliers`). The transients already refused such a block; its two ends must not come
    back as a regression and its recovery."""
    w = settings.transient_context
    pairs = [
        (first.index, second.index)
        for first, second in itertools.pairwise(steps)
        if second.index - first.index <= settings.transient_max_nights
        and first.magnitude * second.magnitude < 0
        and w <= first.index
        and second.index + w <= y.size
    ]
    if not pairs:
        return steps
    start, stop = (np.array(ends, dtype=np.int64) for ends in zip(*pairs, strict=True))
    before = np.array([median(y[a - w : a]) for a in start])
    after = np.array([median(y[b : b + w]) for b in stop])
    around = (before + after) / 2
    shift = np.array([y[a:b].mean() for a, b in pairs]) - around
    dropping = sides_agree(before, after, shift, noise, w) & (
        ~holds_one_level(y, start, stop - start, around, shift, noise, settings)
        | are_outliers(y, start, stop, around, shift, noise, settings)
    )
    dropped: set[int] = set()
    for (a, b), drop in zip(pairs, dropping.tolist(), strict=True):
        if drop and a not in dropped:  # a chain of such pairs: each block once
            dropped |= {a, b}
    return [cp for cp in steps if cp.index not in dropped]


def holds_one_level(
    y: Array, start: IndexArray, length: IndexArray, around: Array, shift: Array, noise: float,
    settings: EpisodeSettings,
) -> BoolArray:  # fmt: skip
    """Which blocks hold one level away from the level `around` them: every night beyond it on the shift's
    side by transient_agreement of the shift (then the one nearest it is the block's lowest or highest), and
    the nights within one another's reach (`LevelAgreement`)."""
    longest = int(length.max())
    nights = y[np.minimum(start[:, None] + np.arange(longest), y.size - 1)]
    inside = np.arange(longest) < length[:, None]
    low, high = np.where(inside, nights, np.inf).min(axis=1), np.where(inside, nights, -np.inf).max(axis=1)
    same_side = np.where(shift > 0, low > around, (shift < 0) & (high < around))
    nearest = np.where(shift > 0, low - around, around - high)
    agree = nearest >= settings.transient_agreement * np.abs(shift)
    return same_side & agree & holds_a_level(high - low, noise, shift, settings.agreement)


def are_outliers(
    y: Array, start: IndexArray, stop: IndexArray, around: Array, shift: Array, noise: float,
    settings: EpisodeSettings,
) -> BoolArray:  # fmt: skip
    """Which blocks are outliers rather than an event: one of a cluster (`among_outliers`) or a level the
    series keeps returning to (`recurring`)."""
    out = _amongoutliers(y, start, stop, around, shift, noise, settings)
    rest = np.flatnonzero(~out)
    out[rest] = recurring(y, start[rest], stop[rest], shift[rest], noise, settings)
    return out


def recurring(
    y: Array, start: IndexArray, stop: IndexArray, shift: Array, noise: float, settings: EpisodeSettings
) -> BoolArray:
    """Which blocks moved as at least recurring_nights other nights of the series did, each from the median
    of its own neighbourhood (2 transient_context + 1 nights): the same way, beyond outlier_z noise widths,
    and about as far (`LevelAgreement`). Excursions that keep coming back to one level are a mode of the
    series (a second kind of runner, a cache that sometimes misses), not an event."""
    w = settings.transient_context
    if y.size < 2 * w + 1 or start.size == 0:
        return np.zeros(start.size, dtype=bool)
    local = sliding_medians(y, 2 * w + 1)
    excursion = y - local[np.clip(np.arange(y.size) - w, 0, local.size - 1)]
    # One row per block, one column per night.
    far = np.sign(shift)[:, None] * excursion[None, :] > settings.outlier_z * noise
    near = holds_a_level(
        np.abs(excursion[None, :] - shift[:, None]), noise, shift[:, None], settings.agreement
    )
    nights = np.arange(y.size)[None, :]
    inside = (nights >= start[:, None]) & (nights < stop[:, None])
    return np.asarray(np.count_nonzero(far & near & ~inside, axis=1) >= settings.recurring_nights, dtype=bool)


def sides_agree(before: Array, after: Array, shift: Array, noise: float, w: int) -> BoolArray:
    """Whether the levels before and after blocks (medians of w nights) agree, as they do around a block
    that came back: within their medians' noise, or within a quarter of the block's shift."""
    return np.abs(after - before) <= np.maximum(
        3 * noise * math.sqrt(2 * MEDIAN_VARIANCE / w), 0.25 * np.abs(shift)
    )


def _amongoutliers(
    y: Array, start: IndexArray, stop: IndexArray, around: Array, shift: Array, noise: float,
    settings: EpisodeSettings,
) -> BoolArray:  # fmt: skip
    """Which blocks have, among the transient_context nights on either side, a night that went the same
    way on its own (beyond outlier_z noise widths and transient_agreement of the shift): the block is then
    part of a cluster of slow nights that scatter, two of which happened to be next to each other, and the
    level around it did not move for it alone."""
    w = settings.transient_context
    offsets = np.concatenate([np.arange(-w, 0), np.arange(w)])
    nights = np.where(offsets < 0, start[:, None] + offsets, stop[:, None] + offsets)
    context = y[np.clip(nights, 0, y.size - 1)]
    limit = np.maximum(settings.outlier_z * noise, settings.transient_agreement * np.abs(shift))
    beyond = np.sign(shift)[:, None] * (context - around[:, None]) > limit[:, None]
    return np.asarray(beyond.any(axis=1), dtype=bool)
