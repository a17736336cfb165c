"""A whole triage against fakes: a fake stack answers each benchmark run from the pins it is given (seeded
lognormal step times, or deterministic loss curves), a fake lists the commits; no subprocess, no git."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from harness.measure.hlo import ProgramSummary
from triage import ledger
from triage.logic import Verdict
from triage.session import Outcome, run_triage
from triage.settings import Settings
from triage.stacks import BAD, GOOD, Kind, Measurement, Move, Plan

STEP_S = 0.1
SLOWDOWN = 1.25
THRESHOLD = 0.05
OPTIMUM = 1.5


def commits(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


OPTAX = {"optax": commits("c", 12)}
"""One component moved: c0 is its last good pin, c11 its first bad pin."""


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
        programs: Callable[[bool], dict[str, Any] | None] = lambda slow: None,
        level: Callable[[str, int, bool], float] | None = None,
        curve: Callable[[str, int, bool], tuple[float, ...]] | None = None,
        seconds: float = 0.0,
        clock: Clock | None = None,
        cpu: Callable[[str, int], float | None] = lambda label, attempt: None,
    ) -> None:
        self.position = {name: {c: i for i, c in enumerate(cs)} for name, cs in components.items()}
        self.first_slow = first_slow
        self.kind, self.noise, self.fails, self.programs = kind, noise, fails, programs
        self.level = level or (lambda label, attempt, slow: SLOWDOWN if slow else 1.0)
        self.curve = curve or (lambda label, attempt, slow: loss_curve(1.1 if slow else 1.0))
        self.rng = np.random.default_rng(seed)
        self.seconds, self.clock, self.cpu = seconds, clock, cpu
        self.calls: list[tuple[str, dict[str, str], int]] = []

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
        if self.fails(label, pins):
            return Measurement("failed", reason="the fake stack does not build", seconds=self.seconds)
        curve = self.curve(label, attempt, slow) if self.kind is Kind.CORRECTNESS else None
        return Measurement(
            "ok",
            median_step_s=step_s,
            loss_curve=curve,
            loss_optimum=OPTIMUM if curve else None,
            program=self.programs(slow),
            seconds=self.seconds,
            cpu_per_wall=self.cpu(label, attempt),
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


# --- throughput --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("first_slow", "last_good"), [("c7", "c6"), ("c11", "c10"), ("c1", "c0")])
def test_bisection_finds_the_first_slow_commit(first_slow: str, last_good: str) -> None:
    stack = Stack(OPTAX, {"optax": first_slow})
    listed = Commits(OPTAX)
    outcome = run_triage(plan_for(OPTAX), stack, listed)

    assert outcome.state == "finished"
    assert outcome.reproduced is Verdict.BAD
    assert outcome.reproduction.startswith("real: ")
    assert outcome.component == "optax"
    assert outcome.repository == "https://github.com/example/optax"
    assert outcome.culprit == first_slow
    assert outcome.last_good_commit == last_good
    assert outcome.window == (first_slow,)
    assert outcome.reason == f"optax {first_slow} is the first bad commit; {last_good} is good"
    assert outcome.effect_ratio is not None
    ratio, low, high = outcome.effect_ratio
    assert 1 < low <= SLOWDOWN <= high
    assert ratio == pytest.approx(SLOWDOWN, rel=0.05)
    assert "a regression" in outcome.effect
    assert outcome.program == ""  # the fake records no program
    assert listed.asked == [plan_for(OPTAX).moved[0]]

    # Every probe is of a commit strictly inside the range, judged by its position against the slowdown.
    position = stack.position["optax"]
    assert outcome.probes
    ambiguous = 0
    for probe in outcome.probes:
        assert 0 < position[probe.commit] < 11
        expected = Verdict.BAD if position[probe.commit] >= position[first_slow] else Verdict.GOOD
        assert probe.verdict is expected
        ambiguous += probe.verdict is Verdict.AMBIGUOUS
        assert probe.median_step_s == pytest.approx(
            STEP_S * (SLOWDOWN if expected is Verdict.BAD else 1), rel=0.05
        )
        assert probe.runs in (4, 8)
        assert probe.final_loss is None
    assert len(outcome.probes) <= math.ceil(math.log2(10)) + ambiguous
    assert len({probe.commit for probe in outcome.probes}) == len(outcome.probes)

    # The ends run interleaved; every probe's runs are of the good stack with optax at the probed commit.
    labels = stack.labels()
    ends = [label for label in labels if label in (GOOD, BAD)]
    assert ends == [GOOD, BAD] * (len(ends) // 2)
    assert labels[: len(ends)] == ends
    for label, pins, _ in stack.calls[len(ends) :]:
        assert label.startswith("optax@")
        assert pins == {"optax": label.removeprefix("optax@")}
    # Attempts count from 0 per label, and the outcome counts every run it made.
    for label in set(labels):
        assert [attempt for name, _, attempt in stack.calls if name == label] == list(
            range(labels.count(label))
        )
    assert outcome.runs == len(stack.calls) == len(ends) + sum(probe.runs for probe in outcome.probes)
    assert json.loads(json.dumps(outcome.as_json()))["culprit"] == first_slow


def test_a_probe_whose_runs_all_fail_is_stepped_around() -> None:
    stack = Stack(OPTAX, {"optax": "c7"}, fails=lambda label, pins: label == "optax@c5")
    outcome = triage(stack, OPTAX)
    assert (outcome.state, outcome.culprit, outcome.last_good_commit) == ("finished", "c7", "c6")
    failed = next(probe for probe in outcome.probes if probe.commit == "c5")
    assert failed.verdict is Verdict.AMBIGUOUS
    assert (failed.runs, failed.median_step_s, failed.note) == (8, None, "8 of 8 runs failed")
    assert outcome.runs == len(stack.calls)


def test_an_ambiguous_probe_runs_again_and_settles() -> None:
    # Without noise, c5's first run as slow as the bad stack makes 4 runs match both ends (each interval holds
    # a ratio of 1), and 8 runs only the good end (the one outlier falls outside the bad end's interval).
    def level(label: str, attempt: int, slow: bool) -> float:
        return SLOWDOWN if slow or (label, attempt) == ("optax@c5", 0) else 1.0

    stack = Stack(OPTAX, {"optax": "c7"}, level=level, noise=0.0)
    outcome = triage(stack, OPTAX)
    assert (outcome.culprit, outcome.last_good_commit) == ("c7", "c6")
    runs = {probe.commit: (probe.verdict, probe.runs) for probe in outcome.probes}
    assert runs["c5"] == (Verdict.GOOD, 8)
    assert all(count == 4 for commit, (_, count) in runs.items() if commit != "c5")


def test_a_probe_halfway_between_the_ends_stays_ambiguous_after_max_probe_repeats() -> None:
    # c5 alone is halfway (two regressions stacked?): it matches neither end however often it runs.
    def level(label: str, attempt: int, slow: bool) -> float:
        return math.sqrt(SLOWDOWN) if label == "optax@c5" else SLOWDOWN if slow else 1.0

    stack = Stack(OPTAX, {"optax": "c7"}, level=level)
    outcome = triage(stack, OPTAX, settings=Settings(max_probe_repeats=12))
    assert (outcome.culprit, outcome.last_good_commit) == ("c7", "c6")
    halfway = next(probe for probe in outcome.probes if probe.commit == "c5")
    assert (halfway.verdict, halfway.runs, halfway.note) == (Verdict.AMBIGUOUS, 12, "")
    assert halfway.median_step_s == pytest.approx(STEP_S * math.sqrt(SLOWDOWN), rel=0.05)


def starved_probe_runs(label: str, attempt: int) -> bool:
    """Runs 1 and 2 of every probed commit share the CPU with other work, as two of a probe's runs did on
    the build machine while tests ran beside the triage."""
    return label.startswith("optax@") and attempt in (1, 2)


def starving(label: str, attempt: int, slow: bool) -> float:
    """Starved runs take as long as the bad stack's, or longer."""
    return SLOWDOWN * 1.1 if starved_probe_runs(label, attempt) else SLOWDOWN if slow else 1.0


def test_runs_starved_of_cpu_are_left_out_and_replaced() -> None:
    cpu = lambda label, attempt: 0.5 if starved_probe_runs(label, attempt) else 0.97  # noqa: E731
    stack = Stack(OPTAX, {"optax": "c7"}, level=starving, cpu=cpu)
    outcome = triage(stack, OPTAX)
    assert outcome.culprit == "c7"
    for probe in outcome.probes:
        assert probe.verdict is not Verdict.AMBIGUOUS
        assert probe.runs == 6  # four that count, and two in place of the starved ones
        assert probe.note == "2 run(s) starved of CPU by other work left out"


def test_without_the_cpu_measured_the_same_runs_blur_the_probes() -> None:
    """The control: the same step times with no CPU figures, so nothing can be left out."""
    outcome = triage(Stack(OPTAX, {"optax": "c7"}, level=starving), OPTAX)
    assert outcome.culprit != "c7"
    assert any(probe.verdict is Verdict.AMBIGUOUS for probe in outcome.probes)


def test_not_reproduced_ends_without_bisecting() -> None:
    stack = Stack(OPTAX, {})
    listed = Commits(OPTAX)
    outcome = run_triage(plan_for(OPTAX), stack, listed)
    assert outcome.state == "finished"
    assert outcome.reproduced is Verdict.GOOD
    assert outcome.reason.startswith("not reproduced on this machine: not real: ")
    assert outcome.culprit is None and outcome.component is None and outcome.probes == ()
    assert listed.asked == []
    assert set(stack.labels()) == {GOOD, BAD}
    assert outcome.runs == len(stack.calls)


MANY = {"jax": commits("jax-", 4), "optax": commits("optax-", 6), "flax": commits("flax-", 9)}


def test_isolation_names_the_one_component_that_is_slow_alone_then_bisects_it() -> None:
    stack = Stack(MANY, {"flax": "flax-5"})
    listed = Commits(MANY)
    outcome = run_triage(plan_for(MANY), stack, listed)

    assert outcome.state == "finished"
    assert outcome.component == "flax"
    assert outcome.isolation.startswith("flax alone reproduces the regression")
    assert outcome.repository == "https://github.com/example/flax"
    assert (outcome.culprit, outcome.last_good_commit) == ("flax-5", "flax-4")
    assert [move.name for move in listed.asked] == ["flax"]

    good = {"jax": "jax-0", "optax": "optax-0", "flax": "flax-0"}
    pins = {label: pins for label, pins, _ in stack.calls}
    assert pins[GOOD] == good
    assert pins[BAD] == {"jax": "jax-3", "optax": "optax-5", "flax": "flax-8"}
    assert pins["jax=bad"] == good | {"jax": "jax-3"}
    assert pins["optax=bad"] == good | {"optax": "optax-5"}
    assert pins["flax=bad"] == good | {"flax": "flax-8"}
    probed = set(pins) - {GOOD, BAD, "jax=bad", "optax=bad", "flax=bad"}
    assert probed == {f"flax@{probe.commit}" for probe in outcome.probes}
    for label in probed:
        assert pins[label] == good | {"flax": label.removeprefix("flax@")}
    assert outcome.runs == len(stack.calls)


def test_the_culprit_at_its_bad_pin_is_judged_without_the_other_components() -> None:
    # flax's bad pin alone is the regression; jax's bad pin recompiles the step (another fingerprint) and
    # costs 3 %, too little to count alone. What the outcome says of the culprit must be flax's alone.
    def level(label: str, attempt: int, slow: bool) -> float:
        return (SLOWDOWN if slow else 1.0) * (1.03 if plan_for(MANY).pins(label)["jax"] == "jax-3" else 1.0)

    class Recompiling(Stack):
        def __call__(self, label: str, pins: Mapping[str, str], attempt: int) -> Measurement:
            measurement = super().__call__(label, pins, attempt)
            fingerprint = "b" if pins["jax"] == "jax-3" else "a"
            return dataclasses.replace(measurement, program=program(fingerprint, 12))

    outcome = triage(Recompiling(MANY, {"flax": "flax-8"}, level=level), MANY)
    assert (outcome.component, outcome.culprit, outcome.last_good_commit) == ("flax", "flax-8", "flax-7")
    assert outcome.program.startswith("same program")


def test_no_single_component_when_two_are_slow_alone() -> None:
    stack = Stack(MANY, {"flax": "flax-5", "jax": "jax-2"})
    listed = Commits(MANY)
    outcome = run_triage(plan_for(MANY), stack, listed)
    assert outcome.state == "finished"
    assert outcome.component is None and outcome.culprit is None
    assert outcome.reason == "no single component: several components reproduce it alone: jax, flax"
    assert listed.asked == []


# --- correctness -------------------------------------------------------------------------------------------


C10 = {"optax": commits("c", 10)}


def test_correctness_bisects_by_the_loss_band() -> None:
    stack = Stack(C10, {"optax": "c4"}, kind=Kind.CORRECTNESS)
    outcome = triage(stack, C10, kind=Kind.CORRECTNESS)
    assert outcome.state == "finished"
    assert outcome.reproduced is Verdict.BAD
    assert outcome.reproduction.startswith("real: the first bad stack's loss at step 10")
    assert (outcome.culprit, outcome.last_good_commit, outcome.window) == ("c4", "c3", ("c4",))
    # One run per probe: the loss curves are deterministic.
    assert [(probe.commit, probe.verdict, probe.runs) for probe in outcome.probes] == [
        ("c4", Verdict.BAD, 1),
        ("c2", Verdict.GOOD, 1),
        ("c3", Verdict.GOOD, 1),
    ]
    final = {probe.commit: probe.final_loss for probe in outcome.probes}
    assert final["c4"] == pytest.approx(1.1 * final["c3"])  # type: ignore[operator]
    assert (
        outcome.effect.startswith("final-window loss ")
        and "(+10.0%) against the commit before it" in outcome.effect
    )
    assert outcome.effect_ratio is None
    assert stack.labels()[:4] == [GOOD, GOOD, GOOD, BAD]
    assert outcome.runs == len(stack.calls) == 4 + 3


@pytest.mark.parametrize(
    ("failing", "culprit", "window", "last_good"),
    [
        # A failed commit off the answer's path is skipped; the culprit is still found.
        ("c2", "c4", ("c4",), "c3"),
        # The culprit itself fails: no single commit, but the window holds it and the commit after it.
        ("c4", None, ("c4", "c5"), "c3"),
    ],
)
def test_correctness_skips_a_commit_that_does_not_train(
    failing: str, culprit: str | None, window: tuple[str, ...], last_good: str
) -> None:
    stack = Stack(
        C10, {"optax": "c4"}, kind=Kind.CORRECTNESS, fails=lambda label, pins: label == f"optax@{failing}"
    )
    outcome = triage(stack, C10, kind=Kind.CORRECTNESS)
    assert outcome.state == "finished"
    assert (outcome.culprit, outcome.window, outcome.last_good_commit) == (culprit, window, last_good)
    skipped = next(probe for probe in outcome.probes if probe.commit == failing)
    assert skipped.verdict is Verdict.AMBIGUOUS
    assert (skipped.runs, skipped.final_loss, skipped.note) == (1, None, "did not train: failed")
    assert stack.labels().count(f"optax@{failing}") == 1
    if culprit is None:
        assert (
            outcome.reason
            == "optax: no single commit: ambiguous commits hide the first bad one among 2 candidates"
        )
        assert outcome.effect == "" and outcome.program == ""
    assert outcome.runs == len(stack.calls)


def test_correctness_not_reproduced_when_the_bad_stack_stays_in_the_band() -> None:
    stack = Stack(C10, {}, kind=Kind.CORRECTNESS)
    outcome = triage(stack, C10, kind=Kind.CORRECTNESS)
    assert (outcome.state, outcome.reproduced, outcome.runs) == ("finished", Verdict.GOOD, 4)


def test_the_good_stacks_runs_face_only_the_hard_checks_among_themselves() -> None:
    # Two other runs make no band (it needs three), so a good run 5 % off the others is no finding, and the
    # bad stack is then judged against the band all three make.
    def curve(label: str, attempt: int, slow: bool) -> tuple[float, ...]:
        return loss_curve(1.1 if slow else 1.05 if (label, attempt) == (GOOD, 2) else 1.0)

    stack = Stack(C10, {"optax": "c4"}, kind=Kind.CORRECTNESS, curve=curve)
    outcome = triage(stack, C10, kind=Kind.CORRECTNESS)
    assert (outcome.state, outcome.reproduced, outcome.culprit) == ("finished", Verdict.BAD, "c4")


def test_a_good_stack_that_diverges_makes_the_reproduction_ambiguous() -> None:
    def curve(label: str, attempt: int, slow: bool) -> tuple[float, ...]:
        return (
            tuple(reversed(loss_curve()))
            if (label, attempt) == (GOOD, 1)
            else loss_curve(1.1 if slow else 1.0)
        )

    stack = Stack(C10, {"optax": "c4"}, kind=Kind.CORRECTNESS, curve=curve)
    listed = Commits(C10)
    outcome = run_triage(plan_for(C10, Kind.CORRECTNESS), stack, listed)
    assert (outcome.state, outcome.reproduced) == ("finished", Verdict.AMBIGUOUS)
    assert (
        outcome.reason
        == "not reproduced on this machine: the last good stack's own runs fail the loss checks"
    )
    assert stack.labels() == [GOOD] * 3 and listed.asked == []


def test_correctness_fails_when_the_good_stack_does_not_train() -> None:
    stack = Stack(C10, {"optax": "c4"}, kind=Kind.CORRECTNESS, fails=lambda label, pins: label == GOOD)
    outcome = triage(stack, C10, kind=Kind.CORRECTNESS)
    assert outcome.state == "failed"
    assert outcome.reason.startswith("the last good stack did not finish its runs")
    assert outcome.runs == 3


# --- budget and resumption ---------------------------------------------------------------------------------


@pytest.mark.parametrize("max_runs", [7, 21])
def test_a_stopped_triage_resumes_from_its_recorded_runs(max_runs: int) -> None:
    uninterrupted = triage(Stack(OPTAX, {"optax": "c7"}, seed=3), OPTAX)
    assert uninterrupted.culprit == "c7" and uninterrupted.runs > 21

    stack = Stack(OPTAX, {"optax": "c7"}, seed=3)
    recorded: dict[tuple[str, int], Measurement] = {}

    def record(label: str, attempt: int, measurement: Measurement) -> None:
        assert (label, attempt) not in recorded
        recorded[(label, attempt)] = measurement

    stopped = run_triage(
        plan_for(OPTAX, settings=Settings(max_runs=max_runs)),
        ledger.replaying(stack, {}, record),
        Commits(OPTAX),
    )
    assert stopped.state == "stopped"
    assert stopped.reason == f"stopped: max_runs={max_runs} benchmark runs used"
    assert stopped.runs == max_runs == len(stack.calls) == len(recorded)
    assert stopped.culprit is None
    if max_runs == 21:  # 10 runs reproduce, 4 a probe: stopped inside the third probe, the first two kept
        assert stopped.reproduced is Verdict.BAD and len(stopped.probes) == 2

    first = dict(recorded)
    calls_before = len(stack.calls)
    new: dict[tuple[str, int], Measurement] = {}
    resumed = run_triage(
        plan_for(OPTAX),
        ledger.replaying(stack, first, lambda label, attempt, m: new.__setitem__((label, attempt), m)),
        Commits(OPTAX),
    )
    asked_again = {(label, attempt) for label, _, attempt in stack.calls[calls_before:]}
    assert not asked_again & first.keys()
    assert asked_again == new.keys()
    # The generator went on where the stopped triage left it, so every answer is the uninterrupted one's.
    assert resumed == uninterrupted
    assert resumed.runs == len(first) + len(new)


def test_max_minutes_stops_by_the_injected_clock() -> None:
    clock = Clock()
    stack = Stack(OPTAX, {"optax": "c7"}, seconds=300.0, clock=clock)
    outcome = run_triage(
        plan_for(OPTAX, settings=Settings(max_minutes=60)), stack, Commits(OPTAX), clock=clock
    )
    assert outcome.state == "stopped"
    assert outcome.reason == "stopped: max_minutes=60 passed"
    # A run starts while at most 60 minutes have passed: at 0, 5, ..., 60 minutes.
    assert outcome.runs == len(stack.calls) == 13
    assert outcome.seconds == 13 * 300.0


def test_max_probes_bounds_the_bisection() -> None:
    stack = Stack(OPTAX, {"optax": "c7"})
    outcome = triage(stack, OPTAX, settings=Settings(max_probes=2))
    assert outcome.state == "finished"
    assert outcome.culprit is None and len(outcome.probes) == 2
    assert outcome.reason.startswith("optax: no single commit: stopped at max_probes=2 with ")
    assert outcome.last_good_commit is not None and outcome.window
    assert "c7" in outcome.window


# --- failures and validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(("failing", "named", "runs"), [(BAD, "first bad", 2), (GOOD, "last good", 1)])
def test_an_end_that_does_not_run_fails_the_triage(failing: str, named: str, runs: int) -> None:
    stack = Stack(OPTAX, {"optax": "c7"}, fails=lambda label, pins: label == failing)
    outcome = triage(stack, OPTAX)
    assert outcome.state == "failed"
    assert outcome.reason == f"the {named} stack did not run: failed: the fake stack does not build"
    assert outcome.reproduced is None and outcome.culprit is None
    assert outcome.runs == len(stack.calls) == runs


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"repeats": 0}, "repeats"),
        ({"max_runs": 0}, "max_runs"),
        ({"max_probe_repeats": 3}, "max_probe_repeats"),
        ({"correctness_good_runs": 2}, "correctness_good_runs"),
        ({"max_minutes": 0.0}, "max_minutes"),
    ],
)
def test_settings_refuse_bad_bounds(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        Settings(**fields)


def test_plan_pins_each_label_form() -> None:
    plan = plan_for(MANY)
    good = {"jax": "jax-0", "optax": "optax-0", "flax": "flax-0"}
    assert plan.pins(GOOD) == good
    assert plan.pins(BAD) == {"jax": "jax-3", "optax": "optax-5", "flax": "flax-8"}
    assert plan.pins("optax@optax-2") == good | {"optax": "optax-2"}
    assert plan.pins("flax=bad") == good | {"flax": "flax-8"}
    with pytest.raises(ValueError, match="unknown stack label"):
        plan.pins("flax")
    with pytest.raises(ValueError, match="'equinox' is not a component that moved"):
        plan.pins("equinox=bad")


def test_run_triage_refuses_a_plan_with_nothing_moved() -> None:
    stack = Stack({}, {})
    with pytest.raises(ValueError, match="no component moved"):
        run_triage(Plan("f0" * 32, Kind.THROUGHPUT, "llama2:tiny", (), THRESHOLD), stack, Commits({}))
    assert stack.calls == []


@pytest.mark.parametrize(
    "listed", [commits("c", 12)[1:], commits("c", 12)[:-1], list(reversed(commits("c", 12)))]
)
def test_commits_between_must_run_from_the_good_to_the_bad_pin(listed: list[str]) -> None:
    stack = Stack(OPTAX, {"optax": "c7"})
    with pytest.raises(ValueError, match="must run from c0 to c11"):
        run_triage(plan_for(OPTAX), stack, lambda move: listed)


# --- the program at the culprit ----------------------------------------------------------------------------


def test_the_outcome_says_the_program_stayed_the_same() -> None:
    stack = Stack(OPTAX, {"optax": "c7"}, programs=lambda slow: program("a", 12))
    outcome = triage(stack, OPTAX)
    assert outcome.culprit == "c7"
    assert outcome.program.startswith(f"same program (fingerprint {'a' * 12})")


def test_the_outcome_says_how_the_program_changed() -> None:
    stack = Stack(
        OPTAX, {"optax": "c7"}, programs=lambda slow: program("b", 14) if slow else program("a", 12)
    )
    outcome = triage(stack, OPTAX)
    assert outcome.culprit == "c7"
    assert outcome.program.startswith(f"program changed ({'a' * 12} → {'b' * 12}): ")
    assert "fusions kLoop 12 → 14" in outcome.program


def test_a_program_the_summary_model_cannot_read_says_nothing() -> None:
    stack = Stack(OPTAX, {"optax": "c7"}, programs=lambda slow: {"summary": {"fingerprint": "a" * 64}})
    assert triage(stack, OPTAX).program == ""
