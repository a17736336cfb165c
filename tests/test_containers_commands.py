"""`jaxbench build` and `jaxbench run --image` at their edges: no engine, bad input before any work."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from containers import commands, docker
from containers.launch import ImageLauncher
from core.errors import ExitCode, ExternalFailure, InvalidInput
from harness.launch import LaunchOptions
from harness.launch.local import LocalLauncher
from harness.run.options import RunOptions

REPO = Path(__file__).resolve().parent.parent


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def test_build_without_an_engine_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker, "engine_version", lambda: None)
    built: list[object] = []
    monkeypatch.setattr(docker, "build_stage", lambda *args: built.append(args))
    console, out = _console()
    code = commands.build_images(commands.BuildOptions("cpu", date="2026-11-22"), REPO, console)
    assert code == ExitCode.OK
    lines = out.getvalue().strip().splitlines()
    assert len(lines) == 1 and "No Docker engine" in lines[0] and "virtualenv" in lines[0]
    assert built == []


@pytest.mark.parametrize(
    ("flavor", "registry", "date", "expected"),
    [
        ("gpu", "ghcr.io/jaxbench", "2026-11-22", "FLAVOR=gpu"),
        ("cpu", "GHCR.io/Bad Org", "2026-11-22", "registry"),
        ("cpu", "ghcr.io/jaxbench", "2026-13-40", "DATE"),
        ("cpu", "ghcr.io/jaxbench", "22-11-2026", "DATE"),
    ],
)
def test_bad_build_input_fails_before_asking_docker(
    monkeypatch: pytest.MonkeyPatch, flavor: str, registry: str, date: str, expected: str
) -> None:
    def engine() -> str:
        raise AssertionError("asked docker before validating the input")

    monkeypatch.setattr(docker, "engine_version", engine)
    with pytest.raises(InvalidInput, match=expected):
        options = commands.BuildOptions(flavor, registry=registry, date=date)
        commands.build_images(options, REPO, _console()[0])


def test_missing_ca_certificate_is_named(tmp_path: Path) -> None:
    with (
        pytest.raises(InvalidInput, match="absent.crt"),
        docker.serve_ca_certificates([tmp_path / "absent.crt"]),
    ):
        pass


def test_run_in_image_without_an_engine_is_an_external_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(docker, "engine_version", lambda: None)
    launcher = ImageLauncher(LaunchOptions("image", image="ghcr.io/x/jax:cpu"))
    with pytest.raises(ExternalFailure, match="IMAGE=ghcr.io/x/jax:cpu"):
        launcher.launch(RunOptions("llama2", out_dir=tmp_path), _console()[0])
    assert not any(tmp_path.iterdir())


def test_the_image_launcher_needs_an_image_and_the_local_one_refuses_it() -> None:
    with pytest.raises(InvalidInput, match="--launcher image: give the image to run in with --image"):
        ImageLauncher(LaunchOptions("image"))
    with pytest.raises(InvalidInput, match="--image ghcr.io/x/jax:cpu: the local launcher runs in this"):
        LocalLauncher(LaunchOptions("local", image="ghcr.io/x/jax:cpu"))
