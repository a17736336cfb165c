"""The static HTML dashboard: its files and links, that it replaces only its own folder, and a real headless
Chromium looking at it.

    JAX_PLATFORMS=cpu python -m pytest -q tests/test_dashboard.py

The browser test uses Debian's /usr/bin/chromium through playwright (never `playwright install`), or the
browser JAXBENCH_CHROMIUM names (Google Chrome on GitHub's runners); without it the test is skipped,
unless JAXBENCH_REQUIRE_BROWSER=1 (CI), where it fails.
"""

from __future__ import annotations

import html.parser
import os
from pathlib import Path

import pytest

from results.report import html as dashboard
from results.report.formatting import safe_file_stem
from results.report.model import (
    Report,
    SeriesView,
)
from tests.sample_report import SPECIAL, sample_report

CHROMIUM = Path(os.environ.get("JAXBENCH_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture
def report() -> Report:
    return sample_report()


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
