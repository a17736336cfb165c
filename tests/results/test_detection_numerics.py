"""The shortcuts that make the retrospective pass fast give the numbers of the plain formulas: medians as
np.median's, bit for bit; least-squares fits from one QR (or in closed form) as lstsq's; and the split
step's batched windows the same candidates as a window-by-window E-Divisive written from the definitions.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection_numerics.py
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from jaxbench.results.detection.energy import split_candidates
from jaxbench.results.detection.least_squares import LeastSquares, step_or_line
from jaxbench.results.detection.medians import median, row_medians, sliding_medians

Array = npt.NDArray[np.float64]
Nights = npt.NDArray[np.int64]
OneSplit = Callable[[int, int, int], bool]
"""Whether splitting x[a:kappa] at tau is significant."""


@pytest.mark.parametrize("size", [1, 2, 3, 8, 9, 364, 365])
def test_median_is_numpys_bit_for_bit(size: int) -> None:
    rng = np.random.default_rng(size)
    for x in (rng.standard_normal(size), np.round(rng.standard_normal(size), 1), np.full(size, 1e300)):
        assert median(x) == float(np.median(x))


@pytest.mark.parametrize("k", [1, 2, 3, 6, 7])
def test_row_and_sliding_medians_are_numpys_bit_for_bit(k: int) -> None:
    x = np.random.default_rng(k).standard_normal(50)
    windows = np.lib.stride_tricks.sliding_window_view(x, k)
    assert np.array_equal(row_medians(windows), np.median(windows, axis=1))
    assert np.array_equal(sliding_medians(x, k), np.median(windows, axis=1))
    strided = x[::2]  # not contiguous
    expected = np.median(np.lib.stride_tricks.sliding_window_view(strided, k), axis=1)
    assert np.array_equal(sliding_medians(strided, k), expected)


def _lstsq_rss(x: Array, y: Array) -> float:
    residual = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
    return float(residual @ residual)


def test_least_squares_fits_are_lstsqs() -> None:
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(80), rng.standard_normal((80, 5)), np.arange(80) >= 30])
    y = 5.0 + x @ rng.standard_normal(x.shape[1]) + 0.1 * rng.standard_normal(80)
    fits = LeastSquares(x, y)
    for m in range(1, x.shape[1] + 1):
        assert fits.leading(m).rss == pytest.approx(_lstsq_rss(x[:, :m], y), rel=1e-10)
        assert fits.leading(m).parameters == m and fits.leading(m).size == 80
        assert fits.coefficients(m) == pytest.approx(np.linalg.lstsq(x[:, :m], y, rcond=None)[0], rel=1e-9)
    for j in range(x.shape[1]):
        assert fits.without(j).rss == pytest.approx(_lstsq_rss(np.delete(x, j, axis=1), y), rel=1e-10)


@pytest.mark.parametrize("rows", [4, 30])
def test_a_degenerate_design_is_fitted_as_lstsq_does(rows: int) -> None:
    """Two equal columns, or no more rows than columns: lstsq's minimum-norm fits, not a QR's."""
    rng = np.random.default_rng(1)
    base = rng.standard_normal((rows, 3))
    x = np.column_stack([base, base[:, 1]]) if rows > 4 else np.column_stack([base, base[:, :2]])
    y = rng.standard_normal(rows)
    fits = LeastSquares(x, y)
    for m in range(1, x.shape[1] + 1):
        assert fits.leading(m).rss == pytest.approx(_lstsq_rss(x[:, :m], y), abs=1e-12)
    assert fits.without(0).rss == pytest.approx(_lstsq_rss(x[:, 1:], y), abs=1e-12)


@pytest.mark.parametrize(("level", "noise"), [(0.0, 0.01), (13.8, 0.01), (1e6, 1e4)])
def test_the_step_or_line_fits_in_closed_form_are_lstsqs(level: float, noise: float) -> None:
    rng = np.random.default_rng(2)
    y = level + noise * (rng.standard_normal(200) + np.linspace(0, 3, 200) + 4 * (np.arange(200) >= 120))
    bounds = [0, 45, 120, 197, 200]  # the last change point leaves 3 nights: its 80 are still judged
    for k, found in enumerate(step_or_line(y, bounds, shortest=10)):
        assert found is not None
        first, split, stop = bounds[k : k + 3]
        segment = y[first:stop]
        step = (np.arange(first, stop) >= split).astype(np.float64)
        line = np.linspace(-1.0, 1.0, stop - first)
        one = np.ones(stop - first)
        expected = [np.column_stack(c) for c in ([one, step], [one, line], [one, line, step])]
        for fit, x in zip(found, expected, strict=True):
            assert fit.rss == pytest.approx(_lstsq_rss(x, segment), rel=1e-9)
            assert fit.parameters == x.shape[1] and fit.size == stop - first


def test_the_step_or_line_fits_skip_short_segments() -> None:
    y = np.arange(30.0) ** 2
    first, second = step_or_line(y, [0, 1, 2, 30], shortest=10)
    assert first is None and second is not None
    assert step_or_line(y[:3], [0, 1, 2, 3], shortest=0) == [None, None]  # 2 nights: never


def _q_by_definition(w: Array, a: int, tau: int, kappa: int) -> float:
    """Matteson & James's Q(tau, kappa) of segment [a, ...) of w, from every pair of nights."""
    x, y = w[a:tau], w[tau:kappa]
    n, m = x.size, y.size
    xy = np.abs(x[:, None] - y[None, :]).sum()
    xx = np.abs(x[:, None] - x[None, :]).sum() / (n * (n - 1))
    yy = np.abs(y[:, None] - y[None, :]).sum() / (m * (m - 1))
    return float(n * m / (n + m) * (2 * xy / (n * m) - xx - yy))


def _split_by_definition(x: Array, width: int, significant: OneSplit) -> list[int]:
    """E-Divisive window after window, as the papers state it (`significant` judges one split)."""
    found: set[int] = set()
    start = 0
    while True:
        stop = min(start + width, x.size)
        w = x[start:stop]
        pending = [(0, w.size)]
        while pending:
            a, b = pending.pop()
            cells = [(t, k) for t in range(a + 2, b - 1) for k in range(t + 2, b + 1)]
            if not cells:
                continue
            tau, kappa = max(cells, key=lambda c: _q_by_definition(w, a, *c))
            if significant(start + a, start + tau, start + kappa):
                found.add(start + tau)
                pending += [(a, tau), (tau, b)]
        if stop == x.size:
            return sorted(found)
        start += max(width // 2, 1)


def _t_test(x: Array) -> OneSplit:
    """A pooled two-sample t statistic beyond 4."""

    def significant(a: int, tau: int, kappa: int) -> bool:
        left, right = x[a:tau], x[tau:kappa]
        pooled = (((left - left.mean()) ** 2).sum() + ((right - right.mean()) ** 2).sum()) / (
            left.size + right.size - 2
        )
        return bool(abs(right.mean() - left.mean()) > 4 * np.sqrt(pooled * (1 / left.size + 1 / right.size)))

    return significant


@pytest.mark.parametrize(
    ("seed", "nights", "width"), [(0, 61, 12), (1, 40, 12), (2, 9, 12), (3, 30, 7), (4, 25, 25), (5, 120, 50)]
)
def test_the_batched_windows_split_as_one_window_at_a_time(seed: int, nights: int, width: int) -> None:
    """Steps and noise, each window's recursion down to segments of 8 nights, and as a t-test decides; the
    last window shorter, or the series shorter than a window. (Below 8 nights two splits of a segment can
    have the same Q, which the two ways of summing then order by their rounding.)"""
    rng = np.random.default_rng(seed)
    nights_ = np.arange(nights)
    x = rng.standard_normal(nights) + 3 * (nights_ >= nights // 3) - 2 * (nights_ >= nights // 2)
    long_enough: OneSplit = lambda a, tau, kappa: kappa - a >= 8  # noqa: E731
    for test in (long_enough, _t_test(x)):
        assert split_candidates(x, width, _elementwise(test)) == _split_by_definition(x, width, test)


def _elementwise(test: OneSplit) -> Callable[[Nights, Nights, Nights], npt.NDArray[np.bool_]]:
    def significant(a: Nights, tau: Nights, kappa: Nights) -> npt.NDArray[np.bool_]:
        return np.array(
            [test(*split) for split in zip(a.tolist(), tau.tolist(), kappa.tolist(), strict=True)]
        )

    return significant


def test_series_of_other_lengths_in_between_change_nothing() -> None:
    """The split step reuses its memory from one series to the next (energy._Scratch)."""
    rng = np.random.default_rng(5)
    series = [rng.standard_normal(n) + (np.arange(n) >= n // 2) for n in (365, 90, 365, 12, 200)]

    def significant(a: Nights, tau: Nights, kappa: Nights) -> npt.NDArray[np.bool_]:
        return (kappa - a) > 30

    first = [split_candidates(x, 50, significant) for x in series]
    again = [split_candidates(x, 50, significant) for x in reversed(series)]
    assert first == again[::-1]
