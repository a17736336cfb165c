"""Triage statistics (triage/logic.py) against seeded lognormal step times: comparing two samples, calling a
regression real, classifying a probe against both ends, reproducing an incident. The clock and runs starved of
CPU: tests/triage/test_triage_clocks.py; the bisection: tests/triage/test_triage_bisection.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from jaxbench.triage.logic import (
    Comparison,
    RunTimes,
    Verdict,
    classify_probe,
    compare_samples,
    regression_is_real,
    reproduce,
)
from jaxbench.triage.stacks import StepClock

STEP_S = 0.1


def step_times(
    rng: np.random.Generator, slowdown: float = 1.0, noise: float = 0.01, n: int = 10
) -> list[float]:
    """Lognormal step times around STEP_S·slowdown seconds; `noise` is the sigma of log time."""
    return rng.lognormal(math.log(STEP_S * slowdown), noise, n).tolist()


# --- compare_samples ---------------------------------------------------------------------------------------


def test_ratio_is_of_medians_and_interval_holds_a_clear_slowdown() -> None:
    rng = np.random.default_rng(0)
    a, b = step_times(rng), step_times(rng, slowdown=1.1)
    comparison = compare_samples(a, b)
    assert comparison.ratio == pytest.approx(np.median(b) / np.median(a))
    assert 1.0 < comparison.low < 1.1 < comparison.high < 1.2
    assert comparison.pvalue < 0.001
    assert comparison.confidence == 0.95


def test_interval_is_the_exact_tables_order_statistics_for_ten_and_ten() -> None:
    # Hollander & Wolfe's exact table for m = n = 10 at 95 %: the 24th smallest and 24th largest of the 100
    # ratios; the distinct powers below make every pairwise ratio distinct.
    a = [math.exp(0.001 * i) for i in range(10)]
    b = [math.exp(0.1 * j) for j in range(10)]
    ratios = sorted(y / x for x in a for y in b)
    comparison = compare_samples(a, b)
    assert comparison.low == pytest.approx(ratios[23])
    assert comparison.high == pytest.approx(ratios[100 - 24])


def test_interval_covers_the_true_ratio_at_its_confidence() -> None:
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(200):
        comparison = compare_samples(step_times(rng), step_times(rng, slowdown=1.05))
        covered += comparison.low <= 1.05 <= comparison.high
    assert 180 <= covered <= 200  # 95 % of 200 is 190; binomial spread is about ±3


def test_too_few_samples_give_an_unbounded_interval() -> None:
    comparison = compare_samples([0.1, 0.11], [0.2])
    assert (comparison.low, comparison.high) == (0.0, math.inf)
    assert regression_is_real(comparison, 0.03) is Verdict.AMBIGUOUS


def test_identical_times_are_no_evidence() -> None:
    assert compare_samples([0.1] * 5, [0.1] * 5).pvalue == 1.0


@pytest.mark.parametrize(
    ("a", "b", "confidence", "argument"),
    [
        ([], [0.1], 0.95, "a"),
        ([0.1], [], 0.95, "b"),
        ([0.1], [0.0], 0.95, "b"),
        ([0.1, math.nan], [0.1], 0.95, "a"),
        ([0.1], [0.1], 1.0, "confidence"),
    ],
)
def test_compare_rejects_bad_input(a: list[float], b: list[float], confidence: float, argument: str) -> None:
    with pytest.raises(ValueError, match=f"^{argument}:"):
        compare_samples(a, b, confidence=confidence)


# --- regression_is_real ----------------------------------------------------------------------------------


def test_ten_percent_slowdown_at_one_percent_noise_is_bad() -> None:
    for seed in range(20):
        rng = np.random.default_rng(seed)
        comparison = compare_samples(step_times(rng), step_times(rng, slowdown=1.1))
        assert regression_is_real(comparison, threshold=0.03) is Verdict.BAD


def test_equal_distributions_are_rarely_called_bad() -> None:
    verdicts = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        verdicts.append(regression_is_real(compare_samples(step_times(rng), step_times(rng)), threshold=0.03))
    assert verdicts.count(Verdict.BAD) <= 5
    assert verdicts.count(Verdict.GOOD) >= 90  # ±1 % noise fits well inside the 3 % threshold


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1.016, 1.2, Verdict.BAD),  # whole interval above 1 + threshold/2
        (1.016, 1.02, Verdict.BAD),  # a precise regression between half and all of the threshold
        (1.014, 1.2, Verdict.AMBIGUOUS),  # might be under half the threshold, might be far above it
        (0.99, 1.05, Verdict.AMBIGUOUS),
        (0.99, 1.03, Verdict.GOOD),
        (1.005, 1.014, Verdict.GOOD),  # real but under half the threshold: not the regression chased
        (0.8, 0.9, Verdict.GOOD),  # an improvement
    ],
)
def test_verdict_boundaries(low: float, high: float, expected: Verdict) -> None:
    comparison = Comparison(ratio=(low + high) / 2, low=low, high=high, pvalue=0.01, confidence=0.95)
    assert regression_is_real(comparison, threshold=0.03) is expected


def test_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="^threshold:"):
        regression_is_real(Comparison(1.0, 0.9, 1.1, 0.5, 0.95), threshold=0.0)


# --- classify_probe --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slowdown", "expected"),
    [(1.0, Verdict.GOOD), (1.1, Verdict.BAD), (1.05, Verdict.AMBIGUOUS), (1.2, Verdict.AMBIGUOUS)],
)
def test_probe_is_judged_against_both_ends(slowdown: float, expected: Verdict) -> None:
    rng = np.random.default_rng(2)
    good, bad = step_times(rng), step_times(rng, slowdown=1.1)
    assert classify_probe(step_times(rng, slowdown=slowdown), good, bad) is expected


def test_small_drift_still_matches_its_end() -> None:
    # 1 % of drift on a 10 % gap is significant with this many samples, yet clearly the good level.
    rng = np.random.default_rng(3)
    good, bad = step_times(rng, noise=0.005, n=50), step_times(rng, slowdown=1.1, noise=0.005, n=50)
    assert compare_samples(good, probe := step_times(rng, slowdown=1.01, noise=0.005, n=50)).low > 1
    assert classify_probe(probe, good, bad) is Verdict.GOOD


def test_probe_is_ambiguous_when_the_ends_cannot_be_told_apart() -> None:
    rng = np.random.default_rng(4)
    assert classify_probe(step_times(rng), step_times(rng), step_times(rng)) is Verdict.AMBIGUOUS


def test_a_probe_far_slower_than_both_ends_is_ambiguous_not_bad() -> None:
    """Measured after the machine slowed down (another job started): twice the bad end's time. The bad
    end's sample, with one slow run, is too wide to show a significant difference, but the probe is nowhere
    near it: not evidence of the regression (trial 3 of the end-to-end scenario named a wrong culprit so)."""
    good = [0.0750, 0.0734, 0.0737, 0.0761, 0.0768]
    bad = [0.0922, 0.0917, 0.0937, 0.0936, 0.1667]
    probe = [0.2031, 0.1800, 0.2100, 0.1950]
    assert classify_probe(probe, good, bad) is Verdict.AMBIGUOUS
    assert classify_probe([0.0925, 0.0930, 0.0941, 0.0919], good, bad) is Verdict.BAD


def test_probe_rejects_empty_samples() -> None:
    with pytest.raises(ValueError, match="^probe:"):
        classify_probe([], [0.1], [0.2])


# --- reproduce -------------------------------------------------------------------------------------------


def recording_measure(slowdown: float, noise: float, n: int) -> tuple[Callable[[str, int], RunTimes], list]:
    """Each run: the median of `n` step times, by the wall clock alone."""
    rng = np.random.default_rng(5)
    calls: list[tuple[str, int]] = []

    def measure(side: str, round_index: int) -> RunTimes:
        calls.append((side, round_index))
        steps = step_times(rng, slowdown=slowdown if side == "bad" else 1.0, noise=noise, n=n)
        return {StepClock.WALL: float(np.median(steps))}

    return measure, calls


def test_reproduce_stops_after_one_round_on_a_clear_regression() -> None:
    measure, calls = recording_measure(slowdown=1.1, noise=0.01, n=5)
    result = reproduce(measure, threshold=0.03, repeats=6, max_rounds=3)
    assert (result.verdict, result.rounds) == (Verdict.BAD, 1)
    assert calls == [("good", 0), ("bad", 0), ("bad", 0), ("good", 0)] * 3
    assert (len(result.good), len(result.bad)) == (6, 6)  # one median per run
    assert result.comparison == compare_samples(result.good, result.bad, confidence=1 - 0.05 / 3)


def test_reproduce_judges_one_median_per_run() -> None:
    """Two runs a side of many steps each: pooled, 400 steps a side would give a narrow interval; as runs, 2
    medians a side cannot close one at this confidence, so the answer is to run more."""
    measure, _ = recording_measure(slowdown=1.1, noise=0.01, n=200)
    result = reproduce(measure, threshold=0.03, repeats=2, max_rounds=1)
    assert result.verdict is Verdict.AMBIGUOUS and (result.comparison.low, result.comparison.high) == (
        0,
        math.inf,
    )


@pytest.mark.parametrize("faster", [False, True])
def test_a_pairs_second_run_being_faster_reproduces_nothing(faster: bool) -> None:
    """Equal sides; each pair's second run 8 % faster (the machine's load easing, caches the first warmed).
    In the order good bad, good bad, ... "bad" would look 8 % faster: a speed-up reproduced, of nothing."""
    rng = np.random.default_rng(11)
    made: list[str] = []

    def measure(side: str, round_index: int) -> RunTimes:
        made.append(side)
        second = len(made) % 2 == 0
        steps = step_times(rng, slowdown=0.92 if second else 1.0, noise=0.005, n=5)
        return {StepClock.WALL: float(np.median(steps))}

    result = reproduce(measure, threshold=0.05, repeats=6, max_rounds=3, faster=faster)
    assert result.verdict is not Verdict.BAD


def test_reproduce_stops_early_when_there_is_no_regression() -> None:
    measure, _ = recording_measure(slowdown=1.0, noise=0.01, n=5)
    assert reproduce(measure, threshold=0.03, repeats=6, max_rounds=3).verdict is Verdict.GOOD


def test_reproduce_uses_every_round_on_a_borderline_case() -> None:
    measure, calls = recording_measure(slowdown=1.03, noise=0.1, n=3)
    result = reproduce(measure, threshold=0.03, repeats=2, max_rounds=3)
    assert (result.verdict, result.rounds) == (Verdict.AMBIGUOUS, 3)
    # The pairs' order runs on across rounds.
    assert [side for side, _ in calls] == ["good", "bad", "bad", "good"] * 3
    assert [round_index for _, round_index in calls] == [0] * 4 + [1] * 4 + [2] * 4
    assert len(result.good) == len(result.bad) == 6


@pytest.mark.parametrize(
    ("arguments", "name"),
    [
        ({"threshold": 0.03, "repeats": 0, "max_rounds": 1}, "repeats"),
        ({"threshold": 0.03, "repeats": 1, "max_rounds": 0}, "max_rounds"),
        ({"threshold": -1.0, "repeats": 1, "max_rounds": 1}, "threshold"),
    ],
)
def test_reproduce_rejects_bad_arguments_before_measuring(arguments: dict, name: str) -> None:
    measure, calls = recording_measure(slowdown=1.0, noise=0.01, n=5)
    with pytest.raises(ValueError, match=f"^{name}:"):
        reproduce(measure, **arguments)
    assert calls == []


def test_reproduce_rejects_an_empty_run() -> None:
    with pytest.raises(ValueError, match=r"^measure\('good', 0\)"):
        reproduce(lambda side, round_index: {StepClock.WALL: 0.0}, threshold=0.03, repeats=1, max_rounds=1)
    with pytest.raises(ValueError, match=r"^measure\('good', 0\): the run has no wall time"):
        reproduce(lambda side, round_index: {StepClock.CPU: 0.1}, threshold=0.03, repeats=1, max_rounds=1)
