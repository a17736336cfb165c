"""E-Divisive's split step: in sliding windows of a series, split each segment at the (tau, kappa) that
maximises Matteson & James's energy statistic Q, and split again the two parts while the split is
significant. The statistic and the steps: docs/design.md, "Retrospective change points"; the merge that
follows, results/detection/edivisive.py.

The windows are worked together, every number as the one-window formulas give it, bit for bit: their
distance prefixes as one array, and Q at every (tau, kappa) from each window's first night as one
expression, which also answers every later segment that starts a window; the other segments, a few per
series, one at a time. Why and how fast: docs/design.md, "Detection speed".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection_numerics.py
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

MIN_SIDE = 2
"""Fewest nights on each side of a split: a t-test needs a variance on both sides."""

Significant = Callable[[IndexArray, IndexArray, IndexArray], BoolArray]
"""Whether splitting x[a:kappa] at tau is significant, elementwise over arrays of nights of the series."""


def split_candidates(x: Array, width: int, significant: Significant) -> list[int]:
    """The significant splits in every window of `width` nights (overlapping by half; the last reaches the
    end of the series), sorted and unique: the weak candidates of the merge."""
    width = min(width, x.size)  # a shorter series is one window
    if width < 2 * MIN_SIDE:
        return []
    windows = _windows(x, width)
    best = windows.q.argmax(axis=1)
    if windows.ends[-1] < width:  # a last window that reaches the series' end early: its cells up to there
        best[-1] = np.argmax(np.where(windows.kappas <= windows.ends[-1], windows.q[-1], -np.inf))
    taus, kappas = windows.taus[best].tolist(), windows.kappas[best].tolist()
    ends = windows.ends.tolist()
    first = [(w, 0, taus[w], kappas[w], end) for w, end in enumerate(ends) if end >= 2 * MIN_SIDE]
    return sorted(set(_divide(windows, first, significant)))


@dataclasses.dataclass(frozen=True)
class _Windows:
    """A series' sliding windows, in their own nights, and Q from each one's first night. Its arrays live in
    this thread's scratch memory (`_Scratch`): good until the next series."""

    starts: IndexArray
    """First night of each window in the series."""
    ends: IndexArray
    """Nights in each window: `width`, but for a last one that reaches the series' end."""
    prefixes: Array
    """`_distance_prefixes` of the windows, (windows, width + 1, width + 1); the last one's nights past the
    series' end repeat its last night and never enter a Q it looks at."""
    taus: IndexArray
    kappas: IndexArray
    """Every (tau, kappa) of a window with a = 0 (`_window_cells`)."""
    q: Array
    """Q at those cells, one row per window."""


_Split = tuple[int, int, int, int, int]
"""(window, a, tau, kappa, b): a segment [a, b) of a window and its best split, in the window's nights."""


def _windows(x: Array, width: int) -> _Windows:
    """The windows of x, every width // 2 nights up to the first that reaches the end of the series."""
    step = max(width // 2, 1)
    starts = np.arange(-(-(x.size - width) // step) + 1) * step
    nights = np.minimum(starts[:, None] + np.arange(width), x.size - 1)
    by_column = _distance_prefixes(x[nights])
    taus, kappas, _ = _window_cells(width)
    ends = np.minimum(starts + width, x.size) - starts
    return _Windows(starts, ends, by_column.transpose(1, 2, 0), taus, kappas, _q(by_column))


def _divide(windows: _Windows, splits: list[_Split], significant: Significant) -> list[int]:
    """E-Divisive's recursion in every window: keep each significant split and split the two segments it
    leaves at their best tau, until no split is significant. The splits of one level are tested together."""
    found: list[int] = []
    while splits:
        window, a, tau, kappa, _ = np.array(splits).T
        offset = windows.starts[window]
        holds = significant(offset + a, offset + tau, offset + kappa).tolist()
        kept = [split for split, held in zip(splits, holds, strict=True) if held]
        found += [int(windows.starts[w]) + tau for w, _, tau, _, _ in kept]
        splits = [
            (w, start, *best, stop)
            for w, a, tau, _, b in kept
            for start, stop in ((a, tau), (tau, b))
            if (best := _best_split_in(windows, w, start, stop)) is not None
        ]
    return found


def _best_split_in(windows: _Windows, w: int, a: int, b: int) -> tuple[int, int] | None:
    """The best split of segment [a, b) of window w, or None if none fits: a segment that starts the
    window has the window's own Q, up to kappa = b."""
    if b - a < 2 * MIN_SIDE:
        return None
    if a == 0:
        k = int(np.argmax(np.where(windows.kappas <= b, windows.q[w], -np.inf)))
        return int(windows.taus[k]), int(windows.kappas[k])
    return _best_split(windows.prefixes[w], a, b)


def _distance_prefixes(windows: Array) -> Array:
    """P[j, w, i] = sum of |x[r] - x[c]| over r < i, c < j of windows[w] (rows of equal length), any block
    sum in four look-ups; laid out column first, in this thread's scratch memory (`_Scratch`).

    The running sums go down the rows, then along the columns, as a one-window prefix's
    cumsum(axis=0).cumsum(axis=1) would: the same additions in the same order, but each as one vector
    addition per row (column) over every window at once, where cumsum adds one number at a time."""
    count, width = windows.shape
    rows = _SCRATCH.array("distances", (width, count, width))  # [r, window, c]
    np.abs(np.subtract(windows.T[:, :, None], windows[None, :, :], out=rows), out=rows)
    for above, row in itertools.pairwise(rows):
        row += above
    columns = _SCRATCH.array("prefixes", (width + 1, count, width + 1))  # [j, window, i]
    columns[0] = 0.0
    columns[1:, :, 0] = 0.0
    columns[1:, :, 1:] = rows.transpose(2, 1, 0)
    for before, column in itertools.pairwise(columns[1:]):
        column += before
    return columns


@functools.cache
def _q_coefficients(length: int) -> tuple[Array, Array, Array, Array]:
    """Coefficients of Q(tau, kappa) for a segment of `length` nights, as (T, T) matrices over
    tau = a + 2 + t and kappa = a + 4 + k, so n = t + 2, m = k - t + 2; cells with m < 2 are masked.

    Q = n m / (n + m) E = 2/(n+m) XY - m/((n+m)(n-1)) XX - n/((n+m)(m-1)) YY, where XX and YY count each
    unordered pair twice (ordered-pair block sums)."""
    size = length - 2 * MIN_SIDE + 1
    t = np.arange(size, dtype=np.float64)[:, None]
    k = np.arange(size, dtype=np.float64)[None, :]
    n = t + MIN_SIDE
    m = np.maximum(k - t + MIN_SIDE, MIN_SIDE)  # masked cells get any finite value
    mask = np.where(k >= t, 0.0, -np.inf)
    return 2 / (n + m), m / ((n + m) * (n - 1)), n / ((n + m) * (m - 1)), mask


@functools.cache
def _window_cells(width: int) -> tuple[IndexArray, IndexArray, Array]:
    """Every (tau, kappa) of a window's segment from its first night, 2 <= tau, tau + 2 <= kappa <= width,
    in (tau, kappa) order, and Q's three coefficients there (`_q_coefficients`)."""
    t, k = np.triu_indices(width - 2 * MIN_SIDE + 1)
    return t + MIN_SIDE, k + 2 * MIN_SIDE, np.stack([c[t, k] for c in _q_coefficients(width)[:3]])


def _q(by_column: Array) -> Array:
    """Q at every cell of `_window_cells` of each window, with a = 0, from the windows' `_distance_prefixes`
    (P[kappa, window, tau]), in scratch memory (`_Scratch`).

    There the row P[a, :] is zero: XX is P[tau, tau] and XY is P[tau, kappa] - P[tau, tau], the same
    numbers that `_best_split` computes by adding and subtracting those zeros, hence the same maxima:
    Q = c_xy (P[tau, kappa] - P[tau, tau]) - c_xx P[tau, tau] - c_yy (P[kappa, kappa] - 2 P[tau, kappa] +
    P[tau, tau]), each operation as written, in place."""
    count, width = by_column.shape[1], by_column.shape[0] - 1
    taus, kappas, (c_xy, c_xx, c_yy) = _window_cells(width)
    q, d_tau, yy, twice = (_SCRATCH.array(name, (count, taus.size)) for name in ("q", "d_tau", "yy", "twice"))
    diagonal = np.diagonal(by_column, axis1=0, axis2=2).copy()  # P[i, w, i]: [window, i]
    np.take(diagonal, taus, axis=1, out=d_tau)
    np.take(diagonal, kappas, axis=1, out=yy)
    np.take(by_column, _block_cells(count, width), out=q)  # P[tau, kappa]
    np.subtract(yy, np.multiply(q, 2, out=twice), out=yy)
    yy += d_tau
    q -= d_tau
    q *= c_xy
    d_tau *= c_xx
    q -= d_tau
    yy *= c_yy
    q -= yy
    return q


@functools.lru_cache(maxsize=16)
def _block_cells(count: int, width: int) -> IndexArray:
    """Where P[kappa, w, tau] of every window w and cell of `_window_cells` lies in `_distance_prefixes`."""
    taus, kappas, _ = _window_cells(width)
    return (kappas * count + np.arange(count)[:, None]) * (width + 1) + taus


class _Scratch(threading.local):
    """Arrays the split step reuses from one series to the next, one set per thread.

    Its largest (the windows' distances and their prefixes, Q) take about 1 MB; allocated afresh for each
    series, that memory goes back to the system in between (the allocator trims the heap's free top) and
    faults in again, page by page: some 200 page faults per series, a third of the whole pass's time."""

    def __init__(self) -> None:
        self.arrays: dict[str, Array] = {}

    def array(self, name: str, shape: tuple[int, ...]) -> Array:
        """An uninitialised array of `shape`, the same memory as the last one of that name if it fits."""
        array = self.arrays.get(name)
        if array is None or array.shape != shape:
            array = self.arrays[name] = np.empty(shape)
        return array


_SCRATCH = _Scratch()


def _best_split(prefix: Array, a: int, b: int) -> tuple[int, int] | None:
    """The (tau, kappa) maximising Q over a + 2 <= tau, tau + 2 <= kappa <= b, or None if none fits."""
    if b - a < 2 * MIN_SIDE:
        return None
    c_xy, c_xx, c_yy, mask = _q_coefficients(b - a)
    diag = np.diagonal(prefix)
    taus = slice(a + MIN_SIDE, b - MIN_SIDE + 1)  # rows
    kappas = slice(a + 2 * MIN_SIDE, b + 1)  # columns
    d_tau, d_kappa = diag[taus][:, None], diag[kappas][None, :]
    row_a_tau = prefix[a, taus][:, None]
    block = prefix[taus, kappas]  # P[tau, kappa]
    xx = d_tau - 2 * row_a_tau + prefix[a, a]
    yy = d_kappa - 2 * block + d_tau
    xy = block - prefix[a, kappas][None, :] - d_tau + row_a_tau
    q = c_xy * xy - c_xx * xx - c_yy * yy + mask
    t, k = divmod(int(np.argmax(q)), q.shape[1])
    return a + MIN_SIDE + t, a + 2 * MIN_SIDE + k
