"""Regression detection on nightly series, pure (numpy and scipy, no database, no JAX): the retrospective
change-point pass over a whole history (`edivisive`) and the nightly screen of the newest nights (`screen`),
with every default in `settings`.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/test_detection.py
"""

from results.detection.edivisive import ChangePoint, find_change_points, segments
from results.detection.screen import ScreenResult, ScreenStatus, screen_latest, segment_start
from results.detection.settings import (
    DEFAULT_SETTINGS,
    ChangePointSettings,
    DetectionSettings,
    ScreenSettings,
)

__all__ = [
    "DEFAULT_SETTINGS",
    "ChangePoint",
    "ChangePointSettings",
    "DetectionSettings",
    "ScreenResult",
    "ScreenSettings",
    "ScreenStatus",
    "find_change_points",
    "screen_latest",
    "segment_start",
    "segments",
]
