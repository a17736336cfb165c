"""The retrospective pass lets the evidence decide (results/detection/edivisive.py, episodes.py, despike.py):
a level of two nights far out of a quiet series' noise is a segment of its own while the same layout in
noise is not; slow nights that come one by one and scatter are outliers, never a transient or a step and
its way back, while pure noise gets no change point; and a level that came back from a short improvement is
no regression."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from jaxbench.results.detection import DEFAULT_SETTINGS, ChangePoint, Findings, SpanKind, run_detectors
from jaxbench.results.detection.levels import holds_a_level
from jaxbench.results.detection.settings import LevelAgreement
from jaxbench.results.judgement.verdicts import performance_state
from jaxbench.results.judgement.vocabulary import SeriesState


def noisy(nights: int, noise: float, seed: int) -> np.ndarray:
    return 0.2 * np.exp(np.random.default_rng(seed).normal(0, noise, nights))


def found(values: np.ndarray) -> Findings:
    return run_detectors(list(values), higher_is_better=False)


def reported(values: np.ndarray) -> list[int]:
    """The nights detect-series reports a change on: each step, both ends of each transient."""
    result = found(values)
    ends = [end for s in result.spans if s.kind is SpanKind.TRANSIENT for end in (s.start, s.stop)]
    return sorted([cp.index for cp in result.change_points] + ends)


def short_segments(noise: float, seed: int) -> np.ndarray:
    """A drop of 3 % for 3 nights, back for 2, then a 1.8 % drop that stays (a microbenchmark's nightly)."""
    values = noisy(200, noise, seed)
    values[100:103] *= 0.97
    values[105:] *= 0.982
    return values


@pytest.mark.parametrize("seed", range(5))
def test_two_nights_sixty_noise_widths_away_are_a_segment_of_their_own(seed: int) -> None:
    # At 0.05 % noise each change is 36-60 noise widths: three changes, where a fixed minimum of three
    # nights a segment saw one step of 1.8 % at night 100.
    assert reported(short_segments(0.0005, seed)) == [100, 103, 105]


@pytest.mark.parametrize("seed", range(5))
def test_the_same_layout_in_noise_keeps_no_two_night_segment(seed: int) -> None:
    # At 1.5 % noise the two nights back are 2 noise widths above the new level: not a segment of their own
    # (the drops are found as one step, wherever the noise puts it best).
    changes = reported(short_segments(0.015, seed))
    assert 103 not in changes and all(b - a > 3 for a, b in itertools.pairwise(changes))


def test_a_two_night_level_is_refused_where_its_nights_scatter() -> None:
    # A quiet series (0.05 % noise): +20 % and +7 % on two nights are two slow nights, not a level.
    values = noisy(200, 0.0005, 3)
    values[100] *= 1.20
    values[101] *= 1.07
    assert reported(values) == []


@pytest.mark.parametrize("seed", range(8))
def test_clusters_of_slow_nights_are_outliers_not_transients(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = noisy(300, 0.01, seed)
    # Three clusters of 2-3 slow nights, an ordinary night or two between them, each slowed on its own.
    for first in (60, 150, 240):
        nights = first + np.cumsum([0, *rng.integers(2, 4, size=int(rng.integers(1, 3)))])
        values[nights] *= 1 + rng.uniform(0.05, 0.3, nights.size)
    # Two of them next to each other that happen to agree (+18 % and +19 %), beside a third of +16 %.
    values[200], values[201], values[204] = values[200] * 1.18, values[201] * 1.19, values[204] * 1.16
    assert reported(values) == []


def test_a_real_two_night_transient_still_is_one() -> None:
    values = noisy(300, 0.005, 11)
    values[150:152] *= 1.10
    [span] = found(values).spans
    assert (span.kind, span.start, span.stop) == (SpanKind.TRANSIENT, 150, 152)


def test_slow_nights_at_the_end_of_a_series_are_no_new_level() -> None:
    values = noisy(200, 0.01, 5)
    values[-3] *= 1.12
    values[-1] *= 1.26
    assert found(values).change_points == ()


def test_pure_noise_at_3_percent_gets_no_change_point() -> None:
    assert sum(len(found(noisy(365, 0.03, 200 + seed)).change_points) for seed in range(40)) == 0


def _cp(index: int, magnitude: float, before: float, after: float) -> tuple[int, ChangePoint]:
    return index, ChangePoint(index, magnitude, 1e-9, before, after, "e-divisive")


def test_a_level_back_from_a_two_night_improvement_is_no_regression() -> None:
    screen = found(noisy(60, 0.01, 1)).screen
    assert screen is not None
    improvement, back = _cp(40, -0.03, 1.0, 0.97), _cp(42, 0.031, 0.97, 1.0)
    state, _, _ = performance_state(screen, [improvement, back], list(range(60)), False)
    assert state is not SeriesState.REGRESSION
    # Back to 5 % above where it was before the improvement: a regression, dated at its change point.
    worse = _cp(42, 0.082, 0.97, 1.05)
    assert performance_state(screen, [improvement, worse], list(range(60)), False)[:2] == (
        SeriesState.REGRESSION,
        42,
    )
    # And an improvement that lasted longer than a transient: going back is a regression of its own.
    late = _cp(40 + DEFAULT_SETTINGS.episodes.transient_max_nights + 1, 0.031, 0.97, 1.0)
    assert performance_state(screen, [improvement, late], list(range(60)), False)[0] is SeriesState.REGRESSION


@pytest.mark.parametrize(
    ("spread", "noise", "shift", "held"),
    [
        (0.04, 0.01, 0.05, True),  # within 4.5 noise widths
        (0.06, 0.01, 0.05, False),  # beyond them, and beyond a quarter of the shift
        (0.14, 0.01, 0.60, True),  # a large shift varies more: within a quarter of it
        (0.17, 0.01, -0.16, False),  # +8 % and +25 %: two slow nights
    ],
)
def test_holds_a_level(spread: float, noise: float, shift: float, held: bool) -> None:
    assert holds_a_level(spread, noise, shift, LevelAgreement()) is held
    assert holds_a_level(np.array([spread]), noise, np.array([shift]), LevelAgreement()).tolist() == [held]
