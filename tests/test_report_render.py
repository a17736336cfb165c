"""Renderers of the report: terminal, Markdown, JSON, SVG, the static dashboard and badges, plus a real
headless Chromium looking at the dashboard.

    JAX_PLATFORMS=cpu python -m pytest -q tests/test_report_render.py

The browser test uses Debian's /usr/bin/chromium through playwright (never `playwright install`), or the
browser JAXBENCH_CHROMIUM names (Google Chrome on GitHub's runners); without it the test is skipped,
unless JAXBENCH_REQUIRE_BROWSER=1 (CI), where it fails.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html.parser
import io
import itertools
import json
import math
import os
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from rich.console import Console

from results.report import html as dashboard
from results.report.badges import write_badges
from results.report.formatting import format_change, format_value, safe_file_stem, safe_url
from results.report.json_report import render_json
from results.report.markdown import render_markdown
from results.report.model import (
    Baseline,
    ChangePointView,
    ComponentRange,
    HumanVerdict,
    IncidentKind,
    IncidentSeries,
    IncidentState,
    IncidentView,
    Report,
    Segment,
    SeriesPoint,
    SeriesState,
    SeriesView,
    SettingChange,
)
from results.report.svg import render_series_svg
from results.report.terminal import render_terminal

START = dt.date(2025, 9, 1)
NIGHTS = 60
H100 = "8 x NVIDIA H100 80GB HBM3 x 1 host"
A100 = "8 x NVIDIA A100-SXM4-80GB x 1 host"
SPECIAL = "vit-b16 <script>alert(1)</script> & a|b"
"""A benchmark name full of characters that HTML, SVG and Markdown tables must escape."""
XLA_COMPARE = "https://github.com/openxla/xla/compare/1a2b3c4d...5e6f7a8b"
SVG_NS = "{http://www.w3.org/2000/svg}"
CHROMIUM = Path(os.environ.get("JAXBENCH_CHROMIUM", "/usr/bin/chromium"))


def make_series(
    key: str,
    benchmark: str,
    metric: str,
    hardware: str,
    state: SeriesState,
    *,
    level: float = 1.0,
    shift_at: int | None = None,
    shift: float = 0.0,
    last: float | None = None,
    failed: dict[int, str] | None = None,
    nights: int = NIGHTS,
) -> SeriesView:
    """A series of `nights` with 1 % noise, a step of `shift` (relative) at `shift_at`, failed nights
    (index -> status) and optionally a different newest value `last` (relative to `level`)."""
    rng = random.Random(key)
    failed = failed or {}
    unit, higher_is_better = {"tokens": ("tokens/s", True), "memory": ("bytes", False)}.get(
        metric.split("/")[0].split("_")[0] if "tokens" not in metric else "tokens", ("s", False)
    )
    values: list[float | None] = []
    for i in range(nights):
        step = 1 + shift if shift_at is not None and i >= shift_at else 1.0
        values.append(None if i in failed else level * step * (1 + rng.gauss(0, 0.01)))
    if last is not None:
        values[-1] = level * last
    points = [
        SeriesPoint(START + dt.timedelta(days=i), v, failed.get(i, "ok"), None if i in failed else 1000 + i)
        for i, v in enumerate(values)
    ]
    bounds = [0, shift_at, nights] if shift_at is not None else [0, nights]
    segments = [
        Segment(a, b, _mean(values[a:b]))
        for a, b in itertools.pairwise(bounds)
        if any(v is not None for v in values[a:b])
    ]
    change_points = []
    if shift_at is not None:
        regression = (shift > 0) != higher_is_better
        change_points.append(ChangePointView(shift_at, points[shift_at].night, shift, 1e-6, regression))
    reference = [v for v in values[: shift_at or nights] if v is not None]
    baseline = None
    if len(reference) >= 10:
        median = sorted(reference)[len(reference) // 2]
        baseline = Baseline(median, median * 0.97, median * 1.03)
    newest = values[-1]
    change = newest / baseline.median - 1 if baseline and newest is not None else None
    settings = {"precision": "bf16", "xla_flags": "--xla_gpu_enable_latency_hiding_scheduler=true"}
    if benchmark == SPECIAL:
        settings["note"] = 'tuned by "A & B" <b>bold</b> | piped'
    return SeriesView(
        key, benchmark, metric, unit, higher_is_better, hardware, "", settings,
        points, segments, change_points, baseline, state, change,
    )  # fmt: skip


def _mean(values: list[float | None]) -> float:
    present = [v for v in values if v is not None]
    return sum(present) / len(present)


def sample_report() -> Report:
    """3 benchmarks x 2-3 metrics x 2 hardware classes over 60 nights: two regressions (one series with a
    failed night), an improvement, a suspected night, an invalid newest night, a series too young for a
    baseline; an open regression incident with component ranges and flag/env changes, an open validity
    incident and a resolved one."""
    step, tokens, memory = "perf/step_time_s", "perf/tokens_per_s_per_device", "memory/peak_bytes"
    series = [
        make_series("llama2-7b.step.h100", "llama2-7b", step, H100, SeriesState.REGRESSION,
                    shift_at=45, shift=0.08, failed={30: "oom"}),
        make_series("llama2-7b.tokens.h100", "llama2-7b", tokens, H100, SeriesState.REGRESSION,
                    level=3900.0, shift_at=45, shift=-0.074),
        make_series("llama2-7b.step.a100", "llama2-7b", step, A100, SeriesState.OK, level=2.1),
        make_series("llama2-7b.tokens.a100", "llama2-7b", tokens, A100, SeriesState.OK, level=1850.0),
        make_series("gpt3-5b.step.h100", "gpt3-5b", step, H100, SeriesState.IMPROVEMENT,
                    level=0.8, shift_at=40, shift=-0.06),
        make_series("gpt3-5b.step.a100", "gpt3-5b", step, A100, SeriesState.SUSPECTED, level=1.6, last=1.045),
        make_series("gpt3-5b.memory.h100", "gpt3-5b", memory, H100, SeriesState.INSUFFICIENT_HISTORY,
                    level=5.1e10, nights=5),
        make_series("vit-special.step.h100", SPECIAL, step, H100, SeriesState.OK, level=0.21),
        make_series("vit-special.step.a100", SPECIAL, step, A100, SeriesState.INVALID, level=0.4,
                    failed={NIGHTS - 1: "nan"}),
    ]  # fmt: skip
    return Report(
        generated_at=dt.datetime(2025, 10, 31, 6, 30, tzinfo=dt.UTC),
        store="postgresql://bench-db/jaxbench",
        series=series,
        incidents=[_regression_incident(series), _validity_incident(), _resolved_incident()],
    )


def _regression_incident(series: list[SeriesView]) -> IncidentView:
    members = [
        IncidentSeries(s.key, s.benchmark, s.metric, s.change_points[0].magnitude, s.state)
        for s in series[:2]
    ]
    return IncidentView(
        id=7, fingerprint="throughput:h100:2025-10-16", kind=IncidentKind.THROUGHPUT,
        state=IncidentState.OPEN,
        hardware=H100, night=START + dt.timedelta(days=45), last_good_night=START + dt.timedelta(days=44),
        series=members,
        components=[
            ComponentRange("jax", "https://github.com/jax-ml/jax", "jax-v0.7.0", "jax-v0.7.1",
                           "https://github.com/jax-ml/jax/compare/jax-v0.7.0...jax-v0.7.1"),
            ComponentRange("xla", "https://github.com/openxla/xla", "1a2b3c4d", "5e6f7a8b", XLA_COMPARE),
        ],
        flag_changes=[SettingChange("--xla_gpu_enable_latency_hiding_scheduler", "true", "false")],
        env_changes=[SettingChange("NCCL_PROTO", None, "LL128")],
        verdict=None,
        summary="llama2-7b step time +8.0% on H100 after the jax 0.7.1 / XLA bump",
    )  # fmt: skip


def _validity_incident() -> IncidentView:
    return IncidentView(
        id=8, fingerprint="validity:a100:2025-10-30", kind=IncidentKind.VALIDITY, state=IncidentState.OPEN,
        hardware=A100, night=START + dt.timedelta(days=NIGHTS - 1), last_good_night=None,
        series=[IncidentSeries("vit-special.step.a100", SPECIAL, "perf/step_time_s", 0.0,
                               SeriesState.INVALID)],
        components=[ComponentRange("flax", None, "0.12.0", "0.12.1", "javascript:alert(1)")],
        flag_changes=[], env_changes=[], verdict=None, summary="loss went NaN <after> 3 steps",
    )  # fmt: skip


def _resolved_incident() -> IncidentView:
    return IncidentView(
        id=5, fingerprint="compile_time:a100:2025-09-20", kind=IncidentKind.COMPILE_TIME,
        state=IncidentState.RESOLVED, hardware=A100, night=START + dt.timedelta(days=19),
        last_good_night=START + dt.timedelta(days=18), series=[], components=[], flag_changes=[],
        env_changes=[], verdict=HumanVerdict.NOISE, summary="one slow node",
    )  # fmt: skip


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


# Dashboard --------------------------------------------------------------------------------------------------


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.links += [value for name, value in attrs if name in ("href", "src") and value]


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_dashboard_files_and_links(report: Report, tmp_path: Path) -> None:
    index = dashboard.write_dashboard(report, tmp_path / "site")
    site = index.parent
    assert index == tmp_path / "site" / "index.html"
    pages = [index, *sorted((site / "series").iterdir()), *sorted((site / "incidents").iterdir())]
    assert len(pages) == 1 + len(report.series) + len(report.incidents)
    assert (site / "series" / f"{safe_file_stem('vit-special.step.h100')}.html").exists()
    for page in pages:
        parsed = _parse(page)
        assert "script" not in parsed.tags, page
        for link in parsed.links:
            if link.startswith("https://"):
                assert page.parent.name == "incidents", (page, link)  # compare links only
                continue
            assert (page.parent / link).resolve().is_file(), (page, link)
        assert "<script>alert" not in page.read_text(encoding="utf-8")
        assert "javascript:" not in page.read_text(encoding="utf-8")
    index_links = _parse(index).links
    assert {f"series/{safe_file_stem(s.key)}.html" for s in report.series} <= set(index_links)
    assert {f"incidents/{i.id}.html" for i in report.incidents} <= set(index_links)
    assert (site / ".nojekyll").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["site"]  # no staging directory left behind


def test_dashboard_replaces_only_its_own_directory(
    report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    dashboard.write_dashboard(report, site)
    before = (site / "index.html").read_text(encoding="utf-8")

    def broken(series: SeriesView, **kwargs: int) -> str:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(dashboard, "render_series_svg", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        dashboard.write_dashboard(report, site)
    assert (site / "index.html").read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    monkeypatch.undo()
    dashboard.write_dashboard(report, site)  # replacing its own output works
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(FileExistsError, match="not a jaxbench dashboard"):
        dashboard.write_dashboard(report, foreign)
    assert (foreign / "thesis.tex").read_text() == "precious"


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


# A real browser ---------------------------------------------------------------------------------------------


def _browser_missing(reason: str) -> None:
    if os.environ.get("JAXBENCH_REQUIRE_BROWSER") == "1":
        pytest.fail(f"JAXBENCH_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(f"{reason}; set JAXBENCH_REQUIRE_BROWSER=1 to make this a failure")


def test_dashboard_in_headless_chromium(report: Report, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        _browser_missing(f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _browser_missing("the playwright package is not installed (pip install playwright)")

    index = dashboard.write_dashboard(report, tmp_path / "site")
    pages = {
        "index": index,
        "series": index.parent / "series" / "llama2-7b.step.h100.html",
        "incident": index.parent / "incidents" / "7.html",
    }
    problems: list[str] = []
    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )  # fmt: skip
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("request", lambda r: requests.append(r.url))
            for name, path in pages.items():
                page.goto(path.as_uri(), wait_until="load")
                plots = page.locator("svg.series-plot")
                expected_plots = {"index": 0, "series": 1, "incident": 2}[name]
                assert plots.count() == expected_plots, name
                for i in range(expected_plots):
                    box = plots.nth(i).bounding_box()
                    assert box is not None and box["width"] > 300 and box["height"] > 100, (name, box)
                    assert plots.nth(i).locator("polyline").count() >= 1
                if name == "index":
                    assert page.locator("a.cell").count() == len(report.series)
                    assert page.get_by_text(SPECIAL).count() >= 1  # shown as text, not run
                shot = tmp_path / f"{name}.png"
                page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 10_000, shot
        finally:
            browser.close()
    assert problems == []
    assert all(url.startswith("file://") for url in requests), requests


def test_formatting_of_values_changes_and_names() -> None:
    assert format_change(0.042) == "+4.2%" and format_change(-0.1) == "-10.0%"
    assert format_change(None) == "-" and format_change(math.nan) == "-"
    assert format_value(12345.6, "s") == "12,346 s" and format_value(0.00123456, "s") == "0.001235 s"
    assert format_value(None, "s") == "-"
    assert safe_url("javascript:alert(1)") is None and safe_url("https://x.org/a b") == "https://x.org/a%20b"
    assert safe_file_stem("llama2-7b") == "llama2-7b"
    odd = safe_file_stem("a/b c")
    assert odd.startswith("a-b-c-") and odd != safe_file_stem("a/b_c")
