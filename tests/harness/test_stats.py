"""Step-time statistics and the final-window loss."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jaxbench.harness.measure import stats


def test_summary_of_known_values() -> None:
    summary = stats.summarize([float(x) for x in range(1, 12)])  # 1..11
    assert summary.count == 11
    assert summary.median == 6.0
    assert summary.p10 == pytest.approx(2.0)
    assert summary.p90 == pytest.approx(10.0)
    assert summary.iqr == pytest.approx(8.5 - 3.5)
    assert (summary.min, summary.max, summary.mean) == (1.0, 11.0, 6.0)


def test_median_ignores_one_slow_outlier() -> None:
    times = [0.1] * 20 + [5.0]
    summary = stats.summarize(times)
    assert summary.median == pytest.approx(0.1)
    assert summary.mean > 0.3


def test_matches_numpy_on_random_data() -> None:
    values = np.random.default_rng(0).lognormal(size=101)
    summary = stats.summarize(values.tolist())
    assert summary.median == pytest.approx(np.median(values))
    assert summary.iqr == pytest.approx(np.subtract(*np.percentile(values, [75, 25])))


def test_no_times() -> None:
    with pytest.raises(ValueError, match="no step times"):
        stats.summarize([])


def test_final_window() -> None:
    assert stats.final_window([5.0, 4.0, 3.0, 2.0], 2) == 2.5
    assert stats.final_window([1.0], 10) == 1.0
    assert stats.final_window([1.0, math.nan], 2) is None
    assert stats.final_window([], 3) is None
