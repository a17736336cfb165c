"""One preflight for every launcher (harness/run/inputs.py: check_run, called by harness/commands.py:
run_recipe): the local, image, SLURM and k8s launchers refuse the same invalid input, in a dry run too,
before they start anything, and write nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from jaxbench import main as cli
from jaxbench.containers import docker
from jaxbench.containers.launch import ImageLauncher
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.launch import ClusterRequest, LaunchOptions, Processes
from jaxbench.harness.launch.k8s import K8sLauncher
from jaxbench.harness.launch.local import LocalLauncher
from jaxbench.harness.launch.slurm import SlurmLauncher
from jaxbench.harness.run.inputs import check_run
from jaxbench.harness.runtime.options import RunOptions
from jaxbench.wiring import LAUNCHERS

WHERE = {
    "local": [],
    "image": ["--image", "ghcr.io/jaxbench/jax:cpu"],
    "slurm": ["--dry-run"],
    "k8s": ["--image", "ghcr.io/jaxbench/jax:cuda", "--dry-run"],
}
"""How each launcher is asked for on the command line; the cluster ones in a dry run, which needs no
cluster."""
CLASSES = {"local": LocalLauncher, "image": ImageLauncher, "slurm": SlurmLauncher, "k8s": K8sLauncher}

REFUSED = [
    (["--set", "xla_flags=bogus"], "no XLA flag profile 'bogus'"),
    (["--set", "flag_overrides.env={A: 1}"], "flag_overrides.env.A: Input should be a valid string"),
    (["--set", "train.nope=1"], "--set train.nope=1: train.nope: no such setting"),
    (["--profile", "2", "--backend", "maxtext"], "--profile: the maxtext backend trains in its framework"),
]


def test_every_launcher_of_the_command_is_covered() -> None:
    assert set(WHERE) == set(LAUNCHERS) == set(CLASSES)


@pytest.mark.parametrize("launcher", sorted(WHERE))
@pytest.mark.parametrize(("argv", "expected"), REFUSED, ids=[a[1] for a, _ in REFUSED])
def test_each_launcher_refuses_invalid_input_before_it_starts_anything(
    launcher: str,
    argv: list[str],
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--set xla_flags=bogus` passed `--launcher slurm --dry-run` and `--launcher k8s --dry-run`, and the
    image launcher checked nothing before it asked Docker: only the local launcher refused it."""

    def started(self: object, run: RunOptions, console: Console) -> Any:
        raise AssertionError(f"the {launcher} launcher started")

    monkeypatch.setattr(CLASSES[launcher], "launch", started)
    monkeypatch.setattr(docker, "require_engine", lambda what: pytest.fail("asked Docker"))
    out = tmp_path / "out"
    argv = ["run", "llama2", *argv, "--launcher", launcher, *WHERE[launcher], "--out", str(out)]
    assert cli.main([*argv, "--no-ingest"]) == ExitCode.INVALID_INPUT
    captured = capsys.readouterr()
    assert expected in captured.err and captured.out == ""
    assert not out.exists()


@pytest.mark.parametrize("launcher", ["slurm", "k8s"])
def test_a_cluster_dry_run_of_bogus_flags_prints_no_job(
    launcher: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same, end to end: no script or manifest printed, exit 1, no folder."""
    argv = ["run", "vit", "--set", "xla_flags=bogus", "--launcher", launcher, *WHERE[launcher]]
    assert cli.main([*argv, "--out", str(tmp_path / "o"), "--no-ingest"]) == ExitCode.INVALID_INPUT
    captured = capsys.readouterr()
    assert "no XLA flag profile 'bogus'" in captured.err and captured.out == ""
    assert list(tmp_path.iterdir()) == []


def test_an_out_folder_that_cannot_be_made_is_refused_first_and_nothing_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    for launcher in sorted(WHERE):
        argv = ["run", "llama2", "--launcher", launcher, *WHERE[launcher], "--out", str(tmp_path / "file/x")]
        assert cli.main([*argv, "--no-ingest"]) == ExitCode.INVALID_INPUT, launcher
        assert "expected a folder that can be created and written in" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file"]


def test_the_inputs_are_checked_for_the_devices_the_processes_will_find(tmp_path: Path) -> None:
    """The default size and the flag profile follow the devices where the processes run: a job that asks
    for GPUs resolves the recipe's GPU size, and its flags for an unknown GPU."""
    run = RunOptions("llama2", out_dir=tmp_path)
    slurm = SlurmLauncher(LaunchOptions("slurm", cluster=ClusterRequest(gpus_per_node=8), dry_run=True))
    processes = slurm.processes({"PATH": "/usr/bin"})
    assert processes.hint.platform == "gpu"
    inputs = check_run(run, processes.hint, processes.environ)
    assert inputs.recipe.size == "1b" and inputs.flags.profile == "base"
    k8s = K8sLauncher(LaunchOptions("k8s", image="img", dry_run=True))
    assert k8s.processes({"XLA_FLAGS": "--xla_bogus"}) == Processes(DeviceHint("cpu", "cpu"), {})
    with pytest.raises(InvalidInput, match="your XLA_FLAGS: 'x' is not a flag"):  # it reaches a SLURM job
        check_run(run, DeviceHint("cpu", "cpu"), {"XLA_FLAGS": "x"})
