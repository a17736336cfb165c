"""Renderers of the report: terminal, Markdown, JSON, SVG and badges (the dashboard: tests/test_dashboard.py).

JAX_PLATFORMS=cpu python -m pytest -q tests/test_report_render.py
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from results.judgement.vocabulary import (
    SeriesState,
)
from results.report.badges import write_badges
from results.report.formatting import format_change, format_value, safe_file_stem, safe_url
from results.report.json_report import render_json
from results.report.markdown import render_markdown
from results.report.model import (
    Baseline,
    Report,
    Segment,
    SeriesView,
)
from results.report.svg import render_series_svg
from results.report.terminal import render_terminal
from tests.sample_report import H100, NIGHTS, SPECIAL, XLA_COMPARE, make_series, sample_report

SVG_NS = "{http://www.w3.org/2000/svg}"


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
    assert "## Incident #7: throughput on 8 x NVIDIA H100 80GB HBM3 x 1 host" in md
    assert "| `--xla_gpu_enable_latency_hiding_scheduler` | `true` | `false` |" in md
    assert "| `NCCL_PROTO` | (unset) | `LL128` |" in md
    assert "Incident #5" not in md and "1 recovered or resolved incidents not shown" in md
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
    text = render_json(report)
    doc = json.loads(text)
    assert text == render_json(report)  # stable
    assert doc["schema_version"] == 1
    assert list(doc) == sorted(doc)
    assert doc["generated_at"] == "2025-10-31T06:30:00+00:00"
    assert doc["summary"]["series_by_state"]["regression"] == 2
    assert doc["summary"]["open_incidents"] == 2
    first = doc["series"][0]
    assert first["state"] == "regression" and first["key"] == "llama2-7b.step.h100"
    assert first["points"][30] == {"night": "2025-10-01", "value": None, "status": "oom", "run_id": None}
    assert first["change_points"][0]["regression"] is True
    assert first["baseline"]["median"] == pytest.approx(report.series[0].baseline.median)  # type: ignore[union-attr]
    incident = doc["incidents"][0]
    assert incident["kind"] == "throughput" and incident["verdict"] is None
    assert incident["components"][1]["compare_url"] == XLA_COMPARE
    assert doc["incidents"][2]["verdict"] == "noise"


# SVG --------------------------------------------------------------------------------------------------------


def _svg(series: SeriesView) -> ET.Element:
    return ET.fromstring(render_series_svg(series))


def test_svg_draws_runs_means_band_and_change_points(report: Report) -> None:
    root = _svg(report.series[0])  # failed night 30 splits the line in two; one regression at night 45
    assert root.tag == f"{SVG_NS}svg"
    assert len(root.findall(f"{SVG_NS}polyline")) == 2
    change_lines = [e for e in root.iter(f"{SVG_NS}line") if "change-point" in e.get("class", "")]
    assert len(change_lines) == 1 and "regression" in change_lines[0].get("class", "")
    assert change_lines[0].get("stroke") == "#c62828"
    assert len([e for e in root.iter(f"{SVG_NS}line") if e.get("class") == "segment-mean"]) == 2
    assert len([e for e in root.iter(f"{SVG_NS}rect") if e.get("class") == "baseline-band"]) == 1
    assert len([e for e in root.iter(f"{SVG_NS}polygon") if e.get("class") == "failed"]) == 1
    texts = "".join(root.itertext())
    assert "2025-09-01" in texts
    [unit] = [e for e in root.iter(f"{SVG_NS}text") if "rotate(-90" in e.get("transform", "")]
    assert unit.text == "s"


def test_svg_improvement_is_green_and_text_is_escaped(report: Report) -> None:
    improvement = _svg(report.series[4])
    (line,) = [e for e in improvement.iter(f"{SVG_NS}line") if "change-point" in e.get("class", "")]
    assert line.get("stroke") == "#2e7d32"
    raw = render_series_svg(report.series[7])
    assert "<script" not in raw
    assert SPECIAL in "".join(ET.fromstring(raw).itertext())


@pytest.mark.parametrize("nights", [0, 1, 5])
def test_svg_degenerate_series(nights: int) -> None:
    series = make_series("young", "young", "perf/step_time_s", H100, SeriesState.INSUFFICIENT_HISTORY,
                         nights=max(nights, 1))  # fmt: skip
    if nights == 0:
        series = dataclasses.replace(series, points=[], segments=[])
    root = _svg(series)
    assert len(root.findall(f"{SVG_NS}polyline")) == (1 if nights else 0)


def test_svg_skips_non_finite_statistics(report: Report) -> None:
    series = dataclasses.replace(
        report.series[0],
        segments=[Segment(0, NIGHTS, float("nan"))],
        baseline=Baseline(float("nan"), 0.9, float("inf")),
    )
    raw = render_series_svg(series)
    assert "nan" not in raw.lower() and "inf" not in raw.lower()
    assert len(ET.fromstring(raw).findall(f"{SVG_NS}polyline")) == 2


def test_svg_all_failed_is_valid() -> None:
    series = make_series("dead", "dead", "perf/step_time_s", H100, SeriesState.INVALID,
                         nights=3, failed={0: "oom", 1: "oom", 2: "nan"})  # fmt: skip
    root = _svg(series)
    assert not root.findall(f"{SVG_NS}polyline")
    assert len([e for e in root.iter(f"{SVG_NS}polygon") if e.get("class") == "failed"]) == 3


# Badges -----------------------------------------------------------------------------------------------------


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
