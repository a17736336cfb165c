"""The dashboard's runs page: every run in the store, newest first, filtered and searched in the browser
(static/runs.js). Pure: entries in, the page's data file out.

The list is not 100,000 table rows in the HTML but one compact data file beside runs.html: each field's
distinct values once, and a row of small integers per run (about 40 bytes). It is JSON behind a one-line
assignment (RUNS_DATA_PREFIX), loaded by a <script> tag: a browser refuses fetch() on a page opened from
file://, and the dashboard must work from a folder.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_dashboard_pages.py
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Container, Iterable, Mapping
from typing import Any

from jaxbench.results.report.model import RunEntry, RunView, SeriesView

RUNS_DATA = "runs-data.js"
"""The data file, beside runs.html."""
RUNS_DATA_PREFIX = "window.jaxbenchRuns = "
"""What comes before the JSON in RUNS_DATA (and ";\\n" after it)."""
FIELDS = ("night", "recipe", "size", "backend", "hardware", "schedule", "status", "benchmark")
"""The columns of a row after the run's id, each an index into its list of values; then 1 where the run has
a page of its own (the dashboard keeps pages for the newest nights only: build.RUN_PAGE_NIGHTS), and 1 where
it is quarantined."""
MICROBENCHMARKS = "micro"
"""The recipe of a run of microbenchmarks (a suite: several benchmarks, no family)."""


def run_entry(
    run_id: int,
    night: dt.date,
    schedule: str,
    status: str,
    family: str | None,
    size: str | None,
    measured: Iterable[tuple[str, str, str, str]],
    quarantined: bool = False,
) -> RunEntry:
    """A run from its record and what its results measured: (benchmark, kind, backend, hardware) each."""
    rows = sorted(set(measured))
    benchmarks = tuple(dict.fromkeys(b for b, _, _, _ in rows))
    micro = any(kind == "microbenchmark" for _, kind, _, _ in rows)
    recipe = family or (MICROBENCHMARKS if micro else ", ".join(benchmarks))
    return RunEntry(
        id=run_id, night=night, recipe=recipe, size=size or "", benchmarks=benchmarks,
        backend=", ".join(dict.fromkeys(b for _, _, b, _ in rows)),
        hardware=", ".join(dict.fromkeys(h for _, _, _, h in rows)),
        schedule=schedule, status=status, quarantined=quarantined,
    )  # fmt: skip


def entries_of_views(runs: Iterable[RunView], series: Mapping[str, SeriesView]) -> list[RunEntry]:
    """The runs list from the runs that have pages, where the report carries no list of every run."""
    entries = []
    for run in runs:
        measured = []
        for result in run.results:
            shown = series.get(result.series_key)
            kind = "microbenchmark" if result.benchmark.startswith("micro/") else "recipe"
            if shown is not None:
                measured.append((result.benchmark, kind, shown.backend, shown.hardware))
        family, size = (run.config.get(name) for name in ("family", "size"))
        family, size = (each if isinstance(each, str) else None for each in (family, size))
        entries.append(run_entry(run.id, run.night, run.schedule, run.status, family, size, measured))
    return entries


def run_list_data(entries: Iterable[RunEntry], pages: Container[int]) -> dict[str, Any]:
    """The data file's document: {"fields", "values": {field: [text]}, "rows": [[id, index per field,
    page, quarantined]]}, newest night first (and the newest run of a night first)."""
    values: dict[str, dict[str, int]] = {field: {} for field in FIELDS}

    def index(field: str, text: str) -> int:
        known = values[field]
        return known.setdefault(text, len(known))

    rows = []
    for e in sorted(entries, key=lambda e: (e.night, e.id), reverse=True):
        texts = (e.night.isoformat(), e.recipe, e.size, e.backend, e.hardware, e.schedule, e.status)
        row = [e.id, *(index(f, t) for f, t in zip(FIELDS, texts, strict=False))]
        row += [index("benchmark", " · ".join(e.benchmarks)), int(e.id in pages), int(e.quarantined)]
        rows.append(row)
    fields = ["id", *FIELDS, "page", "quarantined"]
    return {"fields": fields, "values": {field: list(v) for field, v in values.items()}, "rows": rows}


def runs_data_file(entries: Iterable[RunEntry], pages: Container[int]) -> str:
    """RUNS_DATA's text: the document as compact JSON, safe in a <script> (no "</script>" can end it)."""
    text = json.dumps(run_list_data(entries, pages), separators=(",", ":"), ensure_ascii=False)
    return RUNS_DATA_PREFIX + text.replace("<", "\\u003c") + ";\n"


def parse_runs_data(text: str) -> dict[str, Any]:
    """RUNS_DATA's document back (for tests and scripts)."""
    document: dict[str, Any] = json.loads(text.removeprefix(RUNS_DATA_PREFIX).rstrip().removesuffix(";"))
    return document
