"""A throughput triage guided by the compiled program (triage/session.py with triage/programs.py), against
fakes: decoys that change code but not the program are never timed, a program change that leaves the speed
is stepped past, ends with one program fall back to timing every commit, and a candidate is named only once
fresh runs against its parent confirm it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from jaxbench.core.errors import ExitCode
from jaxbench.triage.commands import exit_code
from jaxbench.triage.ledger import RunLedger
from jaxbench.triage.logic import Verdict
from jaxbench.triage.report import headline, render_markdown
from jaxbench.triage.stacks import GOOD, Measurement, Plan, program_label
from tests.triage.fake_stack import SLOWDOWN, Stack, commits, plan_for, program, triage

RANGE = {"optax": commits("c", 30)}
"""The issue's range: c0 is the last good pin, c29 the first bad one."""


def by_position(changes: Mapping[int, str]) -> Callable[[Mapping[str, str]], dict[str, Any]]:
    """The program of a stack by optax's position: the letter of the last change at or before it."""

    def program_of(pins: Mapping[str, str]) -> dict[str, Any]:
        position = int(pins["optax"].removeprefix("c"))
        letter = max(((at, letter) for at, letter in changes.items() if at <= position), default=(0, "a"))
        return program(letter[1], 10 + ord(letter[1]))

    return program_of


def decoys_look_halfway(label: str, attempt: int, slow: bool) -> float:
    """Decoys at 10 and 14 whose timed runs would land midway between the ends (as load made them in the
    issue's trial), everything else slow or not by its pins."""
    if label in ("optax@c10", "optax@c14"):
        return (1 + SLOWDOWN) / 2
    return SLOWDOWN if slow else 1.0


def timed_labels(stack: Stack) -> set[str]:
    return {label for label in stack.labels() if not label.startswith("program:")}


def test_the_issues_range_names_the_culprit_without_timing_the_decoys() -> None:
    stack = Stack(
        RANGE,
        {"optax": "c7"},
        fails=lambda label, pins: pins["optax"] == "c3",  # does not parse; fixed at c4
        level=decoys_look_halfway,
        program_of=by_position({7: "b"}),
    )
    outcome = triage(stack, RANGE)
    assert (outcome.state, outcome.culprit, outcome.last_good_commit) == ("finished", "c7", "c6")
    assert exit_code(outcome) == ExitCode.OK
    assert outcome.program_search.startswith("the program changes at 1 place(s) of 29 commits: c7 (")
    # Only the ends, and the culprit against its parent, are timed: no probe of a decoy.
    assert timed_labels(stack) == {"good", "bad", "optax@c6", "optax@c7"}
    assert outcome.probes == ()
    assert "a regression" in outcome.effect and outcome.effect_ratio is not None
    assert outcome.effect_ratio[1] > 1.05
    assert outcome.program.startswith("program changed (aaaaaaaaaaaa → bbbbbbbbbbbb)")
    summary = render_markdown(plan_for(RANGE), outcome)
    assert "- Compiled program between the ends: the program changes at 1 place(s) of 29 commits" in summary
    compile_only = [label for label in stack.labels() if label.startswith("program:")]
    assert len(compile_only) == len(set(compile_only)) <= 8


def test_a_program_change_that_leaves_the_speed_is_timed_and_stepped_past() -> None:
    stack = Stack(RANGE, {"optax": "c19"}, program_of=by_position({5: "b", 19: "c"}))
    outcome = triage(stack, RANGE)
    assert (outcome.culprit, outcome.last_good_commit) == ("c19", "c18")
    assert [probe.commit for probe in outcome.probes] == ["c5"]
    assert outcome.probes[0].verdict is Verdict.GOOD
    assert timed_labels(stack) == {"good", "bad", "optax@c5", "optax@c18", "optax@c19"}


def test_ends_with_one_program_fall_back_to_timing_every_commit_and_say_so() -> None:
    # A slowdown outside the compiled program (host-side work in the optimizer's Python).
    stack = Stack(RANGE, {"optax": "c7"}, program_of=lambda pins: program("a", 10))
    outcome = triage(stack, RANGE)
    assert outcome.program_search.startswith(
        "the ends compile the same program (aaaaaaaaaaaa, 2 compile-only"
    )
    assert outcome.program_search.endswith("the change lies outside it, so every commit is timed")
    assert (outcome.culprit, outcome.last_good_commit) == ("c7", "c6")
    assert outcome.probes  # timed probes did the bisection


def test_a_candidate_its_parent_runs_as_slow_as_is_not_named() -> None:
    def parent_slow_too(label: str, attempt: int, slow: bool) -> float:
        return SLOWDOWN if slow or label == "optax@c6" else 1.0

    stack = Stack(RANGE, {"optax": "c7"}, level=parent_slow_too, program_of=by_position({7: "b"}))
    outcome = triage(stack, RANGE)
    assert outcome.culprit is None and outcome.state == "finished"
    assert outcome.reason.startswith("optax: between c6 and c7: the candidate c7 was not confirmed")
    assert outcome.window == ("c7",) and outcome.last_good_commit == "c6"
    assert exit_code(outcome) == ExitCode.INCOMPLETE
    assert headline(triage_plan(), outcome) == "no culprit (finished)"


def test_commits_that_do_not_compile_leave_the_change_between_two_commits() -> None:
    stack = Stack(
        RANGE,
        {"optax": "c7"},
        fails=lambda label, pins: pins["optax"] == "c6",
        program_of=by_position({6: "b"}),
    )
    outcome = triage(stack, RANGE)
    assert outcome.culprit is None and exit_code(outcome) == ExitCode.INCOMPLETE
    assert outcome.reason == (
        "optax: no single commit: the change lies between c5 and c7: 2 commits there may have changed the "
        "program (some did not compile)"
    )
    assert outcome.window == ("c6", "c7")


def test_compile_only_runs_never_judge_starvation() -> None:
    # Four compile-only runs that each timed one step at a full CPU, and three timed runs at half of one:
    # counted together, the typical share would be a full CPU and every timed run starved.
    shares = iter([1.0] * 4 + [0.5] * 3)
    plan = plan_for(RANGE)
    ledger = RunLedger(
        plan, lambda label, pins, attempt: Measurement("ok", 0.1, cpu_per_wall=next(shares)), time.monotonic
    )
    for commit in ("c1", "c2", "c3", "c4"):
        ledger.run(program_label(f"optax@{commit}"))
    for _ in range(3):
        ledger.run(GOOD)
    assert ledger.starved(GOOD) == 0 and ledger.medians(GOOD) == [0.1] * 3


def triage_plan() -> Plan:
    return plan_for(RANGE)


def test_a_long_range_with_two_changes_and_a_broken_commit_is_narrowed_to_single_commits() -> None:
    """A trial's layout: 34 commits, one that does not parse at 11 (fixed at 12), a retune that changes the
    program at 16, the culprit as the very last commit. The compile-only probes (a compile each) must not run
    out at the timed probes' budget and leave "2 commits there may have changed the program"."""
    longer = {"optax": commits("c", 35)}
    stack = Stack(
        longer,
        {"optax": "c34"},
        fails=lambda label, pins: pins["optax"] == "c11",
        program_of=by_position({16: "b", 34: "c"}),
    )
    outcome = triage(stack, longer)
    assert (outcome.state, outcome.culprit, outcome.last_good_commit) == ("finished", "c34", "c33")
    assert "probe budget ran out" not in outcome.program_search
    assert outcome.program_search.startswith("the program changes at 2 place(s) of 34 commits: c16 (")
