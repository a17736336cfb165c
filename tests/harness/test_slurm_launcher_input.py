"""What the SLURM launcher (harness/launch/slurm.py) is given: a dry run prints the batch script and submits
nothing, invalid input and options are refused before anything is submitted or written, a Kubernetes
namespace is refused (from the command line too: exit 1, nothing written), and the local launcher refuses
cluster options. SLURM's commands are played by tests/harness/slurm_fake.py.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/harness/test_slurm_launcher_input.py
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.launch import ClusterRequest, LaunchOptions
from jaxbench.harness.launch.local import LocalLauncher
from jaxbench.harness.launch.slurm import SlurmLauncher
from jaxbench.harness.runtime.options import RunOptions
from tests.conftest import REPO
from tests.harness.slurm_fake import FakeSlurm, launcher, run_options


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


def test_invalid_input_is_refused_before_anything_is_submitted(tmp_path: Path) -> None:
    fake = FakeSlurm(["COMPLETED"], {})
    with pytest.raises(InvalidInput, match=r"--steps 5: .*warmup_steps \(5\) must be smaller than steps"):
        launcher(fake).launch(RunOptions("llama2", steps=5, out_dir=tmp_path), Console())
    assert fake.submitted == [] and not list(tmp_path.glob("slurm-*"))


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
