"""The nightly's GitHub issues for regression incidents: the pure planner rule by rule, its idempotence on an
in-memory tracker, escaping of hostile benchmark names, and detect -> report -> issues end to end on SQLite.

    JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_alerts.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.nightly.alert_sync import print_alerts, sync_alerts
from jaxbench.nightly.github import DirectoryRepository
from jaxbench.results.alert_plan import (
    LABEL,
    RECOVERED_LABEL,
    Action,
    OpenIssue,
    RecoverIssue,
    ReopenIssue,
    TrackedIssue,
    UpdateIssue,
    issue_body,
    issue_title,
    plan_alerts,
)
from jaxbench.results.judgement.detect import detect
from jaxbench.results.judgement.vocabulary import (
    ComponentRange,
    HumanVerdict,
    IncidentKind,
    IncidentState,
    SeriesState,
)
from jaxbench.results.report.build import build_report
from jaxbench.results.report.model import IncidentSeries, IncidentView, Report, SeriesPoint, SeriesView
from tests.results.test_judgement import ingest_all, nightly

H100 = "8 x NVIDIA H100 80GB HBM3 x 1 host"
FIRST_BAD = dt.date(2026, 11, 20)
NEWEST = dt.date(2026, 11, 24)
FINGERPRINT = "a" * 64
HOSTILE = "vit `b16` <script>alert(1)</script> a|b"


def incident(
    state: IncidentState = IncidentState.OPEN,
    *,
    fingerprint: str = FINGERPRINT,
    magnitude: float = -0.073,
    benchmark: str = "llama2-7b",
    verdict: HumanVerdict | None = None,
    hardware: str = H100,
) -> IncidentView:
    return IncidentView(
        id=3, fingerprint=fingerprint, kind=IncidentKind.THROUGHPUT, state=state, hardware=hardware,
        night=FIRST_BAD, last_good_night=FIRST_BAD - dt.timedelta(days=1),
        series=[
            IncidentSeries("tokens", benchmark, "perf/tokens_per_s", magnitude, SeriesState.REGRESSION),
            IncidentSeries("step", benchmark, "perf/step_time_s", 0.05, SeriesState.REGRESSION),
        ],
        components=[ComponentRange("jax", None, "1" * 8, "2" * 8, "https://github.com/jax-ml/jax/compare/1...2")],
        flag_changes=[], env_changes=[], verdict=verdict, summary="2 series",
    )  # fmt: skip


def report(*incidents: IncidentView) -> Report:
    """The incidents' series end on NEWEST (the night a recovery is reported for)."""
    series = [
        SeriesView(key, "llama2-7b", key, "", True, H100, "", {}, [SeriesPoint(NEWEST, 1.0, "ok", 1)],
                   [], [], None, SeriesState.OK, None)
        for key in ("tokens", "step")
    ]  # fmt: skip
    return Report(dt.datetime(2026, 11, 25, tzinfo=dt.UTC), "sqlite://", series, list(incidents))


@dataclasses.dataclass
class MemoryTracker:
    """Issues in a dict: the part of a GitHubRepository that alerts use."""

    issues: dict[int, TrackedIssue] = dataclasses.field(default_factory=dict)
    comments: dict[int, list[str]] = dataclasses.field(default_factory=dict)

    def add(
        self, number: int, title: str, body: str, labels: frozenset[str] = frozenset({LABEL})
    ) -> TrackedIssue:
        self.issues[number] = TrackedIssue(number, title, body, "open", labels)
        return self.issues[number]

    def list_issues(self, label: str) -> list[TrackedIssue]:
        return sorted((i for i in self.issues.values() if label in i.labels), key=lambda i: i.number)

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> TrackedIssue:
        return self.add(
            number=max(self.issues, default=0) + 1, title=title, body=body, labels=frozenset(labels)
        )

    def update_issue(
        self,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        state: str | None = None,
        state_reason: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> TrackedIssue:
        old = self.issues[number]
        new = dataclasses.replace(
            old,
            title=title if title is not None else old.title,
            body=body if body is not None else old.body,
            state=state if state is not None else old.state,  # type: ignore[arg-type]
            labels=frozenset(labels) if labels is not None else old.labels,
        )
        self.issues[number] = new
        return new

    def add_comment(self, number: int, body: str) -> None:
        self.comments.setdefault(number, []).append(body)


def sync(tracker: MemoryTracker, current: Report) -> list[Action]:
    return sync_alerts(current, tracker, dashboard_url=None, dry_run=False)  # type: ignore[arg-type]


# Rules ------------------------------------------------------------------------------------------------------


def test_open_incident_opens_one_issue_and_a_second_sync_does_nothing() -> None:
    tracker = MemoryTracker()
    [action] = sync(tracker, report(incident()))
    assert isinstance(action, OpenIssue) and action.labels == (LABEL,)
    assert (
        action.title
        == f"Regression: llama2-7b perf/tokens_per_s -7.3% (+1 series) on {H100} since 2026-11-20"
    )
    [issue] = tracker.issues.values()
    assert issue.fingerprint == FINGERPRINT and issue.body.startswith(
        f"<!-- jaxbench-incident: {FINGERPRINT} -->"
    )
    assert (
        "## Incident #\u200b3: throughput on" in issue.body
        and "[compare](https://github.com/jax-ml/jax" in issue.body
    )
    assert sync(tracker, report(incident())) == []
    assert len(tracker.issues) == 1 and tracker.comments == {}


def test_changed_details_update_the_open_issue_and_only_then() -> None:
    tracker = MemoryTracker()
    sync(tracker, report(incident()))
    [action] = sync(tracker, report(incident(magnitude=-0.091)))
    assert isinstance(action, UpdateIssue) and action.number == 1 and "-9.1%" in action.title
    assert tracker.issues[1].title == action.title and "-9.1%" in tracker.issues[1].body
    assert sync(tracker, report(incident(magnitude=-0.091))) == []
    # GitHub may hand the body back with Windows line endings and no final newline: not a change.
    body = tracker.issues[1].body.replace("\n", "\r\n").rstrip()
    tracker.issues[1] = dataclasses.replace(tracker.issues[1], body=body)
    assert sync(tracker, report(incident(magnitude=-0.091))) == []


def test_recovery_comments_once_labels_and_closes() -> None:
    tracker = MemoryTracker()
    sync(tracker, report(incident()))
    [action] = sync(tracker, report(incident(IncidentState.RECOVERED)))
    assert isinstance(action, RecoverIssue) and action.state_reason == "completed"
    assert tracker.issues[1].state == "closed" and tracker.issues[1].labels == {LABEL, RECOVERED_LABEL}
    assert tracker.comments == {
        1: ["Recovered as of the night of 2026-11-24: its series are back to normal. Closing."]
    }
    assert sync(tracker, report(incident(IncidentState.RECOVERED))) == []
    assert len(tracker.comments[1]) == 1


@pytest.mark.parametrize(
    ("verdict", "reason"),
    [
        (HumanVerdict.NOISE, "not_planned"),
        (HumanVerdict.INFRASTRUCTURE, "not_planned"),
        (HumanVerdict.EXPECTED, "completed"),
    ],
)
def test_resolved_incident_closes_with_the_human_verdict(verdict: HumanVerdict, reason: str) -> None:
    tracker = MemoryTracker()
    sync(tracker, report(incident()))
    [action] = sync(tracker, report(incident(IncidentState.RESOLVED, verdict=verdict)))
    assert isinstance(action, RecoverIssue) and action.state_reason == reason
    assert tracker.comments[1] == [f"Resolved by a human verdict: **{verdict.value}**. Closing."]
    assert f"human verdict: {verdict.value}" in tracker.issues[1].body  # the description's last word


@pytest.mark.parametrize("state", ["closed", "open"])
def test_regressing_again_reopens_and_drops_the_recovered_label(state: str) -> None:
    """Closed by the nightly as recovered (and maybe reopened by a person since): open again means reopen."""
    tracker = MemoryTracker()
    sync(tracker, report(incident()))
    sync(tracker, report(incident(IncidentState.RECOVERED)))
    tracker.issues[1] = dataclasses.replace(tracker.issues[1], state=state)  # type: ignore[arg-type]
    [action] = sync(tracker, report(incident()))
    assert isinstance(action, ReopenIssue) and action.labels == (LABEL,)
    assert tracker.issues[1].state == "open" and tracker.issues[1].labels == {LABEL}
    assert tracker.comments[1][-1].startswith("Regressed again on the night of 2026-11-24")
    assert sync(tracker, report(incident())) == []


def test_a_person_reopening_a_recovered_issue_gets_no_more_comments() -> None:
    tracker = MemoryTracker()
    sync(tracker, report(incident()))
    sync(tracker, report(incident(IncidentState.RECOVERED)))
    tracker.issues[1] = dataclasses.replace(tracker.issues[1], state="open")
    for _ in range(3):
        assert sync(tracker, report(incident(IncidentState.RECOVERED))) == []
    assert len(tracker.comments[1]) == 1


def test_a_person_closing_an_open_incidents_issue_is_respected() -> None:
    tracker = MemoryTracker()
    sync(tracker, report(incident()))
    tracker.issues[1] = dataclasses.replace(tracker.issues[1], state="closed")
    assert sync(tracker, report(incident(magnitude=-0.2))) == []
    assert sync(tracker, report(incident(IncidentState.RECOVERED))) == []


@pytest.mark.parametrize("state", [IncidentState.RECOVERED, IncidentState.RESOLVED])
def test_incident_not_open_and_no_issue_opens_nothing(state: IncidentState) -> None:
    assert plan_alerts(report(incident(state)), []) == []


def test_issues_of_unknown_incidents_and_unmarked_issues_are_left_alone() -> None:
    tracker = MemoryTracker()
    tracker.add(number=1, title="old", body="<!-- jaxbench-incident: gone -->")
    tracker.add(number=2, title="by hand", body="mentions jaxbench-incident but has no marker")
    [action] = sync(tracker, report(incident()))
    assert isinstance(action, OpenIssue)
    assert [tracker.issues[n].title for n in (1, 2)] == ["old", "by hand"]


def test_duplicated_marker_acts_on_the_lowest_number_only() -> None:
    tracker = MemoryTracker()
    body = issue_body(incident())
    tracker.add(number=9, title=issue_title(incident()), body=body)  # up to date
    tracker.add(number=4, title="stale", body=body)
    [action] = sync(tracker, report(incident()))
    assert isinstance(action, UpdateIssue) and action.number == 4
    [action] = sync(tracker, report(incident(IncidentState.RECOVERED)))
    assert isinstance(action, RecoverIssue) and action.number == 4
    assert tracker.issues[9].state == "open" and set(tracker.comments) == {4}
    assert len(tracker.issues) == 2


def test_dry_run_changes_nothing_and_prints_what_it_would_do() -> None:
    tracker = MemoryTracker()
    actions = sync_alerts(report(incident()), tracker, dashboard_url=None, dry_run=True)  # type: ignore[arg-type]
    assert tracker.issues == {} and len(actions) == 1
    console = Console(file=io.StringIO(), width=300)
    print_alerts(actions, console, dry_run=True)
    print_alerts([], console)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert out.splitlines() == [
        f"would open: {actions[0].title}",  # type: ignore[union-attr]
        "alerts: every incident's issue is up to date",
    ]


# Text -------------------------------------------------------------------------------------------------------


def test_hostile_benchmark_name_is_escaped_in_title_and_body() -> None:
    hostile = incident(benchmark=HOSTILE, hardware="8 x\nH100")
    title, body = issue_title(hostile), issue_body(hostile)
    assert "\n" not in title and "`" not in title and "8 x H100" in title
    assert "vit 'b16' <script>alert(1)</script> a|b perf/tokens_per_s" in title  # GitHub escapes titles
    assert "<script>" not in body and "&lt;script&gt;" in body
    assert "a\\|b" in body and "\\`b16\\`" in body
    rows = [line for line in body.splitlines() if line.startswith("| vit")]
    assert len(rows) == 2 and all(len(r.replace("\\|", "").strip("|").split("|")) == 4 for r in rows)


def test_long_title_is_cut_to_githubs_limit() -> None:
    title = issue_title(incident(hardware="H" * 400))
    assert len(title) == 256 and title.endswith("…")


def test_body_links_to_the_dashboard_only_when_safe() -> None:
    body = issue_body(incident(), dashboard_url="https://example.github.io/jaxbench")
    assert "(https://example.github.io/jaxbench/incidents/3.html)" in body
    assert "javascript" not in issue_body(incident(), dashboard_url="javascript:alert(1)")


def test_a_fingerprint_that_would_break_the_marker_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be a marker"):
        issue_body(incident(fingerprint="x --> <b>"))


# End to end -------------------------------------------------------------------------------------------------


def test_store_to_issues_end_to_end(tmp_path: Path) -> None:
    """36 nights with a 15 % step time regression from night 30 open an incident and one issue; 24 more good
    nights make it recover: one comment, the recovered label, closed."""
    paths = nightly(tmp_path, 60, lambda i: 0.5 * (1.15 if 30 <= i < 36 else 1.0))
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    engine = ingest_all(url, paths[:36])
    github = DirectoryRepository(tmp_path / "github")

    def alerts() -> list[Action]:
        return sync_alerts(build_report(detect(engine), url), github, dashboard_url=None, dry_run=False)

    [opened] = alerts()
    assert isinstance(opened, OpenIssue) and opened.title.startswith("Regression: ")
    assert alerts() == []
    [issue] = github.list_issues(LABEL)
    assert issue.state == "open" and issue.fingerprint == opened.fingerprint
    ingest_all(url, paths[36:])
    [recovered] = alerts()
    assert isinstance(recovered, RecoverIssue) and recovered.number == issue.number
    [issue] = github.list_issues(LABEL)
    assert issue.state == "closed" and issue.labels == {LABEL, RECOVERED_LABEL}
    stored = (tmp_path / "github" / "issues" / f"{issue.number}.json").read_text()
    assert stored.count("Recovered as of the night of") == 1
    assert alerts() == []
    engine.dispose()
