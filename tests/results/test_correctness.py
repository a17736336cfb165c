"""Loss-curve checks: hard failures without history, and the band of recent runs in both directions."""

from __future__ import annotations

import math

from jaxbench.results.judgement.correctness import (
    Severity,
    band_findings,
    check_run,
    checkpoints,
    flagged_since,
    hard_failures,
)

GOOD = [4.0 - 2.0 * s / 40 for s in range(40)]


def test_checkpoints_at_quarters_and_the_final_window() -> None:
    points = checkpoints(GOOD)
    assert list(points) == ["step 10", "step 20", "step 30", "step 40", "final window"]
    assert points["step 40"] == GOOD[39]
    assert points["final window"] == sum(GOOD[-10:]) / 10


def test_hard_failures() -> None:
    assert hard_failures(GOOD, optimum=1.0) == []
    [nan] = hard_failures([*GOOD[:5], math.nan, *GOOD[6:]], optimum=1.0)
    assert nan.check == "non-finite loss" and "step 5" in nan.detail
    [diverged] = hard_failures([4.0 + s for s in range(40)], optimum=1.0)
    assert diverged.check == "divergence"
    [leak] = hard_failures(GOOD, optimum=3.0)
    assert leak.check == "below optimum" and leak.severity is Severity.HARD


def test_band_in_both_directions() -> None:
    history = [[x * (1 + 0.001 * k) for x in GOOD] for k in range(5)]
    assert band_findings(GOOD, history) == []
    higher = [x + 0.5 for x in GOOD]
    lower = [x - 0.5 for x in GOOD]
    above, below = band_findings(higher, history), band_findings(lower, history)
    assert above and all("above the band" in f.detail for f in above)
    assert below and all("below the band" in f.detail for f in below)
    assert band_findings(lower, history[:2]) == []  # too little history for a band


def test_hard_failure_wins_over_the_band() -> None:
    history = [GOOD] * 5
    assert [f.severity for f in check_run([math.inf] * 40, 1.0, history)] == [Severity.HARD]


def test_a_streak_of_failing_runs_is_dated_from_its_first() -> None:
    history = [[x * (1 + 0.001 * (k % 3)) for x in GOOD] for k in range(8)]
    higher = [x * 1.074 for x in GOOD]
    assert flagged_since([*history], [1.0] * 8) is None  # the newest passes
    assert flagged_since([*history, higher], [1.0] * 9) == 8
    assert flagged_since([*history, higher, higher, higher], [1.0] * 11) == 8
    # A decoy: one bad run long before, then good ones, then tonight's: only tonight's streak counts.
    decoy = [*history[:4], higher, *history[4:], higher]
    assert flagged_since(decoy, [1.0] * 10) == 9
    # A run without a curve (a failed run) ends the walk as a pass would not: it cannot be judged.
    assert flagged_since([*history, None, higher], [1.0] * 10) == 9
