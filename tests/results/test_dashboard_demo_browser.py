"""The dashboard of `jaxbench demo` in a real headless Chromium, as a new user meets it: the navigation bar
from page to page, the runs list filtered and searched, a run's page with its loss and step-time plots, an
incident's plots with their reciprocal metrics a toggle away, the backends page, and the overview at 400 px,
offline and with no console error.

    JAXBENCH_SHOTS=/tmp/dashboard-shots JAX_PLATFORMS=cpu python -m pytest -q \
        tests/results/test_dashboard_demo_browser.py

The browser is found as in tests/results/test_dashboard_browser.py (Debian's /usr/bin/chromium through
playwright, never `playwright install`; skipped without it unless JAXBENCH_REQUIRE_BROWSER=1). With
JAXBENCH_SHOTS=DIR the screenshots stay there for a person to look at.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from jaxbench.results.demo_commands import build_demo
from tests.results.test_dashboard_browser import CHROMIUM, browser_or_skip, offline_and_clean

CHROMIUM_ARGS = [
    *("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
]
"""As tests/results/test_dashboard_browser.py starts it: nothing of the browser's own reaches the network."""

H200 = "8 x NVIDIA H200 x 1 host"
ROWS = "#run-table tbody tr"

TRACES = """(chartId) => document.querySelector(`div.chart[data-chart="${chartId}"]`)
  .data.map((t) => t.meta || "")"""
"""What a chart draws: the meta of each of its traces ("series", "band", "steps", ...)."""

Y_AXIS = """(chartId) => {
  const gd = document.querySelector(`div.chart[data-chart="${chartId}"]`);
  return { title: gd._fullLayout.yaxis.title.text,
           ticks: [...gd.querySelectorAll(".ytick text")].map((t) => t.textContent) };
}"""
"""A chart's value axis as drawn: its title and tick labels."""

LINES_OF_TEXT = """(cell) => { const r = document.createRange(); r.selectNodeContents(cell);
  return new Set([...r.getClientRects()].map((rect) => Math.round(rect.top))).size; }"""
"""How many lines a cell's text is drawn on."""

BAND = """(chartId) => {
  const gd = document.querySelector(`div.chart[data-chart="${chartId}"]`);
  const band = gd.data.find((t) => t.meta === "band");
  return [band.x[0], band.x[1]];
}"""
"""The first and last night the baseline band is drawn over."""


def _rows(page: Any) -> list[list[str]]:
    """The runs table as shown: a list of cells' texts per row."""
    rows: list[list[str]] = page.eval_on_selector_all(
        ROWS, "(trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent))"
    )
    return rows


@pytest.mark.slow
@pytest.mark.browser
def test_the_demo_dashboard_in_headless_chromium(tmp_path: Path) -> None:
    sync_playwright, expect, shots = browser_or_skip(tmp_path)
    site = build_demo(tmp_path / "demo").index.parent
    problems: list[str] = []
    requests: list[str] = []
    started = time.monotonic()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(10_000)
            page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("request", lambda r: requests.append(r.url))

            page.goto((site / "index.html").as_uri(), wait_until="load")
            page.screenshot(path=str(shots / "overview.png"), full_page=True)

            # The navigation bar leads to the runs list.
            page.locator("nav.site-nav a", has_text="Runs").click()
            page.wait_for_url(re.compile(r"/runs\.html$"))
            expect(page.locator("#run-count")).to_contain_text("of 1,203.")
            assert len(_rows(page)) == 100  # a page of the 1,203 runs
            page.locator("#run-pager button", has_text="older").click()
            expect(page.locator("#run-pager .page-of")).to_have_text("page 2 of 13")
            page.locator("#run-pager button", has_text="newest").click()

            # Filters: maxtext's out-of-memory night is one run.
            page.select_option("select[name=backend]", "maxtext")
            expect(page.locator("#run-count")).to_contain_text("of 300 matching")
            # Each option counts the runs it would show beside the other filters: maxtext keeps its 300.
            expect(page.locator("select[name=backend] option[value=maxtext]")).to_have_text("maxtext (300)")
            expect(page.locator("select[name=status] option[value=oom]")).to_have_text("oom (1)")
            page.select_option("select[name=status]", "oom")
            expect(page.locator("#run-count")).to_have_text("Runs 1–1 of 1 matching (of 1,203).")
            expect(page.locator("select[name=backend] option[value=maxtext]")).to_have_text("maxtext (1)")
            [row] = _rows(page)
            assert row[1:] == ["2026-11-29", "gpt3-1.3b", "gpt3", "1.3b", "maxtext", H200, "nightly", "oom"]
            assert page.url.endswith("#backend=maxtext&status=oom")
            page.screenshot(path=str(shots / "runs-filtered.png"), full_page=True)

            # The filters are kept in the address: a reload shows the same run.
            page.reload(wait_until="load")
            expect(page.locator("select[name=status]")).to_have_value("oom")
            assert len(_rows(page)) == 1
            page.locator("#run-filters button[type=reset]").click()
            expect(page.locator("#run-count")).to_contain_text("Runs 1–100 of 1,203.")

            # Search and dates: the runs by hand, and one night's microbenchmarks.
            page.fill("input[name=q]", "ad-hoc")
            expect(page.locator("#run-count")).to_contain_text("of 3 matching")
            # The demo's first run by hand is quarantined: listed, marked, and found by the word.
            page.fill("input[name=q]", "quarantined")
            expect(page.locator("#run-count")).to_contain_text("of 1 matching")
            expect(page.locator(ROWS + " .s-quarantined")).to_have_text("quarantined")
            assert _rows(page)[0][7] == "ad-hoc"
            page.screenshot(path=str(shots / "runs-quarantined.png"))
            page.fill("input[name=q]", "micro/matmul")
            page.fill("input[name=from]", "2026-11-01")
            page.fill("input[name=to]", "2026-11-02")
            expect(page.locator("#run-count")).to_contain_text("of 4 matching")
            assert {r[1] for r in _rows(page)} == {"2026-11-01", "2026-11-02"}
            page.locator("#run-filters button[type=reset]").click()

            # A run's page, from the list.
            page.select_option("select[name=backend]", "maxtext")
            page.select_option("select[name=status]", "oom")
            page.locator(ROWS + " a.run").first.click()
            page.wait_for_url(re.compile(r"/runs/\d+\.html$"))
            expect(page.locator("h1")).to_contain_text("Run ")
            expect(page.locator("nav.site-nav a[aria-current=page]")).to_have_text("Runs")

            # A run that trained: its loss curve and the time of each timed step, drawn.
            page.goto((site / "runs.html").as_uri() + "#recipe=llama2&backend=levanter", wait_until="load")
            page.locator(ROWS + " a.run").first.click()
            page.wait_for_url(re.compile(r"/runs/\d+\.html$"))
            for chart_id in ("chart-loss", "chart-step-times"):
                expect(page.locator(f'div.chart[data-chart="{chart_id}"] .main-svg').first).to_be_visible()
                assert page.evaluate(TRACES, chart_id) == ["steps", "reference"]
            legend = page.locator('div.chart[data-chart="chart-loss"] .legend').first
            expect(legend).to_contain_text("optimal loss 2.359 nats")
            expect(page.locator("table.results")).to_contain_text("%")  # MFU in percent
            page.screenshot(path=str(shots / "run.png"), full_page=True)

            # The navigation bar: to the incidents, and an incident's plots, one per measurement.
            page.locator("nav.site-nav a", has_text="Incidents").click()
            page.wait_for_url(re.compile(r"/index\.html#incidents$"))
            page.locator("a", has_text="#2").first.click()
            page.wait_for_url(re.compile(r"/incidents/2\.html$"))
            assert page.locator("div.chart[data-chart]").count() == 3
            assert page.evaluate(Y_AXIS, "chart-1")["title"] == "s"
            toggle = page.locator('.metric-toggle[data-chart="chart-1"]')
            toggle.get_by_role("button", name="MFU").click()
            page.wait_for_function(f"() => ({Y_AXIS})('chart-1').title === '%'")
            axis = page.evaluate(Y_AXIS, "chart-1")
            assert axis["ticks"] and all(tick.endswith("%") for tick in axis["ticks"]), axis
            expect(toggle.get_by_role("button", name="MFU")).to_have_attribute("aria-pressed", "true")
            expect(toggle.locator("a.metric-page")).to_have_attribute("href", re.compile(r"perf-mfu"))
            legend = page.locator('div.chart[data-chart="chart-1"] .legend').first
            expect(legend).to_contain_text("baseline band (its nights)")
            expect(legend).to_contain_text("baseline median")
            page.screenshot(path=str(shots / "incident.png"), full_page=True)
            toggle.get_by_role("button", name="step time").click()
            page.wait_for_function(f"() => ({Y_AXIS})('chart-1').title === 's'")

            # A series: its band over the baseline's own nights, named in the legend.
            page.locator("h3 a").first.click()
            page.wait_for_url(re.compile(r"/series/.+\.html$"))
            band = page.evaluate(BAND, "chart-series")
            assert band == ["2026-11-15", "2026-11-26"], band
            expect(page.locator("p.baseline")).to_contain_text("the median of the 12 nights")
            page.screenshot(path=str(shots / "series.png"), full_page=True)

            # The backends page: each backend's nights on one plot, any metric a click away.
            page.locator("nav.site-nav a", has_text="Backends").click()
            page.wait_for_url(re.compile(r"/backends\.html$"))
            assert page.evaluate(TRACES, "chart-1")[:3] == ["series", "series", "series"]
            page.locator('.metric-toggle[data-chart="chart-1"]').get_by_role("button", name="MFU").click()
            page.wait_for_function(f"() => ({Y_AXIS})('chart-1').title === '%'")
            page.screenshot(path=str(shots / "backends.png"), full_page=True)
            page.locator("table.backends a", has_text="runs").nth(2).click()
            page.wait_for_url(re.compile(r"/runs\.html#backend=maxtext"))
            expect(page.locator("#run-count")).to_contain_text("of 75 matching")  # a night each

            # 400 px: nothing wider than the screen; a hardware class on one line.
            phone = browser.new_page(viewport={"width": 400, "height": 900})
            for name in ("index.html", "incidents/2.html", "runs.html", "backends.html"):
                phone.goto((site / name).as_uri(), wait_until="load")
                assert phone.evaluate("document.documentElement.scrollWidth") <= 400, name
            phone.goto((site / "index.html").as_uri(), wait_until="load")
            lines = phone.eval_on_selector_all("td.hw", "(tds) => tds.map(" + LINES_OF_TEXT + ")")
            assert len(lines) >= 20 and set(lines) == {1}, lines
            heads = phone.eval_on_selector_all("th.hw-head", "(ths) => ths.map(" + LINES_OF_TEXT + ")")
            assert len(heads) == 4 and max(heads) <= 2, heads  # the overview's columns: two lines at most
            phone.screenshot(path=str(shots / "overview-400px.png"))
            phone.goto((site / "incidents" / "2.html").as_uri(), wait_until="load")
            phone.screenshot(path=str(shots / "incident-400px.png"), full_page=True)
        finally:
            browser.close()
    offline_and_clean(shots, problems, requests)
    assert time.monotonic() - started < 120
