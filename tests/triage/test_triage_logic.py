"""Triage statistics (triage/logic.py) against seeded lognormal step times: comparing two samples, calling a
regression real, classifying a probe against both ends, reproducing an incident, and telling runs starved of
CPU. The bisection: tests/triage/test_triage_bisection.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from triage.logic import (
    Comparison,
    RunTimes,
    Verdict,
    classify_probe,
    clock_spreads,
    compare_samples,
    quieter_clock,
    regression_is_real,
    reproduce,
    spread,
    starved_runs,
)
from triage.stacks import Clock

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
        return {Clock.WALL: float(np.median(steps))}

    return measure, calls


def test_reproduce_stops_after_one_round_on_a_clear_regression() -> None:
    measure, calls = recording_measure(slowdown=1.1, noise=0.01, n=5)
    result = reproduce(measure, threshold=0.03, repeats=6, max_rounds=3)
    assert (result.verdict, result.rounds) == (Verdict.BAD, 1)
    assert calls == [("good", 0), ("bad", 0)] * 6
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


def test_reproduce_stops_early_when_there_is_no_regression() -> None:
    measure, _ = recording_measure(slowdown=1.0, noise=0.01, n=5)
    assert reproduce(measure, threshold=0.03, repeats=6, max_rounds=3).verdict is Verdict.GOOD


def test_reproduce_uses_every_round_on_a_borderline_case() -> None:
    measure, calls = recording_measure(slowdown=1.03, noise=0.1, n=3)
    result = reproduce(measure, threshold=0.03, repeats=2, max_rounds=3)
    assert (result.verdict, result.rounds) == (Verdict.AMBIGUOUS, 3)
    assert [side for side, _ in calls] == ["good", "bad"] * 6
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
        reproduce(lambda side, round_index: {Clock.WALL: 0.0}, threshold=0.03, repeats=1, max_rounds=1)
    with pytest.raises(ValueError, match=r"^measure\('good', 0\): the run has no wall time"):
        reproduce(lambda side, round_index: {Clock.CPU: 0.1}, threshold=0.03, repeats=1, max_rounds=1)


# --- the clock -------------------------------------------------------------------------------------------


def loaded_runs(
    rng: np.random.Generator, slowdown: float, *, load: float, n: int = 5
) -> dict[Clock, list[float]]:
    """Runs of one stack on a CPU that other work shares: the run's own work (its CPU time, 1 % noise) plus
    what the other processes took of the CPU meanwhile, a share of 0 to `load` of the wall time."""
    cpu = np.asarray(step_times(rng, slowdown=slowdown, noise=0.01, n=n))
    taken = rng.uniform(0, load, n)
    return {Clock.CPU: cpu.tolist(), Clock.WALL: (cpu / (1 - taken)).tolist()}


def test_on_a_loaded_cpu_the_cpu_clock_is_the_quieter_and_closes_the_interval() -> None:
    """The issue's loaded machine: wall times scatter by tens of percent, CPU times by one. Timed by the
    wall clock a +25 % regression stays ambiguous after 3 rounds; timed by CPU time it is real in one."""
    rng = np.random.default_rng(11)
    runs: dict[str, list[dict[Clock, float]]] = {"good": [], "bad": []}

    def measure(side: str, round_index: int) -> RunTimes:
        one = loaded_runs(rng, 1.25 if side == "bad" else 1.0, load=0.6, n=1)
        runs[side].append({clock: times[0] for clock, times in one.items()})
        return runs[side][-1]

    chosen = reproduce(measure, threshold=0.05, repeats=5, max_rounds=3)
    assert (chosen.clock, chosen.verdict, chosen.rounds) == (Clock.CPU, Verdict.BAD, 1)
    assert chosen.spreads[Clock.CPU] < 0.3 * chosen.spreads[Clock.WALL]
    assert chosen.good == tuple(run[Clock.CPU] for run in runs["good"])
    walled = reproduce(measure, threshold=0.05, repeats=5, max_rounds=3, clock=Clock.WALL)
    assert walled.clock is Clock.WALL and walled.spreads == {}
    assert (walled.verdict, walled.rounds) == (Verdict.AMBIGUOUS, 3)


def test_on_a_quiet_cpu_the_wall_clock_stays() -> None:
    """Both clocks scatter alike where nothing else runs: the wall clock, which users read, is kept."""
    rng = np.random.default_rng(12)
    good, bad = (loaded_runs(rng, slowdown, load=0.0) for slowdown in (1.0, 1.25))
    spreads = clock_spreads(good, bad)
    assert spreads[Clock.CPU] == pytest.approx(spreads[Clock.WALL])
    assert quieter_clock(spreads) is Clock.WALL


def test_the_gap_between_the_ends_does_not_choose_the_clock() -> None:
    """A clock whose runs show a larger regression but scatter as much is not chosen for it: only the
    spread within each end counts, or the choice would bias the verdict."""
    wall = {"good": [1.0, 1.02, 0.98, 1.01, 0.99], "bad": [1.1, 1.12, 1.08, 1.11, 1.09]}
    cpu = {"good": [1.0, 1.02, 0.98, 1.01, 0.99], "bad": [1.5, 1.53, 1.47, 1.515, 1.485]}
    spreads = clock_spreads(
        {Clock.WALL: wall["good"], Clock.CPU: cpu["good"]}, {Clock.WALL: wall["bad"], Clock.CPU: cpu["bad"]}
    )
    assert quieter_clock(spreads) is Clock.WALL


def test_cpu_time_is_no_clock_unless_every_run_measured_it() -> None:
    good = {Clock.WALL: [1.0, 1.3, 0.8], Clock.CPU: [1.0, 1.0, 1.0]}
    bad = {Clock.WALL: [1.2, 1.5, 0.9], Clock.CPU: [1.2, 1.2]}
    assert clock_spreads(good, bad) == {}
    assert quieter_clock({}) is Clock.WALL
    assert quieter_clock({Clock.WALL: 0.1}) is Clock.WALL


def test_spread_is_relative_and_pooled_around_each_sides_own_median() -> None:
    assert spread([1.0, 1.0, 1.0], [2.0, 2.0]) == 0.0
    # Around each side's median: a side ten times slower scatters alike in log time.
    assert spread([1.0, 1.1, 0.9]) == pytest.approx(spread([10.0, 11.0, 9.0]))
    assert spread([1.0, 1.1, 0.9], [5.0, 5.5, 4.5]) == pytest.approx(spread([1.0, 1.1, 0.9]))


def test_a_run_with_much_less_cpu_than_its_peers_is_starved() -> None:
    shares = [0.97, 0.99, 0.5, 0.98, None, 0.84, 0.96]
    # The median of the six measured is 0.965; 85 % of it is 0.820: 0.84 is noise, 0.5 is starved.
    assert starved_runs(shares) == [False, False, True, False, False, False, False]


def test_no_run_is_starved_before_enough_have_measured_their_cpu() -> None:
    assert starved_runs([0.9, 0.2, None, 0.95]) == [False] * 4
    assert starved_runs([]) == []


def test_when_every_run_is_starved_alike_only_an_outlier_is_set_aside() -> None:
    """The issue's loaded machine: shares of 0.28-0.42 around 0.35. Under 85 % of the median (0.30) lie
    three runs of the same load; none lies far below the others' scatter. A run at 0.1 does."""
    shares = [0.35, 0.28, 0.42, 0.33, 0.29, 0.37, 0.4, 0.31, 0.36, 0.34]
    assert not any(starved_runs(shares))
    assert starved_runs([*shares, 0.1]) == [False] * len(shares) + [True]


def test_a_whole_triage_at_a_lower_share_is_not_starved() -> None:
    """Only a run below its peers is: a machine (or a GPU run) that always uses less CPU is normal."""
    assert not any(starved_runs([0.3, 0.31, 0.29, 0.3, 0.32]))
