"""`jaxbench build` and `jaxbench run --image` at their edges: no engine, bad input before any work."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.containers import docker, image_commands
from jaxbench.containers.launch import ImageLauncher
from jaxbench.core.errors import ExitCode, ExternalFailure, InvalidInput
from jaxbench.harness.flags import autotune
from jaxbench.harness.launch import LaunchOptions
from jaxbench.harness.launch.local import LocalLauncher
from jaxbench.harness.runtime.options import RunOptions
from tests.conftest import REPO


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def test_build_without_an_engine_fails_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker, "engine_version", lambda: None)
    built: list[object] = []
    monkeypatch.setattr(docker, "build_stage", lambda *args: built.append(args))
    console, out = _console()
    with pytest.raises(ExternalFailure) as failed:
        image_commands.build_images(image_commands.BuildOptions("cpu", date="2026-11-22"), REPO, console)
    assert failed.value.exit_code == ExitCode.EXTERNAL
    assert "no Docker engine answers" in str(failed.value) and "virtualenv" in str(failed.value)
    assert "\n" not in str(failed.value) and out.getvalue() == "" and built == []


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
        options = image_commands.BuildOptions(flavor, registry=registry, date=date)
        image_commands.build_images(options, REPO, _console()[0])


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


def test_run_in_image_into_a_file_fails_before_docker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An unusable --out stops the image launcher before it asks docker for anything."""

    def engine() -> str:
        raise AssertionError("asked docker before checking --out")

    monkeypatch.setattr(docker, "engine_version", engine)
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    launcher = ImageLauncher(LaunchOptions("image", image="ghcr.io/x/jax:cpu"))
    with pytest.raises(InvalidInput, match=rf"^--out {taken}: expected a folder"):
        launcher.launch(RunOptions("llama2", out_dir=taken), _console()[0])
    assert taken.read_text() == "not a folder"


def test_the_image_launcher_needs_an_image_and_the_local_one_refuses_it() -> None:
    with pytest.raises(InvalidInput, match="--launcher image: give the image to run in with --image"):
        ImageLauncher(LaunchOptions("image"))
    with pytest.raises(InvalidInput, match="--image ghcr.io/x/jax:cpu: the local launcher runs in this"):
        LocalLauncher(LaunchOptions("local", image="ghcr.io/x/jax:cpu"))


def test_a_build_leaves_its_record_for_the_nightly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every stage timed, the final image measured and read: one build record the store accepts, under
    <flavor>-<date>.json; with no record directory nothing is measured."""
    from jaxbench.containers import image_size as sizes
    from jaxbench.containers import measure
    from jaxbench.results.build_record import parse_build_record

    built: list[str] = []
    monkeypatch.setattr(docker, "engine_version", lambda: "20.10")
    monkeypatch.setattr(docker, "has_buildx", lambda: False)
    monkeypatch.setattr(docker, "image_exists", lambda reference: True)
    monkeypatch.setattr(docker, "build_stage", lambda build, *rest: built.append(build.stage))
    monkeypatch.setattr(docker, "image_size", lambda reference: 1_700_000_000)
    monkeypatch.setattr(docker.DockerCli, "image_architecture", lambda self, reference: "amd64")
    report = sizes.build_report(
        "img",
        [sizes.Size("RUN base", 1_000, 400), sizes.Size("COPY … in /opt/", 9_000, 3_600)],
        {
            "jax": {"bytes": 6_000, "compressed_bytes": 2_000},
            "(os)": {"bytes": 4_000, "compressed_bytes": 2_000},
        },
    )
    measured: list[str] = []
    monkeypatch.setattr(measure, "size_report", lambda image: measured.append(image) or report)
    manifest = {
        "components": {"jax": {"repository": "https://github.com/jax-ml/jax.git", "version": "0.12.0"}}
    }
    monkeypatch.setattr(measure, "image_contents", lambda image: (manifest, ["jax==0.12.0", "numpy==2.3.4"]))

    options = image_commands.BuildOptions(
        "cpu", date="2026-11-22", registry="r.local/me", record_dir=tmp_path
    )
    assert image_commands.build_images(options, REPO, _console()[0]) == ExitCode.OK
    assert built == ["base", "jax", "harness"] and measured == ["r.local/me/jax:cpu-2026-11-22"]
    path = tmp_path / "cpu-2026-11-22.json"
    record = parse_build_record(json.loads(path.read_text()), str(path))
    assert [s.stage for s in record.stages] == ["base", "jax", "harness"]
    assert record.size.compressed_bytes == 4_000 and record.size.bytes == 10_000
    assert {g.name: g.compressed_bytes for g in record.groups}["jaxlib"] == 2_000
    assert record.install == "wheel" and record.architecture == "amd64" and record.date == "2026-11-22"
    assert record.components["jax"].version == "0.12.0" and record.packages == {
        "jax": "0.12.0",
        "numpy": "2.3.4",
    }

    measured.clear()
    unrecorded = image_commands.BuildOptions("cpu", date="2026-11-23", registry="r.local/me", record_dir=None)
    assert image_commands.build_images(unrecorded, REPO, _console()[0]) == ExitCode.OK
    assert measured == [] and not (tmp_path / "cpu-2026-11-23.json").exists()


def test_a_gpu_run_in_an_image_shares_the_hosts_autotuning(tmp_path: Path) -> None:
    root = tmp_path / "autotune"
    environ = {"JAXBENCH_AUTOTUNE_CACHE": str(root)}
    assert autotune.shared_root(environ) == root and root.is_dir()
    assert autotune.shared_root({"JAXBENCH_AUTOTUNE_CACHE": "off"}) is None
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert autotune.shared_root({"JAXBENCH_AUTOTUNE_CACHE": str(blocker)}) is None
    argv = docker.run_command("img", ["run", "llama2"], tmp_path, True, {}, root)
    mount = argv.index(f"{root}:/autotune")
    assert argv[mount - 1] == "-v" and argv[mount + 1 : mount + 3] == [
        "-e",
        "JAXBENCH_AUTOTUNE_CACHE=/autotune",
    ]
    assert argv[-3:] == ["img", "run", "llama2"]
    assert not any("/autotune" in item for item in docker.run_command("img", [], tmp_path, False, {}))
