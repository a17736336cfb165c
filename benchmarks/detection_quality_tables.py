"""The detection quality benchmark's tables and targets (benchmarks/detection_quality.py prints them): the
retrospective and nightly tallies per class of series, as plain text or GitHub Markdown, and the PASS/FAIL
lines of the targets in docs/design.md, "How detection quality is scored".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

# A sibling module: benchmarks/ is no package, but a script's own folder is on sys.path.
from detection_quality_scoring import AS_ONE_NIGHTS, Nightly, Retrospective

THREE_NIGHTS = 2
"""Delay of an alarm on the third bad night."""
TARGET_FALSE_ALARMS = 0.05
TARGET_STEP_RECALL = 0.95
TARGET_AS_ONE = 0.8
DRIFT_CLASSES = ("drift_linear", "drift_cyclic", "step_on_drift")


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


def number(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3f}"


def _retrospective_cells(t: Retrospective) -> list[str]:
    return [
        _fraction(t.true, t.findings),
        _fraction(t.found, t.injected),
        number(_f1(t)),
        number(_per_100(t.findings - t.true, t.nights)),
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
                number(_per_100(t.false, t.nights)),
                number(_per_100(t.repeat, t.nights)),
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
