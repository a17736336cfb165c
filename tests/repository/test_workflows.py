"""The GitHub workflows against the project's own rules (make lint checks them against GitHub's schema and
actionlint; these are the rules neither knows): third-party actions pinned to full commit SHAs with their
version in a comment, least-privilege permissions per job, no pull_request_target, no expression inside a
shell line, secrets only in the jobs that need them, and the nightly's plan outputs matching what
`jaxbench nightly plan` prints.

    JAX_PLATFORMS=cpu python -m pytest -q tests/repository/test_workflows.py
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxbench.nightly.matrix import NightlyInputs, plan_nightly
from tests.conftest import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yaml"))
USES = re.compile(r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$")
SECRET_JOBS = {"build", "publish", "bench", "judge", "alerts", "triage"}
"""Jobs allowed to read secrets (registry login, the team store); GITHUB_TOKEN goes only where it writes."""
COMMENT_JOBS = {("pr-check-comment.yaml", "comment")}
"""workflow_run jobs that comment on a pull request with GITHUB_TOKEN and no secret (check-fork-safety)."""


def load(path: Path) -> dict[str, Any]:
    # PyYAML reads the key `on` as True (YAML 1.1); the workflow's triggers are under that key here.
    document: dict[Any, Any] = yaml.safe_load(path.read_text())
    return document


@pytest.fixture(params=WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def workflow(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


def test_there_are_both_workflows() -> None:
    assert {p.name for p in WORKFLOWS} >= {"ci.yaml", "nightly.yaml"}


def test_actions_are_pinned_to_commits_with_their_version(workflow: Path) -> None:
    pinned = 0
    for number, line in enumerate(workflow.read_text().splitlines(), start=1):
        match = USES.match(line)
        if not match:
            continue
        action, rest = match.groups()
        if action.startswith("./"):
            continue
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", action), f"{workflow.name}:{number}: {action}"
        assert re.fullmatch(r"\s*# v\d+(\.\d+)*", rest), f"{workflow.name}:{number}: no '# vX.Y.Z' comment"
        pinned += 1
    assert pinned > 0


def test_permissions_are_per_job_and_least(workflow: Path) -> None:
    document = load(workflow)
    assert "pull_request_target" not in document[True]
    top = document.get("permissions")
    assert top in ({}, {"contents": "read"}), f"{workflow.name}: workflow-wide permissions {top}"
    for name, job in document["jobs"].items():
        granted = job.get("permissions", top)
        writes = {scope for scope, level in granted.items() if level == "write"}
        if workflow.name == "ci.yaml":
            assert not writes, f"ci.yaml job {name} may write {writes}: pull requests run untrusted code"
        assert writes <= {"packages", "issues", "pages", "id-token", "contents", "pull-requests"}
        if "contents" in writes:
            assert name == "land", f"only the land job pushes to the repository, not {name}"


def test_no_expression_in_a_shell_line(workflow: Path) -> None:
    """Inputs, branch names and issue titles reach the shell only through env, quoted."""
    for name, job in load(workflow)["jobs"].items():
        for step in job.get("steps", []):
            assert "${{" not in step.get("run", ""), (
                f"{workflow.name} job {name}: ${{{{ }}}} in run: {step['run']}"
            )


def test_secrets_only_where_needed(workflow: Path) -> None:
    for name, job in load(workflow)["jobs"].items():
        text = yaml.safe_dump(job)
        if "secrets." in text or "github.token" in text:
            commenting = (workflow.name, name) in COMMENT_JOBS and "secrets." not in text
            assert commenting or (workflow.name == "nightly.yaml" and name in SECRET_JOBS | {"land"}), (
                workflow.name,
                name,
            )


def test_nightly_never_overlaps() -> None:
    document = load(next(p for p in WORKFLOWS if p.name == "nightly.yaml"))
    assert document["concurrency"] == {"group": "nightly", "cancel-in-progress": False}
    assert {"schedule", "workflow_dispatch"} <= set(document[True])


def test_nightly_plan_outputs_match_the_plan_command() -> None:
    """Every `needs.plan.outputs.X` the nightly reads is an output of its plan job, which forwards what
    `jaxbench nightly plan` prints."""
    path = next(p for p in WORKFLOWS if p.name == "nightly.yaml")
    declared = load(path)["jobs"]["plan"]["outputs"]
    printed = plan_nightly(
        NightlyInputs(registry_owner="o"),
        flavors=["jax"],
        recipes={"r": ("s", ["s"])},
        now=dt.datetime.now(dt.UTC),
    ).outputs()
    assert set(declared) == set(printed)
    for key, value in declared.items():
        assert value == f"${{{{ steps.plan.outputs.{key} }}}}"
    used = set(re.findall(r"needs\.plan\.outputs\.([\w-]+)", path.read_text()))
    assert used <= set(declared), used - set(declared)
