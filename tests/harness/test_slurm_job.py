"""What a SLURM job of the launcher runs on the cluster (harness/launch/slurm_job.py): the batch script, each
task in the image with the results folder mounted; each rank's wrapper recording its host, then its exit
code, host and time, outliving SIGTERM to record the run's own code; a second SIGTERM while the result is
written doing nothing; the devices a job will find, planned from its request.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/harness/test_slurm_job.py
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.launch import ClusterRequest
from jaxbench.harness.launch.job_result import planned_hint
from jaxbench.harness.launch.slurm_job import RankRecord, read_rank, sbatch_script
from jaxbench.harness.runtime.outcome import Terminated, sigterm_deferred, sigterm_raises


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


def test_the_devices_a_job_will_find_are_planned_from_its_request() -> None:
    no_gpu_here: dict[str, str] = {"PATH": ""}  # no nvidia-smi
    assert planned_hint(ClusterRequest(gpus_per_node=8), no_gpu_here) == DeviceHint("gpu", "unknown")
    assert planned_hint(
        ClusterRequest(gpus_per_node=8), {**no_gpu_here, "JAX_PLATFORMS": "cpu"}
    ) == DeviceHint("cpu", "cpu")
    assert planned_hint(ClusterRequest(tasks_per_node=2), no_gpu_here) == DeviceHint("cpu", "cpu")
