"""The report as GitHub-flavoured Markdown, for a GitHub Actions job summary ($GITHUB_STEP_SUMMARY).

    pytest tests/results/test_report_render.py -k markdown

A headline with the counts; the series that need attention, then the quiet ones folded in <details>; one
section per open incident with its series, the component commit ranges with compare links, and the XLA flag
and environment changes (the same section is the body of the nightly's GitHub issue for the incident, see
results.alert_plan). Text from the store goes through `core.markdown_escape.escape_markdown` (here `cell`):
it would otherwise end table cells, be interpreted as HTML or links, or mention people in the nightly's
issues.
"""

from __future__ import annotations

from collections.abc import Sequence

from jaxbench.core.markdown_escape import escape_markdown as cell
from jaxbench.core.markdown_escape import markdown_code as code
from jaxbench.results.judgement.vocabulary import ComponentRange, IncidentState, SeriesState, SettingChange
from jaxbench.results.report.backends import BACKEND_METRICS, format_cell, shown_metrics
from jaxbench.results.report.formatting import (
    QUIET_STATES,
    STATE_LABELS,
    by_attention,
    format_change,
    newest_text,
    safe_file_stem,
    safe_url,
    series_name,
    state_text,
)
from jaxbench.results.report.model import BackendsTable, IncidentView, Report, SeriesView

STATE_MARKS: dict[SeriesState, str] = {
    SeriesState.REGRESSION: "🔴",
    SeriesState.SUSPECTED: "🟡",
    SeriesState.INVALID: "🟣",
    SeriesState.IMPROVEMENT: "🟢",
    SeriesState.OK: "",
    SeriesState.INSUFFICIENT_HISTORY: "",
    SeriesState.TOO_NOISY: "🔵",
}


def render_markdown(report: Report, *, dashboard_url: str | None = None) -> str:
    """The whole summary. With `dashboard_url` (where write_dashboard's output is served), series link to
    their pages there."""
    base = dashboard_base(dashboard_url)
    open_incidents = [i for i in report.incidents if i.state == IncidentState.OPEN]
    lines = [_headline(report, len(open_incidents)), ""]
    attention = [s for s in by_attention(report.series) if s.state not in QUIET_STATES]
    quiet = [s for s in by_attention(report.series) if s.state in QUIET_STATES]
    if attention:
        lines += ["## Series that need attention", "", *_series_table(attention, base), ""]
    if quiet:
        lines += [
            "<details>",
            f"<summary>{len(quiet)} series ok or without a baseline yet</summary>",
            "",
            *_series_table(quiet, base),
            "",
            "</details>",
            "",
        ]
    if report.backends:
        lines += ["## Backends", ""]
        for backends in report.backends:
            lines += [*_backends_table(backends), ""]
    for incident in open_incidents:
        lines += _incident_section(incident, base)
    closed = len(report.incidents) - len(open_incidents)
    if closed:
        lines += [f"_{closed} recovered or resolved incidents not shown._", ""]
    if base:
        lines += [f"[Dashboard]({base}index.html)", ""]
    return "\n".join(lines)


def dashboard_base(dashboard_url: str | None) -> str | None:
    """The dashboard's address ending in "/", ready for relative page names; None without a safe one."""
    return safe_url(dashboard_url.rstrip("/") + "/") if dashboard_url else None


def incident_markdown(incident: IncidentView, *, dashboard_url: str | None = None) -> str:
    """One incident's section on its own (a "## Incident #n" heading, its series, component ranges and
    setting changes), as in the summary: the body of the incident's GitHub issue."""
    return "\n".join(_incident_section(incident, dashboard_base(dashboard_url))).rstrip() + "\n"


def _headline(report: Report, open_incidents: int) -> str:
    def count(state: SeriesState) -> int:
        return sum(s.state == state for s in report.series)

    return (
        f"# jaxbench: {count(SeriesState.REGRESSION)} regressions, {count(SeriesState.SUSPECTED)} suspected, "
        f"{count(SeriesState.INVALID)} invalid, {open_incidents} open incidents\n\n"
        f"{len(report.series)} series, {count(SeriesState.IMPROVEMENT)} improvements; "
        f"generated {report.generated_at.isoformat(timespec='minutes')} from {cell(report.store)}."
    )


def _series_table(series: Sequence[SeriesView], base: str | None) -> list[str]:
    rows = [
        "| benchmark | metric | hardware | newest | vs baseline | state |",
        "|---|---|---|---:|---:|---|",
    ]
    for s in series:
        name = cell(series_name(s) + (f" ({s.flavor})" if s.flavor else ""))
        if base:
            name = f"[{name}]({base}series/{safe_file_stem(s.key)}.html)"
        state = cell(f"{STATE_MARKS[s.state]} {state_text(s)}".strip())
        rows.append(
            f"| {name} | {cell(s.metric)} | {cell(s.hardware)} | {cell(newest_text(s))} "
            f"| {format_change(s.change_vs_baseline)} | {state} |"
        )
    return rows


def _backends_table(backends: BackendsTable) -> list[str]:
    """One recipe on one hardware class across the backends, with each number's ratio to native."""
    metrics = shown_metrics(backends)
    rows = [
        f"**{cell(backends.benchmark)}** on {cell(backends.hardware)}",
        "",
        "| backend | night | " + " | ".join(BACKEND_METRICS[m] for m in metrics) + " |",
        "|---|---|" + "---:|" * len(metrics),
    ]
    for row in backends.rows:
        night = row.night.isoformat() if row.night else "-"
        values = " | ".join(cell(format_cell(m, row.cells[m], row.night)) for m in metrics)
        rows.append(f"| {cell(row.backend)} | {night} | {values} |")
    return rows


def _incident_section(incident: IncidentView, base: str | None) -> list[str]:
    # The store's text is escaped, the incident's own "#7" is written as it is.
    # Escaped too: on GitHub a bare "#7" links to the repository's issue or pull request of that number,
    # which this is not.
    title = f"Incident {cell(f'#{incident.id}')}: {cell(incident.kind.value)} on {cell(incident.hardware)}"
    if base:
        title = f"[{title}]({base}incidents/{incident.id}.html)"
    last_good = incident.last_good_night.isoformat() if incident.last_good_night else "unknown"
    verdict = incident.verdict.value if incident.verdict else "none yet"
    lines = [
        f"## {title}",
        "",
        f"First bad night {incident.night.isoformat()}, last good night {last_good}; "
        f"human verdict: {verdict}.",
        "",
    ]
    if incident.summary:
        lines += [cell(incident.summary), ""]
    lines += ["| benchmark | metric | change | state |", "|---|---|---:|---|"]
    lines += [
        f"| {cell(s.benchmark)} | {cell(s.metric)} | {format_change(s.magnitude)} | {STATE_LABELS[s.state]} |"
        for s in incident.series
    ]
    lines.append("")
    if incident.program:
        lines += [f"Compiled program: {cell(incident.program.describe())}.", ""]
    if incident.time:
        lines += [f"Profiled: {cell(incident.time.describe())}.", ""]
    lines += _components_table(incident.components, "last good", "first bad")
    lines += _changes_table("XLA flag", incident.flag_changes)
    lines += _changes_table("environment variable", incident.env_changes)
    if incident.recovery:
        recovery = incident.recovery
        lines += [f"A transient: recovered on {recovery.recovered_night.isoformat()}.", ""]
        lines += _components_table(recovery.components, "last bad", "first back")
    return lines


def _components_table(components: Sequence[ComponentRange], before: str, after: str) -> list[str]:
    if not components:
        return []
    lines = [f"| component | {before} | {after} | compare |", "|---|---|---|---|"]
    for c in components:
        compare = link("compare", c.compare_url)
        lines.append(f"| {cell(c.name)} | {code(c.last_good)} | {code(c.first_bad)} | {compare} |")
    return [*lines, ""]


def _changes_table(what: str, changes: Sequence[SettingChange]) -> list[str]:
    if not changes:
        return []
    rows = [f"| {what} | last good | first bad |", "|---|---|---|"]
    rows += [f"| {code(c.name)} | {code(c.before)} | {code(c.after)} |" for c in changes]
    return [*rows, ""]


def link(text: str, url: str | None, *, otherwise: str = "-") -> str:
    """A Markdown link to `url` when it is a safe absolute http(s) address (`safe_url`), else `otherwise`."""
    target = safe_url(url)
    return f"[{cell(text)}]({target})" if target else otherwise


def plain_line(text: str, limit: int = 256) -> str:
    """Text for a line GitHub shows as plain text but for `code` spans, such as an issue title (whose limit
    is 256 characters): one line, no control characters, backticks turned into ', cut at `limit` with "…".
    HTML needs no escaping there: GitHub escapes titles itself."""
    printable = "".join(ch if ch.isprintable() else " " for ch in text.replace("`", "'"))
    line = " ".join(printable.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
