"""The stacks a triage runs: the moved components between an incident's last good and first bad run, the
labelled stacks made of them ("good", "bad", "optax@<commit>", "optax=bad") and one benchmark run of a
stack. A triage is given `Measure` and `CommitsBetween` as callables, so tests pass fakes.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any

from jaxbench.triage.settings import Settings

GOOD, BAD = "good", "bad"
"""The labels of the incident's two stacks: its last good and its first bad run's pins."""
INSTALL_FAILED = "install-failed"
"""A run's status where its stack did not install: a resolver's conflict or a build error, the same at every
attempt, so a stack that did not install is not tried again."""
PROGRAM_PREFIX = "program:"
"""Labels a compile-only run of a stack ("program:optax@<commit>"): its compiled program, not its speed."""


def program_label(label: str) -> str:
    return PROGRAM_PREFIX + label


def is_program_label(label: str) -> bool:
    return label.startswith(PROGRAM_PREFIX)


class StepClock(enum.StrEnum):
    """What a triage times a step by: the wall clock, or the CPU time the run's process used (where the step
    computes on one CPU, the same work less what other processes took of that CPU)."""

    WALL = "wall"
    CPU = "cpu"


class Kind(enum.StrEnum):
    THROUGHPUT = "throughput"
    CORRECTNESS = "correctness"


@dataclasses.dataclass(frozen=True)
class Move:
    """A component that moved between the last good and the first bad run."""

    name: str
    repository: str
    good: str
    bad: str
    """Its pins at the two ends: commits, or release versions where it moves `by` release."""
    by: str = "commit"
    """How a stack puts it elsewhere: "commit" (built from its repository, containers/overlay.py) or
    "release" (its published wheels, containers/wheel_overlay.py: compiled components, or no repository)."""

    @property
    def unit(self) -> str:
        """What one step of its bisection is, in words."""
        return "release" if self.by == "release" else "commit"


@dataclasses.dataclass(frozen=True)
class Plan:
    fingerprint: str
    kind: Kind
    benchmark: str
    """What runs: the recipe and size of the incident's runs ("llama2:tiny")."""
    moved: tuple[Move, ...]
    """The components rerun at other commits: each stack is the good one with some of them moved."""
    threshold: float
    """Smallest slowdown (a fraction; a speed-up where `faster`) the reproduction must show to call the
    incident real."""
    settings: Settings = dataclasses.field(default_factory=Settings)
    skipped: tuple[str, ...] = ()
    """Components that moved too but stay as they are in every stack here, each with why: the reproduction
    tells whether the ones rerun explain the incident without them."""
    carried: tuple[str, ...] = ()
    """Components that moved inside another's stacks, each with whose (jaxlib with jax's release: jax's
    wheels require it at their own version), so they are rerun at both ends without a move of their own."""
    faster: bool = False
    """The change is a speed-up (two runs someone named, the second faster): the "bad" stack is the faster
    one, and the reproduction and the confirmation test that direction. Probes are classified by the end
    they match either way, so the bisection is the same; its culprit is the first faster commit."""

    @property
    def changed(self) -> str:
        """What the culprit is, in words: the first "bad" or the first "faster" commit."""
        return "faster" if self.faster else "bad"

    @property
    def unchanged(self) -> str:
        """What the commit before the culprit is, in words: "good", or "not faster"."""
        return "not faster" if self.faster else "good"

    def as_json(self) -> dict[str, Any]:
        """What the store and the summary keep of the plan."""
        return {
            "incident": self.fingerprint,
            "kind": self.kind.value,
            "benchmark": self.benchmark,
            "moved": [dataclasses.asdict(move) for move in self.moved],
            "skipped": list(self.skipped),
            "carried": list(self.carried),
            "threshold": self.threshold,
            "faster": self.faster,
            "settings": dataclasses.asdict(self.settings),
        }

    def pins(self, label: str) -> dict[str, str]:
        """The commits of the moved components in a labelled stack: "good", "bad", "<name>@<commit>" (the
        good stack with that component at that commit) or "<name>=bad" (with it at its first bad pin); a
        program label's are its stack's."""
        label = label.removeprefix(PROGRAM_PREFIX)
        good = {move.name: move.good for move in self.moved}
        if label == GOOD:
            return good
        if label == BAD:
            return {move.name: move.bad for move in self.moved}
        if "@" in label:
            name, commit = label.split("@", 1)
            self.move_of(name)
            return good | {name: commit}
        if label.endswith("=bad"):
            name = label.removesuffix("=bad")
            return good | {name: self.move_of(name).bad}
        raise ValueError(f"unknown stack label {label!r}")

    def move_of(self, name: str) -> Move:
        for move in self.moved:
            if move.name == name:
                return move
        raise ValueError(f"{name!r} is not a component that moved")


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One benchmark run of a stack."""

    status: str
    """The result's status: "ok", or how the run failed (a failure is a result too)."""
    median_step_s: float | None = None
    loss_curve: tuple[float | None, ...] | None = None
    loss_optimum: float | None = None
    program: Mapping[str, Any] | None = None
    reason: str | None = None
    result_path: str | None = None
    seconds: float = 0.0
    cpu_per_wall: float | None = None
    """CPU seconds the run's process used per wall second of its timed steps (starved runs are left out)."""
    median_cpu_step_s: float | None = None
    """Median CPU seconds the process used per timed step, only where the step computes on the CPU: there it
    is the step's own work, which other processes' load moves less than its wall time. (A GPU's step shows
    in host CPU time only as the host's waiting.)"""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.median_step_s is not None and self.median_step_s > 0

    def median_by(self, clock: StepClock) -> float | None:
        """The run's median step time by the wall clock or by the process's CPU time."""
        median = self.median_step_s if clock is StepClock.WALL else self.median_cpu_step_s
        return median if self.ok and median is not None and median > 0 else None


Measure = Callable[[str, Mapping[str, str], int], Measurement]
"""(label, pins of the moved components, attempt) -> a run of that stack; attempt counts from 0 per label."""
CommitsBetween = Callable[[Move], list[str]]
"""The component's commits from its good pin to its bad pin, oldest first, both ends included."""
