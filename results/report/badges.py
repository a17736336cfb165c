"""One shields.io endpoint badge per benchmark: the worst state among its series, as small JSON files.

    pytest tests/results/test_report_render.py -k badges

Served next to the dashboard (e.g. on GitHub Pages), a README shows one with
`https://img.shields.io/endpoint?url=<url of badges/llama2-7b.json>`. Schema (https://shields.io/badges/endpoint-badge):
{"schemaVersion": 1, "label": ..., "message": ..., "color": ...}. Write badges after write_dashboard when they
live inside the dashboard's directory, which write_dashboard replaces whole.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from jaxbench.core.files import write_atomic
from jaxbench.results.judgement.vocabulary import SeriesState
from jaxbench.results.report.formatting import STATE_LABELS, format_change, safe_file_stem, worst_state
from jaxbench.results.report.model import Report, SeriesView

COLORS: dict[SeriesState, str] = {
    SeriesState.REGRESSION: "red",
    SeriesState.INVALID: "a0309f",  # magenta, as in the terminal and the dashboard; shields takes hex
    SeriesState.SUSPECTED: "yellow",
    SeriesState.IMPROVEMENT: "green",
    SeriesState.OK: "brightgreen",
    SeriesState.INSUFFICIENT_HISTORY: "lightgrey",
    SeriesState.TOO_NOISY: "blue",
}


def write_badges(report: Report, out_dir: Path) -> list[Path]:
    """Write `<benchmark>.json` for every benchmark in `report` into `out_dir`; returns the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    by_benchmark: dict[str, list[SeriesView]] = defaultdict(list)
    for s in report.series:
        by_benchmark[s.benchmark].append(s)
    paths = []
    for benchmark in sorted(by_benchmark):
        path = out_dir / f"{safe_file_stem(benchmark)}.json"
        write_atomic(path, json.dumps(badge(benchmark, by_benchmark[benchmark]), indent=2) + "\n")
        paths.append(path)
    return paths


def badge(benchmark: str, series: list[SeriesView]) -> dict[str, str | int]:
    """The endpoint document for one benchmark. A regression or an improvement names its largest change
    (e.g. "-4.2% (regression)"); other states name themselves."""
    state = worst_state(s.state for s in series)
    message = STATE_LABELS[state]
    changes = [s.change_vs_baseline for s in series if s.state == state and s.change_vs_baseline is not None]
    if state in (SeriesState.REGRESSION, SeriesState.IMPROVEMENT) and changes:
        message = f"{format_change(max(changes, key=abs))} ({message})"
    return {"schemaVersion": 1, "label": benchmark, "message": message, "color": COLORS[state]}
