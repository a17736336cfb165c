"""A whole triage's limits against fakes (tests/triage/fake_stack.py): a bound of its settings stops it,
resumable, and the resumed triage replays its recorded runs to end where it stopped; an end that does not
run fails it; bad settings, plans and commit lists are refused.

    JAX_PLATFORMS=cpu python -m pytest -q tests/triage/test_triage_limits.py
"""

from __future__ import annotations

from typing import Any

import pytest

from jaxbench.triage import ledger
from jaxbench.triage.logic import Verdict
from jaxbench.triage.session import run_triage
from jaxbench.triage.settings import Settings
from jaxbench.triage.stacks import BAD, GOOD, Kind, Measurement, Plan
from tests.triage.fake_stack import MANY, OPTAX, THRESHOLD, Clock, Commits, Stack, commits, plan_for, triage

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
