"""The words of the judgement: a series' state, an incident's kind and state, a person's verdict, what moved
between the last good and the first bad run, and the detail an incident keeps in the store. Frozen data only;
the judgement decides with them, reports and alerts show them.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/test_judgement.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any

from core.schema import Strict


class SeriesState(enum.StrEnum):
    """The verdict on a series' newest night."""

    OK = "ok"
    IMPROVEMENT = "improvement"
    SUSPECTED = "suspected"
    """One night beyond the thresholds: worth a look, not yet an alert."""
    REGRESSION = "regression"
    INVALID = "invalid"
    """The newest run failed, went NaN, lost a metric or changed its configuration."""
    INSUFFICIENT_HISTORY = "insufficient_history"
    TOO_NOISY = "too_noisy"
    """Nothing moved beyond the thresholds, but the series' night-to-night noise hides the changes that
    matter: not "ok"."""


class IncidentKind(enum.StrEnum):
    THROUGHPUT = "throughput"
    MEMORY = "memory"
    COMPILE_TIME = "compile_time"
    CORRECTNESS = "correctness"
    VALIDITY = "validity"
    IMAGE_SIZE = "image_size"
    BUILD_TIME = "build_time"


class IncidentState(enum.StrEnum):
    OPEN = "open"
    RECOVERED = "recovered"
    RESOLVED = "resolved"
    """Closed by a human verdict (infrastructure, noise or expected)."""


class HumanVerdict(enum.StrEnum):
    REAL = "real"
    INFRASTRUCTURE = "infrastructure"
    NOISE = "noise"
    EXPECTED = "expected"


@dataclasses.dataclass(frozen=True)
class ComponentRange:
    name: str
    repository: str | None
    last_good: str | None
    """Commit (or version) in the last good run."""
    first_bad: str | None
    compare_url: str | None
    """A link showing the commits between the two, where the repository host offers one."""


@dataclasses.dataclass(frozen=True)
class SettingChange:
    name: str
    before: str | None
    after: str | None


class AffectedSeries(Strict):
    """One series that moved in an incident."""

    key: str
    benchmark: str
    metric: str
    magnitude: float
    """Relative change (after / before - 1); 0 where the series is invalid rather than shifted."""
    state: SeriesState


class RecoveryDetail(Strict):
    """A transient's other end: the night it came back and what moved between its last bad run and the
    first good one again (one finding, two commit ranges)."""

    recovered_night: dt.date
    components: tuple[ComponentRange, ...] = ()
    flag_changes: tuple[SettingChange, ...] = ()
    env_changes: tuple[SettingChange, ...] = ()


class IncidentDetail(Strict):
    """What an incident keeps in the store's `incidents.details` JSON column, as computed by the judgement.

    The JSON shape (keys and value forms) is the one stored since the first schema, so incidents written
    before this model existed read back unchanged."""

    last_good_night: dt.date | None = None
    series: tuple[AffectedSeries, ...] = ()
    components: tuple[ComponentRange, ...] = ()
    """Per component, the last-good -> first-bad range; components that did not move are left out."""
    flag_changes: tuple[SettingChange, ...] = ()
    """XLA flags that differ between the last good and the first bad run."""
    env_changes: tuple[SettingChange, ...] = ()
    problems: tuple[str, ...] = ()
    """Why the series are invalid, or the correctness findings."""
    recovery: RecoveryDetail | None = None
    """Set for a transient: where it ended."""

    def to_json(self) -> dict[str, Any]:
        """JSON values for the column: dates in ISO 8601, enums as their values; no "recovery" key but a
        transient's, so that a step's detail keeps the shape stored since the first schema."""
        return self.model_dump(mode="json", exclude={"recovery"} if self.recovery is None else None)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any] | None) -> IncidentDetail:
        """The detail from the column's JSON (None or {} for an incident that recorded none)."""
        return cls.model_validate(stored or {})
