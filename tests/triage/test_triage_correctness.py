"""A whole triage of a correctness incident against fakes (tests/triage/fake_stack.py): it bisects by the
last good stack's loss band, skips a commit that does not train, ends unreproduced when the first bad stack
stays in the band, and fails or turns ambiguous when the last good stack does not train or diverges.

    JAX_PLATFORMS=cpu python -m pytest -q tests/triage/test_triage_correctness.py
"""

from __future__ import annotations

import pytest

from jaxbench.core.errors import ExitCode
from jaxbench.triage.commands import exit_code
from jaxbench.triage.logic import Verdict
from jaxbench.triage.report import headline
from jaxbench.triage.session import run_triage
from jaxbench.triage.stacks import BAD, GOOD, Kind
from tests.triage.fake_stack import Commits, Stack, commits, loss_curve, plan_for, triage

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
    assert outcome.reason.startswith(
        "neither reproduced nor ruled out on this machine: "
        "the last good stack's own runs fail the loss checks"
    )
    assert headline(plan_for(C10, Kind.CORRECTNESS), outcome) == "no culprit (reproduction ambiguous)"
    assert exit_code(outcome) == ExitCode.INCOMPLETE
    assert stack.labels() == [GOOD] * 3 and listed.asked == []


def test_correctness_fails_when_the_good_stack_does_not_train() -> None:
    stack = Stack(C10, {"optax": "c4"}, kind=Kind.CORRECTNESS, fails=lambda label, pins: label == GOOD)
    outcome = triage(stack, C10, kind=Kind.CORRECTNESS)
    assert outcome.state == "failed"
    assert outcome.reason.startswith("the last good stack did not finish its runs")
    assert outcome.runs == 3
