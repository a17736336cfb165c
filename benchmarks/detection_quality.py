"""How well regression detection finds what was injected into synthetic nightly series, class by class, with
apache-otava's change points on the same series as a baseline.

Two views: retrospective (the whole series: recall, precision, F1, false findings, delay, transients found
"as one") and nightly (the job replayed night by night: true, repeated and false alarms, recall by the
third night). Prints PASS/FAIL against the targets. apache-otava pins numpy 2.2, so it runs in its own
virtualenv through benchmarks/otava_driver.py. The scoring rules and targets: docs/design.md, "How
detection quality is scored"; run times: docs/measurements.md.

    .venv/bin/python benchmarks/detection_quality.py --otava /tmp/otava-venv/bin/python
    .venv/bin/python benchmarks/detection_quality.py --quick [--markdown]      # the README tables
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import multiprocessing
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

# A sibling module: benchmarks/ is no package, but a script's own folder is on sys.path.
from detection_quality_series import CLASSES, LONGEST, SHORTEST, Series, make_all

from results.detection import DEFAULT_SETTINGS, Span, SpanKind, run_detectors, segment_start
from results.judgement.verdicts import performance_state
from results.judgement.vocabulary import SeriesState

FIRST_JUDGED = 20
"""The screen needs min_history (10) nights; judging from night 20 on leaves every verdict some history."""
REPLAY_NIGHTS = 40
REPLAY_AFTER = 20
"""Replayed nights per series, and how many of them follow its first injected change: the nightly view
costs one detection per night (about 3 ms for a year), so a 365-night replay would cost a second."""
ATTRIBUTION = 10
"""Nights after a regression's first night during which an alarm is its detection."""
THREE_NIGHTS = 2
"""Delay of an alarm on the third bad night."""
CP_TOLERANCE = 2
"""Nights a change point may lie off an injected change and still be it."""
TARGET_FALSE_ALARMS = 0.05
TARGET_STEP_RECALL = 0.95
TARGET_AS_ONE = 0.8
AS_ONE_NIGHTS = 3
DRIFT_CLASSES = ("drift_linear", "drift_cyclic", "step_on_drift")
OTAVA_SETTINGS = {"window_len": 50, "max_pvalue": 1e-5, "min_magnitude": 0.01}
"""Otava's compute_change_points with our retrospective pass's settings (ChangePointSettings), so that the
two differ in method only; its defaults (max_pvalue 1e-3, min_magnitude 0) find spurious change points in
pure noise."""


def _near(indices: Sequence[int], night: int) -> bool:
    return any(abs(index - night) <= CP_TOLERANCE for index in indices)


def _overlaps(span: Span, block: tuple[int, int]) -> bool:
    return span.start < block[1] and block[0] < span.stop


def changes_found(series: Series, change_points: Sequence[int], spans: Sequence[Span]) -> set[int]:
    """The injected changes found: a change point near it, or a transient span over a block it ends."""
    transients = [span for span in spans if span.kind is SpanKind.TRANSIENT]
    by_span = {
        end for block in series.blocks if any(_overlaps(s, block) for s in transients) for end in block
    }
    return {change for change in series.changes if _near(change_points, change) or change in by_span}


@dataclasses.dataclass
class Retrospective:
    """One detector's findings on whole series, counted."""

    series: int = 0
    nights: int = 0
    findings: int = 0
    true: int = 0
    injected: int = 0
    """Changes and drifts to find."""
    found: int = 0
    delays: list[int] = dataclasses.field(default_factory=list)
    transients: int = 0
    """Transients (class transient) of AS_ONE_NIGHTS or more."""
    as_one: int = 0

    def add(self, other: Retrospective) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


def score_retrospective(
    series: Series, change_points: Sequence[int], spans: Sequence[Span], reported: dict[int, int]
) -> Retrospective:
    """One detector's findings on the whole series, scored (`reported`: the night each change was first
    found)."""
    true_spans = [
        span
        for span in spans
        if (span.kind is SpanKind.DRIFT and series.drift)
        or (span.kind is SpanKind.TRANSIENT and any(_overlaps(span, block) for block in series.blocks))
    ]
    found = changes_found(series, change_points, spans)
    drift_found = series.drift and any(span.kind is SpanKind.DRIFT for span in spans)
    tally = Retrospective(
        series=1,
        nights=series.values.size,
        findings=len(change_points) + len(spans),
        true=sum(_near(series.changes, c) for c in change_points) + len(true_spans),
        injected=len(series.changes) + series.drift,
        found=len(found) + drift_found,
        delays=[reported[change] - change for change in sorted(found) if change in reported],
    )
    if series.kind == "transient" and series.blocks[0][1] - series.blocks[0][0] >= AS_ONE_NIGHTS:
        block = series.blocks[0]
        covering = [s for s in spans if s.kind is SpanKind.TRANSIENT and _overlaps(s, block)]
        tally.transients = 1
        tally.as_one = int(len(covering) == 1 and not any(_near(change_points, end) for end in block))
    return tally


@dataclasses.dataclass
class Nightly:
    """Our nightly verdicts on the replayed nights of a set of series, counted."""

    series: int = 0
    nights: int = 0
    true: int = 0
    false: int = 0
    repeat: int = 0
    regressions: int = 0
    delays: list[int] = dataclasses.field(default_factory=list)
    too_noisy: int = 0

    def add(self, other: Nightly) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass
class Replay:
    """Our nightly verdicts on the replayed nights and the night before them (to tell an alarm's onset)."""

    states: list[SeriesState]
    lookback: list[int]
    """The oldest night the screen's baseline used, per night."""
    blamed: list[int | None]
    """The first bad night the verdict names (a regression's change point, or the screen's first flagged
    night), per night."""
    reported: dict[int, int]
    """For each injected change, the first replayed night on which the retrospective pass found it."""


def replayed(series: Series) -> range:
    """The nights the nightly view judges."""
    stop = min(series.values.size, series.changes[0] + REPLAY_AFTER) if series.changes else series.values.size
    return range(max(FIRST_JUDGED, stop - REPLAY_NIGHTS), stop)


def replay(series: Series, nights: range) -> Replay:
    out = Replay([], [], [], {})
    reach = len(DEFAULT_SETTINGS.screen.window_z) + DEFAULT_SETTINGS.screen.baseline_nights
    for t in range(nights.start - 1, nights.stop):
        found = run_detectors(series.values[: t + 1].tolist(), higher_is_better=False)
        assert found.screen is not None
        cps = [cp.index for cp in found.change_points]
        for change in changes_found(series, cps, found.spans):
            if change <= t:
                out.reported.setdefault(change, t)
        located = [(cp.index, cp) for cp in found.change_points]
        state, first_bad, _ = performance_state(found.screen, located, list(range(t + 1)), False)
        out.states.append(state)
        out.blamed.append(first_bad)
        out.lookback.append(max(segment_start(cps, t + 1), t + 1 - reach))
    return out


def score_nightly(series: Series, nights: range, run: Replay) -> Nightly:
    """Classify the alarms (onsets of runs of regression verdicts) on the replayed nights."""
    flags = [state is SeriesState.REGRESSION for state in run.states]
    first = nights.start
    onsets = [first + i for i in range(len(flags) - 1) if flags[i + 1] and not flags[i]]
    tally = Nightly(
        series=1,
        nights=len(nights),
        regressions=sum(r in nights for r in series.regressions),
        too_noisy=sum(state is SeriesState.TOO_NOISY for state in run.states[1:]),
    )
    named: set[int | None] = set()
    for night in onsets:
        lookback, blamed = run.lookback[night - first + 1], run.blamed[night - first + 1]
        reopened = blamed is not None and blamed in named
        named.add(blamed)
        if any(r <= night < r + ATTRIBUTION for r in series.regressions):
            tally.true += 1
        elif reopened:
            # The store's incident is keyed by its first bad night: this alarm reopens an earlier one.
            tally.repeat += 1
        elif series.persistent and any(
            r <= night and (lookback < r or (blamed is not None and abs(blamed - r) <= CP_TOLERANCE))
            for r in series.regressions
        ):
            tally.repeat += 1
        else:
            tally.false += 1
    for r in series.regressions:
        if r in nights:
            tally.delays += [night - r for night in onsets if r <= night < r + ATTRIBUTION][:1]
    return tally


def judge_ours(series: Series) -> tuple[Nightly, Retrospective]:
    """Both views of our detection on one series (the worker's job)."""
    nights = replayed(series)
    run = replay(series, nights)
    whole = run_detectors(series.values.tolist(), higher_is_better=False)
    cps = [cp.index for cp in whole.change_points]
    return score_nightly(series, nights, run), score_retrospective(series, cps, whole.spans, run.reported)


def start_otava(python: str, series: list[Series], folder: Path) -> subprocess.Popen[str]:
    """Otava's driver on every series, in the background (it runs while our detection does)."""
    job = {
        **OTAVA_SETTINGS,
        "tolerance": CP_TOLERANCE,
        "series": [
            {"values": s.values.tolist(), "changes": s.changes, "stop": replayed(s).stop} for s in series
        ],
    }
    path = folder / "otava-job.json"
    path.write_text(json.dumps(job))
    driver = Path(__file__).with_name("otava_driver.py")
    return subprocess.Popen([python, str(driver), str(path)], stdout=subprocess.PIPE, text=True)


def judge_otava(process: subprocess.Popen[str], series: list[Series]) -> tuple[list[Retrospective], float]:
    out, _ = process.communicate()
    if process.returncode:
        raise SystemExit(f"the otava driver failed (exit {process.returncode})")
    result = json.loads(out)
    tallies = []
    for s, cps, reported in zip(series, result["change_points"], result["reported"], strict=True):
        nights = {
            change: night for change, night in zip(s.changes, reported, strict=True) if night is not None
        }
        tallies.append(score_retrospective(s, cps, (), nights))
    return tallies, float(result["seconds"])


# Rendering.


def _fraction(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "-"


def _delay(delays: list[int]) -> str:
    return f"{np.percentile(delays, 50):.0f} / {np.percentile(delays, 90):.0f}" if delays else "-"


def _per_100(count: int, nights: int) -> float:
    return 100 * count / nights if nights else math.nan


def _f1(t: Retrospective) -> float:
    """F1 of precision (1 without findings) and recall (NaN without anything injected)."""
    precision = t.true / t.findings if t.findings else 1.0
    recall = t.found / t.injected if t.injected else math.nan
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def _number(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def _retrospective_cells(t: Retrospective) -> list[str]:
    return [
        _fraction(t.true, t.findings),
        _fraction(t.found, t.injected),
        _number(_f1(t)),
        _number(_per_100(t.findings - t.true, t.nights)),
        _delay(t.delays),
    ]


def table(headers: list[str], rows: list[list[str]], markdown: bool) -> str:
    """Plain text (first column left-aligned, the others right) or a GitHub Markdown table."""
    if markdown:
        lines = [headers, ["---"] + ["--:"] * (len(headers) - 1), *rows]
        return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    return "\n".join(
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [headers, *rows]
    )


def _groups(kinds: Sequence[str]) -> list[tuple[str, list[str]]]:
    """The rows of a table: each class, then all of them, then the drift classes together."""
    return [
        *((kind, [kind]) for kind in kinds),
        ("all classes", list(kinds)),
        ("drift classes", [*DRIFT_CLASSES]),
    ]


def _total[T: (Nightly, Retrospective)](tallies: dict[str, T], kinds: list[str], empty: Callable[[], T]) -> T:
    total = empty()
    for kind in kinds:
        total.add(tallies[kind])
    return total


def retrospective_table(
    ours: dict[str, Retrospective], otava: dict[str, Retrospective] | None, markdown: bool
) -> str:
    columns = ["P", "R", "F1", "FA/100", "delay"]
    headers = ["class", "series", "nights", *(f"ours {c}" for c in columns), "ours as one"]
    headers += [f"otava {c}" for c in columns] if otava is not None else []
    rows = []
    for name, kinds in _groups(list(ours)):
        mine = _total(ours, kinds, Retrospective)
        cells = [name, str(mine.series), str(mine.nights), *_retrospective_cells(mine)]
        cells.append(_fraction(mine.as_one, mine.transients))
        if otava is not None:
            cells += _retrospective_cells(_total(otava, kinds, Retrospective))
        rows.append(cells)
    return table(headers, rows, markdown)


def nightly_table(nightly: dict[str, Nightly], markdown: bool) -> str:
    headers = [
        "class", "series", "judged nights", "true alarms", "FA/100", "repeat/100", "P", "R", "R 3 nights",
        "delay", "too noisy",
    ]  # fmt: skip
    rows = []
    for name, kinds in _groups(list(nightly)):
        t = _total(nightly, kinds, Nightly)
        rows.append(
            [
                name,
                str(t.series),
                str(t.nights),
                str(t.true),
                _number(_per_100(t.false, t.nights)),
                _number(_per_100(t.repeat, t.nights)),
                _fraction(t.true, t.true + t.false),
                _fraction(len(t.delays), t.regressions),
                _fraction(sum(d <= THREE_NIGHTS for d in t.delays), t.regressions),
                _delay(t.delays),
                _fraction(t.too_noisy, t.nights),
            ]
        )
    return table(headers, rows, markdown)


@dataclasses.dataclass(frozen=True)
class Target:
    description: str
    value: float
    bound: float
    relation: str
    """"<=", ">=" or ">": how value must compare with bound."""

    def line(self) -> str:
        met = {"<=": self.value <= self.bound, ">=": self.value >= self.bound, ">": self.value > self.bound}
        verdict = "PASS" if met[self.relation] else "FAIL"
        return f"[{verdict}] {self.description}: {self.value:.3f} {self.relation} {self.bound:.3f}"


def _share(part: int, whole: int) -> float:
    return part / whole if whole else math.nan


def targets(
    nightly: dict[str, Nightly], ours: dict[str, Retrospective], otava: dict[str, Retrospective] | None
) -> list[str]:
    """The PASS/FAIL lines of the detection's targets (docs/design.md), for ours."""
    kinds = list(nightly)
    out = []
    for view, group in (("all classes", kinds), ("drift classes", [*DRIFT_CLASSES])):
        alarms = _total(nightly, group, Nightly)
        found = _total(ours, group, Retrospective)
        out += [
            Target(
                f"nightly: false alarms per 100 series-nights, {view}",
                _per_100(alarms.false, alarms.nights),
                TARGET_FALSE_ALARMS,
                "<=",
            ),
            Target(
                f"retrospective: false findings per 100 series-nights, {view}",
                _per_100(found.findings - found.true, found.nights),
                TARGET_FALSE_ALARMS,
                "<=",
            ),
        ]
    steps, steps_nightly, transients = ours["step_3pct_1pct"], nightly["step_3pct_1pct"], ours["transient"]
    in_three = sum(delay <= THREE_NIGHTS for delay in steps_nightly.delays)
    out += [
        Target(
            "retrospective: recall of 3 %+ steps at 1 % noise",
            _share(steps.found, steps.injected),
            TARGET_STEP_RECALL,
            ">=",
        ),
        Target(
            "nightly: 3 %+ steps at 1 % noise alarmed within 3 nights",
            _share(in_three, steps_nightly.regressions),
            TARGET_STEP_RECALL,
            ">=",
        ),
        Target(
            f"retrospective: transients of {AS_ONE_NIGHTS}+ nights found as one transient",
            _share(transients.as_one, transients.transients),
            TARGET_AS_ONE,
            ">=",
        ),
    ]
    mine = _f1(_total(ours, kinds, Retrospective))
    lines = [target.line() for target in out]
    if otava is None:
        return [*lines, f"[SKIP] F1 over all classes above apache-otava's: ours {mine:.3f}, otava not run"]
    theirs = _f1(_total(otava, kinds, Retrospective))
    return [*lines, Target("retrospective: F1 over all classes above otava's", mine, theirs, ">").line()]


def by_class[T: (Nightly, Retrospective)](
    series: list[Series], tallies: list[T], empty: Callable[[], T]
) -> dict[str, T]:
    out = {kind: empty() for kind in CLASSES}
    for s, tally in zip(series, tallies, strict=True):
        out[s.kind].add(tally)
    return out


def report(
    nightly: dict[str, Nightly],
    ours: dict[str, Retrospective],
    otava: dict[str, Retrospective] | None,
    markdown: bool,
) -> None:
    def title(text: str) -> None:
        print(f"\n**{text}**\n" if markdown else f"\n{text}")

    if otava is None:
        otava_note = (
            "apache-otava not run (--otava PYTHON, an interpreter with apache-otava): its columns left out"
        )
    else:
        otava_note = "otava: compute_change_points with " + ", ".join(
            f"{k} {v}" for k, v in OTAVA_SETTINGS.items()
        )
    title(
        "Retrospective pass on whole series, ours (change points and spans) and apache-otava's (change "
        "points). P precision, R recall, FA/100 false findings per 100 series-nights, delay p50 / p90 in "
        f"nights (first reported, run nightly), as one: transients of {AS_ONE_NIGHTS}+ nights found as one "
        f"transient. {otava_note}."
    )
    print(retrospective_table(ours, otava, markdown))
    title(
        f"Nightly replay (ours), {REPLAY_NIGHTS} nights per series. FA/100 and repeat/100: false and repeat "
        "alarms per 100 judged series-nights; P precision; R recall within "
        f"{ATTRIBUTION} nights, R 3 nights: by the third bad night; delay p50 / p90 in nights; too noisy: "
        "share of nights judged too noisy."
    )
    print(nightly_table(nightly, markdown))
    title("Targets")
    for line in targets(nightly, ours, otava):
        print(f"- {line}" if markdown else line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=200, help="series per class (default 200)")
    parser.add_argument("--quick", action="store_true", help="40 series per class: a look in about 30 s")
    parser.add_argument("--seed", type=int, default=20261122)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--otava", metavar="PYTHON", help="interpreter of a virtualenv with apache-otava")
    parser.add_argument("--markdown", action="store_true", help="tables in GitHub Markdown (for the README)")
    args = parser.parse_args()
    per_class = 40 if args.quick else args.series
    if per_class < 1:
        parser.error("--series must be at least 1")
    if args.otava and not shutil.which(args.otava):
        parser.error(f"--otava {args.otava}: no such interpreter")
    begin = time.perf_counter()
    series = make_all(per_class, args.seed)
    with tempfile.TemporaryDirectory() as folder:
        otava_run = start_otava(args.otava, series, Path(folder)) if args.otava else None
        with multiprocessing.Pool(args.workers) as pool:
            judged = pool.map(judge_ours, series, chunksize=4)
        otava = judge_otava(otava_run, series) if otava_run is not None else None
    nightly = by_class(series, [n for n, _ in judged], Nightly)
    ours = by_class(series, [r for _, r in judged], Retrospective)
    if not args.markdown:
        print(DEFAULT_SETTINGS)
    print(
        f"\n{len(series)} series ({per_class} per class) of {SHORTEST}-{LONGEST} nights, seed {args.seed}"
        + (f"; otava took {otava[1]:.0f} s" if otava is not None else "")
    )
    report(
        nightly, ours, by_class(series, otava[0], Retrospective) if otava is not None else None, args.markdown
    )
    print(f"\n({time.perf_counter() - begin:.0f} s)")


if __name__ == "__main__":
    main()
