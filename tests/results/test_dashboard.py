"""The static HTML dashboard: the data behind its plots, its files and links, that it replaces only its own
folder, and which runs get a page. The report it renders: tests/results/dashboard_report.py; a real browser
on it: tests/results/test_dashboard_browser.py.

    JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_dashboard.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import html.parser
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from jaxbench.results import schema
from jaxbench.results.history import History, Night
from jaxbench.results.identity import HardwareClass, SeriesIdentity
from jaxbench.results.judgement.detect import Detection
from jaxbench.results.report import html as dashboard
from jaxbench.results.report.build import RUN_PAGE_NIGHTS, referenced_runs
from jaxbench.results.report.charts import chart_json, series_chart, shared_range, variant_groups
from jaxbench.results.report.formatting import safe_file_stem
from jaxbench.results.report.model import Baseline, ComponentView, Report
from tests.results.dashboard_report import (
    HIDDEN_RUN,
    JAX_AFTER,
    JAX_BEFORE,
    TRACE_URL,
    dashboard_report,
    night,
)
from tests.support.sample_report import SPECIAL


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


def test_backfilled_points_are_marked_and_name_the_releases_that_moved(report: Report) -> None:
    """A backfilled night (a published release run later) is drawn apart, and where its stack recorded
    versions, not commits (wheels from the index), the versions that moved are named."""
    series = report.series[0]
    wheels = {night(i): ("0.9.0.1" if i < 47 else "0.9.1") for i in range(46, 49)}
    runs = dict(report.runs)
    for point in series.points:
        if point.run_id in runs and point.night in wheels:
            run = runs[point.run_id]
            flax = ComponentView("flax", None, None, wheels[point.night])
            runs[point.run_id] = dataclasses.replace(run, schedule="backfill", components=[flax])
    backfilled = [i for i, p in enumerate(series.points) if p.night in wheels and p.run_id in runs]
    (line,) = series_chart(series, runs, root="../")["lines"]
    assert line["backfill"] == backfilled and backfilled
    assert line["commits"][backfilled[1]] == "moved: flax 0.9.0.1 → 0.9.1"
    assert line["commits"][backfilled[2]] == ""
    (nightly,) = series_chart(series, report.runs, root="../")["lines"]
    assert nightly["backfill"] is None  # no backfilled run: nothing marked
    script = (Path(dashboard.__file__).parent / "static" / "dashboard.js").read_text()
    assert "line.backfill" in script and "diamond-open" in script


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
    pages = [index, site / "runs.html", *(p for f in folders for p in sorted((site / f).glob("*.html")))]
    assert len(pages) == 2 + len(report.series) + len(report.incidents) + len(report.runs) + 1
    assert (site / "series" / f"{safe_file_stem('vit-special.step.h100')}.html").exists()
    assert (site / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    for page in pages:
        parsed = _parse(page)
        for script in parsed.scripts:  # the site's own scripts, or data
            assert script.get("type") == "application/json" or (script.get("src") or "").endswith(
                ("assets/plotly.min.js", "assets/dashboard.js", "assets/runs.js", "runs-data.js")
            ), (page, script)
        for link in parsed.links:
            if link.startswith("https://"):
                assert page.parent.name in ("incidents", "runs"), (page, link)  # compare, commit, CI links
                continue
            assert (page.parent / link.partition("#")[0]).resolve().is_file(), (page, link)
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
    # Its trace, kept at a URL: a link to it, and one that opens it in Perfetto.
    links = _parse(site / "runs" / "1057.html").links
    assert TRACE_URL in links and f"https://ui.perfetto.dev/#!/?url={quote(TRACE_URL, safe='/')}" in links
    kept_beside = (site / "runs" / "1056.html").read_text(encoding="utf-8")  # a path: named, not linked
    assert "<code>profile-56/trace</code>" in kept_beside and "ui.perfetto.dev" not in kept_beside
    assert "Trace:" not in (site / "runs" / "1045.html").read_text(encoding="utf-8")  # none kept


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
