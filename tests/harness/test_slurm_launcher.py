"""The SLURM launcher (harness/launch/slurm.py, job_result.py) watching a job, SLURM's commands played by
tests/harness/slurm_fake.py: the failures it names (a crashed rank, a time limit, a failed node), the result
it writes where no rank wrote one and its amendment of process 0's, and scancel on interrupt. What runs on
the cluster: tests/harness/test_slurm_job.py; dry runs and refusals: test_slurm_launcher_input.py;
tests/harness/test_slurm_cluster.py runs it on a real single-node cluster."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.core.errors import ExitCode
from jaxbench.harness.launch import ClusterRequest, LaunchOptions
from jaxbench.harness.launch.job_watch import Polling
from jaxbench.harness.launch.slurm import JobInfo, SlurmLauncher, failure, parse_job
from jaxbench.harness.launch.slurm_job import RankRecord
from jaxbench.harness.runtime.result import Status, read_result
from jaxbench.results.ingest import read_result_file
from tests.harness.slurm_fake import KILLED, FakeSlurm, launched_result, launcher, run_options


def test_a_completed_job_returns_the_result_rank_0_wrote(tmp_path: Path) -> None:
    fake = FakeSlurm(["PENDING", "RUNNING", "RUNNING", "COMPLETED"], {0: 0, 1: 0})
    launched = launcher(fake, tasks_per_node=2).launch(run_options(tmp_path), Console(width=200))
    assert launched.exit_code == ExitCode.OK
    (path,) = launched.results
    assert read_result(path).status is Status.OK and read_result(path).reason is None  # as rank 0 wrote it
    (script,) = fake.submitted
    assert script.name == "job.sbatch" and script.read_text().startswith("#!/bin/bash\n")
    assert "export JAXBENCH_SLURM_VERSION='slurm 22.05.8'\n" in script.read_text()


def test_a_crash_before_any_result_is_a_failed_result_the_launcher_writes(tmp_path: Path) -> None:
    """Rank 1 crashed; srun then killed rank 0 (SIGKILL: no result, no exit code of its own)."""
    fake = FakeSlurm(["RUNNING", "FAILED"], {1: 42, 0: KILLED}, reason="NonZeroExitCode", result=None)
    code, result, printed = launched_result(fake, tmp_path, tasks_per_node=2)
    assert code == ExitCode.FAILED and result.status is Status.FAILED
    folder = next((tmp_path / "runs").glob("slurm-llama2-*"))
    assert result.reason == (
        "SLURM job 42: a rank failed (SLURM: FAILED, NonZeroExitCode): rank 1 on node-0 exited with 42; "
        "rank 0 on node-0 was killed before it recorded an exit code; "
        f"no rank wrote a result (logs in {folder})"
    )
    assert "no rank wrote a result: the launcher wrote" in printed
    # What was asked, as rank 0 would have recorded it; nothing measured.
    assert result.recipe.name == "llama2-tiny" and result.recipe.resolved["train"]["steps"] == 20
    assert result.parallelism is not None and result.parallelism.device_count == 2
    devices = result.provenance.devices
    assert (devices.platform, devices.process_count, devices.local_count, devices.hostname) == (
        "cpu",
        2,
        1,
        "node-0",
    )
    job = result.provenance.job
    assert job is not None and (job.job_id, job.nodes, job.tasks, job.version) == (
        "42",
        "node-[0-1]",
        2,
        "slurm 22.05.8",
    )
    assert result.timing.raw_step_times_s == [] and result.throughput is None and result.metrics == []
    assert result.command == sys.argv
    # The store takes it: a failed run, marking each metric a run of the recipe reports.
    parsed = read_result_file(next((tmp_path / "runs").glob("*.json"))).run
    assert parsed.status == "failed" and parsed.hosts == 2 and parsed.reason == result.reason
    assert {r.series.metric for r in parsed.results} >= {"perf/step_time_s", "perf/compile_time_s"}
    assert {r.status for r in parsed.results} == {"failed"}


def test_process_0s_failed_result_names_the_rank_that_crashed_first(tmp_path: Path) -> None:
    """Rank 1 crashed; rank 0's collective broke, and it wrote a failed result of its own, later."""
    fake = FakeSlurm(["RUNNING", "FAILED"], {1: 42, 0: 3}, reason="NonZeroExitCode", result=Status.FAILED)
    code, result, _ = launched_result(fake, tmp_path, tasks_per_node=2)
    assert code == ExitCode.FAILED and result.status is Status.FAILED
    assert result.reason == (
        "SLURM job 42: a rank failed (SLURM: FAILED, NonZeroExitCode): rank 1 on node-0 exited first, "
        "with 42; rank 0 on node-0 exited with 3; process 0: failed in the test"
    )
    assert result.timing.raw_step_times_s  # process 0's measurements stay


def test_a_job_over_its_time_limit_is_a_failed_result(tmp_path: Path) -> None:
    """SLURM's SIGTERM at the limit: process 0 wrote an interrupted result, which the launcher makes a
    failure of the job."""
    fake = FakeSlurm(["RUNNING", "TIMEOUT"], {0: 130, 1: 130}, reason="TimeLimit", result=Status.INTERRUPTED)
    code, result, printed = launched_result(fake, tmp_path, tasks_per_node=2, time="1")
    assert code == ExitCode.FAILED and result.status is Status.FAILED
    why = (
        "the job exceeded its time limit (SLURM: TIMEOUT, TimeLimit): rank 0 on node-0 exited first, with "
        "130 (interrupted by SIGINT or SIGTERM); rank 1 on node-0 exited with 130 (interrupted by SIGINT or "
        "SIGTERM)"
    )
    assert result.reason == f"SLURM job 42: {why}; process 0: interrupted in the test"
    assert f"job 42 failed: {why}" in printed


@pytest.mark.parametrize(
    ("state", "ends", "status", "exit_code", "named"),
    [
        (
            "OUT_OF_MEMORY",
            {0: 137, 1: 0},
            Status.OOM,
            ExitCode.FAILED,
            "rank 0 on node-0 exited with 137 (killed",
        ),
        ("NODE_FAIL", {0: KILLED, 1: KILLED}, Status.FAILED, ExitCode.FAILED, "rank 2 never started"),
        ("CANCELLED", {0: 143}, Status.INTERRUPTED, ExitCode.INTERRUPTED, "rank 0 on node-0 exited with 143"),
    ],
)
def test_each_way_a_job_ends_without_a_result_has_its_status(
    tmp_path: Path, state: str, ends: dict[int, int | None], status: Status, exit_code: int, named: str
) -> None:
    fake = FakeSlurm(["RUNNING", state], ends, result=None)
    code, result, _ = launched_result(fake, tmp_path, nodes=2, tasks_per_node=2)
    assert (code, result.status) == (exit_code, status)
    assert result.reason and result.reason.startswith("SLURM job 42: ") and named in result.reason
    assert f"(SLURM: {state})" in result.reason


def test_process_0s_own_diagnosis_keeps_its_status(tmp_path: Path) -> None:
    fake = FakeSlurm(["RUNNING", "FAILED"], {0: 3, 1: KILLED}, result=Status.NAN)
    code, result, _ = launched_result(fake, tmp_path, tasks_per_node=2)
    assert code == ExitCode.FAILED and result.status is Status.NAN
    assert result.reason and result.reason.endswith(
        "rank 0 on node-0 exited with 3; rank 1 on node-0 was "
        "killed before it recorded an exit code; process 0: nan in the test"
    )


def test_a_completed_job_without_a_result_is_a_failed_one(tmp_path: Path) -> None:
    fake = FakeSlurm(["RUNNING", "COMPLETED"], {0: 0}, result=None)
    code, result, _ = launched_result(fake, tmp_path)
    assert code == ExitCode.FAILED and result.status is Status.FAILED
    assert result.reason and result.reason.startswith("SLURM job 42: it completed; no rank wrote a result")


def test_an_interrupt_cancels_the_job_and_waits_for_its_end(tmp_path: Path) -> None:
    fake = FakeSlurm(["RUNNING"] * 100, {0: 130, 1: 130}, result=Status.INTERRUPTED)
    calls = {"n": 0}

    def sleep(_: float) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    job = SlurmLauncher(
        LaunchOptions("slurm", cluster=ClusterRequest(tasks_per_node=2)),
        commands=fake,
        polling=Polling(0, sleep),
    )
    launched = job.launch(run_options(tmp_path), Console(width=200))
    assert fake.cancelled == ["42"]
    assert launched.exit_code == ExitCode.INTERRUPTED
    (path,) = launched.results
    assert read_result(path).reason == "interrupted in the test"  # rank 0's own account: the launcher's stop


def test_an_interrupt_before_any_result_is_an_interrupted_result(tmp_path: Path) -> None:
    fake = FakeSlurm(["RUNNING"] * 100, {0: KILLED}, result=None)
    job = SlurmLauncher(
        LaunchOptions("slurm", cluster=ClusterRequest()),
        commands=fake,
        polling=Polling(0, lambda _: sigint()),
    )
    launched = job.launch(run_options(tmp_path), Console(width=200))
    assert launched.exit_code == ExitCode.INTERRUPTED
    (path,) = launched.results
    assert read_result(path).status is Status.INTERRUPTED
    assert (read_result(path).reason or "").startswith(
        "SLURM job 42: the job was cancelled (SLURM: CANCELLED)"
    )


def sigint() -> None:
    raise KeyboardInterrupt


def test_a_second_interrupt_stops_the_wait_and_stops_the_job_once() -> None:
    """Both cluster launchers watch through Polling: the first Ctrl-C stops the job (scancel, the JobSet's
    deletion) and the watch goes on while its processes write; a second ends the wait."""
    stopped: list[str] = []
    polls = {"n": 0}

    def poll() -> bool:
        polls["n"] += 1
        raise KeyboardInterrupt

    assert Polling(0, lambda _: None).until_ended(poll, lambda: stopped.append("stop")) is True
    assert stopped == ["stop"] and polls["n"] == 2
    ended = iter([False, True])
    assert Polling(0, lambda _: None).until_ended(lambda: next(ended), lambda: stopped.append("x")) is False


def test_failure_names_the_first_rank_to_fail_then_the_others(tmp_path: Path) -> None:
    ranks = [
        RankRecord(0, "node-0", 0, 10.0),
        RankRecord(1, "node-0", 137, 12.0),
        RankRecord(2, "node-1", 1, 11.0),
        RankRecord(3, "node-1", None, None),
        RankRecord(4, None, None, None),
    ]
    why = failure(JobInfo("FAILED", "NonZeroExitCode"), ranks)
    assert why == (
        "a rank failed (SLURM: FAILED, NonZeroExitCode): rank 2 on node-1 exited first, with 1; rank 1 on "
        "node-0 exited with 137 (killed by SIGKILL: out of memory?); rank 3 on node-1 was killed before it "
        "recorded an exit code; rank 4 never started"
    )
    many = [RankRecord(rank, "node-0", None, None) for rank in range(10)]
    assert failure(JobInfo("NODE_FAIL", "None"), many) == (
        "a node of the job failed (SLURM: NODE_FAIL): "
        + "; ".join(f"rank {rank} on node-0 was killed before it recorded an exit code" for rank in range(4))
        + "; 6 more ranks did not end well"
    )
    assert failure(JobInfo("COMPLETED"), ranks[:1]) is None


def test_scontrol_output_is_parsed() -> None:
    line = "JobId=7 JobName=jaxbench-llama2 JobState=TIMEOUT Reason=TimeLimit NodeList=vm ExitCode=0:15\n"
    assert parse_job(line) == JobInfo("TIMEOUT", "TimeLimit", "vm")
