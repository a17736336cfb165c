"""The words of the judgement: a series' state, an incident's kind and state, a person's verdict, what moved
between the last good and the first bad run, and the detail an incident keeps in the store. Frozen data only;
the judgement decides with them, reports and alerts show them.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_judgement.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any, ClassVar

from jaxbench.core.schema import Strict
from jaxbench.harness.measure.stablehlo import program_change_kind


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


class ProgramChange(Strict):
    """Whether the first bad run compiled the program the last good one did (equal fingerprints of the
    optimized HLO: harness/measure/hlo.py), and if not, what changed in it."""

    same_program: bool
    fingerprints: tuple[str, str]
    """Last good, first bad."""
    changes: tuple[str, ...] = ()
    """Each count that changed, readably: "fusions kLoop 12 → 14"."""
    flops_ratio: float | None = None
    """XLA's estimated flops of the step, first bad over last good."""
    same_input: bool | None = None
    """Whether both runs handed XLA the same program (input fingerprints); None where either has none."""

    SHOWN: ClassVar[int] = 6

    def describe(self) -> str:
        """One line for reports and issue bodies."""
        if self.same_program:
            return (
                f"same program (fingerprint {self.fingerprints[0][:12]}): the change lies outside it, in the "
                "runtime, driver, kernels or machine"
            )
        shown = "; ".join(self.changes[: self.SHOWN])
        more = f"; {len(self.changes) - self.SHOWN} more" if len(self.changes) > self.SHOWN else ""
        what = (
            shown + more
            if self.changes
            else "the same instructions, with other shapes, layouts or attributes"
        )
        flops = "" if self.flops_ratio is None else f"; XLA's flops x{self.flops_ratio:.3f}"
        kind = program_change_kind(self.same_input)
        return f"{kind} ({self.fingerprints[0][:12]} → {self.fingerprints[1][:12]}): {what}{flops}"


class TimeChange(Strict):
    """Where the time of a profiled step went in the last good and the first bad run, by kind of op."""

    seconds_per_step: tuple[tuple[str, float, float], ...]
    """(kind, last good, first bad), in the profiles' order."""

    def describe(self) -> str:
        moved = sorted(self.seconds_per_step, key=lambda row: abs(row[2] - row[1]), reverse=True)
        shown = [
            f"{kind} {before * 1e3:.3g} → {after * 1e3:.3g} ms"
            for kind, before, after in moved
            if before or after
        ]
        return "time per step, last good → first bad: " + "; ".join(shown[:4])


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
    program: ProgramChange | None = None
    """Same program or not, where both runs recorded theirs."""
    time: TimeChange | None = None
    """Where both runs were profiled: their time per step by kind of op."""

    def to_json(self) -> dict[str, Any]:
        """JSON values for the column: dates in ISO 8601, enums as their values; no "recovery" key but a
        transient's, and no "program" or "time" key but where it is known, so that a step's detail keeps
        the shape stored since the first schema."""
        unset = {name for name in ("recovery", "program", "time") if getattr(self, name) is None}
        return self.model_dump(mode="json", exclude=unset or None)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any] | None) -> IncidentDetail:
        """The detail from the column's JSON (None or {} for an incident that recorded none)."""
        return cls.model_validate(stored or {})
