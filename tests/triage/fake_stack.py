"""The fakes a whole triage runs against (triage/session.py): a stack that answers each benchmark run from the
pins it is given (seeded lognormal step times, or deterministic loss curves), a clock, and the commits each
component moved through; no subprocess, no git.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from jaxbench.harness.measure.hlo import ProgramSummary
from jaxbench.triage.session import Outcome, run_triage
from jaxbench.triage.settings import Settings
from jaxbench.triage.stacks import Kind, Measurement, Move, Plan

STEP_S = 0.1


SLOWDOWN = 1.25


THRESHOLD = 0.05


OPTIMUM = 1.5


def commits(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


OPTAX = {"optax": commits("c", 12)}
"""One component moved: c0 is its last good pin, c11 its first bad pin."""
MANY = {"jax": commits("jax-", 4), "optax": commits("optax-", 6), "flax": commits("flax-", 9)}
"""Three components moved."""


def never(label: str, pins: Mapping[str, str]) -> bool:
    return False


def loss_curve(scale: float = 1.0) -> tuple[float, ...]:
    """40 decreasing steps, from 4.5 towards OPTIMUM + 0.5; `scale` shifts the whole curve up."""
    return tuple(scale * (OPTIMUM + 0.5 + 2.5 * math.exp(-step / 8)) for step in range(40))


def program(fingerprint: str, kloop: int) -> dict[str, Any]:
    """As runs.program stores it: the summary of the compiled step and XLA's cost."""
    summary = ProgramSummary(
        fingerprint=fingerprint * 64, instructions=900 + kloop, fusions={"kLoop": kloop, "kCustom": 4},
        ops={"fusion": kloop + 4, "other": 900}, collectives={}, custom_calls={},
    )  # fmt: skip
    return {"summary": summary.model_dump(mode="json"), "cost": {"flops": 1.5e12}}


class Stack:
    """The fake benchmark: a run of a stack is slow once any component is pinned at or after its first slow
    commit. Throughput: one lognormal median step time per run around STEP_S times `level` (by default
    SLOWDOWN when slow), one draw of a seeded generator per call, so the same seed and the same sequence of
    calls give the same answers. Correctness: a deterministic loss curve (`curve`), by default shifted up
    10 % when slow."""

    def __init__(
        self,
        components: Mapping[str, Sequence[str]],
        first_slow: Mapping[str, str],
        *,
        kind: Kind = Kind.THROUGHPUT,
        seed: int = 0,
        noise: float = 0.02,
        fails: Callable[[str, Mapping[str, str]], bool] = never,
        failure: str = "failed",
        programs: Callable[[bool], dict[str, Any] | None] = lambda slow: None,
        level: Callable[[str, int, bool], float] | None = None,
        curve: Callable[[str, int, bool], tuple[float, ...]] | None = None,
        seconds: float = 0.0,
        clock: Clock | None = None,
        cpu: Callable[[str, int], float | None] = lambda label, attempt: None,
        program_of: Callable[[Mapping[str, str]], dict[str, Any] | None] | None = None,
        load: float = 0.0,
        cpu_clock: bool = False,
    ) -> None:
        self.position = {name: {c: i for i, c in enumerate(cs)} for name, cs in components.items()}
        self.first_slow = first_slow
        self.kind, self.noise, self.fails, self.programs = kind, noise, fails, programs
        self.failure = failure
        """The status of a run that `fails`: "failed" (at run time), or "install-failed"."""
        self.level = level or (lambda label, attempt, slow: SLOWDOWN if slow else 1.0)
        self.curve = curve or (lambda label, attempt, slow: loss_curve(1.1 if slow else 1.0))
        self.rng = np.random.default_rng(seed)
        self.seconds, self.clock, self.cpu = seconds, clock, cpu
        self.calls: list[tuple[str, dict[str, str], int]] = []
        self.program_of = program_of
        """The compiled program of a stack by its pins, where it depends on more than slow or not."""
        self.load, self.cpu_clock = load, cpu_clock
        """Other work takes a share of 0 to `load` of the CPU during each run: its wall time grows by it,
        its CPU time (reported where `cpu_clock`) does not, and its CPU per wall second shows the share."""

    def slow(self, pins: Mapping[str, str]) -> bool:
        return any(
            self.position[name][pins[name]] >= self.position[name][first]
            for name, first in self.first_slow.items()
        )

    def __call__(self, label: str, pins: Mapping[str, str], attempt: int) -> Measurement:
        self.calls.append((label, dict(pins), attempt))
        if self.clock is not None:
            self.clock.now += self.seconds
        slow = self.slow(pins)
        step_s = float(self.rng.lognormal(math.log(STEP_S * self.level(label, attempt, slow)), self.noise))
        taken = float(self.rng.uniform(0, self.load)) if self.load else 0.0
        if self.fails(label, pins):
            return Measurement(self.failure, reason="the fake stack does not build", seconds=self.seconds)
        curve = self.curve(label, attempt, slow) if self.kind is Kind.CORRECTNESS else None
        return Measurement(
            "ok",
            median_step_s=step_s / (1 - taken),
            loss_curve=curve,
            loss_optimum=OPTIMUM if curve else None,
            program=self.programs(slow) if self.program_of is None else self.program_of(pins),
            seconds=self.seconds,
            cpu_per_wall=1 - taken if self.load else self.cpu(label, attempt),
            median_cpu_step_s=step_s if self.cpu_clock else None,
        )

    def labels(self) -> list[str]:
        return [label for label, _, _ in self.calls]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Commits:
    """The fake `CommitsBetween`: each component's commits as given, oldest first."""

    def __init__(self, components: Mapping[str, Sequence[str]]) -> None:
        self.components = components
        self.asked: list[Move] = []

    def __call__(self, move: Move) -> list[str]:
        self.asked.append(move)
        return list(self.components[move.name])


DEFAULTS = Settings()


def plan_for(
    components: Mapping[str, Sequence[str]], kind: Kind = Kind.THROUGHPUT, settings: Settings = DEFAULTS
) -> Plan:
    moved = tuple(
        Move(name, f"https://github.com/example/{name}", cs[0], cs[-1]) for name, cs in components.items()
    )
    return Plan("f0" * 32, kind, "llama2:tiny", moved, THRESHOLD, settings)


def triage(stack: Stack, components: Mapping[str, Sequence[str]], **plan: Any) -> Outcome:
    return run_triage(plan_for(components, **plan), stack, Commits(components))
