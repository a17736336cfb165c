"""The runs of one triage: each labelled stack's attempts and measurements, the budget of the settings,
which runs other work starved of CPU, and the replay of a resumed triage's recorded runs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from jaxbench.triage.clocks import starved_runs
from jaxbench.triage.stacks import Measure, Measurement, Plan, StepClock, is_program_label


def replaying(
    measure: Measure,
    recorded: Mapping[tuple[str, int], Measurement],
    record: Callable[[str, int, Measurement], None],
) -> Measure:
    """`measure` that answers from `recorded` ((label, attempt) -> run) first and `record`s each new run as
    soon as it ends: an interrupted triage, run again, replays its runs and goes on where it stopped."""

    def measure_or_replay(label: str, pins: Mapping[str, str], attempt: int) -> Measurement:
        if (label, attempt) in recorded:
            return recorded[(label, attempt)]
        measurement = measure(label, pins, attempt)
        record(label, attempt, measurement)
        return measurement

    return measure_or_replay


class BudgetSpent(Exception):
    """A bound of the settings was reached: the triage stops, resumable, with what it has."""


class StackFailed(Exception):
    """An end of the incident does not run at all: nothing can be compared."""


class RunLedger:
    """Hands out attempts per label, keeps every measurement, enforces the budget."""

    def __init__(self, plan: Plan, measure: Measure, clock: Callable[[], float]) -> None:
        self._plan, self._measure, self._clock = plan, measure, clock
        self._started = clock()
        self.by_label: dict[str, list[Measurement]] = {}
        self.clock = StepClock.WALL
        """What `medians` times by: the reproduction chooses it (triage/clocks.py: choose_clock)."""

    @property
    def count(self) -> int:
        return sum(len(runs) for runs in self.by_label.values())

    @property
    def seconds(self) -> float:
        return sum(m.seconds for runs in self.by_label.values() for m in runs)

    def run(self, label: str) -> Measurement:
        settings = self._plan.settings
        if self.count >= settings.max_runs:
            raise BudgetSpent(f"max_runs={settings.max_runs} benchmark runs used")
        if (self._clock() - self._started) / 60 > settings.max_minutes:
            raise BudgetSpent(f"max_minutes={settings.max_minutes:g} passed")
        attempt = len(self.by_label.get(label, []))
        measurement = self._measure(label, self._plan.pins(label), attempt)
        self.by_label.setdefault(label, []).append(measurement)
        return measurement

    def _starved(self) -> dict[str, list[bool]]:
        """Per label, which of its runs other work starved of CPU (logic.starved_runs, over every run)."""
        # A compile-only run times a step or two: its CPU share says nothing of the timed runs' typical one.
        shares = [
            m.cpu_per_wall if m.ok and not is_program_label(label) else None
            for label, runs in self.by_label.items()
            for m in runs
        ]
        flags = iter(starved_runs(shares))
        return {label: [next(flags) for _ in runs] for label, runs in self.by_label.items()}

    def starved(self, label: str) -> int:
        """How many of this label's runs were starved of CPU."""
        return sum(self._starved().get(label, []))

    def last_starved(self, label: str) -> bool:
        flags = self._starved().get(label, [])
        return bool(flags) and flags[-1]

    def medians(self, label: str, *, since: int = 0) -> list[float]:
        """The medians by `clock` of this label's runs that ended ok, leaving out runs starved of CPU; from
        its attempt number `since` on."""
        starved = self._starved().get(label, [])
        return [
            median
            for m, hungry in itertools.islice(
                zip(self.by_label.get(label, []), starved, strict=True), since, None
            )
            if (median := m.median_by(self.clock)) is not None and not hungry
        ]

    def attempts(self, label: str) -> int:
        return len(self.by_label.get(label, []))

    def curves(self, label: str) -> list[Measurement]:
        return [m for m in self.by_label.get(label, []) if m.status == "ok" and m.loss_curve]

    def program(self, label: str) -> Mapping[str, Any] | None:
        return next((m.program for m in self.by_label.get(label, []) if m.program), None)
