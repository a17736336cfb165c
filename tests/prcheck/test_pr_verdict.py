"""pr-check's decisions (prcheck/verdict.py) against fakes: seeded lognormal run medians for each side, no
subprocess. The end-to-end check with real runs is tests/prcheck/test_pr_check.py."""

from __future__ import annotations

import doctest
import math
from collections.abc import Callable

import numpy as np
import pytest

from jaxbench.harness.measure.stats import RatioEstimate
from jaxbench.prcheck import verdict as verdict_module
from jaxbench.prcheck.verdict import BASE, HEAD, Judgement, PRVerdict, compare, overall, verdict_of
from jaxbench.triage.stacks import Measurement

STEP_S = 0.08


def test_the_verdict_example_runs() -> None:
    outcome = doctest.testmod(verdict_module)
    assert outcome.failed == 0 and outcome.attempted > 0


def estimate(low: float, high: float) -> RatioEstimate:
    return RatioEstimate(math.sqrt(low * high), low, high, 5, 0.95)


@pytest.mark.parametrize(
    ("low", "high", "verdict"),
    [
        (1.08, 1.16, PRVerdict.REGRESSION),
        (1.026, 1.04, PRVerdict.REGRESSION),  # confirmed above half the 5 % threshold
        (1.01, 1.04, PRVerdict.OK),
        (0.97, 1.03, PRVerdict.OK),
        (0.96, 1.06, PRVerdict.INCONCLUSIVE),
        (1.01, 1.09, PRVerdict.INCONCLUSIVE),
        (0.85, 0.95, PRVerdict.IMPROVEMENT),
        (0.9, 1.2, PRVerdict.INCONCLUSIVE),
    ],
)
def test_the_interval_decides_against_the_threshold(low: float, high: float, verdict: PRVerdict) -> None:
    assert verdict_of(estimate(low, high), threshold=0.05) is verdict


def test_a_threshold_outside_zero_and_one_is_refused() -> None:
    with pytest.raises(ValueError, match="threshold: expected a fraction"):
        verdict_of(estimate(1.0, 1.1), threshold=5)


class Sides:
    """Each call one run: a lognormal median step time around STEP_S, times `slowdown` on the head."""

    def __init__(
        self,
        slowdown: float,
        *,
        noise: float = 0.03,
        seed: int = 0,
        fails: Callable[[str, int], bool] = lambda side, attempt: False,
        starved: Callable[[str, int], bool] = lambda side, attempt: False,
        second_run: float = 1.0,
    ) -> None:
        self.slowdown, self.noise, self.fails, self.starved = slowdown, noise, fails, starved
        self.second_run = second_run
        """The factor on the step time of a pair's second run, whichever side it is."""
        self.rng = np.random.default_rng(seed)
        self.calls: list[tuple[str, int]] = []

    def __call__(self, side: str, attempt: int) -> Measurement:
        second = any(made == attempt for _, made in self.calls)
        self.calls.append((side, attempt))
        level = STEP_S * (self.slowdown if side == HEAD else 1.0) * (self.second_run if second else 1.0)
        step = float(self.rng.lognormal(math.log(level), self.noise))
        if self.fails(side, attempt):
            return Measurement("compile_error", reason="XlaRuntimeError: the fake does not compile")
        if self.starved(side, attempt):
            return Measurement("ok", median_step_s=step * 1.6, cpu_per_wall=0.5)
        return Measurement("ok", median_step_s=step, cpu_per_wall=0.98)


def judge(sides: Sides, **settings: float) -> tuple[PRVerdict, RatioEstimate | None, int]:
    arguments = {"threshold": 0.05, "repeats": 5, "max_rounds": 3} | settings
    judgement = compare(sides, benchmark="llama2:tiny", **arguments)  # type: ignore[arg-type]
    return judgement.verdict, judgement.estimate, judgement.rounds


def test_a_ten_percent_slower_head_is_a_regression_whose_interval_excludes_one() -> None:
    verdict, found, rounds = judge(Sides(1.10))
    assert verdict is PRVerdict.REGRESSION
    assert found is not None and 1.025 < found.low <= 1.10 <= found.high
    assert rounds == 1


def test_the_pairs_alternate_which_side_runs_first() -> None:
    sides = Sides(1.10)
    judge(sides)
    assert sides.calls == [
        (side, attempt)
        for attempt in range(5)
        for side in ((BASE, HEAD) if attempt % 2 == 0 else (HEAD, BASE))
    ]


@pytest.mark.parametrize("second_run", [0.94, 1.06])
def test_a_pairs_second_run_being_faster_or_slower_is_not_taken_for_the_change(second_run: float) -> None:
    """Equal sides whose pair's second run is 6 % faster (a machine whose load eases, caches the first run
    warmed) or slower: in a fixed order, the side always second would look 6 % faster or slower than the
    other, an improvement or a regression of nothing, every time. In alternating order it cancels."""
    verdicts = [judge(Sides(1.0, noise=0.01, seed=seed, second_run=second_run))[0] for seed in range(40)]
    assert set(verdicts) <= {PRVerdict.OK, PRVerdict.INCONCLUSIVE}


def test_a_regression_is_still_found_where_the_second_run_is_faster() -> None:
    verdict, found, _ = judge(Sides(1.10, noise=0.01, second_run=0.94))
    assert verdict is PRVerdict.REGRESSION
    assert found is not None and found.low <= 1.10 <= found.high


def test_equal_sides_are_never_called_a_regression() -> None:
    """200 seeded trials of two equal sides at 3 % run-to-run noise: ok or inconclusive every time, mostly
    ok (182 of 200 with these seeds)."""
    verdicts = [judge(Sides(1.0, seed=seed))[0] for seed in range(200)]
    assert set(verdicts) <= {PRVerdict.OK, PRVerdict.INCONCLUSIVE}
    assert verdicts.count(PRVerdict.OK) >= 170


def test_noisy_runs_take_more_rounds_and_stop_at_the_last() -> None:
    verdict, found, rounds = judge(Sides(1.03, noise=0.12, seed=3))
    assert rounds == 3 and verdict is PRVerdict.INCONCLUSIVE
    assert found is not None and found.pairs == 15


def test_a_head_that_never_runs_fails_the_check() -> None:
    sides = Sides(1.0, fails=lambda side, attempt: side == HEAD)
    judgement = compare(sides, benchmark="llama2:tiny", threshold=0.05, repeats=5, max_rounds=3)
    assert judgement.verdict is PRVerdict.FAILED
    assert judgement.runs == 4  # two pairs show it; more would not change it
    assert (
        judgement.note == "2 head run(s) failed (compile_error: XlaRuntimeError: the fake does not compile)"
    )


@pytest.mark.parametrize(
    "fails",
    [
        lambda side, attempt: side == BASE,  # the head may be fine: there is nothing to compare it with
        lambda side, attempt: True,  # --cpus 99: every run of both sides
        lambda side, attempt: (side == BASE) == (attempt % 2 == 0),  # each pair loses one run
    ],
)
def test_a_benchmark_without_two_good_pairs_is_unmeasured(fails: Callable[[str, int], bool]) -> None:
    judgement = compare(
        Sides(1.0, fails=fails), benchmark="llama2:tiny", threshold=0.05, repeats=5, max_rounds=3
    )
    assert judgement.verdict is PRVerdict.UNMEASURED and judgement.estimate is None
    assert judgement.base_s == () and "run(s) failed" in judgement.note


def test_the_check_passes_only_what_was_measured() -> None:
    def judged(*verdicts: PRVerdict) -> PRVerdict:
        return overall([Judgement(f"b{i}:tiny", v, None, (), (), 1, 2) for i, v in enumerate(verdicts)])

    assert judged(PRVerdict.OK, PRVerdict.INCONCLUSIVE, PRVerdict.IMPROVEMENT) is PRVerdict.OK
    assert judged(PRVerdict.OK, PRVerdict.UNMEASURED) is PRVerdict.UNMEASURED
    assert judged(PRVerdict.UNMEASURED, PRVerdict.FAILED) is PRVerdict.REGRESSION
    assert judged(PRVerdict.REGRESSION) is PRVerdict.REGRESSION


def test_one_failed_head_run_among_good_ones_is_left_out_and_said() -> None:
    sides = Sides(1.10, fails=lambda side, attempt: side == HEAD and attempt == 1)
    judgement = compare(sides, benchmark="llama2:tiny", threshold=0.05, repeats=5, max_rounds=3)
    assert judgement.verdict is PRVerdict.REGRESSION
    assert len(judgement.base_s) == 5 and judgement.runs == 12
    assert judgement.note.startswith("1 head run(s) failed")


def test_pairs_starved_of_cpu_are_replaced() -> None:
    """Two starved head runs would look like a 60 % slowdown of equal sides; left out, the sides agree."""
    sides = Sides(1.0, noise=0.01, starved=lambda side, attempt: side == HEAD and attempt in (1, 3))
    judgement = compare(sides, benchmark="llama2:tiny", threshold=0.05, repeats=5, max_rounds=3)
    assert judgement.verdict is PRVerdict.OK
    assert len(judgement.head_s) == 5 and judgement.runs == 14
    assert judgement.note == "2 pair(s) starved of CPU by other work left out"


@pytest.mark.parametrize(("name", "value"), [("repeats", 0), ("max_rounds", 0)])
def test_bounds_below_one_are_refused(name: str, value: int) -> None:
    arguments = {"threshold": 0.05, "repeats": 5, "max_rounds": 3} | {name: value}
    with pytest.raises(ValueError, match=f"{name}: needs at least 1"):
        compare(Sides(1.0), benchmark="x:tiny", **arguments)  # type: ignore[arg-type]
