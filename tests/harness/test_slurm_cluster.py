"""The single-node SLURM cluster that scripts/start-slurm brings up (the SLURM launcher runs on it): a batch
job runs, and `srun -n 2` starts two processes that find each other through SLURM's environment alone
(harness/backends/native/distributed.py) and exchange data over gloo, as a 2-task tiny run will. Then the
launcher's runs: a 2-task run that trains like one process, Ctrl-C (scancel), a rank that crashes and a job
over its time limit, each of which ends as one result naming what happened.

Needs SLURM_CONF to name a running cluster (`export SLURM_CONF=$(scripts/start-slurm DIR)`); skipped
without one, except under JAXBENCH_REQUIRE_SLURM=1 (.ci/run), where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slurm

REQUIRE_ENV = "JAXBENCH_REQUIRE_SLURM"


def one_cpu_device_per_process() -> dict[str, str]:
    """The tasks' environment: the CPU, one device per process (not the test session's 8 fake devices)."""
    return {**{k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}, "JAX_PLATFORMS": "cpu"}


def _unavailable() -> str | None:
    conf = os.environ.get("SLURM_CONF")
    if not conf or not Path(conf).is_file():
        return "SLURM_CONF names no slurm.conf (export SLURM_CONF=$(scripts/start-slurm DIR))"
    try:
        done = subprocess.run(
            ["sinfo", "--noheader", "--format=%T"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"sinfo did not answer: {error}"
    if done.returncode != 0 or not {"idle", "mixed", "allocated"} & set(done.stdout.split()):
        return f"the cluster of {conf} has no node ready: {(done.stdout + done.stderr).strip()}"
    older = _jobs_from_before_this_session()
    if older:
        # They would hold the node and leave every test below waiting out its timeout.
        return (
            f"the cluster of {conf} holds jobs from before this test session ({', '.join(older)}): "
            "scancel them, or restart it (scripts/start-slurm --stop DIR, then start it again)"
        )
    return None


SESSION_STARTED = datetime.now()


def _jobs_from_before_this_session() -> list[str]:
    """Jobs submitted before this module was imported, as 'ID STATE': none on a cluster only the tests use."""
    done = subprocess.run(
        ["squeue", "--noheader", "--format=%i %T %V"], capture_output=True, text=True, timeout=10
    )
    return [
        f"{job} {state}"
        for job, state, submitted in (line.split() for line in done.stdout.splitlines() if line.strip())
        if datetime.fromisoformat(submitted) < SESSION_STARTED - timedelta(seconds=5)
    ]


@pytest.fixture(scope="module")
def slurm() -> None:
    reason = _unavailable()
    if reason is None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
    pytest.skip(reason)


def test_a_batch_job_runs_and_writes_its_output(slurm: None, tmp_path: Path) -> None:
    out = tmp_path / "job-%j.out"
    done = subprocess.run(
        ["sbatch", "--wait", f"--output={out}", "--wrap", "echo ran on $(hostname) as $SLURM_JOB_ID"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    job = re.search(r"Submitted batch job (\d+)", done.stdout)
    assert job, done.stdout
    written = (tmp_path / f"job-{job.group(1)}.out").read_text()
    assert written.startswith("ran on ") and written.strip().endswith(f"as {job.group(1)}")


def test_two_tasks_find_each_other_from_slurms_environment(slurm: None) -> None:
    program = (
        "import os, jax, jax.numpy as jnp\n"
        "from jax.experimental import multihost_utils\n"
        "from jaxbench.harness.backends.native import distributed\n"
        "distributed.initialize(os.environ)\n"
        "ranks = multihost_utils.process_allgather(jnp.array([jax.process_index()]))\n"
        "print('rank', jax.process_index(), 'of', jax.process_count(), 'saw', ranks.ravel().tolist())\n"
    )
    done = subprocess.run(
        ["srun", "--ntasks=2", "--time=5", f"--chdir={REPO}", sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=240,
        env=one_cpu_device_per_process(),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("rank "))
    assert lines == ["rank 0 of 2 saw [0, 1]", "rank 1 of 2 saw [0, 1]"], done.stdout


def _result(folder: Path) -> dict[str, Any]:
    (path,) = folder.glob("*.json")
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def test_a_two_task_run_trains_like_one_process(slurm: None, tmp_path: Path) -> None:
    """The tiny shape sharded across 2 processes (gloo) gives the single-process loss curve."""
    common = ["-m", "jaxbench", "run", "llama2", "--steps", "12", "--no-ingest"]
    env = one_cpu_device_per_process()
    two = subprocess.run(
        [
            sys.executable,
            *common,
            "--out",
            str(tmp_path / "two"),
            "--launcher",
            "slurm",
            "--tasks-per-node",
            "2",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert two.returncode == 0, two.stdout[-3000:] + two.stderr[-2000:]
    assert re.search(r"job \d+ completed on", two.stdout), two.stdout[-2000:]
    one = subprocess.run(
        [sys.executable, *common, "--out", str(tmp_path / "one")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert one.returncode == 0, one.stderr[-2000:]
    sharded, single = _result(tmp_path / "two"), _result(tmp_path / "one")
    assert sharded["parallelism"]["mesh"]["data"] == 2 and single["parallelism"]["mesh"]["data"] == 1
    assert sharded["parallelism"]["device_count"] == 2
    losses = [(a, b) for a, b in zip(sharded["loss"]["per_step"], single["loss"]["per_step"], strict=True)]
    assert len(losses) == 12
    for a, b in losses:
        assert a == pytest.approx(b, rel=1e-5)
    # Process 0's one result holds both processes' own step times, and their spread as a metric.
    processes = sharded["timing"]["processes"]
    assert [p["process_index"] for p in processes] == [0, 1] and all(p["host"] for p in processes)
    assert all(p["step_time_s"]["count"] == 12 - sharded["timing"]["warmup_steps"] for p in processes)
    assert "perf/process_step_spread" in {m["name"] for m in sharded["metrics"]}
    assert single["timing"]["processes"] == [] and single["provenance"]["job"] is None
    job_record = sharded["provenance"]["job"]
    assert job_record["scheduler"] == "slurm" and job_record["tasks"] == 2 and job_record["node_count"] == 1
    assert re.match(r"slurm\S* \d+\.\d+", job_record["version"]) and re.search(
        f"job {job_record['job_id']} completed", two.stdout
    )
    (job,) = (tmp_path / "two").glob("slurm-llama2-*")
    assert {p.name for p in job.iterdir()} >= {"job.sbatch", "rank-0.log", "rank-1.log", "rank-0.exit"}


def test_an_interrupt_cancels_the_job_and_rank_0_writes_an_interrupted_result(
    slurm: None, tmp_path: Path
) -> None:
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "jaxbench", "run", "llama2", "--steps", "100000", "--no-ingest"),
            *("--out", str(tmp_path), "--launcher", "slurm", "--tasks-per-node", "2"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=one_cpu_device_per_process(),
    )
    assert process.stdout is not None
    seen: list[str] = []
    try:
        for line in process.stdout:  # rank 0's log, streamed: its compilation has ended
            seen.append(line)
            if line.startswith("compiled in"):
                break
        threading.Thread(target=lambda: seen.extend(process.stdout or []), daemon=True).start()
        time.sleep(2.0)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        process.kill()
        # A job the launcher could not cancel must not hold the cluster's CPUs for later tests.
        for job in re.findall(r"submitted job (\d+)", "".join(seen)):
            subprocess.run(["scancel", job], capture_output=True, timeout=30, check=False)
    output = "".join(seen)
    assert process.returncode == 130, output[-3000:]
    assert re.search(r"cancelling job (\d+) \(scancel\)", output), output[-3000:]
    result = _result(tmp_path)
    assert result["status"] == "interrupted"
    assert result["reason"] == "interrupted by SIGTERM during train"
    assert len(result["loss"]["per_step"]) > 0


CRASH_ENV = "JAXBENCH_TEST_CRASH_RANK"
CRASH_HOOK = f"""# Python imports this at startup (its folder first on PYTHONPATH): the rank {CRASH_ENV}
# names dies at its fourth step, as a crash does: no exception, no result, exit code 42. A rank that does
# not report (every one but 0) tells its SilentReporter of each step.
import os

if os.environ.get("{CRASH_ENV}") is not None and os.environ.get("SLURM_PROCID") == os.environ["{CRASH_ENV}"]:
    from jaxbench.harness.runtime import reporter

    def step_done(self, step, seconds, loss):
        if step == 3:
            os._exit(42)

    reporter.SilentReporter.step_done = step_done
"""


def test_a_rank_that_crashes_is_a_failed_result_in_the_store_naming_it(slurm: None, tmp_path: Path) -> None:
    """Rank 1 dies mid-run; srun then stops rank 0. However rank 0 ends (killed before it could write, or
    writing a failure of its own), the one result, in --out and in the store, is a failure naming rank 1."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(CRASH_HOOK)
    store = tmp_path / "store.sqlite"
    env = {
        **one_cpu_device_per_process(),
        "PYTHONPATH": os.pathsep.join([str(hook), str(REPO)]),
        CRASH_ENV: "1",
        "JAXBENCH_DB": f"sqlite:///{store}",
    }
    done = subprocess.run(
        [
            *(sys.executable, "-m", "jaxbench", "run", "llama2", "--steps", "30"),
            *("--out", str(tmp_path / "runs"), "--launcher", "slurm", "--tasks-per-node", "2"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 3, output[-3000:]
    job = re.search(r"submitted job (\d+)", output)
    assert job, output[-3000:]
    result = _result(tmp_path / "runs")
    assert result["status"] == "failed"
    reason, host = result["reason"], socket.gethostname()
    assert reason.startswith(f"SLURM job {job.group(1)}: a rank failed (SLURM: FAILED, NonZeroExitCode): "), (
        reason
    )
    # Rank 1 named first, with its host and exit code; rank 0, which srun stopped, after it.
    assert re.search(
        f"\\): rank 1 on {re.escape(host)} exited (first, )?with 42; rank 0 on {re.escape(host)} ", reason
    )
    assert result["provenance"]["job"]["job_id"] == job.group(1) and result["provenance"]["job"]["tasks"] == 2
    with closing(sqlite3.connect(store)) as connection:
        stored = connection.execute("SELECT status, reason, hosts, run_uid FROM runs").fetchall()
    assert stored == [("failed", reason, 2, result["run_id"])]


def test_a_job_over_its_time_limit_is_a_failed_result_saying_so(slurm: None, tmp_path: Path) -> None:
    """--time 1 (SLURM's least: one minute; slurmctld checks limits every 30 s, so it ends 60 to 90 s after
    it started): SLURM's SIGTERM makes rank 0 write an interrupted result, which the launcher makes a
    failure of the job, naming the time limit."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "jaxbench", "run", "llama2", "--steps", "1000000", "--no-ingest"),
            *("--out", str(tmp_path), "--launcher", "slurm", "--time", "1"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=one_cpu_device_per_process(),
    )
    output = done.stdout + done.stderr
    assert done.returncode == 3, output[-3000:]
    job = re.search(r"submitted job (\d+)", output)
    assert job, output[-3000:]
    result = _result(tmp_path)
    assert result["status"] == "failed"
    reason = re.escape(
        f"SLURM job {job.group(1)}: the job exceeded its time limit (SLURM: TIMEOUT, TimeLimit): rank 0 on "
        f"{socket.gethostname()} exited with 130 (interrupted by SIGINT or SIGTERM); "
        "process 0: interrupted by SIGTERM during "
    )
    # During training, unless this machine is so loaded that compiling took the whole minute.
    phase = re.fullmatch(f"{reason}(train|compile)", result["reason"])
    assert phase, result["reason"]
    if phase.group(1) == "train":  # what rank 0 measured until SLURM stopped it stays
        assert len(result["loss"]["per_step"]) > 0
    assert result["provenance"]["job"]["job_id"] == job.group(1)
