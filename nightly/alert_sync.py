"""The nightly's alerts: one GitHub issue per regression incident, kept up to date, closed with a comment when
the incident recovers. results.alert_plan decides; this applies its actions through a `GitHubRepository`.

    jaxbench nightly alerts --repo owner/name | --github-dir DIR [--dashboard-url URL] [--dry-run]
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from jaxbench.nightly.github import GitHubRepository
from jaxbench.results.alert_plan import (
    LABEL,
    Action,
    OpenIssue,
    RecoverIssue,
    ReopenIssue,
    UpdateIssue,
    plan_alerts,
)
from jaxbench.results.report.model import Report


def sync_alerts(
    report: Report, repository: GitHubRepository, *, dashboard_url: str | None, dry_run: bool
) -> list[Action]:
    """Plans against the tracker's issues with LABEL and, unless `dry_run`, applies the plan; returns it."""
    actions = plan_alerts(report, repository.list_issues(LABEL), dashboard_url=dashboard_url)
    if not dry_run:
        for action in actions:
            apply_action(repository, action)
    return actions


def apply_action(repository: GitHubRepository, action: Action) -> None:
    # State and labels change before the comment: should the comment fail, the next night finds the issue
    # already handled and does not comment twice.
    match action:
        case OpenIssue():
            repository.create_issue(action.title, action.body, action.labels)
        case UpdateIssue():
            repository.update_issue(action.number, title=action.title, body=action.body)
        case ReopenIssue():
            repository.update_issue(
                action.number, title=action.title, body=action.body, state="open", labels=action.labels
            )
            repository.add_comment(action.number, action.comment)
        case RecoverIssue():
            repository.update_issue(
                action.number,
                body=action.body,
                state="closed",
                state_reason=action.state_reason,
                labels=action.labels,
            )
            repository.add_comment(action.number, action.comment)


def describe(action: Action) -> str:
    """One line for a log."""
    match action:
        case OpenIssue():
            return f"open: {action.title}"
        case UpdateIssue():
            return f"update #{action.number}: {action.title}"
        case ReopenIssue():
            return f"reopen #{action.number} (regressed again): {action.title}"
        case RecoverIssue():
            return f"close #{action.number} ({action.state_reason}): {action.comment}"


def print_alerts(actions: Sequence[Action], console: Console, *, dry_run: bool = False) -> None:
    prefix = "would " if dry_run else ""
    if not actions:
        console.print("alerts: every incident's issue is up to date", markup=False, highlight=False)
    for action in actions:
        console.print(f"{prefix}{describe(action)}", markup=False, highlight=False, soft_wrap=True)
