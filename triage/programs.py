"""Program-first bisection: where between an incident's two ends the compiled training step changes.

A component that acts through the traced program (optax, flax, a framework's model code, jax's Python) can
change the step time only by changing the program XLA compiles, so a commit that compiles exactly its parent's
program is never the culprit of a step-time change. Compiling is deterministic and far cheaper than timing:
the search for program changes runs first on compile-only probes, and only the commits where the program
changes are timed. Pure: the probe is a callable. Why: docs/design.md, "The statistics of a triage".

    python -m pytest -q tests/triage/test_triage_programs.py
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

Fingerprint = str | None
"""A commit's compiled program (sha256 of the optimized HLO), or None where the commit did not compile."""


@dataclasses.dataclass(frozen=True)
class ChangeWindow:
    """Where the program changes once: between the commit before `commits` and the last of them."""

    commits: tuple[str, ...]
    """Oldest first; the last compiles the new program. More than one only where commits that did not
    compile (or the probe budget) hide which of them changed it."""
    before: str
    after: str

    @property
    def exact(self) -> bool:
        return len(self.commits) == 1


@dataclasses.dataclass(frozen=True)
class ProgramSearch:
    windows: tuple[ChangeWindow, ...]
    """Every change between the ends, oldest first; empty where the ends compile the same program."""
    fingerprints: Mapping[str, Fingerprint]
    """Each probed commit's program, in the order probed."""
    complete: bool
    """False where the probe budget ran out before every window was narrowed as far as it could be."""

    @property
    def same_program(self) -> bool:
        return not self.windows


def find_program_changes(
    commits: Sequence[str],
    fingerprint_of: Callable[[str], Fingerprint],
    *,
    max_probes: int,
    known: Mapping[str, Fingerprint] | None = None,
) -> ProgramSearch:
    """Bisect on the program: an interval whose ends compile different programs is split at an untried
    commit nearest its middle, and each half whose ends differ is split again, down to single commits.
    A commit that does not compile is stepped around like `git bisect skip`; where only such commits are
    left inside an interval, its window keeps them all. `known`: fingerprints already probed (a resumed
    triage), never probed again. max_probes bounds the new probes.

    A program that changes and changes back between two probes with equal programs is not seen: such a
    pair leaves the step time where it was, so neither commit can explain a change between the ends.

    >>> programs = {"c0": "A", "c1": "A", "c2": None, "c3": "B", "c4": "B"}
    >>> search = find_program_changes(list(programs), programs.__getitem__, max_probes=5)
    >>> [w.commits for w in search.windows]
    [('c2', 'c3')]
    """
    if len(commits) < 2:
        raise ValueError(f"commits: needs the good and the bad pin at least, got {len(commits)}")
    if len(set(commits)) != len(commits):
        raise ValueError("commits: lists a commit twice")
    fingerprints: dict[str, Fingerprint] = dict(known or {})
    probes = 0

    def fingerprint(index: int) -> Fingerprint:
        nonlocal probes
        commit = commits[index]
        if commit not in fingerprints:
            fingerprints[commit] = fingerprint_of(commit)
            probes += 1
        return fingerprints[commit]

    last = len(commits) - 1
    ends = fingerprint(0), fingerprint(last)
    if ends[0] is None or ends[1] is None:
        which = "last good" if ends[0] is None else "first bad"
        raise ValueError(f"the {which} commit did not compile: no program to bisect from")
    complete = True

    def split(low: int, high: int) -> list[ChangeWindow]:
        """The windows between indices low and high, whose programs are known and differ."""
        nonlocal complete
        before, after = fingerprints[commits[low]], fingerprints[commits[high]]
        assert before is not None and after is not None and before != after
        while True:
            untried = [i for i in range(low + 1, high) if commits[i] not in fingerprints]
            compiled = [i for i in range(low + 1, high) if fingerprints.get(commits[i]) is not None]
            if compiled:  # a compiled commit inside (a resumed triage's): split there
                middle = compiled[(len(compiled) - 1) // 2]
                break
            if not untried:
                return [ChangeWindow(tuple(commits[low + 1 : high + 1]), before, after)]
            if probes >= max_probes:
                complete = False
                return [ChangeWindow(tuple(commits[low + 1 : high + 1]), before, after)]
            candidate = min(untried, key=lambda i: (abs(2 * i - low - high), i))
            if fingerprint(candidate) is not None:
                middle = candidate
                break
        found = []
        if fingerprints[commits[middle]] != before:
            found += split(low, middle)
        if fingerprints[commits[middle]] != after:
            found += split(middle, high)
        return found

    windows = [] if ends[0] == ends[1] else split(0, last)
    return ProgramSearch(tuple(windows), dict(fingerprints), complete)


def timed_commits(commits: Sequence[str], search: ProgramSearch) -> list[str]:
    """What a step-time bisection needs to probe once the program changes are known: the last good commit,
    then the last commit of each window (the first to compile its new program) — the last of them compiles
    the first bad commit's program, so it stands for the bad end. Between two of them the program, and so
    the step time of such a component, stays as it is."""
    if search.same_program:
        raise ValueError("the ends compile the same program: nothing to time by program")
    return [commits[0], *(window.commits[-1] for window in search.windows)]


def window_ending(search: ProgramSearch, commit: str) -> ChangeWindow:
    """The change window whose new program `commit` (a bisection's first bad) compiles first."""
    for window in search.windows:
        if window.commits[-1] == commit:
            return window
    raise ValueError(f"{commit!r} ends no change window")
