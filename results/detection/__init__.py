"""Regression detection on nightly series, pure (numpy and scipy, no database, no JAX): detectors run in the
order the settings list them (`detectors`), today the retrospective pass over a whole history (`edivisive`:
step change points, its split step in `energy`, then the transients and the drift among them, `episodes`,
with its fits in `least_squares`) and the nightly screen of the newest nights (`screen`); what they find
(`findings`), the scale they judge on (`scale`: log for positive quantities), the medians they take
(`medians`), and every default (`settings`).

    JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_detection.py tests/results/test_episodes.py
"""

from results.detection.detectors import DETECTORS, Detector, detector, run_detectors
from results.detection.edivisive import find_change_points, retrospective, segments
from results.detection.findings import (
    NOT_SCREENED,
    ChangePoint,
    Findings,
    ScreenResult,
    ScreenStatus,
    Span,
    SpanKind,
)
from results.detection.scale import Scale, practical
from results.detection.screen import screen_latest, segment_start
from results.detection.settings import (
    DEFAULT_SETTINGS,
    ChangePointSettings,
    DetectionSettings,
    ScreenSettings,
)

__all__ = [
    "DEFAULT_SETTINGS",
    "DETECTORS",
    "NOT_SCREENED",
    "ChangePoint",
    "ChangePointSettings",
    "DetectionSettings",
    "Detector",
    "Findings",
    "Scale",
    "ScreenResult",
    "ScreenSettings",
    "ScreenStatus",
    "Span",
    "SpanKind",
    "detector",
    "find_change_points",
    "practical",
    "retrospective",
    "run_detectors",
    "screen_latest",
    "segment_start",
    "segments",
]
