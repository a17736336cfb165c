"""Finding the culprit (triage/logic.py): isolating the one guilty component with fakes that answer by name,
and bisecting a component's commits with monotone fakes, around ambiguous commits, within log2 probes,
resumed from recorded probes.

    JAX_PLATFORMS=cpu python -m pytest -q tests/triage/test_triage_bisection.py
"""

from __future__ import annotations

import doctest
import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxbench.triage import logic
from jaxbench.triage.logic import (
    Probe,
    Verdict,
    bisect,
    classify_probe,
    contradictions,
    isolate_component,
    next_commit,
)
from tests.triage.test_triage_logic import step_times


def test_the_bisection_example_runs() -> None:
    outcome = doctest.testmod(logic)
    assert outcome.failed == 0 and outcome.attempted > 0


# --- isolate_component -----------------------------------------------------------------------------------


def isolate(guilty: set[str], moved: tuple[str, ...] = ("jax", "xla", "flax")) -> logic.Isolation:
    rng = np.random.default_rng(6)
    good, bad = step_times(rng), step_times(rng, slowdown=1.1)
    return isolate_component(
        moved,
        lambda name: classify_probe(step_times(rng, slowdown=1.1 if name in guilty else 1.0), good, bad),
    )


def test_isolate_names_the_one_guilty_component() -> None:
    result = isolate({"xla"})
    assert result.culprit == "xla"
    assert result.verdicts == {"jax": Verdict.GOOD, "xla": Verdict.BAD, "flax": Verdict.GOOD}
    assert "xla" in result.reason


def test_isolate_reports_several_guilty_components() -> None:
    result = isolate({"xla", "flax"})
    assert result.culprit is None
    assert "several" in result.reason and "xla" in result.reason and "flax" in result.reason


def test_isolate_reports_when_no_component_alone_is_guilty() -> None:
    result = isolate(set())
    assert result.culprit is None
    assert "no single component" in result.reason


def test_a_single_moved_component_needs_no_measurement() -> None:
    def never(name: str) -> Verdict:
        raise AssertionError("measured")

    assert isolate_component(["jax"], never).culprit == "jax"


@pytest.mark.parametrize("moved", [[], ["jax", "jax"]])
def test_isolate_rejects_bad_component_lists(moved: list[str]) -> None:
    with pytest.raises(ValueError, match="^moved:"):
        isolate_component(moved, lambda name: Verdict.GOOD)


# --- bisection -------------------------------------------------------------------------------------------


def monotone_fake(
    commits: list[str], culprit: int, ambiguous: frozenset[int] = frozenset()
) -> tuple[Callable[[str], Probe], list[str]]:
    """GOOD before commits[culprit], BAD from it on, AMBIGUOUS at the given indices; records the probes."""
    asked: list[str] = []

    def probe(commit: str) -> Probe:
        asked.append(commit)
        index = commits.index(commit)
        verdict = (
            Verdict.AMBIGUOUS if index in ambiguous else Verdict.BAD if index >= culprit else Verdict.GOOD
        )
        return Probe(commit, verdict, (float(index),))

    return probe, asked


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[str], int, frozenset[int]]:
    n = draw(st.integers(2, 40))
    culprit = draw(st.integers(1, n - 1))
    ambiguous = draw(st.frozensets(st.integers(1, n - 2), max_size=n // 3)) if n > 2 else frozenset()
    return [f"c{index:02d}" for index in range(n)], culprit, ambiguous


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 40).flatmap(lambda n: st.tuples(st.just(n), st.integers(1, n - 1))))
def test_bisection_finds_every_culprit_within_log2_probes(case: tuple[int, int]) -> None:
    n, culprit = case
    commits = [f"c{index:02d}" for index in range(n)]
    probe, asked = monotone_fake(commits, culprit)
    result = bisect(commits, probe, max_probes=n)
    assert result.culprit == commits[culprit]
    assert (result.last_good, result.first_bad, result.window) == (
        commits[culprit - 1],
        commits[culprit],
        (commits[culprit],),
    )
    assert len(asked) <= math.ceil(math.log2(n))
    assert len(set(asked)) == len(asked) and commits[0] not in asked and commits[-1] not in asked
    assert [p.commit for p in result.probes] == asked


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_bisection_steps_around_ambiguous_commits(scenario: tuple[list[str], int, frozenset[int]]) -> None:
    commits, culprit, ambiguous = scenario
    probe, asked = monotone_fake(commits, culprit, ambiguous)
    result = bisect(commits, probe, max_probes=len(commits))
    assert len(asked) <= math.ceil(math.log2(len(commits))) + len(ambiguous)
    assert commits[0] not in asked and commits[-1] not in asked
    hidden = culprit in ambiguous or culprit - 1 in ambiguous
    if hidden:
        assert result.culprit is None and "ambiguous" in result.reason
        assert commits[culprit] in result.window
        assert all(commit in asked for commit in result.window[:-1])  # nothing left untried
    else:
        assert result.culprit == commits[culprit]


def test_ambiguous_commits_near_the_middle_cost_one_probe_each() -> None:
    # Probing the untried commit nearest the positional middle took 8 probes here, one over the bound.
    commits = [f"c{index:02d}" for index in range(14)]
    probe, asked = monotone_fake(commits, culprit=12, ambiguous=frozenset({6, 7, 9}))
    assert bisect(commits, probe, max_probes=14).culprit == "c12"
    assert len(asked) <= math.ceil(math.log2(14)) + 3


@settings(max_examples=200, deadline=None)
@given(scenarios(), st.integers(0, 40))
def test_resuming_runs_exactly_the_missing_probes(
    scenario: tuple[list[str], int, frozenset[int]], interrupted_after: int
) -> None:
    commits, culprit, ambiguous = scenario
    uninterrupted = bisect(commits, monotone_fake(commits, culprit, ambiguous)[0], max_probes=len(commits))
    recorded = uninterrupted.probes[: min(interrupted_after, len(uninterrupted.probes))]
    probe, asked = monotone_fake(commits, culprit, ambiguous)
    resumed = bisect(commits, probe, probes={p.commit: p for p in recorded}, max_probes=len(commits))
    assert asked == [p.commit for p in uninterrupted.probes[len(recorded) :]]
    assert resumed == uninterrupted


def test_max_probes_bounds_the_whole_bisection_recorded_probes_included() -> None:
    commits = [f"c{index:02d}" for index in range(33)]
    probe, asked = monotone_fake(commits, culprit=20)
    result = bisect(commits, probe, max_probes=2)
    assert (result.culprit, asked) == (None, ["c16", "c24"])
    assert (result.last_good, result.first_bad) == ("c16", "c24")
    assert result.window == tuple(commits[17:25])
    assert "max_probes=2" in result.reason
    assert bisect(commits, probe, probes={p.commit: p for p in result.probes}, max_probes=2) == result
    assert asked == ["c16", "c24"]


def test_two_commits_need_no_probe() -> None:
    result = bisect(["good", "bad"], lambda commit: pytest.fail("probed"), max_probes=1)
    assert (result.culprit, result.probes) == ("bad", ())


def test_next_commit_takes_the_middle_then_the_nearest_untried_neighbour() -> None:
    commits = [f"c{index}" for index in range(9)]
    assert next_commit(commits, {}) == "c4"
    skipped = {"c4": Probe("c4", Verdict.AMBIGUOUS)}
    assert next_commit(commits, skipped) == "c3"  # equally near as c5: the older first
    assert next_commit(commits, skipped | {"c3": Probe("c3", Verdict.AMBIGUOUS)}) == "c5"
    assert next_commit(commits, {"c4": Probe("c4", Verdict.GOOD)}) == "c6"
    assert next_commit(commits, {"c4": Probe("c4", Verdict.BAD)}) == "c2"
    done = {"c4": Probe("c4", Verdict.GOOD), "c5": Probe("c5", Verdict.BAD)}
    assert next_commit(commits, done) is None


def test_a_good_probe_after_a_bad_one_is_kept_but_does_not_move_the_window() -> None:
    commits = [f"c{index}" for index in range(9)]
    contradictory = {"c2": Probe("c2", Verdict.BAD), "c6": Probe("c6", Verdict.GOOD)}
    assert next_commit(commits, contradictory) == "c1"


@pytest.mark.parametrize(
    ("commits", "probes", "max_probes", "argument"),
    [
        (["only"], {}, 5, "commits"),
        (["a", "b", "a"], {}, 5, "commits"),
        (["a", "b", "c"], {"x": Probe("x", Verdict.GOOD)}, 5, "probes"),
        (["a", "b", "c"], {"b": Probe("a", Verdict.GOOD)}, 5, "probes"),
        (["a", "b", "c"], {"c": Probe("c", Verdict.BAD)}, 5, "probes"),
        (["a", "b", "c"], {}, 0, "max_probes"),
    ],
)
def test_bisect_rejects_bad_input(
    commits: list[str], probes: dict[str, Probe], max_probes: int, argument: str
) -> None:
    with pytest.raises(ValueError, match=f"^{argument}:"):
        bisect(commits, lambda commit: Probe(commit, Verdict.GOOD), probes=probes, max_probes=max_probes)


def test_bisect_rejects_a_probe_of_the_wrong_commit() -> None:
    with pytest.raises(ValueError, match="^probe:"):
        bisect(["a", "b", "c"], lambda commit: Probe("a", Verdict.GOOD), max_probes=5)


# --- contradictions: two verdicts the step times cannot tell apart ------------------------------------------

MID = (0.110, 0.111, 0.109, 0.1105)
FAST = (0.100, 0.101, 0.099, 0.1005)
SLOW = (0.125, 0.126, 0.124, 0.1255)


def test_a_good_and_a_bad_probe_with_the_same_step_times_contradict() -> None:
    probes = {"c3": Probe("c3", Verdict.GOOD, MID), "c6": Probe("c6", Verdict.BAD, MID)}
    assert contradictions(probes, margin=1.025) == [("c3", "c6")]
    apart = {"c3": Probe("c3", Verdict.GOOD, FAST), "c6": Probe("c6", Verdict.BAD, SLOW)}
    assert contradictions(apart, margin=1.025) == []
    # Samples too few for an interval never contradict.
    assert contradictions({"c3": Probe("c3", Verdict.GOOD, MID[:1]), "c6": probes["c6"]}, margin=1.025) == []


def test_a_contradiction_is_measured_again_and_then_believed() -> None:
    commits = [f"c{i}" for i in range(10)]  # the culprit is c6
    first = {"c4": Probe("c4", Verdict.GOOD, MID), "c6": Probe("c6", Verdict.BAD, MID)}
    asked: list[tuple[str, str]] = []

    def probe(commit: str) -> Probe:
        if commit in first:
            return first[commit]
        return Probe(
            commit, Verdict.BAD if commit >= "c6" else Verdict.GOOD, SLOW if commit >= "c6" else FAST
        )

    def settle(good: str, bad: str) -> tuple[Probe, Probe]:
        asked.append((good, bad))
        return Probe(good, Verdict.GOOD, FAST), Probe(bad, Verdict.BAD, SLOW)

    result = bisect(commits, probe, max_probes=10, settle=settle, margin=1.025)
    assert asked == [("c4", "c6")]
    assert result.culprit == "c6"


def test_a_contradiction_that_outlives_its_second_look_leaves_both_ambiguous() -> None:
    commits = [f"c{i}" for i in range(10)]
    first = {"c4": Probe("c4", Verdict.GOOD, MID), "c6": Probe("c6", Verdict.BAD, MID)}

    def probe(commit: str) -> Probe:
        if commit in first:
            return first[commit]
        return Probe(
            commit, Verdict.BAD if commit >= "c6" else Verdict.GOOD, SLOW if commit >= "c6" else FAST
        )

    result = bisect(commits, probe, max_probes=10, settle=lambda g, b: (first[g], first[b]), margin=1.025)
    verdicts = {p.commit: p.verdict for p in result.probes}
    assert verdicts["c4"] is verdicts["c6"] is Verdict.AMBIGUOUS
    # Both stepped around: the culprit hides behind the ambiguous c6, and no commit is named.
    assert result.culprit is None and result.window == ("c6", "c7")
    assert result.reason == "ambiguous commits hide the first bad one among 2 candidates"
