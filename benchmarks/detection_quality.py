"""How well regression detection finds injected changes in synthetic nightly series, against simple baselines.

    .venv/bin/python benchmarks/detection_quality.py              # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/detection_quality.py --series 30 --steps 300   # a quick look

Every series is a step time (lower is better) of NIGHTS nights, one value per night, with multiplicative
Gaussian noise of CV 0.5, 1, 2 or 3 %, and one of these kinds (KINDS):

    control      noise only
    slow_nights  noise plus heavy-tailed slow nights: each night with probability 2 %, 5-30 % slower
    step_up      a regression: from a night in CHANGE_NIGHTS on, 2-20 % slower (log-uniform)
    step_down    an improvement: 2-20 % faster from a night in CHANGE_NIGHTS
    transient    a regression of 3-6 nights, 5-20 % slower, from a night in CHANGE_NIGHTS, then back
    drift_up     a slow regression: linearly 5-15 % slower over the series
    drift_down   a slow improvement: linearly 5-15 % faster

The nightly job is replayed night by night: for night t our detection runs on values[:t+1] as the store runs
it (results.detection.run_detectors: the retrospective pass, then the screen, its baseline starting at the
newest change point that leaves min_history nights after it). Nights from FIRST_JUDGED on are judged by
every detector: ours (a "regression" verdict), pct3 (a night 3 % slower than the previous one) and z3 (a
night more than 3 standard deviations above the mean of the previous 20).

What counts, the same for every detector:
- an alarm is the first night of a run of consecutive flagged nights: alarms are counted, not nights;
- true: an injected regression (step_up, the start of a transient) began on that night or within the
  ATTRIBUTION - 1 nights before it;
- repeat: a later alarm of a step_up that the detector's comparison still straddles (its baseline reaches
  back before the step: ours until a change point re-segments the series, z3 for 20 nights). The series did
  change, so it is not false, but it is no new finding either: counted apart;
- false: any other alarm, on every kind but drift_up (a slow regression has no night it began; the share of
  drift_up series alarmed is shown apart). False alarms are per 100 judged series-nights;
- recall: the share of injected regressions with a true alarm; delay: nights from the regression's first
  night to its first true alarm (0 = flagged on the first bad night); precision: true / (true + false).
The retrospective pass is scored on the full series: a change point within CP_TOLERANCE nights of an injected
change (a step, either end of a transient) is true, any other false (drift series left out); its delay is
the number of nights after the change until the nightly pass first reports it.

Targets: at most 0.05 false alarms per 100 series-nights at every noise level (slow nights included), and at
least 95 % of 3 % steps at 1 % noise alarmed within 3 nights (on night t0, t0 + 1 or t0 + 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import time

import numpy as np
import numpy.typing as npt

from results.detection import DEFAULT_SETTINGS, find_change_points, run_detectors, segment_start
from results.judgement.verdicts import performance_state
from results.judgement.vocabulary import SeriesState

Array = npt.NDArray[np.float64]

NOISE_LEVELS = (0.005, 0.01, 0.02, 0.03)
KINDS = ("control", "slow_nights", "step_up", "step_down", "transient", "drift_up", "drift_down")
NIGHTS = 120
FIRST_JUDGED = 20
"""Every detector has 20 nights of history from here on (z3 needs 20)."""
CHANGE_NIGHTS = (60, 100)
"""Injected changes start on a night in [60, 100): after two months, like a series that has run for a
while, and with 20 nights after them. (Younger series have less history: the screen then demands more.)"""
ATTRIBUTION = 10
"""Nights after a regression's first night during which an alarm is its detection."""
CP_TOLERANCE = 2
SLOW_NIGHT_RATE = 0.02
PCT_THRESHOLD = 0.03
Z_THRESHOLD = 3.0
Z_HISTORY = 20
TARGET_FALSE_ALARMS = 0.05
TARGET_THREE_NIGHTS = 0.95
DETECTORS = ("ours", "pct3", "z3")


@dataclasses.dataclass(frozen=True)
class Series:
    values: Array
    regressions: tuple[int, ...]
    """First nights of injected regressions (step_up, transient)."""
    persistent: bool
    """Whether the regression stays (step_up) rather than going away (transient)."""
    changes: tuple[int, ...]
    """Every injected change of level, for the retrospective pass (none for drift)."""


def make_series(kind: str, noise: float, rng: np.random.Generator, step: float | None = None) -> Series:
    """One synthetic series; `step` fixes a step_up's size (the 3 %-at-1 % condition)."""
    level = np.ones(NIGHTS)
    regressions: tuple[int, ...] = ()
    changes: tuple[int, ...] = ()
    start = int(rng.integers(*CHANGE_NIGHTS))
    size = step if step is not None else float(np.exp(rng.uniform(np.log(0.02), np.log(0.2))))
    if kind in ("step_up", "step_down"):
        level[start:] = 1 + size if kind == "step_up" else 1 / (1 + size)
        regressions, changes = ((start,) if kind == "step_up" else ()), (start,)
    elif kind == "transient":
        length = int(rng.integers(3, 7))
        level[start : start + length] = 1 + rng.uniform(0.05, 0.2)
        regressions, changes = (start,), (start, start + length)
    elif kind in ("drift_up", "drift_down"):
        total = rng.uniform(0.05, 0.15) * (1 if kind == "drift_up" else -1)
        level = 1 + total * np.arange(NIGHTS) / (NIGHTS - 1)
    values = level * (1 + noise * rng.standard_normal(NIGHTS))
    if kind == "slow_nights":
        slow = rng.random(NIGHTS) < SLOW_NIGHT_RATE
        values[slow] *= 1 + rng.uniform(0.05, 0.3, int(slow.sum()))
    return Series(values, regressions, kind == "step_up", changes)


@dataclasses.dataclass
class Replay:
    """Our nightly verdicts for nights first..last, as the nightly job would produce them."""

    flags: list[bool]
    """A regression verdict, per night."""
    lookback: list[int]
    """The oldest night the screen's baseline used, per night."""
    reported: dict[int, int]
    """For each injected change, the first night the retrospective pass reported it (within tolerance)."""


def replay(series: Series, first: int = FIRST_JUDGED, last: int = NIGHTS - 1) -> Replay:
    out = Replay([], [], {})
    reach = len(DEFAULT_SETTINGS.screen.window_z) + DEFAULT_SETTINGS.screen.baseline_nights
    for t in range(first, last + 1):
        found = run_detectors(series.values[: t + 1], higher_is_better=False)
        assert found.screen is not None
        cps = [cp.index for cp in found.change_points]
        for change in series.changes:
            if change not in out.reported and any(abs(c - change) <= CP_TOLERANCE for c in cps):
                out.reported[change] = t
        start = segment_start(cps, t + 1)  # where the screen's baseline began
        # The store's verdict: the screen, or a change point in the worse direction still in effect.
        located = [(cp.index, cp) for cp in found.change_points]
        state, _, _ = performance_state(found.screen, located, list(range(t + 1)), False)
        out.flags.append(state is SeriesState.REGRESSION)
        out.lookback.append(max(start, t + 1 - reach))
    return out


def pct_flags(values: Array) -> list[bool]:
    """Baseline: a night more than PCT_THRESHOLD slower than the previous night."""
    ratio = values[FIRST_JUDGED:] / values[FIRST_JUDGED - 1 : -1] - 1
    return (ratio > PCT_THRESHOLD).tolist()


def z_flags(values: Array) -> list[bool]:
    """Baseline: a night more than Z_THRESHOLD standard deviations above the mean of the previous 20."""
    history = np.lib.stride_tricks.sliding_window_view(values[:-1], Z_HISTORY)[FIRST_JUDGED - Z_HISTORY :]
    z = (values[FIRST_JUDGED:] - history.mean(axis=1)) / history.std(axis=1, ddof=1)
    return (z > Z_THRESHOLD).tolist()


@dataclasses.dataclass
class Tally:
    """Counts for one detector over a set of series."""

    nights: int = 0
    true: int = 0
    false: int = 0
    repeat: int = 0
    regressions: int = 0
    delays: list[int] = dataclasses.field(default_factory=list)
    drift_series: int = 0
    drift_alarmed: int = 0

    def add(self, other: Tally) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def score(flags: list[bool], lookback: list[int], series: Series, drift_up: bool) -> Tally:
    """Classify the alarms (onsets of flagged runs) of one series; flags, lookback start on FIRST_JUDGED."""
    onsets = [i for i, f in enumerate(flags) if f and (i == 0 or not flags[i - 1])]
    if drift_up:
        return Tally(drift_series=1, drift_alarmed=int(bool(onsets)))
    tally = Tally(nights=len(flags), regressions=len(series.regressions))
    for i in onsets:
        night = FIRST_JUDGED + i
        if any(r <= night < r + ATTRIBUTION for r in series.regressions):
            tally.true += 1
        elif series.persistent and any(r <= night and lookback[i] < r for r in series.regressions):
            tally.repeat += 1
        else:
            tally.false += 1
    for r in series.regressions:
        tally.delays += [FIRST_JUDGED + i - r for i in onsets if r <= FIRST_JUDGED + i < r + ATTRIBUTION][:1]
    return tally


@dataclasses.dataclass
class ChangePointTally:
    nights: int = 0
    found: int = 0
    true_found: int = 0
    changes: int = 0
    matched: int = 0
    delays: list[int] = dataclasses.field(default_factory=list)

    def add(self, other: ChangePointTally) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def score_change_points(series: Series, reported: dict[int, int]) -> ChangePointTally:
    cps = [cp.index for cp in find_change_points(series.values)]
    near = [c for c in cps if any(abs(c - change) <= CP_TOLERANCE for change in series.changes)]
    matched = [ch for ch in series.changes if any(abs(c - ch) <= CP_TOLERANCE for c in cps)]
    delays = [reported[ch] - ch for ch in series.changes if ch in reported]
    return ChangePointTally(NIGHTS, len(cps), len(near), len(series.changes), len(matched), delays)


Outcome = tuple[float, dict[str, Tally], ChangePointTally]


def run_condition(job: tuple[str, float, int, int]) -> Outcome:
    """All series of one (kind, noise) condition: the three detectors and the retrospective pass."""
    kind, noise, count, seed = job
    rng = np.random.default_rng(seed)
    tallies = {name: Tally() for name in DETECTORS}
    cp_tally = ChangePointTally()
    nights = np.arange(FIRST_JUDGED, NIGHTS)
    for _ in range(count):
        series = make_series(kind, noise, rng)
        ours = replay(series)
        runs = {
            "ours": (ours.flags, ours.lookback),
            "pct3": (pct_flags(series.values), (nights - 1).tolist()),
            "z3": (z_flags(series.values), (nights - Z_HISTORY).tolist()),
        }
        for name, (flags, lookback) in runs.items():
            tallies[name].add(score(flags, lookback, series, kind == "drift_up"))
        if not kind.startswith("drift"):
            cp_tally.add(score_change_points(series, ours.reported))
    return noise, tallies, cp_tally


def run_three_nights(job: tuple[int, int]) -> dict[str, tuple[int, int]]:
    """3 % steps at 1 % noise: how many each detector alarms within 3 nights (t0, t0 + 1, t0 + 2) and within
    4. Ours is replayed on those nights only (what it said earlier does not change them)."""
    count, seed = job
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(DETECTORS, (0, 0))
    for _ in range(count):
        series = make_series("step_up", 0.01, rng, step=0.03)
        start = series.regressions[0]
        first = start - FIRST_JUDGED
        runs = {
            "ours": replay(series, start, start + 3).flags,
            "pct3": pct_flags(series.values)[first : first + 4],
            "z3": z_flags(series.values)[first : first + 4],
        }
        for name, flags in runs.items():
            three, four = hits[name]
            hits[name] = (three + any(flags[:3]), four + any(flags))
    return hits


def fraction(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "-"


def quantile(values: list[int], q: float) -> str:
    return f"{np.percentile(values, q):.0f}" if values else "-"


def print_screen_table(results: dict[tuple[float, str], Tally]) -> None:
    print("\nNightly verdicts: alarms per 100 judged series-nights, recall and delay (nights) of regressions")
    print(
        f"{'noise':>6} {'detector':>8} {'precision':>9} {'recall':>6} {'false':>6} {'repeat':>6}"
        f" {'delay p50':>9} {'p90':>4} {'drift_up alarmed':>16}"
    )
    for (noise, name), t in sorted(results.items(), key=lambda kv: (kv[0][0], DETECTORS.index(kv[0][1]))):
        false = 100 * t.false / t.nights
        verdict = (
            "" if name != "ours" else "  target met" if false <= TARGET_FALSE_ALARMS else "  TARGET MISSED"
        )
        print(
            f"{noise:>6.1%} {name:>8} {fraction(t.true, t.true + t.false):>9}"
            f" {fraction(len(t.delays), t.regressions):>6} {false:>6.3f} {100 * t.repeat / t.nights:>6.3f}"
            f" {quantile(t.delays, 50):>9} {quantile(t.delays, 90):>4}"
            f" {fraction(t.drift_alarmed, t.drift_series):>16}{verdict}"
        )


def print_change_point_table(results: dict[float, ChangePointTally]) -> None:
    print(
        f"\nRetrospective pass on the full series (true: within {CP_TOLERANCE} nights of an injected change)"
    )
    print(f"{'noise':>6} {'precision':>9} {'recall':>6} {'false/100 nights':>16} {'delay p50':>9} {'p90':>4}")
    for noise, t in sorted(results.items()):
        false = 100 * (t.found - t.true_found) / t.nights
        print(
            f"{noise:>6.1%} {fraction(t.true_found, t.found):>9} {fraction(t.matched, t.changes):>6}"
            f" {false:>16.3f} {quantile(t.delays, 50):>9} {quantile(t.delays, 90):>4}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=120, help="series per (kind, noise) condition")
    parser.add_argument("--steps", type=int, default=2000, help="series of the 3 %% step at 1 %% noise")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args()
    if args.steps < 20 or args.series < 1:
        parser.error("--steps must be at least 20 (20 chunks of step series) and --series at least 1")
    begin = time.perf_counter()
    jobs = [
        (kind, noise, args.series, args.seed + 100 * i + j)
        for i, noise in enumerate(NOISE_LEVELS)
        for j, kind in enumerate(KINDS)
    ]
    chunks = 20
    step_jobs = [(args.steps // chunks, args.seed + 10_000 + c) for c in range(chunks)]
    with multiprocessing.Pool(args.workers) as pool:
        outcomes = pool.map(run_condition, jobs, chunksize=1)
        step_hits = pool.map(run_three_nights, step_jobs, chunksize=1)
    screen: dict[tuple[float, str], Tally] = {}
    change_points: dict[float, ChangePointTally] = {}
    for noise, tallies, cp_tally in outcomes:
        for name, tally in tallies.items():
            screen.setdefault((noise, name), Tally()).add(tally)
        change_points.setdefault(noise, ChangePointTally()).add(cp_tally)

    print(f"{DEFAULT_SETTINGS}\n")
    print(f"{len(jobs) * args.series} series of {NIGHTS} nights ({args.series} per kind and noise level)")
    print_screen_table(screen)
    ours = [t for (_, name), t in screen.items() if name == "ours"]
    overall = 100 * sum(t.false for t in ours) / sum(t.nights for t in ours)
    print(f"ours over all noise levels: {overall:.3f} false alarms per 100 series-nights")
    print_change_point_table(change_points)
    total = step_jobs[0][0] * chunks
    print(
        f"\n3 % steps at 1 % noise alarmed by the 3rd bad night, delay <= 2 (and by the 4th, delay <= 3), "
        f"{total} series:"
    )
    for name in DETECTORS:
        three, four = (sum(h[name][i] for h in step_hits) / total for i in (0, 1))
        verdict = (
            "" if name != "ours" else "  target met" if three >= TARGET_THREE_NIGHTS else "  TARGET MISSED"
        )
        print(f"  {name:>5}: {three:.3f} ({four:.3f}){verdict}")
    print(
        f"\ntargets: <= {TARGET_FALSE_ALARMS} false alarms per 100 series-nights at every noise level; >= "
        f"{TARGET_THREE_NIGHTS:.0%} of 3 % steps at 1 % noise within 3 nights."
        f" ({time.perf_counter() - begin:.0f} s)"
    )


if __name__ == "__main__":
    main()
