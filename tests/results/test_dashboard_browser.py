"""The static HTML dashboard in a real headless Chromium: hovering, zooming and following its links, offline,
with no console error.

    JAXBENCH_SHOTS=/tmp/shots JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_dashboard_browser.py

The browser test uses Debian's /usr/bin/chromium through playwright (never `playwright install`), or the
browser JAXBENCH_CHROMIUM names (Google Chrome on GitHub's runners); without it the test is skipped,
unless JAXBENCH_REQUIRE_BROWSER=1 (CI), where it fails. With JAXBENCH_SHOTS=DIR it leaves its screenshots
there (the overview, a hover, a zoom, a run page, a variants page) for a person to look at.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from jaxbench.results.report import html as dashboard
from jaxbench.results.report.formatting import format_value, safe_file_stem
from jaxbench.results.report.model import Report
from tests.results.dashboard_report import JAX_AFTER, JAX_BEFORE, dashboard_report, night
from tests.support.sample_report import SPECIAL

CHROMIUM = Path(os.environ.get("JAXBENCH_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture
def report() -> Report:
    return dashboard_report()


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


def offline_and_clean(shots: Path, problems: list[str], requests: list[str]) -> None:
    """What every browser session must end with: real screenshots, no page error or console error, and no
    request that left the site's own files."""
    for shot in shots.glob("*.png"):
        assert shot.stat().st_size > 10_000, shot
    assert problems == []
    assert all(url.startswith("file://") for url in requests), requests


def browser_or_skip(tmp_path: Path) -> tuple[Any, Any, Path]:
    """Playwright's sync_playwright and expect, and the folder screenshots go to (JAXBENCH_SHOTS); the test
    skips (or fails, with JAXBENCH_REQUIRE_BROWSER=1) where Chromium or playwright is missing."""
    if not CHROMIUM.exists():
        _browser_missing(f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _browser_missing("the playwright package is not installed (pip install playwright)")
    shots = Path(os.environ.get("JAXBENCH_SHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    return sync_playwright, expect, shots


@pytest.mark.slow
@pytest.mark.browser
def test_dashboard_in_headless_chromium(report: Report, tmp_path: Path) -> None:
    sync_playwright, expect, shots = browser_or_skip(tmp_path)
    report.runs[1044] = dataclasses.replace(report.runs[1044], schedule="backfill")  # a release run later
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
            # A backfilled night is drawn apart from the nights that ran then.
            symbols = page.evaluate(
                "(id) => document.querySelector(`div.chart[data-chart='${id}']`)"
                ".data.find((t) => t.meta === 'series').marker.symbol",
                "chart-series",
            )
            assert (symbols[44], symbols[43], symbols[45]) == ("diamond-open", "circle", "circle")
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
    offline_and_clean(shots, problems, requests)
    assert time.monotonic() - started < 60
