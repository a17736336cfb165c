"""The detectors by name, and running them over one series in the order the settings list them.

A detector takes a series' valued nights (oldest first), whether higher is better, what the detectors before
it found and the settings, and returns its own findings. A new detector: its module in results/detection/
(with a class like edivisive.EDivisive) and one line in DETECTORS below; the settings' `detectors` say
whether and when it runs.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_detection.py -k detector
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from jaxbench.results.detection.edivisive import EDivisive
from jaxbench.results.detection.findings import Findings
from jaxbench.results.detection.scale import Scale
from jaxbench.results.detection.screen import NightlyScreen
from jaxbench.results.detection.settings import DEFAULT_SETTINGS, DetectionSettings


class Detector(Protocol):
    @property
    def name(self) -> str:
        """Its registry name, also stored with the change points it finds."""
        ...

    def detect(
        self,
        values: Sequence[float],
        *,
        higher_is_better: bool,
        found: Findings,
        settings: DetectionSettings,
        scale: Scale,
    ) -> Findings:
        """Its findings in `values` (finite, oldest first, in the series' units; judged on `scale`), given
        what the detectors before it `found`."""
        ...


DETECTORS: dict[str, Detector] = {each.name: each for each in (EDivisive(), NightlyScreen())}


def detector(name: str) -> Detector:
    """The detector registered as `name`; a ValueError naming the known ones otherwise."""
    try:
        return DETECTORS[name]
    except KeyError:
        raise ValueError(f"detector {name!r} is unknown; expected one of {sorted(DETECTORS)}") from None


def run_detectors(
    values: Sequence[float],
    *,
    higher_is_better: bool,
    settings: DetectionSettings = DEFAULT_SETTINGS,
    scale: Scale | None = None,
) -> Findings:
    """Every detector of `settings.detectors` over one series, in order, each seeing what came before; on
    `scale`, by default the log scale for a positive series."""
    chosen = [detector(name) for name in settings.detectors]  # an unknown name fails before any runs
    scale = scale or Scale.for_values(values)
    found = Findings()
    for each in chosen:
        found = found.adding(
            each.detect(
                values, higher_is_better=higher_is_better, found=found, settings=settings, scale=scale
            )
        )
    return found
