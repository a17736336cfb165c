"""Which GitHub issues the nightly opens, edits, reopens and closes for its regression incidents.

One issue per incident, found again night after night by a hidden marker with the incident's fingerprint
(`<!-- jaxbench-incident: ... -->`) in a body labelled LABEL. Pure: the report and the tracker's issues in,
the actions out; nightly.alert_sync applies them. Planning twice in a row yields nothing, so a re-run
nightly never adds noise. A person's hand wins: an issue closed while its incident is open stays closed,
and one reopened after a recovery (RECOVERED_LABEL) gets no comments until the incident regresses again.

    pytest tests/results/test_alerts.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable
from typing import Literal

from jaxbench.results.judgement.vocabulary import HumanVerdict, IncidentKind, IncidentState
from jaxbench.results.report.formatting import format_change
from jaxbench.results.report.github_markdown import incident_markdown, plain_line
from jaxbench.results.report.model import IncidentView, Report

LABEL = "jaxbench-regression"
"""Every issue the nightly manages carries it: the tracker is asked for this label's issues only."""
RECOVERED_LABEL = "jaxbench-recovered"
"""Added when the nightly closes an issue because its incident recovered or was resolved."""

_MARKER = "<!-- jaxbench-incident: {} -->"
_MARKER_PATTERN = re.compile(r"<!-- jaxbench-incident: ([A-Za-z0-9._:-]+) -->")
# No "--" and no ">" so a fingerprint can never end the HTML comment that holds it.
_FINGERPRINT = re.compile(r"[A-Za-z0-9._:]+(?:-[A-Za-z0-9._:]+)*")
_NOT_PLANNED = {HumanVerdict.NOISE, HumanVerdict.INFRASTRUCTURE}
"""Verdicts that mean nothing was wrong with the stack: the issue closes as "not planned"."""
_TITLE_PREFIX: dict[IncidentKind, str] = {
    IncidentKind.THROUGHPUT: "Regression",
    IncidentKind.MEMORY: "Memory regression",
    IncidentKind.COMPILE_TIME: "Compile-time regression",
    IncidentKind.CORRECTNESS: "Correctness regression",
    IncidentKind.VALIDITY: "Invalid runs",
    IncidentKind.IMAGE_SIZE: "Image size regression",
    IncidentKind.BUILD_TIME: "Build-time regression",
}


@dataclasses.dataclass(frozen=True)
class TrackedIssue:
    """An issue as the tracker returns it (pull requests never included)."""

    number: int
    title: str
    body: str
    state: Literal["open", "closed"]
    labels: frozenset[str]

    @property
    def fingerprint(self) -> str | None:
        """The incident this issue tracks, from its marker; None for an issue the nightly did not open."""
        found = _MARKER_PATTERN.search(self.body)
        return found.group(1) if found else None


@dataclasses.dataclass(frozen=True)
class OpenIssue:
    fingerprint: str
    title: str
    body: str
    labels: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class UpdateIssue:
    """New title and body for the open issue of a still-open incident whose details moved."""

    number: int
    fingerprint: str
    title: str
    body: str


@dataclasses.dataclass(frozen=True)
class ReopenIssue:
    """The incident is open again after the nightly closed its issue as recovered."""

    number: int
    fingerprint: str
    title: str
    body: str
    labels: tuple[str, ...]
    """The issue's labels without RECOVERED_LABEL."""
    comment: str


@dataclasses.dataclass(frozen=True)
class RecoverIssue:
    """Close the issue of an incident that recovered or was resolved by a human verdict."""

    number: int
    fingerprint: str
    body: str
    labels: tuple[str, ...]
    """The issue's labels plus RECOVERED_LABEL."""
    state_reason: Literal["completed", "not_planned"]
    comment: str


Action = OpenIssue | UpdateIssue | ReopenIssue | RecoverIssue


def plan_alerts(
    report: Report, issues: Iterable[TrackedIssue], *, dashboard_url: str | None = None
) -> list[Action]:
    """The actions that bring the tracker in line with `report`'s incidents, in the report's order.

    `issues`: every issue carrying LABEL, in any state. Where several carry the same marker (someone copied
    one), the lowest number is the incident's issue and the others are left alone.
    """
    tracked: dict[str, TrackedIssue] = {}
    for issue in sorted(issues, key=lambda i: i.number):
        if issue.fingerprint is not None:
            tracked.setdefault(issue.fingerprint, issue)
    newest = _newest_nights(report)
    actions: list[Action] = []
    for incident in report.incidents:
        night = max((newest[s.series_key] for s in incident.series if s.series_key in newest), default=None)
        action = _plan_one(incident, tracked.get(incident.fingerprint), night, dashboard_url)
        if action is not None:
            actions.append(action)
    return actions


def _plan_one(
    incident: IncidentView, issue: TrackedIssue | None, night: dt.date | None, dashboard_url: str | None
) -> Action | None:
    fingerprint = incident.fingerprint
    title, body = issue_title(incident), issue_body(incident, dashboard_url=dashboard_url)
    if incident.state == IncidentState.OPEN:
        if issue is None:
            return OpenIssue(fingerprint, title, body, (LABEL,))
        if RECOVERED_LABEL in issue.labels:
            when = f" on the night of {night.isoformat()}" if night else ""
            labels = tuple(sorted((issue.labels - {RECOVERED_LABEL}) | {LABEL}))
            comment = f"Regressed again{when}: the incident is open again, so this issue is reopened."
            return ReopenIssue(issue.number, fingerprint, title, body, labels, comment)
        if issue.state == "open" and (not _same(issue.title, title) or not _same(issue.body, body)):
            return UpdateIssue(issue.number, fingerprint, title, body)
        return None  # up to date, or closed by a person while still open: their call
    if issue is None or issue.state == "closed" or RECOVERED_LABEL in issue.labels:
        return None  # nothing to close, or a person reopened it after the nightly closed it
    labels = tuple(sorted(issue.labels | {RECOVERED_LABEL}))
    if incident.state == IncidentState.RESOLVED:
        verdict = incident.verdict.value if incident.verdict else "resolved"
        reason: Literal["completed", "not_planned"] = (
            "not_planned" if incident.verdict in _NOT_PLANNED else "completed"
        )
        comment = f"Resolved by a human verdict: **{verdict}**. Closing."
        return RecoverIssue(issue.number, fingerprint, body, labels, reason, comment)
    when = f"as of the night of {night.isoformat()}" if night else "in the newest report"
    comment = f"Recovered {when}: its series are back to normal. Closing."
    return RecoverIssue(issue.number, fingerprint, body, labels, "completed", comment)


def _same(current: str, wanted: str) -> bool:
    # GitHub may hand a body back with \r\n or without the trailing newline it was given.
    return current.replace("\r\n", "\n").strip() == wanted.strip()


def _newest_nights(report: Report) -> dict[str, dt.date]:
    return {s.key: s.points[-1].night for s in report.series if s.points}


def issue_title(incident: IncidentView) -> str:
    """E.g. "Regression: llama2-7b perf/tokens_per_s -7.3% (+1 series) on 8 x NVIDIA H100 ... since
    2026-11-20", naming the series that moved most."""
    what = incident.kind.value.replace("_", " ")
    if incident.series:
        worst = max(incident.series, key=lambda s: abs(s.magnitude))
        change = f" {format_change(worst.magnitude)}" if worst.magnitude else ""
        more = len(incident.series) - 1
        what = f"{worst.benchmark} {worst.metric}{change}" + (f" (+{more} series)" if more else "")
    prefix = _TITLE_PREFIX[incident.kind]
    return plain_line(f"{prefix}: {what} on {incident.hardware} since {incident.night.isoformat()}")


def issue_body(incident: IncidentView, *, dashboard_url: str | None = None) -> str:
    """The marker, a note on who maintains the issue, and the incident's section of the job summary."""
    if not _FINGERPRINT.fullmatch(incident.fingerprint):
        raise ValueError(f"incident {incident.id}: fingerprint {incident.fingerprint!r} cannot be a marker")
    return "\n".join(
        [
            _MARKER.format(incident.fingerprint),
            "",
            "_The jaxbench nightly keeps this description up to date while the incident is open, and "
            "comments and closes the issue when it recovers. Record a human verdict with "
            f"`jaxbench verdict {incident.id} real|infrastructure|noise|expected`._",
            "",
            incident_markdown(incident, dashboard_url=dashboard_url),
        ]
    )
