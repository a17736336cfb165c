"""What a fork's pull request triggers holds no secret and no token that writes: scripts/check-fork-safety (in
make lint) passes on the repository's workflows and fails, naming the file, the job and the rule, on each
mutation of pr-check.yaml and pr-check-comment.yaml that would open a hole.

    JAX_PLATFORMS=cpu python -m pytest -q tests/repository/test_fork_safety.py
"""

from __future__ import annotations

import copy
import importlib.util
import subprocess
import sys
from collections.abc import Callable
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

CHECK = REPO / "scripts" / "check-fork-safety"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yaml"))
CHECKOUT = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1"

Workflow = dict[Any, Any]


def _module() -> ModuleType:
    loader = SourceFileLoader("check_fork_safety", str(CHECK))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


check = _module()


def _load(name: str) -> Workflow:
    document: Workflow = yaml.safe_load((REPO / ".github" / "workflows" / name).read_text())
    return document


def _steps(workflow: Workflow) -> list[dict[str, Any]]:
    """The steps of the workflow's one job."""
    (job,) = workflow["jobs"].values()
    steps: list[dict[str, Any]] = job["steps"]
    return steps


def _step_running(workflow: Workflow, command: str) -> dict[str, Any]:
    return next(step for step in _steps(workflow) if command in str(step.get("run", "")))


def _add_secret(workflow: Workflow) -> None:
    _step_running(workflow, "make pr-check")["env"]["FOO"] = "${{ secrets.FOO }}"


def _grant_pull_requests_write(workflow: Workflow) -> None:
    workflow["jobs"]["pr-check"]["permissions"]["pull-requests"] = "write"


def _remove_permissions(workflow: Workflow) -> None:
    del workflow["permissions"]
    del workflow["jobs"]["pr-check"]["permissions"]


def _interpolate_title(workflow: Workflow) -> None:
    _step_running(workflow, "make pr-check")["run"] += ' TITLE="${{ github.event.pull_request.title }}"'


def _target_with_head_checkout(workflow: Workflow) -> None:
    workflow[True] = {"pull_request_target": None}
    _steps(workflow)[0]["with"]["ref"] = "${{ github.event.pull_request.head.sha }}"


def _checkout_run_head(workflow: Workflow) -> None:
    checkout = {"uses": CHECKOUT, "with": {"ref": "${{ github.event.workflow_run.head_sha }}"}}
    _steps(workflow).insert(0, checkout)


def _run_from_artifact(command: str) -> Callable[[Workflow], None]:
    def mutate(workflow: Workflow) -> None:
        _steps(workflow).append({"run": command})

    return mutate


def _grant_contents_write(workflow: Workflow) -> None:
    workflow["jobs"]["comment"]["permissions"]["contents"] = "write"


PR = "pr-check.yaml: job pr-check: "
COMMENT = "pr-check-comment.yaml: job comment: "
SECRETS = "secrets: a job that runs a fork's code reads a secret"
RUNS_ARTIFACT = COMMENT + "runs artifact: a workflow_run job that downloads an artifact runs "


@pytest.mark.parametrize(
    ("name", "mutate", "expected"),
    [
        ("pr-check.yaml", _add_secret, PR + SECRETS),
        (
            "pr-check.yaml",
            _grant_pull_requests_write,
            PR + "write token: a job that runs a fork's code may write (pull-requests)",
        ),
        (
            "pr-check.yaml",
            _remove_permissions,
            PR + "default token: no permissions block (the default token may write)",
        ),
        (
            "pr-check.yaml",
            _interpolate_title,
            PR + "script injection: ${{ github.event.pull_request.title }} in a script; pass it through env",
        ),
        (
            "pr-check.yaml",
            _target_with_head_checkout,
            PR + "head checkout: pull_request_target checks out the pull request's head "
            "(${{ github.event.pull_request.head.sha }})",
        ),
        (
            "pr-check-comment.yaml",
            _checkout_run_head,
            COMMENT + "run checkout: workflow_run checks out the triggering run's code "
            "(${{ github.event.workflow_run.head_sha }})",
        ),
        (
            "pr-check-comment.yaml",
            _run_from_artifact("bash pr-check/script.sh"),
            RUNS_ARTIFACT + "`bash pr-check/script.sh`",
        ),
        (
            "pr-check-comment.yaml",
            _grant_contents_write,
            COMMENT + "permissions: contents: write in a workflow_run job; it may hold "
            "pull-requests: write, issues: write, actions: read, contents: read",
        ),
    ],
    ids=lambda value: getattr(value, "__name__", None) if callable(value) else None,
)
def test_each_rule_fails_its_mutation(name: str, mutate: Callable[[Workflow], None], expected: str) -> None:
    workflow = copy.deepcopy(_load(name))
    mutate(workflow)
    assert check.violations(name, workflow) == [expected]


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("python3 pr-check/x.py", "python3 pr-check/x.py"),
        ("source pr-check/env", "source pr-check/env"),
        ("set -e; . pr-check/env", ". pr-check/env"),
        ("cd pr-check && ./run", "./run"),
        ("chmod +x pr-check/run", "chmod +x pr-check/run"),
        ('eval "$line"', "eval"),
        ("$(cat pr-check/command)", "$(cat"),
        ("cat pr-check/x | sh", "cat pr-check/x | sh"),
        ("if true; then\n  bash pr-check/x\nfi", "then bash pr-check/x"),
    ],
)
def test_running_what_an_artifact_holds_fails(command: str, shown: str) -> None:
    workflow = copy.deepcopy(_load("pr-check-comment.yaml"))
    _run_from_artifact(command)(workflow)
    assert check.violations("pr-check-comment.yaml", workflow) == [RUNS_ARTIFACT + f"`{shown}`"]


def test_a_local_action_after_a_download_fails() -> None:
    workflow = copy.deepcopy(_load("pr-check-comment.yaml"))
    _steps(workflow).append({"uses": "./pr-check/action"})
    assert check.violations("pr-check-comment.yaml", workflow) == [
        RUNS_ARTIFACT + "`uses: ./pr-check/action`"
    ]


def test_the_trigger_key_on_is_read_however_it_was_parsed() -> None:
    """PyYAML reads `on:` as True; a quoted "on": or another parser gives the string."""
    workflow = copy.deepcopy(_load("pr-check.yaml"))
    workflow["on"] = workflow.pop(True)
    _grant_pull_requests_write(workflow)
    assert len(check.violations("pr-check.yaml", workflow)) == 1


def test_the_repository_passes() -> None:
    for path in WORKFLOWS:
        assert check.violations(path.name, _load(path.name)) == [], path.name


def test_the_command_names_each_violation(tmp_path: Path) -> None:
    workflow = copy.deepcopy(_load("pr-check.yaml"))
    _add_secret(workflow)
    mutated = tmp_path / "pr-check.yaml"
    mutated.write_text(yaml.safe_dump(workflow))
    command = [sys.executable, str(CHECK)]
    passed = subprocess.run([*command, *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=60)
    failed = subprocess.run([*command, str(mutated)], capture_output=True, text=True, timeout=60)
    assert passed.returncode == 0, passed.stderr
    assert failed.returncode == 1
    assert failed.stderr == f"{mutated}: job pr-check: {SECRETS}\n"
