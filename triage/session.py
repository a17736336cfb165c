"""One triage of an incident, start to end: reproduce it, find the component, bisect the component's commits.

The decisions are triage/logic.py's; this module sequences them, asking each question of a judge
(triage/judges.py) that turns it into benchmark runs of named stacks (triage/stacks.py: "good", "bad",
"optax@<commit>", ...), counted against the budget by triage/ledger.py. Running a stack (`Measure`) and
listing a component's commits (`CommitsBetween`) are callables passed in, so a whole triage runs in tests
with fakes, and a resumed triage replays its recorded runs to end exactly where it stopped. Throughput
incidents compare step times, correctness incidents loss curves: docs/design.md, "A triage session".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/triage/test_triage_session.py
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from jaxbench.results.judgement.components import program_change
from jaxbench.triage.judges import CorrectnessJudge, NoProgram, ProbeReport, ThroughputJudge
from jaxbench.triage.ledger import BudgetSpent, RunLedger, StackFailed
from jaxbench.triage.logic import (
    PRACTICAL_FRACTION,
    Bisection,
    Probe,
    Settle,
    Verdict,
    bisect,
    isolate_component,
)
from jaxbench.triage.programs import find_program_changes, timed_commits, window_ending
from jaxbench.triage.stacks import BAD, GOOD, CommitsBetween, Kind, Measure, Move, Plan


@dataclasses.dataclass(frozen=True)
class Outcome:
    state: str
    """finished, stopped (a bound was reached; resumable) or failed."""
    reason: str
    reproduced: Verdict | None = None
    """BAD: the incident is real on this machine; GOOD: it does not reproduce; AMBIGUOUS: cannot tell."""
    reproduction: str = ""
    """How the ends compared, in words with figures."""
    clock: str = "wall"
    """What step times were measured by: "wall", or "cpu" (the process's CPU time), chosen by the
    reproduction (triage/clocks.py, choose_clock)."""
    component: str | None = None
    isolation: str = ""
    unit: str = "commit"
    """What the culprit is: a commit, or a release (a component bisected by its wheels)."""
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
    release_range: str = ""
    """A release culprit's commits since the last good release (their tags, a compare link): what a source
    bisection on a build runner would take next; set by the caller, which knows the releases' tags."""
    program_search: str = ""
    """Where the compiled program changes between the ends (compile-only probes), in words; "" where the
    search did not run (a correctness incident)."""
    probes: tuple[ProbeReport, ...] = ()
    runs: int = 0
    """Benchmark runs this triage used, recorded ones included."""
    seconds: float = 0.0
    """Time spent in those runs."""

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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
    runs = RunLedger(plan, measure, clock)
    partial: dict[str, Any] = {}
    try:
        _triage(plan, runs, commits_between, partial)
    except BudgetSpent as spent:
        return Outcome("stopped", f"stopped: {spent}", **partial, runs=runs.count, seconds=runs.seconds)
    except StackFailed as failed:
        return Outcome("failed", str(failed), **partial, runs=runs.count, seconds=runs.seconds)
    return Outcome(**partial, runs=runs.count, seconds=runs.seconds)


def _triage(plan: Plan, runs: RunLedger, commits_between: CommitsBetween, out: dict[str, Any]) -> None:
    judge = ThroughputJudge(plan, runs) if plan.kind is Kind.THROUGHPUT else CorrectnessJudge(plan, runs)
    verdict, described = judge.reproduce()
    out.update(reproduced=verdict, reproduction=described, clock=runs.clock.value)
    if verdict is not Verdict.BAD:
        unmoved = f"; not rerun at their first bad pins: {'; '.join(plan.skipped)}" if plan.skipped else ""
        if verdict is Verdict.GOOD:
            reason = f"not reproduced on this machine: {described}{unmoved}"
        else:
            reason = (
                f"neither reproduced nor ruled out on this machine: {described}{unmoved}; more runs "
                "(--repeats, --max-runs) or one CPU for the runs (--cpus N: timed by CPU time, which other "
                "work moves least) would settle it"
            )
        out.update(state="finished", reason=reason)
        return
    found = isolate_component([m.name for m in plan.moved], lambda name: judge.verdict_of(f"{name}=bad"))
    component, isolation = found.culprit, found.reason
    if plan.skipped and len(plan.moved) == 1:
        isolation = f"{component} is the only component that moved and can be rerun here"
    out.update(component=component, isolation=isolation)
    if component is None:
        out.update(state="finished", reason=f"no single component: {isolation}")
        return
    move = plan.move_of(component)
    out.update(repository=move.repository, unit=move.unit)
    commits = commits_between(move)
    if commits[0] != move.good or commits[-1] != move.bad:
        raise ValueError(f"commits_between({component}) must run from {move.good} to {move.bad}")
    reports: dict[str, ProbeReport] = {}

    def probe(commit: str) -> Probe:
        report = judge.probe(f"{component}@{commit}", commit)
        reports[commit] = report
        out.update(probes=tuple(reports.values()))
        return Probe(commit, report.verdict, report.samples)

    if isinstance(judge, ThroughputJudge):
        found_commit = _timed_bisection(_Bisecting(plan, runs, judge, move, commits, probe, out), reports)
        _confirm(judge, found_commit, move, runs, out)
    else:
        assert isinstance(judge, CorrectnessJudge)
        found_commit = bisect(commits, probe, max_probes=plan.settings.max_probes)
        _conclude(plan, runs, judge, found_commit, move, out)


@dataclasses.dataclass(frozen=True)
class _Bisecting:
    """What a throughput bisection works with: the triage's plan, runs and judge, the component it bisects
    and its commits (ends included), how one commit is probed, and the outcome's fields so far."""

    plan: Plan
    runs: RunLedger
    judge: ThroughputJudge
    move: Move
    commits: list[str]
    probe: Callable[[str], Probe]
    out: dict[str, Any]


def _timed_bisection(bisecting: _Bisecting, reports: dict[str, ProbeReport]) -> Bisection:
    """The throughput bisection (program first), two probes that contradict each other measured again, and
    the probes' reports brought in line with the verdicts the bisection ended with."""

    def settle(good: str, bad: str) -> tuple[Probe, Probe]:
        again = []
        for commit in (good, bad):
            report = bisecting.judge.remeasure(f"{bisecting.move.name}@{commit}", commit)
            reports[commit] = _noted(report, "contradicted another probe: measured again")
            again.append(Probe(commit, report.verdict, report.samples))
        bisecting.out.update(probes=tuple(reports.values()))
        return again[0], again[1]

    found = _bisect_by_program(bisecting, settle)
    for final in found.probes:  # a contradiction that outlived its second look: both ambiguous
        if final.commit in reports and reports[final.commit].verdict is not final.verdict:
            reports[final.commit] = _noted(
                reports[final.commit], "still contradicted: ambiguous", verdict=final.verdict
            )
    bisecting.out.update(probes=tuple(reports.values()))
    return found


def _noted(report: ProbeReport, note: str, **changes: Any) -> ProbeReport:
    """The report with `note` added after its own, and any other fields changed."""
    return dataclasses.replace(report, note="; ".join(filter(None, [report.note, note])), **changes)


COMPILE_PROBES_PER_PROBE = 3
"""Compile-only probes allowed per timed probe of max_probes: one costs a compile of a few steps, a timed
probe four runs or more, and the search takes about log2(commits) of them per program change plus one per
commit that does not compile (34 commits, two changes and a broken commit ran out at 12)."""


def _bisect_by_program(bisecting: _Bisecting, settle: Settle) -> Bisection:
    """Program first (triage/programs.py): compile-only probes find where the program changes, and only
    those commits are timed. Where the ends compile one program, or the runs record none, every commit is a
    candidate and the step time alone decides, as the outcome says."""
    plan, commits, out = bisecting.plan, bisecting.commits, bisecting.out
    max_probes, confidence = plan.settings.max_probes, plan.settings.confidence
    # Two probes a practical change apart are no contradiction, however wide their intervals.
    margin = 1 + PRACTICAL_FRACTION * plan.threshold

    def by_time(candidates: list[str]) -> Bisection:
        return bisect(
            candidates,
            bisecting.probe,
            max_probes=max_probes,
            settle=settle,
            margin=margin,
            confidence=confidence,
        )

    if bisecting.runs.program(GOOD) is None:
        out.update(program_search="not used (the runs record no compiled program): every commit timed")
        return by_time(commits)
    try:
        search = find_program_changes(
            commits,
            lambda commit: bisecting.judge.fingerprint(f"{bisecting.move.name}@{commit}"),
            max_probes=COMPILE_PROBES_PER_PROBE * max_probes,
        )
    except (NoProgram, ValueError) as unusable:
        out.update(program_search=f"not used ({unusable}): every commit timed")
        return by_time(commits)
    probed = len(search.fingerprints)
    if search.same_program:
        ends = search.fingerprints[commits[0]] or ""
        out.update(
            program_search=f"the ends compile the same program ({ends[:12]}, {probed} compile-only probes): "
            "the change lies outside it, so every commit is timed"
        )
        return by_time(commits)
    changes = "; ".join(
        f"{'..'.join(c[:12] for c in (w.commits[0], w.commits[-1])[: 1 if w.exact else 2])} "
        f"({w.before[:8]} → {w.after[:8]})"
        for w in search.windows
    )
    budget = "" if search.complete else " (the probe budget ran out before every window was narrowed)"
    out.update(
        program_search=f"the program changes at {len(search.windows)} place(s) of {len(commits) - 1} "
        f"{bisecting.move.unit}s: {changes}; {probed} compile-only probes{budget}"
    )
    timed = by_time(timed_commits(commits, search))
    if timed.culprit is None:
        return timed
    window = window_ending(search, timed.culprit)
    parent = commits[commits.index(window.commits[0]) - 1]
    if not window.exact:
        reason = (
            f"the change lies between {parent[:12]} and {window.commits[-1][:12]}: "
            f"{len(window.commits)} commits there may have changed the program"
            + (" (some did not compile)" if search.complete else "")
        )
        return dataclasses.replace(
            timed, culprit=None, last_good=parent, window=window.commits, reason=reason
        )
    return dataclasses.replace(timed, last_good=parent, window=window.commits)


def _confirm(
    judge: ThroughputJudge, found: Bisection, move: Move, runs: RunLedger, out: dict[str, Any]
) -> None:
    """A candidate is named only once fresh interleaved runs against its parent clear the threshold;
    otherwise the outcome says where the change lies, and that it was not confirmed."""
    out.update(last_good_commit=found.last_good, window=found.window)
    if found.culprit is None:
        out.update(state="finished", reason=f"{move.name}: no single {move.unit}: {found.reason}")
        return
    before, after = f"{move.name}@{found.last_good}", f"{move.name}@{found.culprit}"
    verdict, effect, ratio = judge.confirm(before, after, move.unit)
    change = program_change(runs.program(before), runs.program(after))
    out.update(effect=effect, effect_ratio=ratio, program="" if change is None else change.describe())
    if verdict is not Verdict.BAD:
        out.update(
            state="finished",
            reason=f"{move.name}: between {found.last_good} and {found.culprit}: the candidate "
            f"{found.culprit[:12]} was not confirmed against the {move.unit} before it: {effect}",
        )
        return
    out.update(
        state="finished",
        reason=f"{move.name} {found.culprit} is the first {judge.plan.changed} {move.unit}; "
        f"{found.last_good} is {judge.plan.unchanged}",
        culprit=found.culprit,
    )


def _conclude(
    plan: Plan, runs: RunLedger, judge: CorrectnessJudge, found: Bisection, move: Move, out: dict[str, Any]
) -> None:
    """A correctness culprit: the loss checks named it, and its final loss against the commit before it."""
    out.update(last_good_commit=found.last_good, window=found.window)
    if found.culprit is None:
        out.update(state="finished", reason=f"{move.name}: no single {move.unit}: {found.reason}")
        return
    before = GOOD if found.last_good == move.good else f"{move.name}@{found.last_good}"
    # The culprit at the component's bad pin is measured alone (isolation's stack) where others moved too.
    bad_alone = BAD if len(plan.moved) == 1 else f"{move.name}=bad"
    after = bad_alone if found.culprit == move.bad else f"{move.name}@{found.culprit}"
    effect, ratio = judge.effect(before, after)
    change = program_change(runs.program(before), runs.program(after))
    out.update(
        state="finished",
        reason=f"{move.name} {found.culprit} is the first bad {move.unit}; {found.last_good} is good",
        culprit=found.culprit,
        effect=effect,
        effect_ratio=ratio,
        program="" if change is None else change.describe(),
    )
