"""How a triage judges a stack, by the incident's kind: throughput compares the run medians of step time
with the two ends' (more runs while a probe stays ambiguous, runs starved of CPU left out), correctness
checks a run's loss curve against the last good stack's band. The statistics are triage/logic.py's.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping

from jaxbench.results.judgement.correctness import check_run, checkpoints
from jaxbench.triage.ledger import RunLedger, StackFailed
from jaxbench.triage.logic import (
    Comparison,
    Reproduction,
    Verdict,
    classify_probe,
    reproduce,
)
from jaxbench.triage.stacks import (
    BAD,
    GOOD,
    INSTALL_FAILED,
    Kind,
    Measurement,
    Plan,
    StepClock,
    program_label,
)

STARVED_RETRIES = 2
"""A run of an end that other work starved of CPU is run again, at most this many times."""


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
    samples: tuple[float, ...] = ()
    """The runs' median step times (throughput): what a contradiction between two probes is judged on."""


class Judge:
    def __init__(self, plan: Plan, runs: RunLedger) -> None:
        self.plan, self.runs = plan, runs

    def reproduce(self) -> tuple[Verdict, str]:
        raise NotImplementedError

    def verdict_of(self, label: str) -> Verdict:
        """Runs the labelled stack as a probe and classifies it against the two ends."""
        raise NotImplementedError

    def probe(self, label: str, commit: str) -> ProbeReport:
        raise NotImplementedError

    def _ok(self, label: str, what: str) -> Measurement:
        measurement = self.runs.run(label)
        if label in (GOOD, BAD) and not measurement.ok and self.plan.kind is Kind.THROUGHPUT:
            raise StackFailed(f"the {what} stack did not run: {measurement.status}: {measurement.reason}")
        return measurement


class NoProgram(Exception):
    """The runs record no compiled program (a framework's trainer): the program cannot guide the search."""


class ThroughputJudge(Judge):
    def __init__(self, plan: Plan, runs: RunLedger) -> None:
        super().__init__(plan, runs)
        self._since: dict[str, dict[str, int]] = {}
        """Per probe that went side by side (_side_by_side): where its judged runs and the ends' begin, as
        attempt numbers."""

    def reproduce(self) -> tuple[Verdict, str]:
        found = self._interleaved(GOOD, BAD, clock=None)
        # Every verdict after the reproduction times by the clock it chose.
        self.runs.clock = found.clock
        said = {Verdict.BAD: "real", Verdict.GOOD: "not real", Verdict.AMBIGUOUS: "ambiguous"}[found.verdict]
        ratio = "last good / first faster" if self.plan.faster else "first bad / last good"
        return found.verdict, (
            f"{said}: step time {ratio} {_interval(found.comparison)} over "
            f"{len(found.good)} + {len(found.bad)} interleaved runs in {found.rounds} round(s); "
            f"threshold {self.plan.threshold:.1%}; {clock_said(found)}"
        )

    def _interleaved(self, before: str, after: str, *, clock: StepClock | None) -> Reproduction:
        """`before` and `after` run in turn, judged after each round as the reproduction is (logic.reproduce),
        by `clock` (None: the one the first round chooses); a run starved of CPU is run again. A stack whose
        run fails raises StackFailed."""
        settings = self.plan.settings
        labels = {GOOD: before, BAD: after}

        def one_run(side: str, _: int) -> dict[StepClock, float]:
            measurement = self._counted_run(labels[side])
            return {c: median for c in StepClock if (median := measurement.median_by(c)) is not None}

        return reproduce(
            one_run,
            threshold=self.plan.threshold,
            repeats=settings.repeats,
            max_rounds=settings.max_rounds,
            confidence=settings.confidence,
            clock=clock,
            faster=self.plan.faster,
        )

    def _counted_run(self, label: str) -> Measurement:
        """One run of a stack that must run (an end, or a stack compared with one), run again while other
        work starved it of CPU. A failed run raises StackFailed."""
        measurement = self._unstarved_run(label)
        if not measurement.ok:
            raise StackFailed(f"{label} did not run: {measurement.status}: {measurement.reason}")
        return measurement

    def _unstarved_run(self, label: str) -> Measurement:
        for _ in range(1 + STARVED_RETRIES):
            measurement = self._ok(label, "last good" if label == GOOD else "first bad")
            if not self.runs.last_starved(label):
                break
        return measurement

    def fingerprint(self, label: str) -> str | None:
        """The compiled program of a compile-only run of the labelled stack; None where it did not run (a
        commit that does not import or compile). NoProgram where it ran but records no program."""
        measurement = self.runs.run(program_label(label))
        if measurement.status != "ok":
            return None
        summary = (measurement.program or {}).get("summary")
        fingerprint = summary.get("fingerprint") if isinstance(summary, Mapping) else None
        if not fingerprint:
            raise NoProgram(f"{label}'s run records no compiled program")
        return str(fingerprint)

    def confirm(
        self, before: str, after: str, unit: str = "commit"
    ) -> tuple[Verdict, str, tuple[float, float, float] | None]:
        """A candidate culprit (`after`) against its parent (`before`) in fresh interleaved runs: BAD only
        where the interval of the step-time ratio clears the incident's threshold, as the reproduction's
        must. Returns the verdict, the comparison in words, and (ratio, low, high)."""
        try:
            found = self._interleaved(before, after, clock=self.runs.clock)
        except StackFailed as failed:
            return Verdict.AMBIGUOUS, f"not confirmed: {failed}", None
        comparison = found.comparison
        change = "speed-up" if self.plan.faster else "regression"
        said = {
            Verdict.BAD: f"a {change}",
            Verdict.GOOD: f"no {change}",
            Verdict.AMBIGUOUS: "not conclusive",
        }[found.verdict]
        ratio = (
            f"faster than the {unit} before it (its step time over this one's)"
            if self.plan.faster
            else f"against the {unit} before it"
        )
        return (
            found.verdict,
            f"{found.clock} step time x{_interval(comparison)} {ratio} ("
            f"{len(found.good)} + {len(found.bad)} interleaved runs; {said} at the {self.plan.threshold:.1%} "
            "threshold)",
            (comparison.ratio, comparison.low, comparison.high),
        )

    def _samples(self, label: str) -> None:
        """probe_repeats runs of the probe, judged against every run of the ends so far; while that is
        ambiguous, the rest of max_probe_repeats side by side with fresh runs of both ends (or alone, where
        its runs fail: fresh ends would not make them run)."""
        settings = self.plan.settings
        self._top_up(label, settings.probe_repeats, limit=2 * settings.max_probe_repeats)
        if self._classify(label) is not Verdict.AMBIGUOUS:
            return
        if len(self.runs.medians(label)) < 2:
            self._top_up(label, settings.max_probe_repeats, limit=2 * settings.max_probe_repeats)
        elif extra := settings.max_probe_repeats - settings.probe_repeats:
            self._side_by_side(label, extra)

    def _side_by_side(self, label: str, rounds: int) -> None:
        """`rounds` rounds of the last good stack, the probe and the first bad stack in turn, and from then
        on the probe judged on these runs alone. A probe between the ends' earlier runs is often a machine
        that got faster or slower since they ran (other work started or stopped, caches and clocks
        settled): side by side, all three move alike."""
        self._since[label] = {side: self.runs.attempts(side) for side in (GOOD, label, BAD)}
        for index in range(rounds):
            for side in (GOOD, label, BAD) if index % 2 == 0 else (BAD, label, GOOD):
                if side == label:
                    self._unstarved_run(label)  # a probe's failed run is a result of the probe
                else:
                    self._counted_run(side)

    def _top_up(self, label: str, wanted: int, *, limit: int) -> None:
        """Run the stack until `wanted` of its runs count, at most `limit` runs in all: a run starved of
        CPU by other work does not count, and another takes its place. A stack that did not install is
        not run again."""
        while True:
            runs = self.runs.by_label.get(label, [])
            if runs and runs[-1].status == INSTALL_FAILED:
                return
            if len(runs) - self.runs.starved(label) >= wanted or len(runs) >= limit:
                return
            self.runs.run(label)

    def _judged(self, label: str, side: str | None = None) -> list[float]:
        """The run medians of `side` (default the probe) that the probe's verdict rests on: every run, or
        since its side-by-side rounds began."""
        side = side or label
        return self.runs.medians(side, since=self._since.get(label, {}).get(side, 0))

    def _classify(self, label: str) -> Verdict:
        probe, good, bad = self._judged(label), self._judged(label, GOOD), self._judged(label, BAD)
        if len(probe) < 2 or not good or not bad:
            return Verdict.AMBIGUOUS
        return classify_probe(probe, good, bad, confidence=self.plan.settings.confidence)

    def verdict_of(self, label: str) -> Verdict:
        self._samples(label)
        return self._classify(label)

    def probe(self, label: str, commit: str) -> ProbeReport:
        self._samples(label)
        return self._report(label, commit)

    def remeasure(self, label: str, commit: str) -> ProbeReport:
        """A probed stack whose verdict another probe contradicts: probe_repeats rounds side by side with
        fresh runs of both ends, and the probe judged on those."""
        self._side_by_side(label, self.plan.settings.probe_repeats)
        return self._report(label, commit)

    def _report(self, label: str, commit: str) -> ProbeReport:
        medians = self._judged(label)
        attempts = self.runs.attempts(label)
        starved = self.runs.starved(label)
        failed = attempts - len(self.runs.medians(label)) - starved
        notes = [f"{failed} of {attempts} runs failed"] if failed else []
        notes += [f"{starved} run(s) starved of CPU by other work left out"] if starved else []
        if label in self._since:
            notes.append(f"judged on {len(medians)} runs side by side with fresh runs of both ends")
        return ProbeReport(
            commit,
            self._classify(label),
            attempts,
            statistics.median(medians) if medians else None,
            None,
            "; ".join(notes),
            tuple(medians),
        )


class CorrectnessJudge(Judge):
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


def clock_said(found: Reproduction) -> str:
    """Which clock the runs were timed by, and why, in words."""
    if not found.spreads:
        return f"timed by the {found.clock} clock"
    wall, cpu = found.spreads[StepClock.WALL], found.spreads[StepClock.CPU]
    why = "the step's own work" if found.clock is StepClock.CPU else "CPU time scatters more"
    return (
        f"timed by {'CPU time' if found.clock is StepClock.CPU else 'the wall clock'} ({why}: runs spread "
        f"{cpu:.1%} by CPU time, {wall:.1%} by the wall clock)"
    )


def _interval(comparison: Comparison) -> str:
    return (
        f"{comparison.ratio:.3f} ({comparison.confidence:.0%} interval {comparison.low:.3f} .. "
        f"{comparison.high:.3f})"
    )
