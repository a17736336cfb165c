"""A Kubernetes API that plays a JobSet, for the k8s launcher's tests: its states and pods poll by poll, rank
0's log, what was created and deleted; the launcher wired to it, and the results it leaves.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from jaxbench.harness.launch import ClusterRequest, LaunchOptions
from jaxbench.harness.launch.job_watch import Polling
from jaxbench.harness.launch.k8s import K8sLauncher
from jaxbench.harness.launch.k8s_api import JobSetState, PodState
from jaxbench.harness.runtime.options import RunOptions
from jaxbench.harness.runtime.result import (
    RESULT_BEGIN,
    RESULT_END,
    RESULT_IN_LOG_ENV,
    RunResult,
    Status,
    read_result,
)
from jaxbench.results import synthetic
from tests.conftest import REPO

RESULT = {
    "recipe": {"name": "llama2-tiny"},
    "started_at": "2026-11-26T06:00:00.000+00:00",
    "run_id": "ab" * 16,
}


RESULT_FILE = "llama2-tiny-20261126T060000-abababab.json"


def result_block(**fields: Any) -> list[str]:
    return [RESULT_BEGIN, *json.dumps(RESULT | fields, indent=2).splitlines(), RESULT_END]


def rank_0_result(status: Status) -> list[str]:
    """A whole result of `status` as rank 0 prints it (the launcher reads and amends these)."""
    written = synthetic.run_result(dt.date(2026, 11, 26), 0.1, recipe="llama2-tiny", status=status)
    text = RunResult.model_validate(written).model_dump_json(indent=2)
    return ["step 1", RESULT_BEGIN, *text.splitlines(), RESULT_END]


def jaxbench_run(*args: str, result_in_log: str = "") -> subprocess.CompletedProcess[str]:
    """`jaxbench run ARGS` as a pod runs it (RESULT_IN_LOG_ENV set where asked)."""
    env = {**os.environ, RESULT_IN_LOG_ENV: result_in_log}
    argv = [sys.executable, "-m", "jaxbench", "run", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=240, env=env)


RUNNING = [PodState("w-0-x", 0, "Running", "node-a"), PodState("w-1-y", 1, "Running", "node-b")]


class FakeKubernetes:
    """Plays a JobSet: (state, pods) per poll in turn, the last one repeated; rank 0's log lines."""

    namespace = "bench"

    def __init__(self, polls: list[tuple[JobSetState | None, list[PodState]]], log: list[str]) -> None:
        self.polls, self.log = polls, log
        self.created: list[Mapping[str, Any]] = []
        self.deleted: list[str] = []
        self.followed: list[str] = []
        self.n = 0

    def create_jobset(self, manifest: Mapping[str, Any]) -> None:
        self.created.append(manifest)

    def jobset(self, name: str) -> JobSetState | None:
        if self.deleted:
            return None  # gone
        self.n += 1
        return self.polls[min(self.n, len(self.polls)) - 1][0]

    def pods(self, jobset: str) -> list[PodState]:
        return self.polls[min(self.n, len(self.polls)) - 1][1]

    def log_lines(self, pod: str) -> Iterator[str]:
        self.followed.append(pod)
        yield from self.log

    def delete_jobset(self, name: str) -> None:
        self.deleted.append(name)


def launcher(api: FakeKubernetes | None = None, dry_run: bool = False, **cluster: Any) -> K8sLauncher:
    options = LaunchOptions(
        "k8s", image="ghcr.io/jaxbench/jax:cuda", cluster=ClusterRequest(**cluster), dry_run=dry_run
    )
    return K8sLauncher(options, api=api, polling=Polling(0, lambda _: None), log_wait_s=10)


def run_options(tmp_path: Path) -> RunOptions:
    return RunOptions("llama2", steps=20, out_dir=tmp_path / "runs")


def launch(api: FakeKubernetes, tmp_path: Path, **cluster: Any) -> tuple[Any, str]:
    console = Console(width=300, record=True)
    launched = launcher(api, nodes=2, **cluster).launch(run_options(tmp_path), console)
    return launched, console.export_text()


def launched_result(api: FakeKubernetes, tmp_path: Path, **cluster: Any) -> tuple[int, RunResult, str]:
    """The exit code, the one result in --out, and what the launcher printed."""
    launched, text = launch(api, tmp_path, **cluster)
    (path,) = launched.results
    assert list((tmp_path / "runs").glob("*.json")) == [path]
    return launched.exit_code, read_result(path), text


def jobset(api: FakeKubernetes) -> str:
    """The JobSet the launcher created, as its results name it: namespace/name."""
    return f"bench/{api.created[0]['metadata']['name']}"


FAILED = JobSetState(ended=True, failed=True, message="jobset failed due to one or more job failures")
