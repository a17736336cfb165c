"""What the k8s launcher (harness/launch/k8s.py) is given: a dry run prints the JobSet's manifest and
submits nothing, options it cannot honour and invalid input are refused before anything is created, and the
local launcher refuses a namespace. The fake API: tests/harness/k8s_fake.py.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/harness/test_k8s_launcher_input.py
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.launch import ClusterRequest, LaunchOptions
from jaxbench.harness.launch.k8s import K8sLauncher
from jaxbench.harness.launch.k8s_api import JobSetState
from jaxbench.harness.runtime.options import RunOptions
from tests.harness.k8s_fake import FakeKubernetes, jaxbench_run, launcher, run_options


def test_a_two_node_dry_run_prints_the_manifest_and_needs_no_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))  # never read for a dry run
    job = launcher(dry_run=True, nodes=2, gpus_per_node=8)
    launched = job.launch(run_options(tmp_path), Console(width=300))
    assert launched.exit_code == ExitCode.OK and launched.results == []
    manifest = yaml.safe_load(capsys.readouterr().out)
    name = manifest["metadata"]["name"]
    assert re.fullmatch(r"jaxbench-llama2-\d{8}-\d{6}", name)
    job_spec = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (job_spec["parallelism"], job_spec["completions"], job_spec["completionMode"]) == (2, 2, "Indexed")
    (container,) = job_spec["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["JAX_COORDINATOR_ADDRESS"] == f"{name}-workers-0-0.{name}:1234"
    assert env["JAXBENCH_NUM_PROCESSES"] == "2"
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert env["JAXBENCH_PROCESS_ID"] == {"fieldRef": {"fieldPath": index}}
    assert container["command"] == [
        "jaxbench", "run", "llama2", "--steps", "20", "--out", "/results", "--no-ingest"
    ]  # fmt: skip
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


@pytest.mark.parametrize(
    ("cluster", "image", "message"),
    [
        ({"tasks_per_node": 2}, "img", "--tasks-per-node 2: the k8s launcher runs one process per pod"),
        (
            {"partition": "gpu", "account": "perf"},
            "img",
            "--partition gpu, --account perf: options of the SLURM launcher; the k8s launcher takes --names",
        ),
        ({"account": "perf"}, "img", "--account perf: an option of the SLURM launcher"),
        ({}, None, "--launcher k8s: give the image each pod runs with --image"),
        ({"time": "1h"}, "img", "--time '1h': expected minutes"),
    ],
)
def test_options_the_k8s_launcher_cannot_honour_are_refused(
    cluster: dict[str, Any], image: str | None, message: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        K8sLauncher(LaunchOptions("k8s", image=image, cluster=ClusterRequest(**cluster), dry_run=True))


def test_the_local_launcher_refuses_a_namespace() -> None:
    from jaxbench.harness.launch.local import LocalLauncher

    with pytest.raises(InvalidInput, match=r"--namespace bench: the local launcher runs on this machine"):
        LocalLauncher(LaunchOptions("local", namespace="bench"))


@pytest.mark.slow
def test_the_command_line_dry_run(tmp_path: Path) -> None:
    flags = ["--launcher", "k8s", "--image", "img:1", "--nodes", "4", "--time", "2-00", "--namespace", "perf"]
    done = jaxbench_run("vit", *flags, "--out", str(tmp_path), "--dry-run")
    assert done.returncode == 0, done.stderr
    manifest = yaml.safe_load(done.stdout)
    assert manifest["metadata"]["namespace"] == "perf"
    job = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["parallelism"] == 4 and job["template"]["spec"]["activeDeadlineSeconds"] == 2 * 86400


def test_invalid_input_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    for dry_run in (False, True):
        api = FakeKubernetes([(JobSetState(ended=True), [])], [])
        job = launcher(api, dry_run=dry_run)
        with pytest.raises(InvalidInput, match=r"--steps 5: .*warmup_steps \(5\) must be smaller than steps"):
            job.launch(RunOptions("llama2", steps=5, out_dir=tmp_path), Console(quiet=True))
        with pytest.raises(InvalidInput, match=r"--set train\.nope=1"):
            job.launch(
                RunOptions("llama2", overrides=("train.nope=1",), out_dir=tmp_path), Console(quiet=True)
            )
        assert api.created == [] and list(tmp_path.iterdir()) == []


def test_a_dry_run_submits_nothing_even_with_a_cluster_at_hand(tmp_path: Path) -> None:
    api = FakeKubernetes([(JobSetState(ended=True), [])], [])
    launched = launcher(api, dry_run=True).launch(run_options(tmp_path), Console(width=300, quiet=True))
    assert launched.exit_code == ExitCode.OK and api.created == []
