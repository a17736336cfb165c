"""The static dashboard: an overview page, one page per series and one per incident, as plain files.

    .venv/bin/python benchmarks/dashboard_speed.py   # builds 1,000 series x 365 nights and prints the time
    pytest tests/test_report_render.py -k dashboard  # includes a headless Chromium looking at the pages

The site needs no server, no JavaScript and no network: it works from file:// and from GitHub Pages (a
`.nojekyll` file keeps Jekyll from hiding anything). Plots are inline SVG (results/report/svg.py); templates
are jinja2 with autoescape on, so every name and setting from the store is escaped.

The site is built in a temporary directory next to `out_dir` and then renamed into place, so a failure
while building leaves the previous dashboard untouched, never a half-written one.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import uuid
from collections import defaultdict
from pathlib import Path

import jinja2
from markupsafe import Markup

from results.judgement.vocabulary import IncidentState
from results.report import formatting
from results.report.backends import BACKEND_METRICS, format_cell, shown_metrics
from results.report.model import Report, SeriesView
from results.report.svg import render_series_svg

MARKER = ".jaxbench-dashboard"
"""Written into every dashboard, so that write_dashboard only ever replaces a directory it made."""

RECENT_NIGHTS = 30


@dataclasses.dataclass(frozen=True)
class _GridRow:
    benchmark: str
    flavor: str
    metric: str
    first_of_benchmark: bool
    cells: list[list[SeriesView]]
    """Per hardware class (in the order of the columns), the series of this row."""


def write_dashboard(report: Report, out_dir: Path) -> Path:
    """Write the site for `report` to `out_dir` (replacing a previous dashboard there); returns index.html."""
    out_dir = Path(out_dir)
    _check_replaceable(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.building-", dir=out_dir.parent))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; a web server may run as another user
        _build(report, staging)
        _swap_into_place(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir / "index.html"


def _build(report: Report, site: Path) -> None:
    env = _environment()
    plots = {s.key: Markup(render_series_svg(s)) for s in report.series}  # our own, already escaped
    incidents = sorted(report.incidents, key=lambda i: (i.state != IncidentState.OPEN, -i.id))
    incidents_of: dict[str, list[int]] = defaultdict(list)
    for incident in incidents:
        for member in incident.series:
            incidents_of[member.series_key].append(incident.id)
    by_key = {s.key: s for s in report.series}
    states = sorted(formatting.SEVERITY, key=formatting.SEVERITY.__getitem__, reverse=True)
    counts = [(state, sum(s.state == state for s in report.series)) for state in states]
    common = {"report": report}

    (site / "series").mkdir()
    (site / "incidents").mkdir()
    series_page = env.get_template("series.html.j2")
    for s in report.series:
        html = series_page.render(
            common, root="../", series=s, plot=plots[s.key], incident_ids=incidents_of[s.key],
            recent=list(reversed(s.points[-RECENT_NIGHTS:])),
        )  # fmt: skip
        _write(site / "series" / f"{formatting.safe_file_stem(s.key)}.html", html)
    incident_page = env.get_template("incident.html.j2")
    for incident in incidents:
        members = [by_key[m.series_key] for m in incident.series if m.series_key in by_key]
        html = incident_page.render(common, root="../", incident=incident, members=members, plots=plots)
        _write(site / "incidents" / f"{incident.id}.html", html)
    hardware = sorted({s.hardware for s in report.series})
    attention = [s for s in formatting.by_attention(report.series) if s.state not in formatting.QUIET_STATES]
    index = env.get_template("index.html.j2").render(
        common, root="", counts=counts, hardware=hardware, grid=_grid(report.series, hardware),
        incidents=incidents, attention=attention,
    )  # fmt: skip
    if report.backends:
        backends = env.get_template("backends.html.j2").render(
            common, root="", tables=[(t, shown_metrics(t)) for t in report.backends], titles=BACKEND_METRICS
        )
        _write(site / "backends.html", backends)
    _write(site / ".nojekyll", "")
    _write(site / MARKER, "written by results.report.html.write_dashboard; the directory is replaced whole\n")
    _write(site / "index.html", index)  # last: a site with an index is complete


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
        safe_url=formatting.safe_url,
        stem=formatting.safe_file_stem,
        name=formatting.series_name,
        backend_cell=lambda cell, metric, night: format_cell(metric, cell, night),
    )
    return env


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _check_replaceable(out_dir: Path) -> None:
    if not out_dir.exists():
        return
    if not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / MARKER).exists()):
        raise FileExistsError(
            f"{out_dir} exists and is not a jaxbench dashboard (no {MARKER}); refusing to replace it"
        )


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
