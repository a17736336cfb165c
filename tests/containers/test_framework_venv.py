"""A framework's own virtualenv (containers/venv.py): the flavor's wheel pins for this host's accelerator,
through the images' installer, refused before anything is made when a component has no release."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

import pytest

from jaxbench.containers import venv
from jaxbench.containers.manifest import load_manifest
from jaxbench.containers.resolve import resolve
from jaxbench.core.errors import InvalidInput, RunFailed


def test_a_cpu_host_gets_the_flavors_wheels_without_cuda_or_transformer_engine() -> None:
    resolved = resolve(load_manifest(), "maxtext", "wheel", accelerator="cpu")
    plans = venv.install_plans(resolved)
    assert [p["stage"] for p in plans] == ["jax", "maxtext"]
    jax_stage = plans[0]["components"]
    assert "transformer-engine" not in jax_stage
    assert not any("cuda" in r for r in jax_stage["jax"]["requirements"])
    assert plans[1]["components"]["maxtext"]["requirements"] == ["maxtext==0.2.4"]
    assert plans[0]["accelerator"] == "cpu"


def test_levanter_comes_from_its_pinned_dev_builds_on_its_own_jax() -> None:
    resolved = resolve(load_manifest(), "levanter", "wheel", accelerator="cpu")
    [jax_stage, stage] = venv.install_plans(resolved)
    assert {n: c["requirements"][0] for n, c in stage["components"].items()} == {
        "haliax": "haliax==1.4.dev453",
        "levanter": "levanter==1.2.dev1644",
    }
    assert jax_stage["components"]["jax"]["requirements"] == ["jax==0.7.2", "jaxlib==0.7.2"]


def test_pax_gets_its_stage_alone_in_a_python_of_that_stages_version() -> None:
    """The pax flavor's stage has its own Python (3.10): the virtualenv holds that stage alone (the flavor's
    current jax stage stays the harness's), made of a 3.10 found for it, whatever make passed."""
    resolved = resolve(load_manifest(), "pax", "wheel", accelerator="cpu")
    [stage] = venv.install_plans(resolved)
    assert stage["stage"] == "pax"
    assert {n: c["requirements"] for n, c in stage["components"].items() if c["requirements"]} == {
        "jax-legacy": ["jax==0.4.26", "jaxlib==0.4.26"],
        "praxis": ["praxis==1.4.0"],
        "paxml": ["paxml==1.4.0"],
    }
    assert venv.stage_python(resolved) == "3.10"
    asked: list[str] = []

    def find(version: str) -> str:
        asked.append(version)
        return "/pyenv/versions/3.10.13/bin/python3"

    harness_python = sys.executable  # 3.12 or later
    assert venv.interpreter(resolved, harness_python, find) == "/pyenv/versions/3.10.13/bin/python3"
    assert asked == ["3.10"]
    maxtext = resolve(load_manifest(), "maxtext", "wheel", accelerator="cpu")
    assert venv.stage_python(maxtext) is None
    assert venv.interpreter(maxtext, harness_python, find) == harness_python and asked == ["3.10"]


def test_no_python_of_the_stages_version_is_refused_naming_it() -> None:
    """scripts/find-python looks on PATH and among pyenv's versions; a version nobody has is one message."""
    with pytest.raises(InvalidInput, match=r"no Python 3\.1 was found .*pyenv install 3\.1"):
        venv.find_python("3.1")


def test_a_component_without_a_release_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    resolved = resolve(load_manifest(), "t5x", "wheel", accelerator="cpu")
    calls: list[list[str]] = []
    with pytest.raises(InvalidInput, match=r"FLAVOR=t5x: components.t5x has no published release"):
        venv.create(resolved, tmp_path / "v", "python3", run=calls.append)
    assert calls == [] and not (tmp_path / "v").exists()


def made_by_venv(argv: list[str]) -> None:
    """What `python -m venv DIR` leaves that the next steps write into: DIR (a stand-in runner's part)."""
    if argv[1:3] == ["-m", "venv"]:
        Path(argv[3], "bin").mkdir(parents=True)


def test_each_stage_goes_through_the_installer_into_the_venv(tmp_path: Path) -> None:
    resolved = resolve(load_manifest(), "maxtext", "wheel", accelerator="cpu")
    calls: list[list[str]] = []
    target = tmp_path / ".venv-maxtext"
    pip_config = configparser.ConfigParser()

    def fail_on_the_installer(argv: list[str]) -> None:
        calls.append(argv)
        made_by_venv(argv)
        if argv[1].endswith("install_stage.py"):
            pip_config.read(target / "pip.conf")  # what the venv's pip reads while the stages install
            raise OSError("pip could not reach the index")

    with pytest.raises(RunFailed, match=r"half-made virtualenv was removed"):
        venv.create(resolved, target, "python3", run=fail_on_the_installer)
    assert not target.exists()  # nothing half-written is left for make to trust
    assert calls[0] == ["python3", "-m", "venv", str(target)]
    installer = calls[2]
    assert installer[installer.index("--python") + 1] == str(target / "bin" / "python")
    # pip byte-compiles nothing (maxtext's 27,000 modules); a trainer's imports compile on first use
    assert not pip_config.getboolean("install", "compile")


def test_accelerators_from_make() -> None:
    assert venv.host_accelerator("cpu") == "cpu" and venv.host_accelerator("cuda13") == "cuda"
    with pytest.raises(InvalidInput, match=r"ACCEL=rocm"):
        venv.host_accelerator("rocm")


@pytest.mark.parametrize("kind", ["a folder of the user's", "a link to one", "a file"])
def test_a_dir_that_is_no_virtualenv_is_refused_and_left_as_it_was(tmp_path: Path, kind: str) -> None:
    """`jaxbench venv --dir` replaces a virtualenv; a folder of anything else, named by mistake, was deleted
    (and a link to one failed with a traceback)."""
    resolved = resolve(load_manifest(), "maxtext", "wheel", accelerator="cpu")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    target = {
        "a folder of the user's": mine,
        "a link to one": tmp_path / "link",
        "a file": mine / "notes.txt",
    }[kind]
    if kind == "a link to one":
        target.symlink_to(mine)
    calls: list[list[str]] = []
    with pytest.raises(
        InvalidInput, match=r"^--dir .*: (holds files but no virtualenv|a symbolic link|a file)"
    ):
        venv.create(resolved, target, "python3", run=calls.append)
    assert calls == [] and (mine / "notes.txt").read_text() == "keep"


def test_a_stale_virtualenv_is_replaced(tmp_path: Path) -> None:
    resolved = resolve(load_manifest(), "maxtext", "wheel", accelerator="cpu")
    target = tmp_path / ".venv-maxtext"
    target.mkdir()
    (target / "pyvenv.cfg").write_text("home = /usr\n")
    (target / "stale").write_text("x")
    calls: list[list[str]] = []

    def stop_after_venv(argv: list[str]) -> None:
        calls.append(argv)
        raise OSError("stopped here")

    with pytest.raises(RunFailed):
        venv.create(resolved, target, "python3", run=stop_after_venv)
    assert calls == [["python3", "-m", "venv", str(target)]]


@pytest.mark.parametrize(
    ("flavor", "trainer"),
    [
        ("maxtext", "maxtext.trainers.pre_train.train"),
        ("levanter", "levanter.main.train_lm"),
        ("pax", "paxml.main"),
    ],
)
def test_a_framework_venv_imports_its_trainer_once_writing_byte_code(flavor: str, trainer: str) -> None:
    """pip compiles nothing (pip.conf); the trainer a run starts is imported once instead, with byte-code
    written even where PYTHONDONTWRITEBYTECODE is set, and with the framework's own environment."""
    command = venv.trainer_import(flavor, "/v/bin/python")
    assert command is not None and command[0] == "env" and command[-3:-1] == ["/v/bin/python", "-c"]
    assert command[-1] == f"import sys; sys.dont_write_bytecode = False; import {trainer}"
    assert ("DECOUPLE_GCLOUD=TRUE" in command) == (flavor == "maxtext")


def test_a_flavor_without_a_framework_backend_imports_nothing() -> None:
    assert venv.trainer_import("jax", "python3") is None and venv.trainer_import("t5x", "python3") is None


def test_a_trainer_that_does_not_import_fails_the_venv_naming_it_and_removes_it(tmp_path: Path) -> None:
    """The installs went through (the runner here does them all), then importing the trainer failed: the
    message says so rather than blaming the pins, and no half-made virtualenv is left for make to trust."""
    resolved = resolve(load_manifest(), "maxtext", "wheel", accelerator="cpu")
    target = tmp_path / ".venv-maxtext"
    calls: list[list[str]] = []

    def fail_on_the_import(argv: list[str]) -> None:
        calls.append(argv)
        made_by_venv(argv)
        if argv[0] == "env":
            raise subprocess.CalledProcessError(1, argv)

    with pytest.raises(
        RunFailed, match=r"flavor maxtext: its trainer does not import .*virtualenv was removed"
    ):
        venv.create(resolved, target, "python3", run=fail_on_the_import)
    assert not target.exists()
    assert sum(argv[1].endswith("install_stage.py") for argv in calls) >= 2  # every stage, then the import
    assert calls[-1][-1].endswith("import maxtext.trainers.pre_train.train")
