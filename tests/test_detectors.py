"""The detector seam: detectors found by name, run in the order the settings list them, each seeing what the
ones before it found; today's two (the change-point pass, the nightly screen) as before.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/test_detectors.py
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest

from results.detection import (
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
