"""Every process's step times in a multi-process run's one result: gathered by a collective at
the end of the run (harness/backends/native/distributed.py), summarised per process, and their spread a
metric. tests/harness/test_slurm_cluster.py checks them on a real 2-task SLURM job."""

from __future__ import annotations

import socket

import pytest

from jaxbench.harness.backends.native import distributed
from jaxbench.harness.measure import stats
from jaxbench.harness.provenance import collection, record
from jaxbench.harness.run import runner
from jaxbench.harness.runtime import result


def test_one_process_gathers_its_own_host_and_times() -> None:
    gathered = distributed.gather_step_times([0.5, 0.25, 0.125])
    assert gathered == [(socket.gethostname()[: distributed.HOST_BYTES], [0.5, 0.25, 0.125])]


def timing(index: int, host: str, median: float) -> result.ProcessTiming:
    return result.ProcessTiming(
        process_index=index, host=host, step_time_s=stats.summarize([median * 0.99, median, median * 1.01])
    )


def test_the_spread_of_the_processes_medians_is_a_metric() -> None:
    memory = result.Memory(peak_bytes_per_device=None, compiled_temp_bytes=None, compiled_argument_bytes=None)
    processes = [timing(0, "node-0", 0.100), timing(1, "node-1", 0.125)]
    metrics = {m.name: m for m in runner.headline_metrics(1.0, None, None, memory, None, processes)}
    spread = metrics["perf/process_step_spread"]
    assert spread.value == pytest.approx(0.25) and spread.unit == "fraction"
    alone = runner.headline_metrics(1.0, None, None, memory, None, processes[:1])
    assert "perf/process_step_spread" not in {m.name for m in alone}


def test_the_slurm_job_is_read_from_the_environment_slurm_sets() -> None:
    environ = {
        "SLURM_JOB_ID": "4711",
        "SLURM_JOB_NODELIST": "node-[0-3]",
        "SLURM_JOB_NUM_NODES": "4",
        "SLURM_NTASKS": "32",
        collection.SLURM_VERSION_ENV: "slurm 22.05.8",
    }
    job = collection.read_cluster_job(environ)
    assert job == record.ClusterJob(
        scheduler="slurm", job_id="4711", nodes="node-[0-3]", node_count=4, tasks=32, version="slurm 22.05.8"
    )
    assert collection.read_cluster_job({"SLURM_NTASKS": "2"}) is None  # not inside a job
