"""The detector seam: detectors found by name, run in the order the settings list them, each seeing what the
ones before it found; today's two (the change-point pass, the nightly screen) as before.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detectors.py
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st

from jaxbench.results.detection import (
    DEFAULT_SETTINGS,
    DETECTORS,
    ChangePoint,
    DetectionSettings,
    Findings,
    Scale,
    ScreenStatus,
    detector,
    find_change_points,
    run_detectors,
    screen_latest,
    segment_start,
)


def stepped(seed: int = 3) -> list[float]:
    """Two months at 1.0, then 20 nights 10 % slower, at 1 % noise: one change point, screened after it."""
    rng = np.random.default_rng(seed)
    level = np.concatenate([np.full(60, 1.0), np.full(20, 1.1)])
    return (level * (1 + 0.01 * rng.standard_normal(level.size))).tolist()


def test_the_default_detectors_are_the_change_points_then_the_screen() -> None:
    assert DEFAULT_SETTINGS.detectors == ("e-divisive", "screen")
    assert set(DEFAULT_SETTINGS.detectors) <= set(DETECTORS)
    assert all(DETECTORS[name].name == name for name in DETECTORS)


def test_run_detectors_is_what_the_two_passes_gave_by_hand() -> None:
    values = stepped()
    found = run_detectors(values, higher_is_better=False)
    by_hand = find_change_points(values)
    start = segment_start([cp.index for cp in by_hand], len(values))
    assert found.change_points == tuple(by_hand) and [cp.index for cp in by_hand] == [60]
    assert found.screen == screen_latest(values, higher_is_better=False, segment_start=start)
    assert found.screen is not None and found.screen.status is ScreenStatus.OK  # judged on the new level
    assert {cp.detector for cp in found.change_points} == {"e-divisive"}


def test_the_order_decides_what_a_detector_sees() -> None:
    """The screen before the change points has no segment to start from: its baseline is the old level
    (after them, the new one)."""
    values = stepped()
    screen_first = dataclasses.replace(DEFAULT_SETTINGS, detectors=("screen", "e-divisive"))
    found = run_detectors(values, higher_is_better=False, settings=screen_first)
    assert found.screen is not None and found.screen.baseline_median == pytest.approx(1.0, abs=0.01)
    after = run_detectors(values, higher_is_better=False).screen
    assert after is not None and after.baseline_median == pytest.approx(1.1, abs=0.01)
    screen_only = run_detectors(
        values, higher_is_better=False, settings=DetectionSettings(detectors=("screen",))
    )
    assert screen_only.change_points == () and screen_only.screen == found.screen
    assert (
        run_detectors(values, higher_is_better=False, settings=DetectionSettings(detectors=())) == Findings()
    )


def test_an_unknown_detector_is_a_clear_error() -> None:
    with pytest.raises(
        ValueError, match=r"detector 'drift' is unknown; expected one of \['e-divisive', 'screen'\]"
    ):
        detector("drift")
    with pytest.raises(ValueError, match="'drift' is unknown"):
        run_detectors([1.0] * 20, higher_is_better=False, settings=DetectionSettings(detectors=("drift",)))


class _EveryThirtyNights:
    """A stand-in for a later detector: a change point every thirty nights from night ten."""

    name = "every-thirty"

    def detect(
        self,
        values: Sequence[float],
        *,
        higher_is_better: bool,
        found: Findings,
        settings: DetectionSettings,
        scale: Scale,
    ) -> Findings:
        assert found.change_points  # it runs after e-divisive, and sees its findings
        return Findings(
            change_points=tuple(
                ChangePoint(i, 0.0, 1.0, 1.0, 1.0, self.name) for i in range(10, len(values), 30)
            )
        )


def test_a_new_detector_is_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(DETECTORS, "every-thirty", _EveryThirtyNights())
    settings = DetectionSettings(detectors=("e-divisive", "every-thirty", "screen"))
    found = run_detectors(stepped(), higher_is_better=False, settings=settings)
    assert [(cp.index, cp.detector) for cp in found.change_points] == [
        (10, "every-thirty"),
        (40, "every-thirty"),
        (60, "e-divisive"),
        (70, "every-thirty"),
    ]  # in time order, each naming its detector
    assert found.screen is not None


# --- any finite value a store can hold --------------------------------------------------------------------

EXTREMES = [5e-324, 1e-300, 1e-30, 1e-9, 1.0, 1e9, 1e30, 1e300, 1.7976931348623157e308]
"""Representable positive values far apart: ratios up to ~1e632, beyond any float."""

_positive = st.one_of(
    st.sampled_from(EXTREMES),
    st.floats(min_value=5e-324, max_value=1.7976931348623157e308, allow_nan=False, allow_infinity=False),
)
_finite = st.one_of(
    st.sampled_from([0.0, *EXTREMES, *(-x for x in EXTREMES)]),
    st.floats(allow_nan=False, allow_infinity=False),
)


def _floats_of(found: Findings) -> list[float]:
    """Every number the detectors report: what the judgement stores and reports render."""
    numbers = [
        x for cp in found.change_points for x in (cp.magnitude, cp.pvalue, cp.mean_before, cp.mean_after)
    ]
    numbers += [x for span in found.spans for x in (span.magnitude, span.pvalue, span.slope) if x is not None]
    if found.screen is not None:
        screen = found.screen
        numbers += [
            x
            for x in (
                screen.baseline_median,
                screen.band_low,
                screen.band_high,
                screen.change,
                screen.resolvable,
                screen.noise,
            )
            if x is not None
        ]
    return numbers


@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(st.lists(_positive, max_size=60), st.booleans())
def test_no_positive_finite_series_breaks_the_detectors_or_yields_an_infinity(
    values: list[float], higher: bool
) -> None:
    """The store may hold any finite value (stores written before ingest bounded them): a series of step
    times alternating 1e-300 and 1e300 once made every later `detect` raise OverflowError. On the log scale
    every reported number stays finite, so that the store (PostgreSQL's JSON refuses an infinity) and the
    reports can take it."""
    found = run_detectors(values, higher_is_better=higher)
    assert all(math.isfinite(x) for x in _floats_of(found)), found


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(st.lists(_finite, max_size=60), st.booleans())
def test_no_finite_series_breaks_the_detectors(values: list[float], higher: bool) -> None:
    """Series that cross zero are judged on the linear scale, where a zero baseline has no relative change
    (an infinity by design); no finite value raises, makes a NaN or an endless band."""
    found = run_detectors(values, higher_is_better=higher)
    assert not any(math.isnan(x) for x in _floats_of(found)), found
    if found.screen is not None and found.screen.band_low is not None and found.screen.band_high is not None:
        assert math.isfinite(found.screen.band_low) and math.isfinite(found.screen.band_high), found


def test_sixteen_nights_alternating_1e_300_and_1e300_are_judged() -> None:
    values = [1e-300, 1e300] * 8
    for higher in (False, True):
        found = run_detectors(values, higher_is_better=higher)
        assert found.screen is not None and all(math.isfinite(x) for x in _floats_of(found))
