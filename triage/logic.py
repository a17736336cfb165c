"""Pure decisions of `jaxbench triage INCIDENT`: is a regression real, in which component, which commit?

Nothing here runs a stack, a subprocess or git: each effect is a callable passed in, so every decision can be
tested with fakes and replayed from recorded probes. All times are step times in seconds; lower is better.
Rank statistics (Mann-Whitney U, the Hodges-Lehmann interval on log times) because step times are skewed;
one median per run (by the clock triage/clocks.py chooses, runs starved of CPU left out), a Bonferroni
share of the error per look; the bisection probes the middle of the untried commits. Why each:
docs/design.md, "The statistics of a triage".

    python -m pytest -q tests/triage/test_triage_logic.py tests/triage/test_triage_bisection.py
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import numpy as np
from scipy.stats import mannwhitneyu, norm

from jaxbench.harness.measure.stats import check_confidence, check_rounds, counterbalanced
from jaxbench.triage.clocks import choose_clock, clock_spreads
from jaxbench.triage.stacks import StepClock

PRACTICAL_FRACTION = 0.5
"""A regression is BAD once its interval lies above 1 + this fraction of the threshold. With the whole
threshold, a true regression exactly at it would stay ambiguous however many samples were taken; with half,
more samples settle every true ratio but the cut itself."""
MATCH_FRACTION = 0.25
"""A probe matches an end when it differs from it by less than this fraction of the good-to-bad gap."""


class Verdict(enum.StrEnum):
    GOOD = "good"
    BAD = "bad"
    AMBIGUOUS = "ambiguous"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Sample b against sample a; a ratio above 1 means b is slower."""

    ratio: float
    """median(b) / median(a)."""
    low: float
    high: float
    """Hodges-Lehmann interval of the time ratio b/a at `confidence`; (0, inf) when samples are too few."""
    pvalue: float
    """Two-sided Mann-Whitney U."""
    confidence: float


def _step_times(samples: Sequence[float], name: str) -> np.ndarray:
    times = np.asarray(samples, dtype=float)
    if times.ndim != 1 or times.size == 0:
        raise ValueError(f"{name}: needs at least one step time")
    if not np.all(np.isfinite(times) & (times > 0)):
        raise ValueError(f"{name}: step times must be finite, positive seconds")
    return times


def compare_samples(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95) -> Comparison:
    check_confidence(confidence)
    times_a, times_b = _step_times(a, "a"), _step_times(b, "b")
    low, high = _log_shift_interval(np.log(times_a), np.log(times_b), confidence)
    pvalue = float(mannwhitneyu(times_b, times_a, alternative="two-sided").pvalue)
    return Comparison(
        ratio=float(np.median(times_b) / np.median(times_a)),
        low=math.exp(low),
        high=math.exp(high),
        # scipy answers NaN when every time is tied: no evidence of any difference.
        pvalue=1.0 if math.isnan(pvalue) else pvalue,
        confidence=confidence,
    )


def _log_shift_interval(log_a: np.ndarray, log_b: np.ndarray, confidence: float) -> tuple[float, float]:
    """Moses' interval (Hollander & Wolfe §4.3): drop `cut` of the m·n sorted differences at each end.

    `cut` comes from the normal approximation of U's null distribution, rounded down so that the interval
    errs wide; for m = n = 10 at 95 % it gives 24, the exact table value."""
    m, n = len(log_a), len(log_b)
    differences = np.sort(np.subtract.outer(log_b, log_a), axis=None)
    z = float(norm.ppf(0.5 + confidence / 2))
    cut = math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12))
    if cut < 1:
        # Even the full range of differences falls short of this confidence: an unbounded interval says so.
        return -math.inf, math.inf
    return float(differences[cut - 1]), float(differences[m * n - cut])


def _check_threshold(threshold: float) -> None:
    if not threshold > 0:
        raise ValueError(f"threshold: must be a positive fraction such as 0.03, got {threshold}")


def regression_is_real(comparison: Comparison, threshold: float) -> Verdict:
    """BAD when the whole interval lies above 1 + PRACTICAL_FRACTION·threshold (hence above 1); otherwise GOOD
    when the whole interval lies at or below 1 + threshold (no slowdown worth the alarm, or an improvement);
    AMBIGUOUS when the interval is too wide to say. BAD is checked first, so the two never overlap."""
    _check_threshold(threshold)
    if comparison.low > 1 + PRACTICAL_FRACTION * threshold:
        return Verdict.BAD
    if comparison.high <= 1 + threshold:
        return Verdict.GOOD
    return Verdict.AMBIGUOUS


def classify_probe(
    probe: Sequence[float], good: Sequence[float], bad: Sequence[float], *, confidence: float = 0.95
) -> Verdict:
    """GOOD when the probe matches the good end and differs from the bad one, BAD in the mirror case,
    AMBIGUOUS when it matches both (too noisy to tell) or neither (e.g. halfway: two regressions stacked),
    and when its median lies beyond either end by more than the gap between them: then the machine itself
    has changed since the ends ran, and a wide interval of one end must not pass for a match."""
    probe_median = float(np.median(_step_times(probe, "probe")))
    good_median, bad_median = (
        float(np.median(_step_times(good, "good"))),
        float(np.median(_step_times(bad, "bad"))),
    )
    gap = abs(math.log(bad_median / good_median))
    low_end, high_end = sorted((good_median, bad_median))
    if not low_end / math.exp(gap) <= probe_median <= high_end * math.exp(gap):
        return Verdict.AMBIGUOUS
    margin = math.exp(MATCH_FRACTION * gap)
    matches_good = _matches(compare_samples(good, probe, confidence=confidence), margin)
    matches_bad = _matches(compare_samples(bad, probe, confidence=confidence), margin)
    if matches_good and not matches_bad:
        return Verdict.GOOD
    if matches_bad and not matches_good:
        return Verdict.BAD
    return Verdict.AMBIGUOUS


def _matches(comparison: Comparison, margin: float) -> bool:
    """No significant difference, or one confined within the equivalence margin (a ratio)."""
    no_difference = comparison.low <= 1 <= comparison.high
    return no_difference or (1 / margin <= comparison.low and comparison.high <= margin)


@dataclasses.dataclass(frozen=True)
class Reproduction:
    verdict: Verdict
    comparison: Comparison
    """Of the bad runs' medians against the good runs' (the good against the bad where the change is a
    speed-up), at the per-look confidence."""
    good: tuple[float, ...]
    """The median step time of each good run by `clock`, in the order they ran."""
    bad: tuple[float, ...]
    rounds: int
    clock: StepClock = StepClock.WALL
    spreads: Mapping[StepClock, float] = dataclasses.field(default_factory=dict)
    """Each clock's spread over the first round (`clock_spreads`), where the clock was chosen from them; {}
    where it was given, or the runs measured the wall clock alone."""


RunTimes = Mapping[StepClock, float]
"""One run's median step time by each clock it measured (the wall clock always)."""


def reproduce(
    measure: Callable[[str, int], RunTimes],
    *,
    threshold: float,
    repeats: int,
    max_rounds: int,
    confidence: float = 0.95,
    clock: StepClock | None = None,
    faster: bool = False,
) -> Reproduction:
    """Runs "good" and "bad" in pairs of alternating order (`counterbalanced`), `repeats` a round, judged
    after each round until GOOD or BAD (at 95 %: 4 a side in one look, 5 over 3). By `clock`, or the one the
    first round chooses (`choose_clock`); `faster`: BAD means "bad" is faster by the threshold."""
    check_rounds(repeats, max_rounds, confidence)
    _check_threshold(threshold)
    confidence_per_look = 1 - (1 - confidence) / max_rounds
    times: dict[str, dict[StepClock, list[float]]] = {"good": {}, "bad": {}}
    spreads: dict[StepClock, float] = {}
    for round_index in range(max_rounds):
        for pair in range(round_index * repeats, (round_index + 1) * repeats):
            for side in counterbalanced(pair, "good", "bad"):
                run = measure(side, round_index)
                if StepClock.WALL not in run or (clock is not None and clock not in run):
                    missing = clock or StepClock.WALL
                    raise ValueError(f"measure({side!r}, {round_index}): the run has no {missing} time")
                for run_clock, value in run.items():
                    checked = _step_times([value], f"measure({side!r}, {round_index})")
                    times[side].setdefault(run_clock, []).append(float(checked[0]))
        if clock is None:
            spreads = clock_spreads(times["good"], times["bad"])
            clock = choose_clock(spreads)
        timed_by = clock
        good, bad = tuple(times["good"][timed_by]), tuple(times["bad"][timed_by])
        # The ratio is above 1 where the change is in the direction looked for.
        reference, changed = (bad, good) if faster else (good, bad)
        comparison = compare_samples(reference, changed, confidence=confidence_per_look)
        verdict = regression_is_real(comparison, threshold)
        if verdict is not Verdict.AMBIGUOUS:
            break
    return Reproduction(verdict, comparison, good, bad, round_index + 1, timed_by, spreads)


@dataclasses.dataclass(frozen=True)
class Isolation:
    verdicts: Mapping[str, Verdict]
    """Per moved component: the last-good stack with only that component at its first-bad pin."""
    culprit: str | None
    reason: str


def isolate_component(moved: Sequence[str], verdict_of: Callable[[str], Verdict]) -> Isolation:
    """Classify, for each moved component, the last-good stack with only it moved (`verdict_of`: by its step
    times with `classify_probe`, or by its loss); `culprit` is the one component whose move alone is BAD,
    None when none or several are (the reason says which)."""
    if not moved:
        raise ValueError("moved: needs at least one component")
    if len(set(moved)) != len(moved):
        raise ValueError(f"moved: names a component twice: {list(moved)}")
    if len(moved) == 1:
        # With one component moved, moving it alone gives the first-bad stack itself: nothing left to measure.
        return Isolation({moved[0]: Verdict.BAD}, moved[0], f"{moved[0]} is the only component that moved")
    verdicts = {name: verdict_of(name) for name in moved}
    guilty = [name for name, verdict in verdicts.items() if verdict is Verdict.BAD]
    unclear = [name for name, verdict in verdicts.items() if verdict is Verdict.AMBIGUOUS]
    unclear_note = f"; ambiguous: {', '.join(unclear)}" if unclear else ""
    if len(guilty) == 1:
        return Isolation(verdicts, guilty[0], f"{guilty[0]} alone reproduces the change{unclear_note}")
    if guilty:
        return Isolation(verdicts, None, f"several components reproduce it alone: {', '.join(guilty)}")
    return Isolation(verdicts, None, f"no single component reproduces it: it takes several{unclear_note}")


@dataclasses.dataclass(frozen=True)
class Probe:
    commit: str
    verdict: Verdict
    samples: tuple[float, ...] = ()
    """The probe's step times, kept so that a recorded verdict can be checked again."""


@dataclasses.dataclass(frozen=True)
class Bisection:
    culprit: str | None
    """The first bad commit, or None when the probes could not single it out."""
    last_good: str
    first_bad: str
    window: tuple[str, ...]
    """The commits that may still be the first bad one, oldest first: after last_good, up to first_bad."""
    probes: tuple[Probe, ...]
    """Recorded probes first, then the new ones, in the order they ran."""
    reason: str


_NO_PROBES: Mapping[str, Probe] = MappingProxyType({})


def _positions(commits: Sequence[str], probes: Mapping[str, Probe]) -> dict[str, int]:
    if len(commits) < 2:
        raise ValueError(f"commits: needs the good and the bad pin at least, got {len(commits)}")
    position = {commit: index for index, commit in enumerate(commits)}
    if len(position) != len(commits):
        raise ValueError("commits: lists a commit twice")
    for commit, probe in probes.items():
        if commit not in position:
            raise ValueError(f"probes: {commit!r} is not in commits")
        if probe.commit != commit:
            raise ValueError(f"probes: the entry for {commit!r} holds a probe of {probe.commit!r}")
        if position[commit] in (0, len(commits) - 1):
            raise ValueError(f"probes: {commit!r} is an end of the range, known good or bad by definition")
    return position


def _window(position: Mapping[str, int], probes: Mapping[str, Probe], last: int) -> tuple[int, int]:
    """Indices of the last good and the first bad commit. A GOOD probe after the first bad one contradicts a
    single regression; it is ignored here, and the probes returned keep it for a human to see."""
    first_bad = min([position[c] for c, p in probes.items() if p.verdict is Verdict.BAD] + [last])
    goods = [position[c] for c, p in probes.items() if p.verdict is Verdict.GOOD and position[c] < first_bad]
    return max([*goods, 0]), first_bad


def next_commit(commits: Sequence[str], probes: Mapping[str, Probe]) -> str | None:
    """The middle one of the untried commits inside the good/bad window (the older of two), or None when none
    is left. Ambiguous commits stay in the window and are stepped around, like `git bisect skip`.

    Counting untried commits rather than positions is what bounds the probes: a clear verdict halves the
    untried commits and an ambiguous one removes itself, so a bisection takes at most ceil(log2(n)) probes
    plus one per ambiguous commit. Probing the untried commit nearest the positional middle can exceed that
    (14 commits, ambiguous at 6, 7 and 9, first bad 12: 8 probes)."""
    position = _positions(commits, probes)
    last_good, first_bad = _window(position, probes, len(commits) - 1)
    untried = [commit for commit in commits[last_good + 1 : first_bad] if commit not in probes]
    return untried[(len(untried) - 1) // 2] if untried else None


def contradictions(
    probes: Mapping[str, Probe], *, margin: float, confidence: float = 0.95
) -> list[tuple[str, str]]:
    """(good, bad) pairs of probes whose verdicts differ while their step times do not: the interval of the
    ratio of their samples holds 1 and their medians lie within `margin` (a ratio, e.g. 1.025) of each
    other. One of the two verdicts is wrong, and nothing says which."""
    check_confidence(confidence)
    timed = [p for p in probes.values() if len(p.samples) >= 2]
    pairs = []
    for good in (p for p in timed if p.verdict is Verdict.GOOD):
        for bad in (p for p in timed if p.verdict is Verdict.BAD):
            comparison = compare_samples(good.samples, bad.samples, confidence=confidence)
            near = 1 / margin <= comparison.ratio <= margin
            if near and comparison.low <= 1 <= comparison.high:
                pairs.append((good.commit, bad.commit))
    return pairs


Settle = Callable[[str, str], tuple[Probe, Probe]]
"""(good commit, bad commit) of a contradiction -> both probed again with more runs."""


def bisect(
    commits: Sequence[str],
    probe: Callable[[str], Probe],
    *,
    probes: Mapping[str, Probe] = _NO_PROBES,
    max_probes: int,
    settle: Settle | None = None,
    margin: float = 1.0,
    confidence: float = 0.95,
) -> Bisection:
    """Probe until one commit remains, only ambiguous ones separate the ends, or max_probes is reached.

    max_probes bounds the whole bisection, recorded probes included, so a resumed run ends exactly where an
    uninterrupted one would; recorded commits are never probed again. With `settle`, two probes that
    contradict each other (`contradictions` within `margin`) go back for more runs once; if they still do,
    both become ambiguous and are stepped around, rather than one wrong verdict steering the rest. A fake
    stands in for building and measuring each commit:

    >>> commits = [f"c{i}" for i in range(9)]
    >>> fake = lambda commit: Probe(commit, Verdict.BAD if commit >= "c6" else Verdict.GOOD)
    >>> result = bisect(commits, fake, max_probes=10)
    >>> result.culprit, [p.commit for p in result.probes]
    ('c6', ['c4', 'c6', 'c5'])
    """
    if max_probes < 1:
        raise ValueError(f"max_probes: needs at least 1, got {max_probes}")
    position = _positions(commits, probes)
    recorded = dict(probes)
    settled: set[tuple[str, str]] = set()
    while len(recorded) < max_probes and (commit := next_commit(commits, recorded)) is not None:
        result = probe(commit)
        if result.commit != commit:
            raise ValueError(f"probe: asked for {commit!r}, answered for {result.commit!r}")
        recorded[commit] = result
        if settle is not None:
            _settle(recorded, settle, settled, margin, confidence)
    last_good, first_bad = _window(position, recorded, len(commits) - 1)
    window = tuple(commits[last_good + 1 : first_bad + 1])
    if len(window) == 1:
        culprit, reason = (
            window[0],
            f"{window[0]} is the first bad commit; {commits[last_good]} is good",
        )
    elif any(commit not in recorded for commit in window[:-1]):
        culprit, reason = None, f"stopped at max_probes={max_probes} with {len(window)} candidates left"
    else:
        culprit, reason = None, f"ambiguous commits hide the first bad one among {len(window)} candidates"
    return Bisection(
        culprit, commits[last_good], commits[first_bad], window, tuple(recorded.values()), reason
    )


def _settle(
    recorded: dict[str, Probe],
    settle: Settle,
    settled: set[tuple[str, str]],
    margin: float,
    confidence: float,
) -> None:
    """Each new contradiction probed again once; one that outlives its second look makes both ambiguous."""
    for pair in contradictions(recorded, margin=margin, confidence=confidence):
        if pair not in settled:
            settled.add(pair)
            again = settle(*pair)
            if [p.commit for p in again] != list(pair):
                raise ValueError(f"settle: asked for {pair}, answered for {[p.commit for p in again]}")
            recorded[pair[0]], recorded[pair[1]] = again
    for good, bad in contradictions(recorded, margin=margin, confidence=confidence):
        if (good, bad) in settled:
            for commit in (good, bad):
                recorded[commit] = dataclasses.replace(recorded[commit], verdict=Verdict.AMBIGUOUS)
