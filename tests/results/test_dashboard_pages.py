"""The dashboard of `jaxbench demo` (results/demo.py: 75 nights, three backends, two hardware classes) as
built files: the navigation bar on every page, the runs page and its data file, each run's loss and step-time
plots, MFU in percent, the baseline band over the baseline's own nights, one plot per measurement on an
incident, and the backends page's trends. The same site in a real browser:
tests/results/test_dashboard_demo_browser.py.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_dashboard_pages.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html.parser
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from jaxbench.results import demo, schema, store
from jaxbench.results.demo_commands import build_demo
from jaxbench.results.detection.settings import DEFAULT_SETTINGS
from jaxbench.results.judgement.detect import Detection, detect
from jaxbench.results.judgement.verdicts import scale_of
from jaxbench.results.report.build import baseline_window, series_view
from jaxbench.results.report.formatting import format_percent, format_value, safe_file_stem
from jaxbench.results.report.measurements import measurements, metric_title
from jaxbench.results.report.model import RunEntry
from jaxbench.results.report.run_list import RUNS_DATA, parse_runs_data, run_list_data, runs_data_file
from tests.results.dashboard_report import dashboard_report


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The demo's dashboard folder and its store's URL, made once."""
    made = build_demo(tmp_path_factory.mktemp("demo") / "demo")
    return made.index.parent, made.store_url


class _Page(html.parser.HTMLParser):
    """The links of the navigation bar, and which one is the page's own."""

    def __init__(self) -> None:
        super().__init__()
        self.nav: list[str] = []
        self.current: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "nav" and named.get("class") == "site-nav":
            self._depth = 1
        elif self._depth and tag == "a":
            self.nav.append(named.get("href") or "")
            if named.get("aria-current") == "page":
                self.current.append(named.get("href") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self._depth = 0


def _page(path: Path) -> _Page:
    parser = _Page()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _runs_data(site: Path) -> tuple[dict[str, list[str]], list[dict[str, Any]]]:
    document = parse_runs_data((site / RUNS_DATA).read_text(encoding="utf-8"))
    values, fields = document["values"], document["fields"]
    rows = []
    for row in document["rows"]:
        named = dict(zip(fields, row, strict=True))
        rows.append({f: values[f][v] if f in values else v for f, v in named.items()})
    return values, rows


# The navigation bar -----------------------------------------------------------------------------------------


def test_every_page_has_the_navigation_bar(demo_site: tuple[Path, str]) -> None:
    site, _ = demo_site
    pages = [site / "index.html", site / "runs.html", site / "backends.html"]
    for folder in ("series", "incidents", "runs", "variants"):
        found = sorted((site / folder).glob("*.html"))
        assert found, folder
        pages += found[:3] + found[-3:]
    expected = ["index.html", "index.html", "index.html#incidents", "runs.html", "backends.html"]
    sections = {"index.html": "index.html", "runs.html": "runs.html", "backends.html": "backends.html",
                "incidents": "../index.html#incidents", "runs": "../runs.html", "series": "../index.html",
                "variants": "../index.html"}  # fmt: skip
    for page in pages:
        parsed = _page(page)
        root = "" if page.parent == site else "../"
        assert parsed.nav == [root + link for link in expected], page
        assert parsed.current == [sections[page.name if page.parent == site else page.parent.name]], page
        for link in parsed.nav:
            assert (page.parent / link.partition("#")[0]).resolve().is_file(), (page, link)
    assert 'id="incidents"' in (site / "index.html").read_text(encoding="utf-8")


# The runs page ----------------------------------------------------------------------------------------------


def test_the_runs_data_file_lists_every_run_with_its_filter_fields(demo_site: tuple[Path, str]) -> None:
    site, url = demo_site
    engine = store.connect(url)
    with store.transaction(engine) as session:
        stored = {r.id: r for r in session.execute(select(schema.Run)).scalars()}
        assert len(stored) == 1203
        values, rows = _runs_data(site)
        assert sorted(r["id"] for r in rows) == sorted(stored)
        for row in rows:
            run = stored[row["id"]]
            assert (row["night"], row["schedule"], row["status"]) == (
                run.night.isoformat(), run.schedule, run.status,
            )  # fmt: skip
            assert row["page"] == int((site / "runs" / f"{run.id}.html").is_file())
            if run.source_kind == "harness":
                assert (row["recipe"], row["size"]) == (run.config["family"], run.config["size"])
                assert row["benchmark"] == f"{run.config['family']}-{run.config['size']}"
    engine.dispose()
    nights = [r["night"] for r in rows]
    assert nights == sorted(nights, reverse=True)  # newest first
    assert set(values["recipe"]) == {"llama2", "gpt3", "vit", "micro"}
    assert set(values["backend"]) == {"native", "maxtext", "levanter"}
    assert set(values["status"]) == {"ok", "oom"} and set(values["schedule"]) == {"nightly", "ad-hoc"}
    assert "8 x NVIDIA H100 80GB HBM3 x 1 host" in values["hardware"]
    oom = [r for r in rows if r["backend"] == "maxtext" and r["status"] == "oom"]
    assert [(r["benchmark"], r["hardware"], r["night"]) for r in oom] == [
        ("gpt3-1.3b", "8 x NVIDIA H200 x 1 host", "2026-11-29")
    ]
    micro = next(r for r in rows if r["recipe"] == "micro")
    assert micro["size"] == "" and str(micro["benchmark"]).count("micro/") == 3
    # The demo's one quarantined run (the first by hand) is listed and marked, with no page (judged nowhere).
    by_hand = sorted((r["night"], r["id"]) for r in rows if r["schedule"] == "ad-hoc")
    assert [(r["id"], r["page"]) for r in rows if r["quarantined"]] == [(by_hand[0][1], 0)]


def test_the_runs_page_loads_its_data_and_script(demo_site: tuple[Path, str]) -> None:
    site, _ = demo_site
    page = (site / "runs.html").read_text(encoding="utf-8")
    assert '<script src="runs-data.js"></script>' in page and '<script src="assets/runs.js"></script>' in page
    for field in ("recipe", "size", "backend", "hardware", "schedule", "status"):
        assert f'<select name="{field}" data-field="{field}">' in page, field
    assert 'type="date" name="from"' in page and 'type="search" name="q"' in page
    assert "<tbody></tbody>" in page  # the rows come from the data file, never as HTML
    assert (site / "assets" / "runs.js").is_file()


def test_a_hundred_thousand_runs_make_a_small_data_file() -> None:
    night = dt.date(2025, 1, 1)
    entries = [
        RunEntry(i, night + dt.timedelta(days=i // 300), ("llama2", "gpt3", "vit")[i % 3], "1b",
                 (f"bench-{i % 40}",), ("native", "maxtext")[i % 2], f"8 x GPU {i % 4} x 1 host",
                 "nightly", "ok" if i % 97 else "oom")
        for i in range(100_000)
    ]  # fmt: skip
    text = runs_data_file(entries, range(90_000, 100_000))
    assert len(text.encode()) < 45 * len(entries)  # about 40 bytes a run
    document = parse_runs_data(text)
    assert len(document["rows"]) == 100_000 and document["rows"][0][0] == 99_999
    page = document["fields"].index("page")
    assert sum(row[page] for row in document["rows"]) == 10_000


def test_a_name_cannot_end_the_data_files_script() -> None:
    name = "</script><script>alert(1)"
    entry = RunEntry(1, dt.date(2025, 1, 1), name, "", ("x",), "n", "h", "nightly", "ok")
    text = runs_data_file([entry], ())
    assert "</script>" not in text and "<" not in text
    assert run_list_data([entry], ())["values"]["recipe"] == ["</script><script>alert(1)"]
    assert parse_runs_data(text)["values"]["recipe"] == ["</script><script>alert(1)"]
    assert re.fullmatch(r"window\.jaxbenchRuns = \{.*\};\n", text, re.DOTALL)


# A run's page -----------------------------------------------------------------------------------------------


def _chart(page: Path, chart_id: str) -> dict[str, Any]:
    """The data of the chart `chart_id` on `page` (inline JSON, as jaxbench.results.report.charts made it)."""
    match = re.search(rf'<script type="application/json" id="{chart_id}">(.*?)</script>', _text(page), re.S)
    assert match, (page, chart_id)
    chart: dict[str, Any] = json.loads(match.group(1))
    return chart


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def test_a_run_page_plots_its_loss_curve_and_step_times(demo_site: tuple[Path, str]) -> None:
    site, url = demo_site
    engine = store.connect(url)
    with store.transaction(engine) as session:
        run = session.execute(select(schema.Run).where(schema.Run.id == 1158)).scalar_one()
        step_time = session.execute(
            select(schema.Result)
            .join(schema.Series, schema.Series.id == schema.Result.series_id)
            .where(schema.Result.run_id == run.id, schema.Series.metric == "perf/step_time_s")
        ).scalar_one()
        curve, optimum, samples, value = run.loss_curve, run.loss_optimum, step_time.samples, step_time.value
    engine.dispose()
    page = site / "runs" / "1158.html"
    assert "<h3>Loss at every step</h3>" in _text(page)
    assert "<h3>Time of each timed step (after 10 warm-up steps)</h3>" in _text(page)
    loss = _chart(page, "chart-loss")
    assert loss["kind"] == "steps" and loss["unit"] == "nats"
    assert loss["lines"][0]["y"] == curve and loss["lines"][0]["x"] == list(range(1, 61))
    assert loss["reference"]["value"] == optimum and "optimal loss 2.359 nats" in loss["reference"]["name"]
    times = _chart(page, "chart-step-times")
    assert times["lines"][0]["y"] == samples and times["lines"][0]["x"] == list(range(11, 61))
    assert times["reference"]["value"] == value
    assert '<script src="../assets/plotly.min.js"></script>' in _text(page)
    # A run that ran out of memory kept neither: no empty plots.
    assert "chart-loss" not in _text(site / "runs" / "1199.html")


# One unit convention ----------------------------------------------------------------------------------------


def test_mfu_is_in_percent_in_every_table_and_label() -> None:
    assert format_value(0.4073, "fraction") == format_percent(0.4073) == "40.7%"
    assert format_value(0.00123, "fraction") == "0.123%" and format_value(1.5, "fraction") == "150.0%"
    assert format_value(0.0, "fraction") == "0.0%" and format_value(None, "fraction") == "-"


def test_no_page_shows_a_fraction(demo_site: tuple[Path, str]) -> None:
    site, _ = demo_site
    pages = [site / "index.html", site / "backends.html", *site.glob("*/*.html")]
    mfu_pages = 0
    for page in pages:
        shown = re.sub(r"<script.*?</script>", "", _text(page), flags=re.S)  # the plots' data is numbers
        assert not re.search(r"\d fraction", shown), page
        mfu_pages += "perf/mfu" in shown
    assert mfu_pages > 20
    mfu = [p for p in (site / "series").glob("*.html") if "· perf/mfu</h1>" in _text(p)]
    assert len(mfu) == 15  # every recipe and backend on both hardware classes, and the runs by hand
    assert sum(bool(re.search(r"newest \d+\.\d%", _text(p))) for p in mfu) == 14  # one failed (oom)
    assert any(re.search(r"Baseline: \d+\.\d%,\s+the median of", _text(p)) for p in mfu)
    assert re.search(r"<td>perf/mfu</td><td class=\"num\">\d+\.\d%</td>", _text(site / "runs" / "1158.html"))


# The baseline band ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def detection(demo_site: tuple[Path, str]) -> Detection:
    engine = store.connect(demo_site[1])
    try:
        return detect(engine)
    finally:
        engine.dispose()


def test_the_baseline_window_is_the_one_the_screen_took_its_median_over(detection: Detection) -> None:
    """baseline_window makes the screen's choice of nights again: their median is the screen's baseline."""
    checked = trends = 0
    for analysis in detection.analyses:
        screen, window = analysis.screen, baseline_window(analysis)
        if screen.baseline_median is None:
            assert window is None or not analysis.history.nights
            continue
        assert window is not None, analysis.history.key
        first, last, count, trend = window
        values = [
            n.value for n in analysis.history.nights if first <= n.night <= last and n.value is not None
        ]
        assert len(values) == count
        if trend:  # a drift's trend carried to the newest night: its own nights, the newest 20
            trends += 1
            assert count == DEFAULT_SETTINGS.screen.drift_baseline_nights
            continue
        units = scale_of(analysis.history.identity.metric, values)
        median = units.level_in_units(float(statistics.median(units.forward(values))))
        assert median == pytest.approx(screen.baseline_median, rel=1e-9), analysis.history.key
        checked += 1
    assert checked > 100 and trends >= 1


def test_the_band_is_drawn_over_the_baselines_nights(
    demo_site: tuple[Path, str], detection: Detection
) -> None:
    site, _ = demo_site
    [step] = [
        a for a in detection.analyses
        if (a.history.identity.benchmark, a.history.identity.backend, a.history.identity.metric)
        == ("llama2-1b", "maxtext", "perf/step_time_s") and "H100" in a.history.identity.hardware.label()
    ]  # fmt: skip
    window = baseline_window(step)
    assert window is not None
    first, last, count, trend = window
    # The step of night 60 (of 75) leaves the new level 15 nights: the 12 before the 3 newest it judges.
    assert (first, last, count, trend) == (demo.night(60), demo.night(71), 12, False)
    view = series_view(step)
    assert view.baseline is not None and (view.baseline.first, view.baseline.last) == (first, last)
    page = site / "series" / f"{safe_file_stem(view.key)}.html"
    band = _chart(page, "chart-series")["band"]
    assert (band["start"], band["end"], band["newest"]) == ("2026-11-15", "2026-11-26", "2026-11-29")
    assert "the median of the 12 nights from 2026-11-15 to 2026-11-26" in band["label"]
    words = " ".join(_text(page).split())
    assert "the median of the 12 nights from 2026-11-15 to 2026-11-26 (under the shaded band)" in words


# An incident: one plot per measurement ----------------------------------------------------------------------


RATES = ["step time", "tokens/s", "tokens/s per device", "TFLOP/s per device", "MFU"]


def _toggles(page: Path) -> list[tuple[str, list[str]]]:
    """Per measurement chart on `page`: its id and the metrics on its toggle, in order."""
    groups = re.findall(r'<div class="metric-toggle"[^>]*data-chart="([^"]+)">(.*?)</div>', _text(page), re.S)
    return [(chart, re.findall(r"<button[^>]*>([^<]+)</button>", body)) for chart, body in groups]


def test_an_incident_shows_one_plot_per_measurement(demo_site: tuple[Path, str]) -> None:
    site, _ = demo_site
    throughput = site / "incidents" / "2.html"  # a step in 3 benchmarks' 5 metrics each: 15 series
    assert _text(throughput).count('<div class="chart" data-chart=') == 3
    assert _toggles(throughput) == [(f"chart-{i}", RATES) for i in (1, 2, 3)]
    first = _chart(throughput, "chart-1")
    assert first["unit"] == "s" and first["lines"][0]["name"] == "llama2-1b by maxtext"
    rates = [_chart(throughput, f"chart-1-{i}") for i in range(1, 5)]
    assert [r["unit"] for r in rates] == ["tokens/s", "tokens/s", "TFLOP/s", "fraction"]
    assert all(r["lines"][0]["x"] == first["lines"][0]["x"] for r in rates)  # the same nights
    assert all(r["band"]["start"] == first["band"]["start"] for r in rates)
    oom = site / "incidents" / "4.html"  # 7 series: the timing with its 4 rates, the compile time, the loss
    assert _text(oom).count('<div class="chart" data-chart=') == 3 and _toggles(oom) == [("chart-1", RATES)]
    assert "</a> · perf/compile_time_s</h3>" in _text(oom) and "</a> · loss/final_window</h3>" in _text(oom)
    loss = site / "incidents" / "3.html"
    assert _text(loss).count('<div class="chart" data-chart=') == 1 and _toggles(loss) == []


def test_measurements_put_the_timing_first_and_keep_other_metrics_apart() -> None:
    step = dashboard_report().series[0]
    rate = dataclasses.replace(step, key="tp", metric="perf/tokens_per_s", higher_is_better=True)
    loss = dataclasses.replace(step, key="loss", metric="loss/final_window", unit="nats")
    other = dataclasses.replace(rate, key="tp-a100", hardware="8 x A100")  # another measurement
    found = measurements([rate, loss], [step, rate, loss, other])
    assert [[s.key for s in m.series] for m in found] == [[step.key, "tp"], ["loss"]]
    assert [metric_title(s.metric) for s in found[0].series] == ["step time", "tokens/s"]
    assert measurements([other], [step, rate, other])[0].series == [other]


# The backends page ------------------------------------------------------------------------------------------


def test_the_backends_page_links_each_value_and_plots_each_backend(demo_site: tuple[Path, str]) -> None:
    site, _ = demo_site
    page = site / "backends.html"
    text = _text(page)
    assert text.count('<table class="backends">') == 4  # two recipes a framework trains, two hardware classes
    values = re.findall(r'<td class="num"><a href="(series/[^"]+\.html)">', text)
    assert len(values) == 4 * 3 * 5 and all((site / v).is_file() for v in values)  # 3 backends, 5 metrics
    runs = re.findall(r'<a href="(runs\.html#[^"]+)">runs</a>', text)
    assert len(runs) == 12
    hardware = "8%20x%20NVIDIA%20H100%2080GB%20HBM3%20x%201%20host"
    assert runs[0] == f"runs.html#backend=native&amp;hardware={hardware}&amp;q=gpt3-1.3b"
    titles = ["tokens/s", "MFU", "step time", "compile time", "loss at the end"]
    assert _toggles(page)[0] == ("chart-1", titles)
    trend = _chart(page, "chart-1")
    assert [line["name"] for line in trend["lines"]] == ["native", "levanter", "maxtext"]
    assert len(trend["lines"][0]["x"]) == demo.NIGHTS
    assert _chart(page, "chart-1-1")["unit"] == "fraction"  # MFU, shown in percent
