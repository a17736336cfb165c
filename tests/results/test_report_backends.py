"""The backends view in the terminal, Markdown, JSON and the dashboard: one recipe on one hardware class
across native and the framework backends, each at its newest valid night, with the ratio to native. The
view's grouping, nights and ratios as pure functions: tests/results/test_backends_view.py.

JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_report_backends.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.results.report.backends import backends_tables
from jaxbench.results.report.github_markdown import render_markdown
from jaxbench.results.report.html import write_dashboard
from jaxbench.results.report.json_report import report_data
from jaxbench.results.report.model import Report
from jaxbench.results.report.terminal import render_terminal
from tests.results.test_backends_view import NEWEST, TINY, ending, series
from tests.support.sample_report import H100, SPECIAL, sample_report

OLDER = (NEWEST - dt.timedelta(days=1)).isoformat()


def with_backends() -> Report:
    base = sample_report()
    views = [
        series("native", "perf/tokens_per_s", 6224.0),
        series("maxtext", "perf/tokens_per_s", 6264.0),
        series("levanter", "perf/tokens_per_s", 5964.0),
        series("maxtext", "perf/step_time_s", 0.1635),
        series("native", "perf/mfu", 0.40),
        series("maxtext", "perf/mfu", 0.348),
        ending(series("levanter", "perf/mfu", 0.38), 1),  # its newest MFU is a night older than its row
        series("native", "perf/tokens_per_s", 100.0, benchmark=SPECIAL),
        series("levanter <b>", "perf/tokens_per_s", 87.0, benchmark=SPECIAL),
    ]
    return dataclasses.replace(base, series=[*base.series, *views], backends=backends_tables(views))


def test_the_terminal_shows_a_table_per_recipe_after_the_series() -> None:
    out = io.StringIO()
    render_terminal(with_backends(), Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    heading = f"Backends: {TINY} on {H100}"
    assert heading in text and f"Backends: {SPECIAL} on {H100}" in text
    assert text.index(heading) > text.index(f"{TINY} by maxtext")  # after the series tables
    assert text.index(heading) < text.index("Open incidents")
    assert "6,264 (1.01x)" in text and "5,964 (0.96x)" in text and "163.5 ms" in text
    assert "34.8% (0.87x)" in text and f"38.0% (0.95x) on {OLDER}" in text
    assert "levanter <b>" in text and "87 (0.87x)" in text
    assert f"{TINY} by maxtext" in text  # its series too, named by who trained them


def test_markdown_has_a_backends_section() -> None:
    md = render_markdown(with_backends())
    section = md[md.index("## Backends") :]
    assert f"**{TINY}** on {H100}" in section
    assert "| backend | night | tokens/s | MFU | step time |" in section
    assert "| levanter | " in section and "5,964 (0.96x)" in section and "34.8% (0.87x)" in section
    assert "| levanter &lt;b&gt; |" in section and "<script>" not in section  # escaped like every cell


def test_json_has_the_backends_tables() -> None:
    document = json.loads(json.dumps(report_data(with_backends())))
    tiny = next(t for t in document["backends"] if t["benchmark"] == TINY)
    rows = tiny["rows"]
    assert [r["backend"] for r in rows] == ["native", "levanter", "maxtext"]
    assert rows[2]["cells"]["perf/tokens_per_s"]["vs_native"] == pytest.approx(6264 / 6224)
    assert rows[1]["night"] == NEWEST.isoformat() and rows[1]["cells"]["perf/mfu"]["night"] == OLDER
    empty = {"value": None, "vs_native": None, "night": None, "series_key": None}
    assert rows[1]["cells"]["perf/step_time_s"] == empty
    assert rows[1]["cells"]["perf/mfu"]["series_key"] == f"levanter-perf/mfu-{TINY}-{H100}"  # its series


def test_the_dashboard_has_a_backends_page(tmp_path: Path) -> None:
    index = write_dashboard(with_backends(), tmp_path / "site")
    assert 'href="backends.html"' in index.read_text()
    page = (tmp_path / "site" / "backends.html").read_text()
    assert "maxtext" in page and "6,264 (1.01x)" in page and "163.5 ms" in page
    assert "34.8% (0.87x)" in page and f"on {OLDER}" in page
    assert "levanter &lt;b&gt;" in page and "<script>alert" not in page
    plain = write_dashboard(sample_report(), tmp_path / "plain")
    assert "backends.html" not in plain.read_text() and not (tmp_path / "plain" / "backends.html").exists()
