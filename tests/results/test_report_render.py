"""Renderers of the report: terminal, Markdown, JSON, SVG and badges (the dashboard:
tests/results/test_dashboard.py).

JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_report_render.py
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.core.json_output import render
from jaxbench.results.report.badges import write_badges
from jaxbench.results.report.formatting import (
    format_change,
    format_value,
    newest_text,
    safe_file_stem,
    safe_url,
)
from jaxbench.results.report.github_markdown import render_markdown
from jaxbench.results.report.json_report import report_data
from jaxbench.results.report.model import (
    Report,
    SeriesPoint,
)
from jaxbench.results.report.terminal import render_terminal
from tests.support.sample_report import SPECIAL, XLA_COMPARE, sample_report


@pytest.fixture
def report() -> Report:
    return sample_report()


# Terminal ---------------------------------------------------------------------------------------------------


def test_terminal_shows_states_in_100_columns(report: Report) -> None:
    out = io.StringIO()
    render_terminal(report, Console(file=out, width=100, color_system=None))
    text = out.getvalue()
    assert "2 regressions, 1 suspected, 1 invalid, 1 improvements, 2 open incidents, 9 series" in text
    table = text.split("9 series", 1)[1]  # the rows, not the headline that names the states too
    for label in ("regression", "suspected", "invalid", "improvement", "ok", "no baseline yet"):
        assert label in table
    assert format_change(report.series[0].change_vs_baseline) in text
    assert "failed (nan)" in text
    assert "<script>alert(1)</script>" in text  # a terminal shows names as they are
    assert XLA_COMPARE in text  # links are never broken across lines
    assert "javascript:" not in text
    assert "perf/tokens_per_s_per_device" in text  # metric names are never folded
    assert all(len(line) <= 100 for line in text.splitlines() if "https://" not in line)


def test_terminal_colours_by_state(report: Report) -> None:
    out = io.StringIO()
    render_terminal(report, Console(file=out, width=100, force_terminal=True, color_system="standard"))
    text = out.getvalue()
    assert "\x1b[1;31mregression" in text  # bold red
    assert "\x1b[33msuspected" in text  # yellow
    assert "\x1b[32mimprovement" in text  # green
    assert "\x1b[1;35minvalid" in text  # bold magenta


# Markdown ---------------------------------------------------------------------------------------------------


def test_markdown_headline_tables_and_incident(report: Report) -> None:
    md = render_markdown(report)
    assert md.startswith("# jaxbench: 2 regressions, 1 suspected, 1 invalid, 2 open incidents")
    assert f"[compare]({XLA_COMPARE})" in md
    assert "## Incident #\u200b7: throughput on 8 x NVIDIA H100 80GB HBM3 x 1 host" in md
    assert "| `--xla_gpu_enable_latency_hiding_scheduler` | `true` | `false` |" in md
    assert "| `NCCL_PROTO` | (unset) | `LL128` |" in md
    assert "Incident #\u200b5" not in md and "1 recovered or resolved incidents not shown" in md
    # Attention first, the quiet series folded below.
    assert md.index("Series that need attention") < md.index("<details>")
    assert md.index("🔴 regression") < md.index("<details>")


def test_markdown_escapes_cells(report: Report) -> None:
    md = render_markdown(report)
    assert "a\\|b" in md and "a|b" not in md
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert "javascript:" not in md
    for line in md.splitlines():  # tables have 6 (series), 4 (incident series, components) or 3 columns
        if line.startswith("| "):
            assert len(line.replace("\\|", "").strip("|").split("|")) in (3, 4, 6), line


def test_markdown_links_to_dashboard(report: Report) -> None:
    md = render_markdown(report, dashboard_url="https://example.github.io/jaxbench")
    assert "(https://example.github.io/jaxbench/series/llama2-7b.step.h100.html)" in md
    assert "(https://example.github.io/jaxbench/incidents/7.html)" in md


# JSON -------------------------------------------------------------------------------------------------------


def test_json_round_trips(report: Report) -> None:
    text = render("report", report_data(report))
    envelope = json.loads(text)
    assert text == render("report", report_data(report))  # stable
    assert envelope["schema_version"] == 1 and envelope["command"] == "report"
    doc = envelope["data"]
    assert "schema_version" not in doc  # the envelope's covers the report's fields
    assert list(doc) == sorted(doc) and list(doc["series"][0]) == sorted(doc["series"][0])
    assert doc["generated_at"] == "2025-10-31T06:30:00+00:00"
    assert doc["summary"]["series_by_state"]["regression"] == 2
    assert doc["summary"]["open_incidents"] == 2
    first = doc["series"][0]
    assert first["state"] == "regression" and first["key"] == "llama2-7b.step.h100"
    point = {k: first["points"][30][k] for k in ("night", "value", "status", "run_id")}
    assert point == {"night": "2025-10-01", "value": None, "status": "oom", "run_id": None}
    assert first["name"] == "llama2-7b"  # as the other formats name it; `key` may end in a hash
    assert first["change_points"][0]["regression"] is True
    assert first["baseline"]["median"] == pytest.approx(report.series[0].baseline.median)  # type: ignore[union-attr]
    incident = doc["incidents"][0]
    assert incident["kind"] == "throughput" and incident["verdict"] is None
    assert incident["components"][1]["compare_url"] == XLA_COMPARE
    assert doc["incidents"][2]["verdict"] == "noise"


# SVG --------------------------------------------------------------------------------------------------------


def test_badges_follow_the_endpoint_schema(report: Report, tmp_path: Path) -> None:
    paths = write_badges(report, tmp_path / "badges")
    badges = {p.name: json.loads(p.read_text()) for p in paths}
    assert len(badges) == 3
    for badge in badges.values():
        assert set(badge) == {"schemaVersion", "label", "message", "color"}
        assert badge["schemaVersion"] == 1
    llama = badges["llama2-7b.json"]
    assert llama["color"] == "red" and llama["message"].endswith("% (regression)")
    assert llama["message"] == f"{format_change(report.series[0].change_vs_baseline)} (regression)"
    assert badges["gpt3-5b.json"] == {"schemaVersion": 1, "label": "gpt3-5b", "message": "suspected",
                                      "color": "yellow"}  # fmt: skip
    special = badges[f"{safe_file_stem(SPECIAL)}.json"]
    assert special["label"] == SPECIAL and special["message"] == "invalid"
    assert all(p.parent == tmp_path / "badges" for p in paths)


def test_formatting_of_values_changes_and_names() -> None:
    assert format_change(0.042) == "+4.2%" and format_change(-0.1) == "-10.0%"
    assert format_change(None) == "-" and format_change(math.nan) == "-"
    assert format_value(12345.6, "s") == "12,346 s" and format_value(0.00123456, "s") == "0.001235 s"
    assert format_value(None, "s") == "-"
    assert safe_url("javascript:alert(1)") is None and safe_url("https://x.org/a b") == "https://x.org/a%20b"
    assert safe_file_stem("llama2-7b") == "llama2-7b"
    odd = safe_file_stem("a/b c")
    assert odd.startswith("a-b-c-") and odd != safe_file_stem("a/b_c")


def test_variants_runs_by_hand_and_medians_are_named_in_every_format(report: Report) -> None:
    """A series that differs from its benchmark's default settings is named by the difference, one run by
    hand only says so, and a night of several runs says it is their median."""
    base = report.series[0]
    newest = dataclasses.replace(base.points[-1], runs=3, ad_hoc_runs=2, run_ids=(1, 2, 3))
    variant = dataclasses.replace(
        base, key="variant", variant="global_batch=16", ad_hoc=True, points=[*base.points[:-1], newest]
    )
    assert newest_text(variant).endswith(" (median of 3 runs, 2 ad hoc)")
    assert (
        newest_text(dataclasses.replace(variant, points=[SeriesPoint(newest.night, 2.0, "ok", 3)])) == "2 s"
    )
    shown = dataclasses.replace(report, series=[variant], incidents=[], backends=[])
    name = "llama2-7b · global_batch=16 (ad hoc)"
    assert name in render_markdown(shown)
    assert json.loads(render("report", report_data(shown)))["data"]["series"][0]["name"] == name
    out = io.StringIO()
    render_terminal(shown, Console(file=out, width=160, color_system=None))
    assert name in out.getvalue() and "(median of 3 runs, 2 ad hoc)" in out.getvalue()
