"""Regression detection on nightly series, pure (numpy and scipy, no database, no JAX): detectors run in the
order the settings list them (`detectors`), today the retrospective pass over a whole history (`edivisive`:
step change points, its split step in `energy`, then the transients and the drift among them, `episodes`,
with its fits in `least_squares`) and the nightly screen of the newest nights (`screen`); what they find
(`findings`), the scale they judge on (`scale`: log for positive quantities), the medians they take
(`medians`), and every default (`settings`).

    JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_detection.py tests/results/test_episodes.py
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jaxbench.results.detection.findings import (
    NOT_SCREENED,
    ChangePoint,
    Findings,
    ScreenResult,
    ScreenStatus,
    Span,
    SpanKind,
)
from jaxbench.results.detection.settings import (
    DEFAULT_SETTINGS,
    ChangePointSettings,
    DetectionSettings,
    ScreenSettings,
)

if TYPE_CHECKING:
    from jaxbench.results.detection.detectors import DETECTORS, Detector, detector, run_detectors
    from jaxbench.results.detection.edivisive import find_change_points, retrospective, segments
    from jaxbench.results.detection.scale import Scale, practical
    from jaxbench.results.detection.screen import screen_latest, segment_start

_NUMERIC = {
    "DETECTORS": "detectors",
    "Detector": "detectors",
    "detector": "detectors",
    "run_detectors": "detectors",
    "find_change_points": "edivisive",
    "retrospective": "edivisive",
    "segments": "edivisive",
    "Scale": "scale",
    "practical": "scale",
    "screen_latest": "screen",
    "segment_start": "screen",
}
"""What needs numpy and scipy, imported on first use (PEP 562): the findings and the settings are read by
commands that judge nothing, such as `jaxbench report` on an empty store, which should not pay for them."""


def __getattr__(name: str) -> Any:
    if name in _NUMERIC:
        return getattr(importlib.import_module(f"jaxbench.results.detection.{_NUMERIC[name]}"), name)
    raise AttributeError(f"module 'jaxbench.results.detection' has no attribute {name!r}")


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
