"""The backends view: one recipe on one hardware class across native and the framework backends, each at its
newest valid night, with the ratio to native; in the terminal, Markdown, JSON and the dashboard.

JAX_PLATFORMS=cpu python -m pytest -q tests/test_report_backends.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from results.judgement.vocabulary import SeriesState
from results.report.backends import backends_tables, format_cell
from results.report.html import write_dashboard
from results.report.json_report import render_json
from results.report.markdown import render_markdown
from results.report.model import BackendCell, Report, SeriesPoint, SeriesView
from results.report.terminal import render_terminal
from tests.sample_report import H100, make_series, sample_report

TINY = "llama2-tiny"


def series(backend: str, metric: str, value: float, *, benchmark: str = TINY, nights: int = 5) -> SeriesView:
    made = make_series(
        f"{backend}-{metric}-{benchmark}", benchmark, metric, H100, SeriesState.OK, level=value
    )
    points = [dataclasses.replace(p, value=value) for p in made.points[-nights:]]
    return dataclasses.replace(made, backend=backend, points=points)


def test_each_backend_against_native() -> None:
    views = [
        series("native", "perf/tokens_per_s", 100.0),
        series("maxtext", "perf/tokens_per_s", 87.0),
        series("levanter", "perf/tokens_per_s", 104.0),
        series("native", "perf/step_time_s", 0.2),
        series("maxtext", "perf/step_time_s", 0.23),
        series("native", "perf/tokens_per_s_per_device", 50.0),  # not a column of the view
    ]
    [table] = backends_tables(views)
    assert (table.benchmark, table.hardware) == (TINY, H100)
    assert [row.backend for row in table.rows] == ["native", "levanter", "maxtext"]  # native first
    native, levanter, maxtext = table.rows
    assert native.cells["perf/tokens_per_s"] == BackendCell(100.0, 1.0)
    assert maxtext.cells["perf/tokens_per_s"].vs_native == pytest.approx(0.87)
    assert levanter.cells["perf/tokens_per_s"].vs_native == pytest.approx(1.04)
    assert maxtext.cells["perf/step_time_s"].vs_native == pytest.approx(1.15)
    assert levanter.cells["perf/step_time_s"] == BackendCell(None, None)  # never measured
    assert "perf/tokens_per_s_per_device" not in native.cells


def test_only_recipes_a_framework_trained_and_no_ratio_without_native() -> None:
    views = [
        series("native", "perf/tokens_per_s", 100.0, benchmark="vit-tiny"),
        series("levanter", "perf/tokens_per_s", 90.0, benchmark="gpt3-tiny"),
    ]
    [table] = backends_tables(views)
    assert table.benchmark == "gpt3-tiny" and [r.backend for r in table.rows] == ["levanter"]
    assert table.rows[0].cells["perf/tokens_per_s"] == BackendCell(90.0, None)
    assert backends_tables([series("native", "perf/tokens_per_s", 1.0)]) == []


def test_the_newest_valid_night_not_a_newer_failed_one() -> None:
    maxtext = series("maxtext", "perf/tokens_per_s", 80.0)
    failed = SeriesPoint(maxtext.points[-1].night + dt.timedelta(days=1), None, "oom", None)
    maxtext = dataclasses.replace(maxtext, points=[*maxtext.points, failed])
    [table] = backends_tables([series("native", "perf/tokens_per_s", 100.0), maxtext])
    row = table.rows[1]
    assert row.night == maxtext.points[-2].night and row.cells["perf/tokens_per_s"].value == 80.0


def test_cells_in_everyday_units() -> None:
    assert format_cell("perf/step_time_s", BackendCell(0.1635, 0.994)) == "163.5 ms (0.99x)"
    assert format_cell("perf/mfu", BackendCell(0.412, None)) == "41.2%"
    assert format_cell("perf/tokens_per_s", BackendCell(6264.0, 1.0064)) == "6,264 (1.01x)"
    assert format_cell("loss/final_window", BackendCell(None, None)) == "-"


def with_backends() -> Report:
    base = sample_report()
    views = [
        series("native", "perf/tokens_per_s", 6224.0),
        series("maxtext", "perf/tokens_per_s", 6264.0),
        series("levanter", "perf/tokens_per_s", 5964.0),
        series("maxtext", "perf/step_time_s", 0.1635),
    ]
    return dataclasses.replace(base, series=[*base.series, *views], backends=backends_tables(views))


def test_every_renderer_shows_the_backends() -> None:
    report = with_backends()
    out = io.StringIO()
    render_terminal(report, Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    assert f"Backends: {TINY} on {H100}" in text
    assert "6,264 (1.01x)" in text and "5,964 (0.96x)" in text
    assert f"{TINY} by maxtext" in text  # its series too, named by who trained them
    md = render_markdown(report)
    assert "## Backends" in md and "| levanter |" in md and "5,964 (0.96x)" in md
    document = json.loads(render_json(report))
    rows = document["backends"][0]["rows"]
    assert [r["backend"] for r in rows] == ["native", "levanter", "maxtext"]
    assert rows[2]["cells"]["perf/tokens_per_s"]["vs_native"] == pytest.approx(6264 / 6224)


def test_the_dashboard_has_a_backends_page(tmp_path: Path) -> None:
    index = write_dashboard(with_backends(), tmp_path / "site")
    assert 'href="backends.html"' in index.read_text()
    page = (tmp_path / "site" / "backends.html").read_text()
    assert "maxtext" in page and "6,264 (1.01x)" in page and "163.5 ms" in page
    plain = write_dashboard(sample_report(), tmp_path / "plain")
    assert "backends.html" not in plain.read_text() and not (tmp_path / "plain" / "backends.html").exists()
