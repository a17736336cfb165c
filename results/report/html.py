"""The static dashboard: an overview page, one page per series, per incident, per run and per group of
settings variants, the list of every run (runs.html, run_list.py) and the backends side by side, each with
the navigation bar, as plain files that work from file:// and GitHub Pages, no server, no network.

The plots are plotly.js copied from the plotly package (never a CDN); templates autoescape every name from
the store. The site is built beside `out_dir` and renamed into place, so a failed or killed build leaves
the previous dashboard whole. How: docs/design.md, "Results store and dashboard".

    .venv/bin/python benchmarks/dashboard_speed.py   # builds 1,000 series x 365 nights and prints the time
    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_dashboard.py
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Iterable
from functools import partial
from pathlib import Path

import jinja2
from markupsafe import Markup

from jaxbench.results.judgement.vocabulary import IncidentState
from jaxbench.results.report import formatting
from jaxbench.results.report.backends import BACKEND_METRICS, format_cell, shown_metrics
from jaxbench.results.report.charts import (
    VariantGroup,
    backend_trends,
    chart_json,
    run_charts,
    series_chart,
    shared_range,
    variant_groups,
    variants_chart,
)
from jaxbench.results.report.measurements import measurements, metric_title
from jaxbench.results.report.model import IncidentSeries, IncidentView, Report, RunView, SeriesView
from jaxbench.results.report.run_list import RUNS_DATA, entries_of_views, runs_data_file
from jaxbench.results.report.svg import render_sparkline

MARKER = ".jaxbench-dashboard"
"""Written into every dashboard, so that write_dashboard only ever replaces a directory it made."""

RECENT_NIGHTS = 30

STATIC = Path(__file__).parent / "static"
"""The dashboard's own script and stylesheet, copied into the site's assets/."""


def plotly_js() -> Path:
    """plotly.min.js as the plotly package on PyPI ships it (found without importing plotly)."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the dashboard needs the plotly package (pip install plotly)")
    return Path(spec.origin).parent / "package_data" / "plotly.min.js"


@dataclasses.dataclass(frozen=True)
class _GridRow:
    benchmark: str
    flavor: str
    metric: str
    first_of_benchmark: bool
    cells: list[list[SeriesView]]
    """Per hardware class (in the order of the columns), the series of this row."""


def write_dashboard(report: Report, out_dir: Path) -> Path:
    """Write the site for `report` to `out_dir` (replacing a previous dashboard there); returns index.html.
    Where `out_dir` is a symbolic link (a web server's root pointing at the dashboards' folder), the folder
    it names is replaced and the link left as it is: renaming the link aside would replace it with a folder
    and never update what it points at."""
    out_dir = Path(out_dir)
    site = out_dir.resolve() if out_dir.is_symlink() else out_dir
    _recover_from_a_killed_build(site)
    _check_replaceable(site)
    site.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{site.name}.building-", dir=site.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; a web server may run as another user
        _build(report, staging)
        _swap_into_place(staging, site)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir / "index.html"


def _build(report: Report, site: Path) -> None:
    env = _environment()
    incidents = sorted(report.incidents, key=lambda i: (i.state != IncidentState.OPEN, -i.id))
    incidents_of: dict[str, list[int]] = defaultdict(list)
    for incident in incidents:
        for member in incident.series:
            incidents_of[member.series_key].append(incident.id)
    by_key = {s.key: s for s in report.series}
    groups = variant_groups(report.series)
    group_of = {s.key: g for g in groups for s in g.series}
    states = sorted(formatting.SEVERITY, key=formatting.SEVERITY.__getitem__, reverse=True)
    counts = [(state, sum(s.state == state for s in report.series)) for state in states]
    # Our own SVG, escaped where it is drawn.
    sparks = {s.key: Markup(render_sparkline(s)) for s in report.series}
    common = {"report": report, "runs": report.runs, "sparks": sparks}

    for folder in ("assets", "series", "incidents", "runs", "variants"):
        (site / folder).mkdir()
    shutil.copyfile(plotly_js(), site / "assets" / "plotly.min.js")
    for name in ("dashboard.js", "dashboard.css", "runs.js"):
        shutil.copyfile(STATIC / name, site / "assets" / name)
    series_page = env.get_template("series.html.j2")
    for s in report.series:
        html = series_page.render(
            common, root="../", section="overview", series=s, chart=series_chart(s, report.runs, root="../"),
            incident_ids=incidents_of[s.key], group=group_of.get(s.key),
            recent=list(reversed(s.points[-RECENT_NIGHTS:])),
        )  # fmt: skip
        _write(site / "series" / f"{formatting.safe_file_stem(s.key)}.html", html)
    _write_incidents(env, common, incidents, by_key, report.runs, site)
    _write_variants(env, common, groups, report.runs, site)
    _write_runs(env, common, report.runs.values(), by_key, site)
    entries = report.run_list or entries_of_views(report.runs.values(), by_key)
    _write(site / RUNS_DATA, runs_data_file(entries, report.runs))
    _write(site / "runs.html", env.get_template("runs.html.j2").render(common, root="", section="runs"))
    hardware = sorted({s.hardware for s in report.series})
    attention = [s for s in formatting.by_attention(report.series) if s.state not in formatting.QUIET_STATES]
    index = env.get_template("index.html.j2").render(
        common, root="", section="overview", counts=counts, hardware=hardware,
        grid=_grid(report.series, hardware), incidents=incidents, attention=attention, groups=groups,
    )  # fmt: skip
    if report.backends:
        tables = [(t, shown_metrics(t)) for t in report.backends]
        trends = [backend_trends(t, metrics, by_key, report.runs, root="") for t, metrics in tables]
        backends = env.get_template("backends.html.j2").render(
            common, root="", section="backends", tables=tables, trends=trends, titles=BACKEND_METRICS
        )
        _write(site / "backends.html", backends)
    _write(site / ".nojekyll", "")
    _write(
        site / MARKER,
        "written by jaxbench.results.report.html.write_dashboard; the directory is replaced whole\n",
    )
    _write(site / "index.html", index)  # last: a site with an index is complete


def _write_incidents(
    env: jinja2.Environment,
    common: dict[str, object],
    incidents: list[IncidentView],
    series: dict[str, SeriesView],
    runs: dict[int, RunView],
    site: Path,
) -> None:
    """One page per incident: what changed, one plot per measurement of its series (its rates a toggle
    away), and their runs either side of it."""
    page = env.get_template("incident.html.j2")
    for incident in incidents:
        members = [series[m.series_key] for m in incident.series if m.series_key in series]
        named = {s.key: s for s in members}
        plots = [
            [(metric_title(s.metric), s, series_chart(s, runs, root="../")) for s in measurement.series]
            for measurement in measurements(members, series.values())
        ]
        html = page.render(
            common, root="../", section="incidents", incident=incident, plots=plots, named=named,
            rows=sorted(incident.series, key=partial(_member_order, named)),
            edges=_edge_runs(incident, members),
        )  # fmt: skip
        _write(site / "incidents" / f"{incident.id}.html", html)


def _member_order(named: dict[str, SeriesView], member: IncidentSeries) -> tuple[str, str]:
    """An incident's series by name (who trained it, its settings), then metric: a measurement's together."""
    shown = named.get(member.series_key)
    return (formatting.series_name(shown) if shown is not None else member.benchmark, member.metric)


def _write_variants(
    env: jinja2.Environment,
    common: dict[str, object],
    groups: list[VariantGroup],
    runs: dict[int, RunView],
    site: Path,
) -> None:
    """One page per group of settings variants: all of them on one plot, then each on its own, side by side
    on one shared value axis."""
    page = env.get_template("variants.html.j2")
    for group in groups:
        charts = [series_chart(s, runs, root="../") for s in group.series]
        shared = shared_range(charts)
        singles = [
            (s, label, {**chart, "height": 320, "yRange": shared})
            for s, label, chart in zip(group.series, group.labels, charts, strict=True)
        ]
        overlay = variants_chart(group, runs, root="../")
        html = page.render(
            common, root="../", section="overview", group=group, overlay=overlay, singles=singles
        )
        _write(site / "variants" / f"{formatting.safe_file_stem(group.key)}.html", html)


def _write_runs(
    env: jinja2.Environment,
    common: dict[str, object],
    runs: Iterable[RunView],
    series: dict[str, SeriesView],
    site: Path,
) -> None:
    """One page per run: its settings, provenance and results; beside it the run's stored record as JSON
    (what the page shows, for scripts and for diffing two runs)."""
    page = env.get_template("run.html.j2")
    for run in runs:
        html = page.render(
            common, root="../", section="runs", run=run, settings=_flatten(run.config), series=series,
            charts=run_charts(run),
        )  # fmt: skip
        _write(site / "runs" / f"{run.id}.html", html)
        record = json.dumps(dataclasses.asdict(run), separators=(",", ":"), sort_keys=True, default=str)
        _write(site / "runs" / f"{run.id}.json", record + "\n")


def _edge_runs(incident: IncidentView, members: list[SeriesView]) -> dict[str, tuple[int | None, int | None]]:
    """Per member series, its runs on the incident's last good and first bad nights (None: no run)."""
    edges = {}
    for s in members:
        by_night = {p.night: p.run_id for p in s.points}
        last_good = by_night.get(incident.last_good_night) if incident.last_good_night else None
        edges[s.key] = (last_good, by_night.get(incident.night))
    return edges


def _flatten(config: object, prefix: str = "") -> list[tuple[str, str]]:
    """A nested config as ("train.precision", "bf16") rows, in key order."""
    if isinstance(config, dict) and config:
        return [row for k in sorted(config, key=str) for row in _flatten(config[k], f"{prefix}{k}.")]
    return [(prefix.rstrip("."), json.dumps(config) if not isinstance(config, str) else config)]


def _grid(series: list[SeriesView], hardware: list[str]) -> list[_GridRow]:
    """Rows (benchmark, flavor, metric) by columns (hardware classes) for the overview."""
    cells: dict[tuple[str, str, str], dict[str, list[SeriesView]]] = defaultdict(lambda: defaultdict(list))
    for s in series:
        cells[(formatting.series_name(s), s.flavor, s.metric)][s.hardware].append(s)
    rows, previous = [], None
    for benchmark, flavor, metric in sorted(cells):
        row = cells[(benchmark, flavor, metric)]
        first = (benchmark, flavor) != previous
        rows.append(_GridRow(benchmark, flavor, metric, first, [row.get(h, []) for h in hardware]))
        previous = (benchmark, flavor)
    return rows


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        change=formatting.format_change,
        value=formatting.format_value,
        newest=formatting.newest_text,
        state_label=formatting.STATE_LABELS.__getitem__,
        state_text=formatting.state_text,
        safe_url=formatting.safe_url,
        stem=formatting.safe_file_stem,
        name=formatting.series_name,
        backend_cell=lambda cell, metric, night: format_cell(metric, cell, night),
        chart_json=chart_json,
    )
    return env


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def replace_refusal(out_dir: Path) -> str | None:
    """Why `out_dir` must not be replaced by a dashboard, or None where it may: it is missing, empty, or a
    dashboard that write_dashboard made."""
    if not out_dir.exists():
        return None
    if not out_dir.is_dir():
        return f"{out_dir} is a file; expected a folder for the dashboard"
    if any(out_dir.iterdir()) and not (out_dir / MARKER).exists():
        return (
            f"{out_dir} exists and is not a jaxbench dashboard (no {MARKER}); refusing to replace it; "
            "expected a new or empty folder, or a dashboard written before"
        )
    return None


def _check_replaceable(out_dir: Path) -> None:
    refusal = replace_refusal(out_dir)
    if refusal is not None:
        raise FileExistsError(refusal)


def _recover_from_a_killed_build(out_dir: Path) -> None:
    """What a build killed midway (kill -9, a lost runner) left beside `out_dir`: the previous site, moved
    aside just before the new one was renamed in, is put back; half-built and set-aside sites are removed
    (each holds a copy of plotly.js). The names are write_dashboard's own, and a folder gets one dashboard
    build at a time (the nightly's)."""
    if not out_dir.parent.is_dir():
        return
    aside = sorted(
        out_dir.parent.glob(f".{out_dir.name}.old-*"), key=lambda p: p.stat().st_mtime, reverse=True
    )
    if not out_dir.exists() and aside and (aside[0] / MARKER).exists():
        aside.pop(0).rename(out_dir)
    for leftover in [*aside, *out_dir.parent.glob(f".{out_dir.name}.building-*")]:
        shutil.rmtree(leftover, ignore_errors=True)


def _swap_into_place(staging: Path, out_dir: Path) -> None:
    """Rename the finished site to `out_dir`. With a previous site there, that one is moved aside first and
    put back if the rename fails: at every moment `out_dir` is either the old or the new complete site, or
    (between the two renames, microseconds) absent."""
    if not out_dir.exists():
        staging.rename(out_dir)
        return
    old = out_dir.with_name(f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}")
    out_dir.rename(old)
    try:
        staging.rename(out_dir)
    except BaseException:
        old.rename(out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)
