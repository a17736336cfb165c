"""The SLURM launcher (harness/launch/slurm.py, slurm_job.py, job_result.py) with SLURM's commands replaced:
the script it writes, the failures it names (a crashed rank, a time limit, a failed node), the result it
writes where no rank wrote one and its amendment of process 0's, scancel on interrupt, and refused options.
tests/harness/test_slurm_cluster.py runs it on a real single-node cluster."""

from __future__ import annotations

import datetime as dt
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from core.errors import ExitCode, InvalidInput
from harness.flags.environment import DeviceHint
from harness.launch import ClusterRequest, LaunchOptions
from harness.launch.job_result import planned_hint
from harness.launch.job_watch import Polling
from harness.launch.local import LocalLauncher
from harness.launch.slurm import JobInfo, SlurmLauncher, failure, parse_job
from harness.launch.slurm_job import RankRecord, rank_exit, rank_log, rank_start, read_rank, sbatch_script
from harness.runtime.options import RunOptions
from harness.runtime.outcome import Terminated, sigterm_deferred, sigterm_raises
from harness.runtime.result import RunResult, Status, read_result, write_result
from results import synthetic
from results.ingest import read_result_file
from tests.conftest import REPO

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
    (path,) = launched.results
    assert read_result(path).status is Status.OK and read_result(path).reason is None  # as rank 0 wrote it
    (script,) = fake.submitted
    assert script.name == "job.sbatch" and script.read_text().startswith("#!/bin/bash\n")
    assert "export JAXBENCH_SLURM_VERSION='slurm 22.05.8'\n" in script.read_text()


def launched_result(fake: FakeSlurm, tmp_path: Path, **cluster: object) -> tuple[int, RunResult, str]:
    """The exit code, the one result in --out, and what the launcher printed."""
    console = Console(width=400, record=True)
    launched = launcher(fake, **cluster).launch(run_options(tmp_path), console)
    (path,) = launched.results
    assert list((tmp_path / "runs").glob("*.json")) == [path]
    return launched.exit_code, read_result(path), console.export_text()


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


def wrapper(tmp_path: Path) -> str:
    """The command each task's srun step runs its rank in (bash -c WRAPPER rank COMMAND...)."""
    script = sbatch_script(ClusterRequest(), job_name="j", folder=tmp_path, command=["true"])
    step = shlex.split(script.splitlines()[-1])
    return step[step.index("-c") + 1]


def test_each_rank_records_its_host_and_then_its_exit_code_host_and_time(tmp_path: Path) -> None:
    env = {**os.environ, "SLURM_PROCID": "1"}
    before = time.time()
    done = subprocess.run(
        ["bash", "-c", wrapper(tmp_path), "rank", "sh", "-c", "exit 7"], env=env, check=False
    )
    assert done.returncode == 7
    record = read_rank(tmp_path, 1)
    assert (record.rank, record.host, record.exit_code) == (1, os.uname().nodename, 7)
    assert record.ended_at is not None and before <= record.ended_at <= time.time() + 1
    assert read_rank(tmp_path, 0) == RankRecord(0, None, None, None)  # never started


def test_a_rank_outlives_sigterm_to_record_the_code_of_the_run_it_waits_for(tmp_path: Path) -> None:
    """SLURM's SIGTERM reaches the wrapper too (a time limit, scancel): it waits for the run, which writes
    its result then, and records how that ended; without its trap no exit file would be left."""
    run = "trap 'sleep 0.2; exit 130' TERM; echo started > started; while :; do sleep 0.05; done"
    env = {**os.environ, "SLURM_PROCID": "0"}
    task = subprocess.Popen(
        ["bash", "-c", wrapper(tmp_path), "rank", "bash", "-c", run], cwd=tmp_path, env=env
    )
    deadline = time.monotonic() + 10
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    subprocess.run(["pkill", "-TERM", "-P", str(task.pid)], check=False)  # the run, as SLURM signals it
    task.send_signal(signal.SIGTERM)  # and the wrapper
    assert task.wait(timeout=10) == 130
    assert read_rank(tmp_path, 0).exit_code == 130


def test_a_second_sigterm_while_the_result_is_written_does_nothing() -> None:
    """SLURM sends SIGTERM twice at a time limit (slurmstepd, then srun): the first becomes the run's
    interrupted outcome, the second must not kill the process before its result is written."""
    with sigterm_deferred():
        with pytest.raises(Terminated), sigterm_raises():  # the backend's, around compiling and training
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        os.kill(os.getpid(), signal.SIGTERM)  # the result being written
        time.sleep(0.01)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_invalid_input_is_refused_before_anything_is_submitted(tmp_path: Path) -> None:
    fake = FakeSlurm(["COMPLETED"], {})
    with pytest.raises(InvalidInput, match=r"--steps 5: .*warmup_steps \(5\) must be smaller than steps"):
        launcher(fake).launch(RunOptions("llama2", steps=5, out_dir=tmp_path), Console())
    assert fake.submitted == [] and not list(tmp_path.glob("slurm-*"))


def test_the_devices_a_job_will_find_are_planned_from_its_request() -> None:
    no_gpu_here: dict[str, str] = {"PATH": ""}  # no nvidia-smi
    assert planned_hint(ClusterRequest(gpus_per_node=8), no_gpu_here) == DeviceHint("gpu", "unknown")
    assert planned_hint(
        ClusterRequest(gpus_per_node=8), {**no_gpu_here, "JAX_PLATFORMS": "cpu"}
    ) == DeviceHint("cpu", "cpu")
    assert planned_hint(ClusterRequest(tasks_per_node=2), no_gpu_here) == DeviceHint("cpu", "cpu")


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


def test_the_slurm_launcher_refuses_a_kubernetes_namespace(tmp_path: Path) -> None:
    options = LaunchOptions("slurm", namespace="perf", dry_run=True)
    message = "--namespace perf: an option of the k8s launcher (a Kubernetes namespace); the SLURM launcher"
    with pytest.raises(InvalidInput, match=re.escape(message)):
        SlurmLauncher(options, commands=FakeSlurm([], {}))
    # From the command line: exit 1, the message, nothing written.
    argv = [sys.executable, "-m", "jaxbench", "run", "llama2", "--launcher", "slurm", "--namespace", "perf"]
    argv += ["--dry-run", "--out", str(tmp_path)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == ExitCode.INVALID_INPUT and message in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_local_launcher_refuses_cluster_options() -> None:
    with pytest.raises(InvalidInput, match=r"--nodes 2, --time 30: the local launcher runs on this machine"):
        LocalLauncher(LaunchOptions("local", cluster=ClusterRequest(nodes=2, time="30")))
