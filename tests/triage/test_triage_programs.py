"""Program-first bisection (triage/programs.py): the commits where the compiled step changes, found with
compile-only probes, stepping around commits that do not compile; decoys that change code but not the program
are never windows."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxbench.triage.programs import Fingerprint, find_program_changes, timed_commits, window_ending


class Probes:
    def __init__(self, programs: list[Fingerprint]) -> None:
        self.commits = [f"c{i}" for i in range(len(programs))]
        self.programs = dict(zip(self.commits, programs, strict=True))
        self.asked: list[str] = []

    def __call__(self, commit: str) -> Fingerprint:
        self.asked.append(commit)
        return self.programs[commit]


def scenario() -> list[Fingerprint]:
    """The issue's range: 29 commits after the last good pin; position 3 does not parse (fixed at 4), the
    culprit at 7 changes the program, decoys at 10 (a docstring) and 14 (renames) do not."""
    programs: list[Fingerprint] = ["A"] * 7 + ["B"] * 23
    programs[3] = None
    return programs


def test_the_issues_range_has_one_change_at_the_culprit() -> None:
    probes = Probes(scenario())
    search = find_program_changes(probes.commits, probes, max_probes=20)
    assert [w.commits for w in search.windows] == [("c7",)]
    assert search.windows[0].exact and search.complete
    assert timed_commits(probes.commits, search) == ["c0", "c7"]
    assert window_ending(search, "c7").before == "A"
    # About log2(29) probes beside the ends: far fewer than timing every half.
    assert len(probes.asked) <= 2 + math.ceil(math.log2(29)) + 1
    assert "c10" not in probes.asked or search.fingerprints["c10"] == "B"


def test_a_program_change_that_leaves_the_speed_is_a_window_too() -> None:
    programs: list[Fingerprint] = ["A"] * 7 + ["B"] * 5 + ["C"] * 10
    probes = Probes(programs)
    search = find_program_changes(probes.commits, probes, max_probes=20)
    assert [w.commits for w in search.windows] == [("c7",), ("c12",)]
    assert [(w.before, w.after) for w in search.windows] == [("A", "B"), ("B", "C")]
    # The timed bisection probes only c7: the last window stands for the bad end.
    assert timed_commits(probes.commits, search) == ["c0", "c7", "c12"]


def test_ends_that_compile_one_program_have_no_window() -> None:
    probes = Probes(["A"] * 12)
    search = find_program_changes(probes.commits, probes, max_probes=20)
    assert search.same_program and probes.asked == ["c0", "c11"]
    with pytest.raises(ValueError, match="same program"):
        timed_commits(probes.commits, search)


def test_commits_that_do_not_compile_widen_the_window_they_hide() -> None:
    programs: list[Fingerprint] = ["A", "A", None, None, "B", "B"]
    probes = Probes(programs)
    search = find_program_changes(probes.commits, probes, max_probes=20)
    assert [w.commits for w in search.windows] == [("c2", "c3", "c4")]
    assert not search.windows[0].exact and search.complete


def test_the_probe_budget_leaves_a_wide_window_and_says_so() -> None:
    probes = Probes(["A"] * 20 + ["B"] * 20)
    search = find_program_changes(probes.commits, probes, max_probes=3)
    assert len(probes.asked) == 3 and not search.complete
    (window,) = search.windows
    assert "c20" in window.commits and len(window.commits) > 1


def test_a_resumed_search_probes_nothing_twice() -> None:
    first = Probes(scenario())
    done = find_program_changes(first.commits, first, max_probes=20)
    again = Probes(scenario())
    resumed = find_program_changes(again.commits, again, max_probes=20, known=done.fingerprints)
    assert again.asked == [] and resumed.windows == done.windows


def test_an_end_that_does_not_compile_is_refused() -> None:
    probes = Probes(["A", "A", None])
    with pytest.raises(ValueError, match="the first bad commit did not compile"):
        find_program_changes(probes.commits, probes, max_probes=5)


programs_strategy = st.lists(st.sampled_from(["A", "B", "C", None]), min_size=2, max_size=40).filter(
    lambda p: p[0] is not None and p[-1] is not None
)


@settings(max_examples=300, deadline=None)
@given(programs_strategy)
def test_windows_chain_the_ends_and_each_holds_a_change(programs: list[Fingerprint]) -> None:
    probes = Probes(programs)
    search = find_program_changes(probes.commits, probes, max_probes=100)
    index = {c: i for i, c in enumerate(probes.commits)}
    if programs[0] == programs[-1]:
        assert search.windows == ()
        return
    # From the good end's program to the bad end's, one window after another.
    assert search.windows[0].before == programs[0] and search.windows[-1].after == programs[-1]
    for earlier, later in zip(search.windows, search.windows[1:], strict=False):
        assert earlier.after == later.before and index[earlier.commits[-1]] < index[later.commits[0]]
    for window in search.windows:
        first, last = index[window.commits[0]], index[window.commits[-1]]
        # The commit before it compiles the old program, its last the new one, and every commit between
        # did not compile: the change is inside, and no smaller window could be told apart.
        assert programs[first - 1] == window.before != window.after == programs[last]
        assert all(programs[i] is None for i in range(first, last))
    # Each commit is probed at most once.
    assert len(probes.asked) == len(set(probes.asked))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=38), max_size=4, unique=True))
def test_without_broken_commits_or_reverts_every_change_is_found_exactly(changes: list[int]) -> None:
    programs: list[Fingerprint] = []
    level = 0
    for i in range(40):
        level += i in changes
        programs.append(f"P{level}")
    probes = Probes(programs)
    search = find_program_changes(probes.commits, probes, max_probes=100)
    assert [w.commits for w in search.windows] == [(f"c{i}",) for i in sorted(changes)]
