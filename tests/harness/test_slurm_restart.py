"""scripts/start-slurm after its daemons died (a machine that restarted with its /tmp kept): the controller it
starts again must not bring back the jobs of the one before, whose processes died with it. Recovered as
running, such a job held the node for half an hour and every job after it waited (a CI failure).

A second cluster on its own port and state folder, beside the one the other SLURM tests use; needs SLURM's
daemons (scripts/start-slurm installs them) and munge, so it runs where that cluster runs.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.harness.test_slurm_cluster import slurm  # noqa: F401  (the fixture: a cluster runs here)

pytestmark = pytest.mark.slurm

PORT = 6851
START = str(REPO / "scripts" / "start-slurm")


@pytest.fixture
def cluster() -> Iterator[tuple[Path, dict[str, str]]]:
    # A short path: slurmd's sockets live in its spool folder, and a Unix socket's path is at most 108 bytes.
    state = Path(tempfile.mkdtemp(prefix="jb-slurm-", dir="/tmp"))
    try:
        conf = subprocess.run(
            [START, str(state), str(PORT)], capture_output=True, text=True, timeout=180, check=True
        ).stdout.strip()
        yield state, {**os.environ, "SLURM_CONF": conf}
    finally:
        subprocess.run([START, "--stop", str(state), str(PORT)], capture_output=True, timeout=60)
        shutil.rmtree(state, ignore_errors=True)


def _squeue(env: dict[str, str]) -> str:
    return subprocess.run(
        ["squeue", "--noheader", "--format=%i %T"], capture_output=True, text=True, timeout=10, env=env
    ).stdout.strip()


def test_a_restarted_cluster_forgets_the_jobs_that_died_with_its_daemons(
    slurm: None,  # noqa: F811
    cluster: tuple[Path, dict[str, str]],
) -> None:
    state, env = cluster
    pid_file = state / "job.pid"
    # A job holding every CPU of the node, as a 2-task run does.
    subprocess.run(
        ["sbatch", "--exclusive", f"--chdir={state}", "--wrap", f"echo $$ > {pid_file}; exec sleep 600"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=True,
    )
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and "RUNNING" in _squeue(env)):
        assert time.monotonic() < deadline, f"the job never ran: {_squeue(env)!r}"
        time.sleep(1)

    # The machine goes down: the daemons stop, and the job's processes die with them.
    subprocess.run([START, "--stop", str(state), str(PORT)], capture_output=True, timeout=60, check=True)
    job_pid = int(pid_file.read_text())
    stepd_pid = int(Path(f"/proc/{job_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    for pid in (job_pid, stepd_pid):
        os.kill(pid, signal.SIGKILL)

    subprocess.run([START, str(state), str(PORT)], capture_output=True, timeout=180, check=True)
    assert _squeue(env) == ""
    # The node is free at once: a job that needs all of it runs and ends.
    done = subprocess.run(
        ["sbatch", "--exclusive", "--wait", f"--chdir={state}", "--wrap", "true"],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
    )
    assert done.returncode == 0, done.stderr
