"""SLURM's commands played for the SLURM launcher's tests: a job's states in turn, then what its ranks leave
behind (start and exit files, process 0's result); the launcher wired to it, and the result it leaves.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from rich.console import Console

from jaxbench.harness.launch import ClusterRequest, LaunchOptions
from jaxbench.harness.launch.job_watch import Polling
from jaxbench.harness.launch.slurm import JobInfo, SlurmLauncher
from jaxbench.harness.launch.slurm_job import rank_exit, rank_log, rank_start
from jaxbench.harness.runtime.options import RunOptions
from jaxbench.harness.runtime.result import RunResult, Status, read_result, write_result
from jaxbench.results import synthetic

KILLED = None
"""A rank's end in FakeSlurm: started, then killed before its wrapper recorded an exit code."""


class FakeSlurm:
    """Plays a job: its states in turn, then what its ranks leave behind when it ends: each rank of `ends`
    (in the order they ended) its start and exit files, and process 0's result where `result` gives its
    status."""

    def __init__(
        self,
        states: list[str],
        ends: dict[int, int | None],
        reason: str = "",
        result: Status | None = Status.OK,
    ) -> None:
        self.states, self.ends, self.reason, self.result = states, ends, reason, result
        self.submitted: list[Path] = []
        self.cancelled: list[str] = []
        self.polls = 0

    def submit(self, script: Path) -> str:
        self.submitted.append(script)
        self.folder = script.parent
        rank_log(self.folder, 0).write_text("compiled in 1.0 s\nstep 1\n")
        return "42"

    def job(self, job_id: str) -> JobInfo:
        state = self.states[min(self.polls, len(self.states) - 1)]
        self.polls += 1
        if state not in ("PENDING", "RUNNING"):
            for order, (rank, code) in enumerate(self.ends.items()):
                rank_start(self.folder, rank).write_text(f"node-{rank // 2}\n")
                if code is not KILLED:
                    rank_exit(self.folder, rank).write_text(f"{code} node-{rank // 2} {1000.5 + order}\n")
            if self.result is not None:
                written = synthetic.run_result(
                    dt.date(2026, 11, 26), 0.1, recipe="llama2-tiny", status=self.result
                )
                write_result(RunResult.model_validate(written), self.folder.parent)
        return JobInfo(state, self.reason, "node-[0-1]")

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)
        self.states = [*self.states[: self.polls], "CANCELLED"]

    def version(self) -> str:
        return "slurm 22.05.8"


def launcher(fake: FakeSlurm, dry_run: bool = False, **cluster: object) -> SlurmLauncher:
    options = LaunchOptions("slurm", cluster=ClusterRequest(**cluster), dry_run=dry_run)  # type: ignore[arg-type]
    return SlurmLauncher(options, commands=fake, polling=Polling(0, lambda _: None))


def run_options(tmp_path: Path) -> RunOptions:
    return RunOptions("llama2", steps=20, out_dir=tmp_path / "runs")


def launched_result(fake: FakeSlurm, tmp_path: Path, **cluster: object) -> tuple[int, RunResult, str]:
    """The exit code, the one result in --out, and what the launcher printed."""
    console = Console(width=400, record=True)
    launched = launcher(fake, **cluster).launch(run_options(tmp_path), console)
    (path,) = launched.results
    assert list((tmp_path / "runs").glob("*.json")) == [path]
    return launched.exit_code, read_result(path), console.export_text()
