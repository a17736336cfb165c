"""Multi-process runs: when jax.distributed is initialised, and a real two-process run on CPU (gloo)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.backends.native.distributed import distributed_arguments
from tests.conftest import REPO


def test_single_process_by_default() -> None:
    assert distributed_arguments({}) is None
    assert distributed_arguments({"SLURM_NTASKS": "1"}) is None


def test_cluster_launchers_are_left_to_jax() -> None:
    assert distributed_arguments({"SLURM_NTASKS": "16"}) == {}
    assert distributed_arguments({"OMPI_COMM_WORLD_SIZE": "2"}) == {}


def test_explicit_settings() -> None:
    environ = {
        "JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234",
        "JAXBENCH_NUM_PROCESSES": "4",
        "JAXBENCH_PROCESS_ID": "3",
    }
    assert distributed_arguments(environ) == {
        "coordinator_address": "10.0.0.1:1234",
        "num_processes": 4,
        "process_id": 3,
    }


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"JAXBENCH_NUM_PROCESSES": "2"}, "needs JAX_COORDINATOR_ADDRESS, JAXBENCH_PROCESS_ID set as well"),
        (
            {"JAX_COORDINATOR_ADDRESS": "h:1", "JAXBENCH_NUM_PROCESSES": "2", "JAXBENCH_PROCESS_ID": "2"},
            r"JAXBENCH_PROCESS_ID=2 must be in \[0, JAXBENCH_NUM_PROCESSES=2\)",
        ),
        ({"SLURM_NTASKS": "many"}, "SLURM_NTASKS='many': expected an integer"),
    ],
)
def test_bad_settings(environ: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        distributed_arguments(environ)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_two_processes_train_one_mesh(tmp_path: Path) -> None:
    base = dict(
        os.environ,
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{free_port()}",
        JAXBENCH_NUM_PROCESSES="2",
    )
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jaxbench",
                "run",
                "gpt3",
                "--steps",
                "7",
                "--out",
                str(tmp_path / str(rank)),
            ],
            cwd=REPO,
            env={**base, "JAXBENCH_PROCESS_ID": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in (0, 1)
    ]
    outputs = [p.communicate(timeout=180) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    assert not (tmp_path / "1").exists()  # only process 0 writes
    [path] = (tmp_path / "0").glob("*.json")
    result = json.loads(path.read_text())
    assert result["status"] == "ok"
    assert result["parallelism"] == {"mesh": {"data": 4, "fsdp": 1, "tensor": 1}, "device_count": 4}
    assert result["provenance"]["devices"]["process_count"] == 2
    assert result["provenance"]["devices"]["local_count"] == 2
    assert "gpt3-tiny" in outputs[0][0] and "gpt3-tiny" not in outputs[1][0]  # one summary table
