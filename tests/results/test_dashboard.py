"""The static HTML dashboard: the data behind its plots, its files and links, that it replaces only its own
folder, and a real headless Chromium hovering, zooming and following its links.

    JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_dashboard.py
    JAXBENCH_SHOTS=/tmp/shots JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_dashboard.py -k chrom

The browser test uses Debian's /usr/bin/chromium through playwright (never `playwright install`), or the
browser JAXBENCH_CHROMIUM names (Google Chrome on GitHub's runners); without it the test is skipped,
unless JAXBENCH_REQUIRE_BROWSER=1 (CI), where it fails. With JAXBENCH_SHOTS=DIR it leaves its screenshots
there (the overview, a hover, a zoom, a run page, a variants page) for a person to look at.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html.parser
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from harness.measure.hlo import ProgramSummary
from results import schema
from results.history import History, Night
from results.identity import HardwareClass, SeriesIdentity
from results.judgement.detect import Detection
from results.report import html as dashboard
from results.report.build import RUN_PAGE_NIGHTS, referenced_runs
from results.report.charts import chart_json, series_chart, shared_range, variant_groups
from results.report.formatting import format_value, safe_file_stem
from results.report.model import (
    Baseline,
    ComponentView,
    Marker,
    Report,
    RunResultView,
    RunView,
    SeriesPoint,
    SeriesView,
)
from tests.support.sample_report import SPECIAL, START, sample_report

CHROMIUM = Path(os.environ.get("JAXBENCH_CHROMIUM", "/usr/bin/chromium"))
JAX_BEFORE, JAX_AFTER = "a1b2c3d4e5f6a7b8", "0f9e8d7c6b5a4f3e"
"""jax's commit before and from the night of the step (night 45 of the sample)."""
HIDDEN_RUN = 1003
"""A run behind a point that the report does not carry: its night links nowhere."""


def night(index: int) -> dt.date:
    return START + dt.timedelta(days=index)


def _run(run_id: int, members: list[tuple[SeriesView, SeriesPoint]]) -> RunView:
    index = (members[0][1].night - START).days
    precision = members[0][0].settings.get("precision", "bf16")
    started = dt.datetime.combine(night(index), dt.time(2, 0), dt.UTC)
    jax = JAX_BEFORE if index < 45 else JAX_AFTER
    return RunView(
        id=run_id, night=night(index), status="ok", reason=None, source_kind="harness",
        run_uid=f"uid-{run_id}", started_at=started, finished_at=started + dt.timedelta(minutes=41),
        image_ref=f"ghcr.io/example/jax:nightly-{night(index)}", image_digest="sha256:" + "ab" * 32,
        ci_job_url="https://github.com/example/jaxbench/actions/runs/1", hostname="gpu-node-07", hosts=1,
        config={"model": {"family": "llama2", "num_layers": 32}, "train": {"precision": precision,
                "global_batch": 256, "note": SPECIAL}, "xla_flags": "auto"},
        environment={"NCCL_PROTO": "LL128", "XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true"},
        components=[
            ComponentView("jax", "https://github.com/jax-ml/jax", jax, "0.7"),
            ComponentView("xla", "https://github.com/openxla/xla", "5e6f7a8b9c0d", None),
        ],
        results=[
            RunResultView(s.key, s.benchmark, s.metric, s.unit, p.value, p.status, None) for s, p in members
        ],
        schedule="nightly" if index % 10 else "ad-hoc", source_hash="cd" * 32,
        program=_program(index), profile=_profile(index),
    )  # fmt: skip


def _program(index: int) -> dict[str, Any]:
    """As runs.program stores it: the program changed with jax on night 45 (two more kLoop fusions)."""
    fusions = 12 if index < 45 else 14
    summary = ProgramSummary(
        fingerprint=("a" if index < 45 else "b") * 64, instructions=900 + fusions,
        fusions={"kLoop": fusions, "kCustom": 4}, ops={"fusion": fusions + 4, "other": 900},
        collectives={"all-reduce": 3}, custom_calls={"__cublas$lt$matmul": 4},
    )  # fmt: skip
    return {"summary": summary.model_dump(mode="json"), "cost": {"flops": 1.5e12, "bytes accessed": 3e9}}


def _profile(index: int) -> dict[str, Any]:
    matmul = 0.009 if index < 45 else 0.013
    return {"steps": 3, "wall_s": 0.1, "seconds_per_step": {"matmul": matmul, "host": 0.001}, "problem": None}


def dashboard_report() -> Report:
    """The sample report plus what the interactive pages show: the runs behind the points (but one), a fp8
    variant of llama2-7b's step time on H100 (a settings group), findings of every kind on the bf16 one,
    and a gap night beside its failed (oom) night."""
    base = sample_report()
    step = base.series[0]
    assert step.key == "llama2-7b.step.h100"
    points = list(step.points)
    points[30] = dataclasses.replace(points[30], run_id=1030)  # the oom run: stored, without a value
    points[31] = SeriesPoint(points[31].night, None, "gap", None, runs=0)
    points[50] = dataclasses.replace(points[50], runs=3, run_ids=(1950, 1951, 1050))
    bf16 = dataclasses.replace(
        step, points=points,
        markers=[Marker("step", night(45), night(45), "step +8.0% (worse, p = 1e-06)"),
                 Marker("drift", night(10), night(20), "drift +2.1% over 11 nights"),
                 Marker("transient", night(36), night(37), "transient +5.0%, back the next night")],
    )  # fmt: skip
    assert step.baseline is not None
    fp8 = dataclasses.replace(
        step, key="llama2-7b.step.h100.fp8", settings={**step.settings, "precision": "fp8"},
        variant="precision=fp8", change_points=[], segments=[], markers=[],
        baseline=Baseline(*(0.8 * v for v in dataclasses.astuple(step.baseline))),
        points=[dataclasses.replace(p, value=p.value * 0.8 if p.value is not None else None,
                                    run_id=p.run_id + 1000 if p.run_id is not None else None,
                                    run_ids=tuple(r + 1000 for r in p.run_ids)) for p in points],
    )  # fmt: skip
    series = [bf16, fp8, *(_on_own_runs(s) for s in base.series[1:])]
    members: dict[int, list[tuple[SeriesView, SeriesPoint]]] = {}
    for s in series:
        for p in s.points:
            for run_id in {p.run_id, *p.run_ids} - {None, HIDDEN_RUN}:
                assert run_id is not None
                members.setdefault(run_id, []).append((s, p))
    runs = {run_id: _run(run_id, m) for run_id, m in sorted(members.items())}
    return dataclasses.replace(base, series=series, runs=runs)


def _on_own_runs(series: SeriesView) -> SeriesView:
    """The sample numbers runs by night alone; a run is on one hardware class, so the A100's get their own."""
    if "A100" not in series.hardware:
        return series
    points = [
        dataclasses.replace(p, run_id=p.run_id + 3000) if p.run_id is not None else p for p in series.points
    ]
    return dataclasses.replace(series, points=points)


@pytest.fixture
def report() -> Report:
    return dashboard_report()


# The plots' data --------------------------------------------------------------------------------------------


def test_a_night_without_a_value_is_a_null_that_breaks_the_line(report: Report) -> None:
    chart = series_chart(report.series[0], report.runs, root="../")
    (line,) = chart["lines"]
    assert line["y"][30] is None and line["status"]["30"] == "oom"
    assert line["y"][31] is None and line["status"]["31"] == "gap" and line["run"][31] is None
    assert line["status"] == {"30": "oom", "31": "gap"}  # only the nights that are not "ok"
    assert sum(v is None for v in line["y"]) == 2
    assert '"y":[' in chart_json(chart) and ",null,null," in chart_json(chart)
    assert len(line["x"]) == len(line["y"]) == len(report.series[0].points)
    assert line["runs"][50] == 3 and line["runs"][49] == 1


def test_the_band_never_goes_below_zero_for_a_positive_metric(report: Report) -> None:
    positive = dataclasses.replace(report.series[0], baseline=Baseline(1.0, -0.4, 2.4))
    band = series_chart(positive, {}, root="")["band"]
    assert band["low"] == 0.0 and band["high"] == 2.4 and band["median"] == 1.0
    assert band["start"] == night(45).isoformat() and band["end"] == night(59).isoformat()
    points = [dataclasses.replace(p, value=None if p.value is None else -p.value) for p in positive.points]
    negative = dataclasses.replace(positive, points=points, baseline=Baseline(-1.0, -1.5, -0.4))
    assert series_chart(negative, {}, root="")["band"]["low"] == -1.5  # a signed metric keeps its band
    assert shared_range([series_chart(positive, {}, root="")])[0] >= 0.0  # type: ignore[index]


def test_points_link_to_run_pages_and_name_the_commits_that_moved(report: Report) -> None:
    chart = series_chart(report.series[0], report.runs, root="../")
    (line,) = chart["lines"]
    assert chart["runBase"] == "../runs/"
    assert line["run"][3] == HIDDEN_RUN and line["noPage"] == [HIDDEN_RUN]  # no page: no link
    assert line["commits"][0] == f"commits: jax {JAX_BEFORE[:7]}; xla 5e6f7a8"
    assert line["commits"][45] == f"moved: jax {JAX_BEFORE[:7]} → {JAX_AFTER[:7]}"
    assert line["commits"][44] == line["commits"][46] == ""
    bare = series_chart(report.series[0], {}, root="../")
    assert bare["runBase"] is None and bare["lines"][0]["commits"] is None


def test_findings_become_markers(report: Report) -> None:
    markers = series_chart(report.series[0], report.runs, root="")["markers"]
    assert [(m["kind"], m["start"], m["end"]) for m in markers] == [
        ("step", "2025-10-16", "2025-10-16"),
        ("drift", "2025-09-11", "2025-09-21"),
        ("transient", "2025-10-07", "2025-10-08"),
    ]


def test_settings_variants_are_grouped_and_labelled_by_what_differs(report: Report) -> None:
    (group,) = variant_groups(report.series)
    assert [s.key for s in group.series] == ["llama2-7b.step.h100", "llama2-7b.step.h100.fp8"]
    assert group.labels == ["precision=bf16", "precision=fp8"]
    assert group.title.startswith("llama2-7b · perf/step_time_s · 8 x NVIDIA H100")
    assert "fp8" not in group.title  # named for the group, not for its first member


def test_names_reach_the_page_as_json_that_cannot_close_its_script(report: Report) -> None:
    special = next(s for s in report.series if s.benchmark == SPECIAL)
    text = str(chart_json(series_chart(special, report.runs, root="../")))
    assert not {"<", ">", "&"} & set(text)
    assert json.loads(text)["lines"][0]["name"] == SPECIAL


# The site --------------------------------------------------------------------------------------------------


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.scripts: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.links += [value for name, value in attrs if name in ("href", "src") and value]
        if tag == "script":
            self.scripts.append(dict(attrs))


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_dashboard_files_and_links(report: Report, tmp_path: Path) -> None:
    index = dashboard.write_dashboard(report, tmp_path / "site")
    site = index.parent
    assert index == tmp_path / "site" / "index.html"
    folders = ("series", "incidents", "runs", "variants")
    pages = [index, *(p for folder in folders for p in sorted((site / folder).glob("*.html")))]
    assert len(pages) == 1 + len(report.series) + len(report.incidents) + len(report.runs) + 1
    assert (site / "series" / f"{safe_file_stem('vit-special.step.h100')}.html").exists()
    assert (site / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    for page in pages:
        parsed = _parse(page)
        for script in parsed.scripts:  # the site's own scripts, or data
            assert script.get("type") == "application/json" or (script.get("src") or "").endswith(
                ("assets/plotly.min.js", "assets/dashboard.js")
            ), (page, script)
        for link in parsed.links:
            if link.startswith("https://"):
                assert page.parent.name in ("incidents", "runs"), (page, link)  # compare, commit, CI links
                continue
            assert (page.parent / link).resolve().is_file(), (page, link)
        text = page.read_text(encoding="utf-8")
        assert "<script>alert" not in text and "<b>bold</b>" not in text and "javascript:" not in text
    index_links = set(_parse(index).links)
    assert {f"series/{safe_file_stem(s.key)}.html" for s in report.series} <= index_links
    assert {f"incidents/{i.id}.html" for i in report.incidents} <= index_links
    assert any(link.startswith("variants/") for link in index_links)
    assert index.read_text(encoding="utf-8").count('<svg class="spark"') >= len(report.series)
    assert (site / ".nojekyll").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["site"]  # no staging directory left behind


def test_a_run_page_shows_its_compiled_program_and_profile(report: Report, tmp_path: Path) -> None:
    site = dashboard.write_dashboard(report, tmp_path / "site").parent
    page = (site / "runs" / "1057.html").read_text(encoding="utf-8")
    assert "<h2>Compiled program</h2>" in page and f"<code>{'b' * 64}</code>" in page
    assert "<code>kLoop</code> 14" in page and "<code>__cublas$lt$matmul</code> 4" in page
    assert "<dt>XLA flops</dt><dd>1,500,000,000,000</dd>" in page
    assert "<h2>Profile</h2>" in page and '<td>matmul</td><td class="num">13.000</td>' in page


def test_tables_link_every_run_to_its_page(report: Report, tmp_path: Path) -> None:
    site = dashboard.write_dashboard(report, tmp_path / "site").parent
    recent = _parse(site / "series" / "llama2-7b.step.h100.html").links
    assert "../runs/1059.html" in recent
    assert {"../runs/1950.html", "../runs/1951.html", "../runs/1050.html"} <= set(recent)  # a 3-run night
    incident = _parse(site / "incidents" / "7.html").links
    assert {"../runs/1044.html", "../runs/1045.html"} <= set(incident)  # last good and first bad runs
    run = (site / "runs" / "1045.html").read_text(encoding="utf-8")
    for text in ("train.precision", "model.num_layers", "ghcr.io/example/jax:nightly-2025-10-16",
                 "gpu-node-07", JAX_AFTER, "NCCL_PROTO", "nightly (judged)", "1045.json"):  # fmt: skip
        assert text in run, text
    assert "../series/llama2-7b.step.h100.html" in _parse(site / "runs" / "1045.html").links
    assert "ad hoc" in (site / "runs" / "1040.html").read_text(encoding="utf-8")
    stored = json.loads((site / "runs" / "1045.json").read_text(encoding="utf-8"))
    assert stored["config"]["train"]["precision"] == "bf16" and stored["components"][0]["name"] == "jax"
    assert not (site / "runs" / f"{HIDDEN_RUN}.html").exists()


def test_dashboard_replaces_only_its_own_directory(
    report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    dashboard.write_dashboard(report, site)
    before = (site / "index.html").read_text(encoding="utf-8")

    def broken(*args: object, **kwargs: object) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(dashboard, "series_chart", broken)
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


@pytest.mark.parametrize("first", [True, False], ids=["over a dashboard", "to a folder not made yet"])
def test_an_out_folder_that_is_a_link_updates_what_it_points_at(
    report: Report, tmp_path: Path, first: bool
) -> None:
    """`--out /var/www/dashboard` linked to the folder a web server serves: the link stays, the folder it
    names gets the new site, and nothing is left beside either."""
    served, docroot = tmp_path / "sites" / "current", tmp_path / "www"
    docroot.mkdir()
    if first:
        dashboard.write_dashboard(report, served)
        (served / "stale.html").write_text("from the site before")
    link = docroot / "dashboard"
    link.symlink_to(served, target_is_directory=True)
    for _ in range(2):
        index = dashboard.write_dashboard(report, link)
        assert index == link / "index.html" and index.is_file()
        assert link.is_symlink() and link.resolve() == served.resolve()
        assert (served / dashboard.MARKER).is_file() and not (served / "stale.html").exists()
        assert [p.name for p in docroot.iterdir()] == ["dashboard"]
        assert [p.name for p in served.parent.iterdir()] == ["current"]


# A real browser ---------------------------------------------------------------------------------------------

POINT_AT = """([chartId, index]) => {
  const gd = document.querySelector(`div.chart[data-chart="${chartId}"]`);
  const trace = gd.data.find((t) => t.meta === "series");
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
  return { x: box.left + xa._offset + xa.l2p(xa.d2l(trace.x[index])),
           y: box.top + ya._offset + ya.l2p(ya.d2l(trace.y[index])) };
}"""
"""Where on the screen a chart's point is drawn, from plotly's own axes (to move the real mouse there)."""

AXES = """(chartId) => {
  const gd = document.querySelector(`div.chart[data-chart="${chartId}"]`);
  const xa = gd._fullLayout.xaxis, box = gd.getBoundingClientRect();
  return { x: xa.range.map((r) => xa.r2l(r)), y: gd._fullLayout.yaxis.range, yType: gd._fullLayout.yaxis.type,
           left: box.left + xa._offset, width: xa._length,
           top: box.top + gd._fullLayout.yaxis._offset, height: gd._fullLayout.yaxis._length,
           shapes: gd._fullLayout.shapes.length, traces: gd.data.map((t) => t.meta || "") };
}"""


def _browser_missing(reason: str) -> None:
    if os.environ.get("JAXBENCH_REQUIRE_BROWSER") == "1":
        pytest.fail(f"JAXBENCH_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(f"{reason}; set JAXBENCH_REQUIRE_BROWSER=1 to make this a failure")


@pytest.mark.slow
@pytest.mark.browser
def test_dashboard_in_headless_chromium(report: Report, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        _browser_missing(f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _browser_missing("the playwright package is not installed (pip install playwright)")

    shots = Path(os.environ.get("JAXBENCH_SHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    site = dashboard.write_dashboard(report, tmp_path / "site").parent
    series_page = site / "series" / "llama2-7b.step.h100.html"
    problems: list[str] = []
    requests: list[str] = []
    started = time.monotonic()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )  # fmt: skip
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(10_000)
            page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("dialog", lambda d: problems.append(f"dialog: {d.message}"))  # an escaped name ran
            page.on("request", lambda r: requests.append(r.url))

            page.goto((site / "index.html").as_uri(), wait_until="load")
            assert page.locator("svg.spark").count() >= len(report.series)
            assert page.locator("a.cell").count() == len(report.series)
            assert page.get_by_text(SPECIAL).count() >= 1  # shown as text, not run
            page.screenshot(path=str(shots / "overview.png"), full_page=True)

            # Hover: the tooltip names the value, the night and the run.
            page.goto(series_page.as_uri(), wait_until="load")
            chart = page.locator('div.chart[data-chart="chart-series"] .main-svg').first
            expect(chart).to_be_visible()
            axes = page.evaluate(AXES, "chart-series")
            assert axes["traces"].count("series") == 1 and "failed" in axes["traces"]
            assert {"marker-step", "marker-drift", "marker-transient"} <= set(axes["traces"])
            assert axes["shapes"] == 3  # the step's line, the drift's and the transient's spans
            point = page.evaluate(POINT_AT, ["chart-series", 45])
            page.mouse.move(point["x"] - 6, point["y"] - 6)
            page.mouse.move(point["x"], point["y"], steps=3)
            hover = page.locator(".hoverlayer .hovertext").first
            expect(hover).to_contain_text("run 1045")  # on the way there the mouse may pass other labels
            tooltip = hover.text_content() or ""
            value = report.series[0].points[45].value
            assert format_value(value, "s") in tooltip, tooltip
            assert night(45).isoformat() in tooltip and "run 1045" in tooltip, tooltip
            assert f"moved: jax {JAX_BEFORE[:7]} → {JAX_AFTER[:7]}" in tooltip, tooltip  # the commit range
            page.screenshot(path=str(shots / "series-hover.png"))

            # Zoom: a drag across the plot narrows the night axis to what was dragged over.
            left = axes["left"] + axes["width"] * 0.55
            right = axes["left"] + axes["width"] * 0.85
            middle = axes["top"] + axes["height"] * 0.5
            page.mouse.move(left, middle)
            page.mouse.down()
            page.mouse.move(right, middle + 2, steps=8)
            page.mouse.up()
            page.wait_for_function(
                "([id, width]) => { const xa = document.querySelector(`div.chart[data-chart='${id}']`)"
                "._fullLayout.xaxis; return xa.r2l(xa.range[1]) - xa.r2l(xa.range[0]) < width; }",
                arg=["chart-series", (axes["x"][1] - axes["x"][0]) * 0.5],
            )
            zoomed = page.evaluate(AXES, "chart-series")
            span = axes["x"][1] - axes["x"][0]
            assert zoomed["x"][0] > axes["x"][0] + 0.4 * span and zoomed["x"][1] < axes["x"][1] - 0.1 * span
            page.screenshot(path=str(shots / "series-zoomed.png"))

            # The log axis, on and off.
            toggle = page.locator('input.log-axis[data-chart="chart-series"]')
            y_type = "(type) => document.querySelector('div.chart')._fullLayout.yaxis.type === type"
            toggle.check()
            page.wait_for_function(y_type, arg="log")
            toggle.uncheck()
            page.wait_for_function(y_type, arg="linear")

            # A click on a point opens its run; a run in the table opens its page with the settings.
            page.locator(".rangeselector .button", has_text="all").click()  # zoom back out
            page.wait_for_function(
                "(lo) => { const xa = document.querySelector('div.chart')._fullLayout.xaxis;"
                " return xa.r2l(xa.range[0]) <= lo; }",
                arg=axes["x"][0],
            )
            point = page.evaluate(POINT_AT, ["chart-series", 40])
            page.mouse.move(point["x"], point["y"], steps=3)
            expect(page.locator(".hoverlayer .hovertext").first).to_contain_text("run 1040")
            page.mouse.click(point["x"], point["y"])
            page.wait_for_url(re.compile(r"/runs/1040\.html$"))
            page.go_back(wait_until="load")
            page.locator("table.recent a.run", has_text="1057").click()
            page.wait_for_url(re.compile(r"/runs/1057\.html$"))
            expect(page.locator("h1")).to_contain_text("Run 1057")
            settings = page.locator("table.settings")
            expect(settings).to_contain_text("train.precision")
            expect(settings).to_contain_text("bf16")
            expect(page.locator("table.results")).to_contain_text("llama2-7b")
            page.screenshot(path=str(shots / "run.png"), full_page=True)

            # The settings variants: one overlay and each variant on its own, on one value axis.
            variants = next((site / "variants").glob("*.html"))
            page.goto(variants.as_uri(), wait_until="load")
            expect(page.locator("div.chart .main-svg").first).to_be_visible()
            assert page.locator("div.chart[data-chart]").count() == 3
            overlay = page.evaluate(AXES, "chart-overlay")
            assert overlay["traces"].count("series") == 2
            expect(page.locator("main")).to_contain_text("precision=fp8")
            singles = [page.evaluate(AXES, f"chart-single-{i}") for i in (1, 2)]
            assert singles[0]["x"] == singles[1]["x"] and singles[0]["y"] == singles[1]["y"]
            page.screenshot(path=str(shots / "variants.png"), full_page=True)

            # An awkward name is drawn as text in the legend, never as markup.
            special = next(s for s in report.series if s.benchmark == SPECIAL)
            page.goto((site / "series" / f"{safe_file_stem(special.key)}.html").as_uri(), wait_until="load")
            expect(page.locator(".legend").first).to_contain_text("<script>alert(1)</script>")
        finally:
            browser.close()
    for shot in shots.glob("*.png"):
        assert shot.stat().st_size > 10_000, shot
    assert problems == []
    assert all(url.startswith("file://") for url in requests), requests
    assert time.monotonic() - started < 60


def test_run_pages_cover_the_newest_nights_and_every_incidents_runs() -> None:
    """A year of nightly runs would be half a gigabyte of pages: the newest RUN_PAGE_NIGHTS of each series
    and the runs incidents name get one (older points show their run id without a link)."""
    identity = SeriesIdentity("llama2-7b", "recipe", (), HardwareClass("H100", 8, 1), "jax", "m", "s", False)
    first = dt.date(2026, 1, 1)
    nights = [Night(first + dt.timedelta(i), 1.0, "ok", 1000 + i, "c", (1000 + i,)) for i in range(200)]
    nights[-1] = dataclasses.replace(nights[-1], run_ids=(1199, 5000))  # an ad-hoc run beside the nightly's
    incident = schema.Incident(last_good_run_id=1010, first_bad_run_id=1011)
    detection = Detection([], [incident], {}, [History(1, identity, nights)])
    expected = {1000 + i for i in range(200 - RUN_PAGE_NIGHTS, 200)} | {5000, 1010, 1011}
    assert referenced_runs(detection) == expected
