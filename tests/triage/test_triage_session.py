"""A whole triage of a throughput incident against fakes (tests/triage/fake_stack.py): bisection to the first
slow commit, ambiguous and failing probes, runs starved of CPU, isolation of one component among several,
and what the outcome says of the program at the culprit. Correctness incidents:
tests/triage/test_triage_correctness.py; budgets, resumption and refusals: test_triage_limits.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Callable, Mapping

import pytest

from jaxbench.triage.logic import Verdict
from jaxbench.triage.session import run_triage
from jaxbench.triage.settings import Settings
from jaxbench.triage.stacks import BAD, GOOD, Measurement
from tests.triage.fake_stack import MANY, OPTAX, SLOWDOWN, STEP_S, Commits, Stack, plan_for, program, triage

# --- throughput --------------------------------------------------------------------------------------------


def in_pairs(first: str, second: str, pairs: int) -> list[str]:
    """first second, second first, first second, ..."""
    return [label for index in range(pairs) for label in ((first, second), (second, first))[index % 2]]


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

    # The ends run in pairs of alternating order; every probe's runs are of the good stack with optax at the
    # probed commit.
    labels = stack.labels()
    ends = [label for label in labels if label in (GOOD, BAD)]
    assert ends == in_pairs(GOOD, BAD, len(ends) // 2)
    assert labels[: len(ends)] == ends
    for label, pins, _ in stack.calls[len(ends) :]:
        assert label.startswith("optax@")
        assert pins == {"optax": label.removeprefix("optax@")}
    # Attempts count from 0 per label, and the outcome counts every run it made.
    for label in set(labels):
        assert [attempt for name, _, attempt in stack.calls if name == label] == list(
            range(labels.count(label))
        )
    # The culprit is named once fresh interleaved runs against its parent confirm it: one round of 5 + 5.
    confirmation = stack.labels()[len(ends) + sum(probe.runs for probe in outcome.probes) :]
    assert confirmation == in_pairs(f"optax@{last_good}", f"optax@{first_slow}", 5)
    assert outcome.runs == len(stack.calls)
    assert outcome.program_search == "not used (the runs record no compiled program): every commit timed"
    assert json.loads(json.dumps(outcome.as_json()))["culprit"] == first_slow


def test_a_probe_whose_runs_all_fail_is_stepped_around() -> None:
    stack = Stack(OPTAX, {"optax": "c7"}, fails=lambda label, pins: label == "optax@c5")
    outcome = triage(stack, OPTAX)
    assert (outcome.state, outcome.culprit, outcome.last_good_commit) == ("finished", "c7", "c6")
    failed = next(probe for probe in outcome.probes if probe.commit == "c5")
    assert failed.verdict is Verdict.AMBIGUOUS
    assert (failed.runs, failed.median_step_s, failed.note) == (8, None, "8 of 8 runs failed")
    assert outcome.runs == len(stack.calls)


def test_a_probe_whose_stack_does_not_install_is_tried_once() -> None:
    """An install fails alike at every attempt (a resolver's conflict): one attempt, not eight."""
    stack = Stack(
        OPTAX, {"optax": "c7"}, fails=lambda label, pins: label == "optax@c5", failure="install-failed"
    )
    outcome = triage(stack, OPTAX)
    assert (outcome.state, outcome.culprit, outcome.last_good_commit) == ("finished", "c7", "c6")
    failed = next(probe for probe in outcome.probes if probe.commit == "c5")
    assert failed.verdict is Verdict.AMBIGUOUS
    assert (failed.runs, failed.note) == (1, "1 of 1 runs failed")
    assert stack.labels().count("optax@c5") == 1


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
    assert (halfway.verdict, halfway.runs) == (Verdict.AMBIGUOUS, 12)
    assert halfway.note == "judged on 8 runs side by side with fresh runs of both ends"
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


def test_without_the_cpu_measured_the_same_runs_blur_each_probes_first_look() -> None:
    """The control: the same step times with no CPU figures, so nothing can be left out. A probe's first
    runs are ambiguous; only side by side with fresh runs of both ends does it settle, at a cost."""
    cpu = lambda label, attempt: 0.5 if starved_probe_runs(label, attempt) else 0.97  # noqa: E731
    filtered = triage(Stack(OPTAX, {"optax": "c7"}, level=starving, cpu=cpu), OPTAX)
    blurred = triage(Stack(OPTAX, {"optax": "c7"}, level=starving), OPTAX)
    assert blurred.culprit == "c7"
    assert any("side by side" in probe.note for probe in blurred.probes)
    assert blurred.runs > filtered.runs
    without = triage(
        Stack(OPTAX, {"optax": "c7"}, level=starving), OPTAX, settings=Settings(max_probe_repeats=4)
    )
    assert without.culprit != "c7" and any(probe.verdict is Verdict.AMBIGUOUS for probe in without.probes)


def drifting(after_runs: int, factor: float) -> Callable[[str, int, bool], float]:
    """Every stack `factor` times slower from the machine's `after_runs`-th run on: other work that started
    after the reproduction, and took the same share of every later run."""
    calls = itertools.count()

    def level(label: str, attempt: int, slow: bool) -> float:
        return (SLOWDOWN if slow else 1.0) * (factor if next(calls) >= after_runs else 1.0)

    return level


def test_a_machine_that_slows_after_the_reproduction_is_judged_side_by_side() -> None:
    """8 % slower after the 10 runs of the reproduction: a good probe lies between the ends' earlier runs,
    matching neither. Side by side with fresh runs of both ends, such a probe settles and c7 is named; with
    no runs beyond the first four, the same drift leaves probes ambiguous and names nothing."""
    outcome = triage(Stack(OPTAX, {"optax": "c7"}, level=drifting(10, 1.08), seed=5), OPTAX)
    assert (outcome.culprit, outcome.last_good_commit) == ("c7", "c6")
    good_probes = [probe for probe in outcome.probes if probe.commit < "c7"]
    assert any("side by side" in probe.note for probe in good_probes)
    assert all(probe.verdict is not Verdict.AMBIGUOUS for probe in outcome.probes)
    control = triage(
        Stack(OPTAX, {"optax": "c7"}, level=drifting(10, 1.08), seed=5),
        OPTAX,
        settings=Settings(max_probe_repeats=4),
    )
    assert control.culprit is None


def test_on_a_loaded_cpu_the_triage_times_by_cpu_time_and_names_the_culprit() -> None:
    """Other work takes 0-60 % of the CPU in every run, alike for every stack: wall times scatter by tens of
    percent, the runs' CPU time by 2 %. The triage chooses CPU time, says so, and names c7; no run is set
    aside as starved, though every one was."""
    stack = Stack(OPTAX, {"optax": "c7"}, load=0.6, cpu_clock=True, seed=3)
    outcome = triage(stack, OPTAX)
    assert (outcome.culprit, outcome.clock) == ("c7", "cpu")
    assert "timed by CPU time (the step's own work" in outcome.reproduction
    assert "cpu step time x" in outcome.effect
    assert not any("starved" in probe.note for probe in outcome.probes)
    for probe in outcome.probes:
        assert probe.median_step_s == pytest.approx(
            STEP_S * (SLOWDOWN if probe.commit >= "c7" else 1), rel=0.05
        )


def test_on_a_loaded_cpu_the_wall_clock_alone_names_no_culprit() -> None:
    """The control: the same runs without their CPU time. Nothing is named, and nothing wrongly."""
    outcome = triage(Stack(OPTAX, {"optax": "c7"}, load=0.6, seed=3), OPTAX)
    assert outcome.clock == "wall" and outcome.culprit is None


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


def test_isolation_names_the_one_component_that_is_slow_alone_then_bisects_it() -> None:
    stack = Stack(MANY, {"flax": "flax-5"})
    listed = Commits(MANY)
    outcome = run_triage(plan_for(MANY), stack, listed)

    assert outcome.state == "finished"
    assert outcome.component == "flax"
    assert outcome.isolation.startswith("flax alone reproduces the change")
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
