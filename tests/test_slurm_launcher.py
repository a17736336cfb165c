"""The SLURM launcher (harness/launch/slurm.py, slurm_job.py) with SLURM's commands replaced: the script it
writes, the failures it names (a crashed rank, a time limit), scancel on interrupt, and refused options.
tests/test_slurm_cluster.py runs it on a real single-node cluster."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from core.errors import ExitCode, InvalidInput
from harness.launch import ClusterRequest, LaunchOptions
from harness.launch.local import LocalLauncher
from harness.launch.slurm import JobInfo, SlurmLauncher, failure, parse_job, rank_ends
from harness.launch.slurm_job import rank_exit, rank_log, sbatch_script
from harness.run.options import RunOptions


class FakeSlurm:
    """Plays a job: its states in turn, then what its ranks leave behind when it ends."""

    def __init__(
        self, states: list[str], rank_codes: dict[int, int], reason: str = "", result: bool = True
    ) -> None:
        self.states, self.rank_codes, self.reason, self.result = states, rank_codes, reason, result
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
            for rank, code in self.rank_codes.items():
                rank_exit(self.folder, rank).write_text(f"{code} node-{rank // 2}\n")
            if self.result:
                (self.folder.parent / "llama2-tiny-result.json").write_text("{}")
        return JobInfo(state, self.reason, "node-[0-1]")

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)
        self.states = [*self.states[: self.polls], "CANCELLED"]

    def version(self) -> str:
        return "slurm 22.05.8"


def launcher(fake: FakeSlurm, dry_run: bool = False, **cluster: object) -> SlurmLauncher:
    options = LaunchOptions("slurm", cluster=ClusterRequest(**cluster), dry_run=dry_run)  # type: ignore[arg-type]
    return SlurmLauncher(options, commands=fake, sleep=lambda _: None)


def run_options(tmp_path: Path) -> RunOptions:
    return RunOptions("llama2", steps=20, out_dir=tmp_path / "runs")


def test_a_two_node_dry_run_prints_the_script_and_submits_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeSlurm(["COMPLETED"], {})
    job = launcher(fake, nodes=2, gpus_per_node=8, partition="gpu", account="perf", dry_run=True)
    launched = job.launch(run_options(tmp_path), Console(width=300))
    assert launched.exit_code == ExitCode.OK and launched.results == [] and fake.submitted == []
    script = capsys.readouterr().out
    for directive in ("--nodes=2", "--ntasks-per-node=8", "--gpus-per-node=8", "--partition=gpu"):
        assert f"#SBATCH {directive}\n" in script
    assert "#SBATCH --account=perf\n" in script
    assert re.search(r"^srun --kill-on-bad-exit=1 .*-m jaxbench run llama2 --steps 20 ", script, re.M)
    assert not list((tmp_path / "runs").glob("slurm-*"))  # nothing written either


def test_the_script_runs_each_task_in_the_image_with_the_results_folder_mounted(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    script = sbatch_script(
        ClusterRequest(nodes=2, gpus_per_node=4),
        job_name="jaxbench-llama2",
        folder=folder,
        command=["jaxbench", "run", "llama2", "--out", str(tmp_path)],
        image="ghcr.io/jaxbench/jax:cuda-2026-11-26",
        mounts=(tmp_path,),
        environment={"NCCL_DEBUG": "WARN"},
    )
    assert "--container-image=ghcr.io/jaxbench/jax:cuda-2026-11-26" in script
    assert f"--container-mounts={tmp_path}:{tmp_path},{folder}:{folder}" in script
    assert "export NCCL_DEBUG=WARN\n" in script
    assert script.count("#SBATCH --ntasks-per-node=4\n") == 1


def test_a_completed_job_returns_the_result_rank_0_wrote(tmp_path: Path) -> None:
    fake = FakeSlurm(["PENDING", "RUNNING", "RUNNING", "COMPLETED"], {0: 0, 1: 0})
    launched = launcher(fake, tasks_per_node=2).launch(run_options(tmp_path), Console(width=200))
    assert launched.exit_code == ExitCode.OK
    assert [p.name for p in launched.results] == ["llama2-tiny-result.json"]
    (script,) = fake.submitted
    assert script.name == "job.sbatch" and script.read_text().startswith("#!/bin/bash\n")
    assert "export JAXBENCH_SLURM_VERSION='slurm 22.05.8'\n" in script.read_text()


def test_a_rank_that_crashes_fails_the_run_naming_rank_and_host(tmp_path: Path) -> None:
    fake = FakeSlurm(["RUNNING", "FAILED"], {0: 137, 1: 1}, result=False)
    console = Console(width=300, record=True)
    launched = launcher(fake, tasks_per_node=2).launch(run_options(tmp_path), console)
    assert launched.exit_code == ExitCode.FAILED and launched.results == []
    text = console.export_text()
    assert "rank 0 on node-0 exited with 137 (killed by SIGKILL: out of memory?)" in text


def test_a_job_over_its_time_limit_says_so(tmp_path: Path) -> None:
    fake = FakeSlurm(["RUNNING", "TIMEOUT"], {0: 130, 1: 130})
    console = Console(width=300, record=True)
    launched = launcher(fake, tasks_per_node=2, time="1").launch(run_options(tmp_path), console)
    assert launched.exit_code == ExitCode.FAILED
    assert (
        "the job exceeded its time limit (--time); rank 0 on node-0 exited with 130" in console.export_text()
    )


def test_an_interrupt_cancels_the_job_and_waits_for_its_end(tmp_path: Path) -> None:
    fake = FakeSlurm(["RUNNING"] * 100, {0: 130, 1: 130})
    calls = {"n": 0}

    def sleep(_: float) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    job = SlurmLauncher(
        LaunchOptions("slurm", cluster=ClusterRequest(tasks_per_node=2)), commands=fake, sleep=sleep
    )
    launched = job.launch(run_options(tmp_path), Console(width=200))
    assert fake.cancelled == ["42"]
    assert launched.exit_code == ExitCode.INTERRUPTED
    assert [p.name for p in launched.results] == ["llama2-tiny-result.json"]


def test_failure_names_ranks_that_never_recorded_an_end(tmp_path: Path) -> None:
    rank_exit(tmp_path, 0).write_text("0 node-0\n")
    ends = rank_ends(tmp_path, 4)
    assert [(e.rank, e.exit_code, e.host) for e in ends] == [(0, 0, "node-0")]
    why = failure(JobInfo("NODE_FAIL"), ends, 4)
    assert why == "a node of the job failed; 3 of 4 ranks never recorded an end"
    assert failure(JobInfo("COMPLETED"), ends, 1) is None


def test_scontrol_output_is_parsed() -> None:
    line = "JobId=7 JobName=jaxbench-llama2 JobState=TIMEOUT Reason=TimeLimit NodeList=vm ExitCode=0:15\n"
    assert parse_job(line) == JobInfo("TIMEOUT", "TimeLimit", "vm")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nodes": 0}, "--nodes 0: expected a whole number of at least 1"),
        ({"gpus_per_node": 0}, "--gpus-per-node 0: expected a whole number of at least 1"),
        ({"time": "1h"}, "--time '1h': expected minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]]"),
        ({"partition": "gpu;rm -rf"}, "--partition 'gpu;rm -rf': expected a SLURM name"),
    ],
)
def test_invalid_options_are_refused_before_anything_is_written(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        launcher(FakeSlurm([], {}), **options)


def test_the_local_launcher_refuses_cluster_options() -> None:
    with pytest.raises(InvalidInput, match=r"--nodes 2, --time 30: the local launcher runs on this machine"):
        LocalLauncher(LaunchOptions("local", cluster=ClusterRequest(nodes=2, time="30")))
