"""One triage of an incident, start to end: reproduce it, find the component, bisect the component's commits.

The decisions are triage/logic.py's; this module sequences them and turns each question into benchmark runs
of named stacks ("good", "bad", "optax@<commit>", ...). Running a stack (`Measure`) and listing a
component's commits (`CommitsBetween`) are callables passed in, so a whole triage runs in tests with fakes,
and a resumed triage replays its recorded runs to end exactly where it stopped. Throughput incidents compare
step times, correctness incidents loss curves: docs/design.md, "A triage session".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/test_triage_session.py
"""

from __future__ import annotations

import dataclasses
import enum
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from results.judgement.components import program_change
from results.judgement.correctness import check_run, checkpoints
from triage.logic import (
    Bisection,
    Comparison,
    Probe,
    Verdict,
    bisect,
    classify_probe,
    compare_samples,
    isolate_component,
    regression_is_real,
    reproduce,
    starved_runs,
)
from triage.settings import Settings

STARVED_RETRIES = 2
"""A run of an end that other work starved of CPU is run again, at most this many times."""

GOOD, BAD = "good", "bad"
"""The labels of the incident's two stacks: its last good and its first bad run's pins."""


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


@dataclasses.dataclass(frozen=True)
class Plan:
    fingerprint: str
    kind: Kind
    benchmark: str
    """What runs: the recipe and size of the incident's runs ("llama2:tiny")."""
    moved: tuple[Move, ...]
    """The components rerun at other commits: each stack is the good one with some of them moved."""
    threshold: float
    """Smallest slowdown (a fraction) the reproduction must show to call the incident real."""
    settings: Settings = dataclasses.field(default_factory=Settings)
    skipped: tuple[str, ...] = ()
    """Components that moved too but stay as they are in every stack here, each with why: the reproduction
    tells whether the ones rerun explain the incident without them."""

    def as_json(self) -> dict[str, Any]:
        """What the store and the summary keep of the plan."""
        return {
            "incident": self.fingerprint,
            "kind": self.kind.value,
            "benchmark": self.benchmark,
            "moved": [dataclasses.asdict(move) for move in self.moved],
            "skipped": list(self.skipped),
            "threshold": self.threshold,
            "settings": dataclasses.asdict(self.settings),
        }

    def pins(self, label: str) -> dict[str, str]:
        """The commits of the moved components in a labelled stack: "good", "bad", "<name>@<commit>" (the
        good stack with that component at that commit) or "<name>=bad" (with it at its first bad pin)."""
        good = {move.name: move.good for move in self.moved}
        if label == GOOD:
            return good
        if label == BAD:
            return {move.name: move.bad for move in self.moved}
        if "@" in label:
            name, commit = label.split("@", 1)
            self._move(name)
            return good | {name: commit}
        if label.endswith("=bad"):
            name = label.removesuffix("=bad")
            return good | {name: self._move(name).bad}
        raise ValueError(f"unknown stack label {label!r}")

    def _move(self, name: str) -> Move:
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

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.median_step_s is not None and self.median_step_s > 0


Measure = Callable[[str, Mapping[str, str], int], Measurement]
"""(label, pins of the moved components, attempt) -> a run of that stack; attempt counts from 0 per label."""
CommitsBetween = Callable[[Move], list[str]]
"""The component's commits from its good pin to its bad pin, oldest first, both ends included."""


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


@dataclasses.dataclass(frozen=True)
class ProbeReport:
    commit: str
    verdict: Verdict
    runs: int
    median_step_s: float | None
    """Median of the runs' medians (throughput)."""
    final_loss: float | None
    """Median final-window loss of the runs (correctness)."""
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Outcome:
    state: str
    """finished, stopped (a bound was reached; resumable) or failed."""
    reason: str
    reproduced: Verdict | None = None
    """BAD: the incident is real on this machine; GOOD: it does not reproduce; AMBIGUOUS: cannot tell."""
    reproduction: str = ""
    """How the ends compared, in words with figures."""
    component: str | None = None
    isolation: str = ""
    culprit: str | None = None
    repository: str | None = None
    window: tuple[str, ...] = ()
    """Commits that may still be the first bad one when no single culprit was found."""
    last_good_commit: str | None = None
    effect: str = ""
    """The culprit's measured effect against the commit before it, with its interval."""
    effect_ratio: tuple[float, float, float] | None = None
    """(ratio, low, high): step time, culprit over the commit before it."""
    program: str = ""
    """Same program or not at the culprit (the compiled step's fingerprint), in words."""
    probes: tuple[ProbeReport, ...] = ()
    runs: int = 0
    """Benchmark runs this triage used, recorded ones included."""
    seconds: float = 0.0
    """Time spent in those runs."""

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class _RunLedger:
    """Hands out attempts per label, keeps every measurement, enforces the budget."""

    def __init__(self, plan: Plan, measure: Measure, clock: Callable[[], float]) -> None:
        self._plan, self._measure, self._clock = plan, measure, clock
        self._started = clock()
        self.by_label: dict[str, list[Measurement]] = {}

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
        every = [m for runs in self.by_label.values() for m in runs]
        flags = iter(starved_runs([m.cpu_per_wall if m.ok else None for m in every]))
        return {label: [next(flags) for _ in runs] for label, runs in self.by_label.items()}

    def starved(self, label: str) -> int:
        """How many of this label's runs were starved of CPU."""
        return sum(self._starved().get(label, []))

    def last_starved(self, label: str) -> bool:
        flags = self._starved().get(label, [])
        return bool(flags) and flags[-1]

    def medians(self, label: str) -> list[float]:
        """The medians of this label's runs that ended ok, leaving out runs starved of CPU."""
        starved = self._starved().get(label, [])
        return [
            m.median_step_s
            for m, hungry in zip(self.by_label.get(label, []), starved, strict=True)
            if m.ok and m.median_step_s and not hungry
        ]

    def curves(self, label: str) -> list[Measurement]:
        return [m for m in self.by_label.get(label, []) if m.status == "ok" and m.loss_curve]

    def program(self, label: str) -> Mapping[str, Any] | None:
        return next((m.program for m in self.by_label.get(label, []) if m.program), None)


def run_triage(
    plan: Plan,
    measure: Measure,
    commits_between: CommitsBetween,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Outcome:
    """Reproduce, isolate, bisect; every step's figures go into the outcome, and a bound reached anywhere
    ends the triage as "stopped" with what it found so far."""
    if not plan.moved:
        raise ValueError(f"incident {plan.fingerprint[:12]}: no component moved; nothing to bisect")
    runs = _RunLedger(plan, measure, clock)
    partial: dict[str, Any] = {}
    try:
        _triage(plan, runs, commits_between, partial)
    except BudgetSpent as spent:
        return Outcome("stopped", f"stopped: {spent}", **partial, runs=runs.count, seconds=runs.seconds)
    except StackFailed as failed:
        return Outcome("failed", str(failed), **partial, runs=runs.count, seconds=runs.seconds)
    return Outcome(**partial, runs=runs.count, seconds=runs.seconds)


def _triage(plan: Plan, runs: _RunLedger, commits_between: CommitsBetween, out: dict[str, Any]) -> None:
    judge = _Throughput(plan, runs) if plan.kind is Kind.THROUGHPUT else _Correctness(plan, runs)
    verdict, described = judge.reproduce()
    out.update(reproduced=verdict, reproduction=described)
    if verdict is not Verdict.BAD:
        unmoved = f"; not rerun at their first bad pins: {'; '.join(plan.skipped)}" if plan.skipped else ""
        out.update(state="finished", reason=f"not reproduced on this machine: {described}{unmoved}")
        return
    found = isolate_component([m.name for m in plan.moved], lambda name: judge.verdict_of(f"{name}=bad"))
    component, isolation = found.culprit, found.reason
    if plan.skipped and len(plan.moved) == 1:
        isolation = f"{component} is the only component that moved and can be rerun here"
    out.update(component=component, isolation=isolation)
    if component is None:
        out.update(state="finished", reason=f"no single component: {isolation}")
        return
    move = plan._move(component)
    out.update(repository=move.repository)
    commits = commits_between(move)
    if commits[0] != move.good or commits[-1] != move.bad:
        raise ValueError(f"commits_between({component}) must run from {move.good} to {move.bad}")
    reports: dict[str, ProbeReport] = {}

    def probe(commit: str) -> Probe:
        report = judge.probe(f"{component}@{commit}", commit)
        reports[commit] = report
        out.update(probes=tuple(reports.values()))
        return Probe(commit, report.verdict)

    found_commit = bisect(commits, probe, max_probes=plan.settings.max_probes)
    _conclude(plan, runs, judge, found_commit, move, out)


def _conclude(
    plan: Plan, runs: _RunLedger, judge: _Judge, found: Bisection, move: Move, out: dict[str, Any]
) -> None:
    out.update(last_good_commit=found.last_good, window=found.window)
    if found.culprit is None:
        out.update(state="finished", reason=f"{move.name}: no single commit: {found.reason}")
        return
    before = GOOD if found.last_good == move.good else f"{move.name}@{found.last_good}"
    # The culprit at the component's bad pin is measured alone (isolation's stack) where others moved too.
    bad_alone = BAD if len(plan.moved) == 1 else f"{move.name}=bad"
    after = bad_alone if found.culprit == move.bad else f"{move.name}@{found.culprit}"
    effect, ratio = judge.effect(before, after)
    change = program_change(runs.program(before), runs.program(after))
    out.update(
        state="finished",
        reason=f"{move.name} {found.culprit} is the first bad commit; {found.last_good} is good",
        culprit=found.culprit,
        effect=effect,
        effect_ratio=ratio,
        program="" if change is None else change.describe(),
    )


class _Judge:
    def __init__(self, plan: Plan, runs: _RunLedger) -> None:
        self.plan, self.runs = plan, runs

    def reproduce(self) -> tuple[Verdict, str]:
        raise NotImplementedError

    def verdict_of(self, label: str) -> Verdict:
        """Runs the labelled stack as a probe and classifies it against the two ends."""
        raise NotImplementedError

    def probe(self, label: str, commit: str) -> ProbeReport:
        raise NotImplementedError

    def effect(self, before: str, after: str) -> tuple[str, tuple[float, float, float] | None]:
        raise NotImplementedError

    def _ok(self, label: str, what: str) -> Measurement:
        measurement = self.runs.run(label)
        if label in (GOOD, BAD) and not measurement.ok and self.plan.kind is Kind.THROUGHPUT:
            raise StackFailed(f"the {what} stack did not run: {measurement.status}: {measurement.reason}")
        return measurement


class _Throughput(_Judge):
    def reproduce(self) -> tuple[Verdict, str]:
        settings = self.plan.settings

        def one_run(side: str, _: int) -> list[float]:
            for _ in range(1 + STARVED_RETRIES):
                measurement = self._ok(side, "last good" if side == GOOD else "first bad")
                if not self.runs.last_starved(side):
                    break
            assert measurement.median_step_s is not None
            return [measurement.median_step_s]

        found = reproduce(
            one_run,
            threshold=self.plan.threshold,
            repeats=settings.repeats,
            max_rounds=settings.max_rounds,
            confidence=settings.confidence,
        )
        said = {Verdict.BAD: "real", Verdict.GOOD: "not real", Verdict.AMBIGUOUS: "ambiguous"}[found.verdict]
        return found.verdict, (
            f"{said}: step time first bad / last good {_interval(found.comparison)} over "
            f"{len(found.good)} + {len(found.bad)} interleaved runs in {found.rounds} round(s); "
            f"threshold {self.plan.threshold:.1%}"
        )

    def _samples(self, label: str) -> list[float]:
        """The probe's run medians: probe_repeats runs, then more while they stay ambiguous."""
        settings = self.plan.settings
        wanted = settings.probe_repeats
        while True:
            self._top_up(label, wanted, limit=2 * settings.max_probe_repeats)
            medians = self.runs.medians(label)
            if len(medians) >= 2 and self._classify(medians) is not Verdict.AMBIGUOUS:
                return medians
            if wanted + settings.probe_repeats > settings.max_probe_repeats:
                return medians
            wanted += settings.probe_repeats

    def _top_up(self, label: str, wanted: int, *, limit: int) -> None:
        """Run the stack until `wanted` of its runs count, at most `limit` runs in all: a run starved of
        CPU by other work does not count, and another takes its place."""
        while True:
            attempts = len(self.runs.by_label.get(label, []))
            if attempts - self.runs.starved(label) >= wanted or attempts >= limit:
                return
            self.runs.run(label)

    def _classify(self, medians: Sequence[float]) -> Verdict:
        if len(medians) < 2:
            return Verdict.AMBIGUOUS
        return classify_probe(
            medians, self.runs.medians(GOOD), self.runs.medians(BAD), confidence=self.plan.settings.confidence
        )

    def verdict_of(self, label: str) -> Verdict:
        return self._classify(self._samples(label))

    def probe(self, label: str, commit: str) -> ProbeReport:
        medians = self._samples(label)
        verdict = self._classify(medians)
        attempts = len(self.runs.by_label[label])
        starved = self.runs.starved(label)
        failed = attempts - len(medians) - starved
        notes = [f"{failed} of {attempts} runs failed"] if failed else []
        notes += [f"{starved} run(s) starved of CPU by other work left out"] if starved else []
        note = "; ".join(notes)
        return ProbeReport(
            commit, verdict, attempts, statistics.median(medians) if medians else None, None, note
        )

    def effect(self, before: str, after: str) -> tuple[str, tuple[float, float, float] | None]:
        comparison = compare_samples(
            self.runs.medians(before), self.runs.medians(after), confidence=self.plan.settings.confidence
        )
        verdict = regression_is_real(comparison, self.plan.threshold)
        return (
            f"step time x{_interval(comparison)} against the commit before it "
            f"({len(self.runs.medians(before))} and {len(self.runs.medians(after))} runs; "
            f"{'a regression' if verdict is Verdict.BAD else 'not conclusive on its own'})",
            (comparison.ratio, comparison.low, comparison.high),
        )


class _Correctness(_Judge):
    """A run is bad when its loss curve fails the correctness checks against the last good stack's runs."""

    def reproduce(self) -> tuple[Verdict, str]:
        for _ in range(self.plan.settings.correctness_good_runs):
            self.runs.run(GOOD)
        good = self.runs.curves(GOOD)
        if len(good) < self.plan.settings.correctness_good_runs:
            raise StackFailed("the last good stack did not finish its runs: no loss band to compare with")
        clean = [m for m in good if not self._findings(m)]
        if len(clean) < len(good):
            return Verdict.AMBIGUOUS, "the last good stack's own runs fail the loss checks"
        bad = self.runs.run(BAD)
        findings = self._findings(bad) if bad.loss_curve else [f"the run failed: {bad.status}"]
        if findings:
            return Verdict.BAD, f"real: the first bad stack's {'; '.join(findings)}"
        return Verdict.GOOD, "not real: the first bad stack's loss stays inside the last good stack's band"

    def _findings(self, measurement: Measurement) -> list[str]:
        history = [list(m.loss_curve or ()) for m in self.runs.curves(GOOD) if m is not measurement]
        curve = list(measurement.loss_curve or ())
        return [f"{f.check}: {f.detail}" for f in check_run(curve, measurement.loss_optimum, history)]

    def _verdict(self, label: str) -> tuple[Verdict, Measurement]:
        measurement = self.runs.run(label)
        if not measurement.loss_curve:
            # A stack that does not train is not evidence about the loss: skipped, like `git bisect skip`.
            return Verdict.AMBIGUOUS, measurement
        return (Verdict.BAD if self._findings(measurement) else Verdict.GOOD), measurement

    def verdict_of(self, label: str) -> Verdict:
        return self._verdict(label)[0]

    def probe(self, label: str, commit: str) -> ProbeReport:
        verdict, measurement = self._verdict(label)
        note = "" if measurement.loss_curve else f"did not train: {measurement.status}"
        return ProbeReport(commit, verdict, 1, measurement.median_step_s, _final_loss(measurement), note)

    def effect(self, before: str, after: str) -> tuple[str, tuple[float, float, float] | None]:
        losses = {
            label: [x for m in self.runs.curves(label) if (x := _final_loss(m)) is not None]
            for label in (before, after)
        }
        if not losses[before] or not losses[after]:
            return "", None
        old, new = statistics.median(losses[before]), statistics.median(losses[after])
        described = f"final-window loss {old:.4f} → {new:.4f} ({new / old - 1:+.1%})"
        return f"{described} against the commit before it", None


def _final_loss(measurement: Measurement) -> float | None:
    if not measurement.loss_curve:
        return None
    return checkpoints(list(measurement.loss_curve))["final window"]


def _interval(comparison: Comparison) -> str:
    return (
        f"{comparison.ratio:.3f} ({comparison.confidence:.0%} interval {comparison.low:.3f} .. "
        f"{comparison.high:.3f})"
    )
