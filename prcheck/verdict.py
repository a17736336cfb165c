"""Pure decisions of `jaxbench pr-check`: is the head of a change slower than its base?

Each benchmark runs base and head in pairs on one machine, the order alternating (base first, then head
first); the log ratio of head / base within each pair gets a Student-t interval
(harness.measure.stats.paired_ratio), so drift between pairs and a pair's favoured position both cancel.
The interval against a practical threshold T gives regression, improvement, ok, inconclusive, failed or
unmeasured; `compare` runs rounds of pairs until the verdict is not inconclusive, a Bonferroni share of the
error per look, and replaces pairs starved of CPU. Each verdict's rule: docs/design.md, "Pull-request
check".

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/prcheck/test_pr_verdict.py
"""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from jaxbench.harness.measure.stats import RatioEstimate, check_rounds, counterbalanced, paired_ratio
from jaxbench.triage.clocks import starved_runs
from jaxbench.triage.logic import PRACTICAL_FRACTION
from jaxbench.triage.stacks import Measurement

BASE, HEAD = "base", "head"


class PRVerdict(enum.StrEnum):
    OK = "ok"
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    INCONCLUSIVE = "inconclusive"
    FAILED = "failed"
    UNMEASURED = "unmeasured"


BLOCKING = frozenset({PRVerdict.REGRESSION, PRVerdict.FAILED})
"""Verdicts that fail the pull request's check: findings about the change."""


@dataclasses.dataclass(frozen=True)
class Judgement:
    benchmark: str
    """`recipe:size`."""
    verdict: PRVerdict
    estimate: RatioEstimate | None
    """Step time head / base with its interval; None where no pair ran ok on both sides."""
    base_s: tuple[float, ...]
    head_s: tuple[float, ...]
    """The counted pairs' run medians, in the order they ran."""
    rounds: int
    runs: int
    """Every run made, starved and failed ones included."""
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        estimate = self.estimate
        return {
            "benchmark": self.benchmark,
            "verdict": self.verdict.value,
            "ratio": None if estimate is None else estimate.ratio,
            "low": None if estimate is None else _finite(estimate.low),
            "high": None if estimate is None else _finite(estimate.high),
            "confidence": None if estimate is None else estimate.confidence,
            "pairs": len(self.base_s),
            "base_median_step_s": statistics.median(self.base_s) if self.base_s else None,
            "head_median_step_s": statistics.median(self.head_s) if self.head_s else None,
            "base_step_s": list(self.base_s),
            "head_step_s": list(self.head_s),
            "rounds": self.rounds,
            "runs": self.runs,
            "note": self.note,
        }


def overall(judgements: Sequence[Judgement]) -> PRVerdict:
    """The check's own verdict: REGRESSION where a benchmark's is blocking, else UNMEASURED where one was
    never measured (a check of nothing must not pass), else OK (inconclusive ones included)."""
    verdicts = {j.verdict for j in judgements}
    if verdicts & BLOCKING:
        return PRVerdict.REGRESSION
    return PRVerdict.UNMEASURED if PRVerdict.UNMEASURED in verdicts else PRVerdict.OK


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def check_threshold(threshold: float) -> None:
    if not 0 < threshold < 1:
        raise ValueError(f"threshold: expected a fraction between 0 and 1 such as 0.05, got {threshold}")


def verdict_of(estimate: RatioEstimate, *, threshold: float) -> PRVerdict:
    """The verdict of one interval of head / base (the rules: docs/design.md, "Pull-request check").

    >>> verdict_of(RatioEstimate(1.12, 1.08, 1.16, 6, 0.95), threshold=0.05)
    <PRVerdict.REGRESSION: 'regression'>
    """
    check_threshold(threshold)
    confirmed = 1 + PRACTICAL_FRACTION * threshold
    if estimate.low > confirmed:
        return PRVerdict.REGRESSION
    if estimate.high < 1 / confirmed:
        return PRVerdict.IMPROVEMENT
    if 1 / (1 + threshold) <= estimate.low and estimate.high <= 1 + threshold:
        return PRVerdict.OK
    return PRVerdict.INCONCLUSIVE


Measure = Callable[[str, int], Measurement]
"""(side, attempt) -> one run of that side's stack; attempt counts from 0 per side."""


@dataclasses.dataclass
class _Pairs:
    """Every run made, in pairs (base, head) whichever ran first, and which of them count."""

    runs: list[tuple[Measurement, Measurement]] = dataclasses.field(default_factory=list)

    def counted(self) -> list[tuple[float, float]]:
        """Pairs whose two runs ended ok and neither was starved of CPU."""
        flat = [run for pair in self.runs for run in pair]
        starved = starved_runs([run.cpu_per_wall if run.ok else None for run in flat])
        kept = []
        for index, (base, head) in enumerate(self.runs):
            if base.ok and head.ok and not (starved[2 * index] or starved[2 * index + 1]):
                assert base.median_step_s is not None and head.median_step_s is not None
                kept.append((base.median_step_s, head.median_step_s))
        return kept

    def failures(self, side: int) -> list[Measurement]:
        return [pair[side] for pair in self.runs if not pair[side].ok]


def compare(
    measure: Measure,
    *,
    benchmark: str,
    threshold: float,
    repeats: int,
    max_rounds: int,
    confidence: float = 0.95,
) -> Judgement:
    """Pairs of runs, base then head and head then base in turn (`counterbalanced`), judged after each round
    of `repeats` counted pairs."""
    check_threshold(threshold)
    check_rounds(repeats, max_rounds, confidence)
    per_look = 1 - (1 - confidence) / max_rounds
    pairs = _Pairs()
    estimate: RatioEstimate | None = None
    verdict = PRVerdict.INCONCLUSIVE
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        wanted, limit = rounds * repeats, len(pairs.runs) + 2 * repeats
        while len(pairs.counted()) < wanted and len(pairs.runs) < limit:
            attempt = len(pairs.runs)
            ran = {side: measure(side, attempt) for side in counterbalanced(attempt, BASE, HEAD)}
            pairs.runs.append((ran[BASE], ran[HEAD]))
            if len(pairs.runs) >= 2 and _failed(pairs):
                break  # one side does not run at all: more pairs will not change that
        if failed := _failed(pairs):
            return _judgement(benchmark, failed, None, pairs, rounds)
        counted = pairs.counted()
        if len(counted) >= 2:
            estimate = paired_ratio([b for b, _ in counted], [h for _, h in counted], per_look)
            verdict = verdict_of(estimate, threshold=threshold)
            if verdict is not PRVerdict.INCONCLUSIVE:
                break
    if estimate is None:
        verdict = PRVerdict.UNMEASURED
    return _judgement(benchmark, verdict, estimate, pairs, rounds)


def _failed(pairs: _Pairs) -> PRVerdict | None:
    """FAILED when every head run failed while a base run was ok; UNMEASURED when the base never ran."""
    base_failed, head_failed = pairs.failures(0), pairs.failures(1)
    if not pairs.runs:
        return None
    if len(base_failed) == len(pairs.runs):
        return PRVerdict.UNMEASURED
    if len(head_failed) == len(pairs.runs):
        return PRVerdict.FAILED
    return None


def _judgement(
    benchmark: str, verdict: PRVerdict, estimate: RatioEstimate | None, pairs: _Pairs, rounds: int
) -> Judgement:
    counted = pairs.counted()
    notes = []
    for side, name in ((0, BASE), (1, HEAD)):
        failed = pairs.failures(side)
        if failed:
            reasons = sorted({f"{run.status}: {run.reason}" if run.reason else run.status for run in failed})
            notes.append(f"{len(failed)} {name} run(s) failed ({'; '.join(reasons)[:300]})")
    all_ok = [pair for pair in pairs.runs if pair[0].ok and pair[1].ok]
    if starved := len(all_ok) - len(counted):
        notes.append(f"{starved} pair(s) starved of CPU by other work left out")
    return Judgement(
        benchmark=benchmark,
        verdict=verdict,
        estimate=estimate,
        base_s=tuple(b for b, _ in counted),
        head_s=tuple(h for _, h in counted),
        rounds=rounds,
        runs=2 * len(pairs.runs),
        note="; ".join(notes),
    )
