"""The Makefile is thin: it sets up and passes the run's options through (ARGS) to the jaxbench command, asks
the command which backends are frameworks, and leaves every check of the options to the command itself
(an overlay with an image or a framework is refused by `jaxbench run`, in one line).

    JAX_PLATFORMS=cpu python -m pytest -q tests/repository/test_makefile.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.commands import refuse_overlay_elsewhere
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A stand-in for .venv whose `jaxbench` is this checkout's, its installation taken as done."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "jaxbench").write_text(f'#!/bin/sh\ncd {REPO} && exec {sys.executable} -m jaxbench "$@"\n')
    (bin_dir / "jaxbench").chmod(0o755)
    (tmp_path / "venv" / ".installed-cpu").touch()
    return tmp_path / "venv"


def make(venv: Path, *args: str, dry_run: bool = True) -> subprocess.CompletedProcess[str]:
    stamp = f"{venv}/.installed-cpu"
    argv = ["make", "--no-print-directory", "-C", str(REPO), f"VENV={venv}", "ACCEL=cpu", "-o", stamp]
    return subprocess.run(
        [*argv, *(["-n"] if dry_run else []), *args], capture_output=True, text=True, timeout=120
    )


def commands(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The commands make would run, one a line (continued lines joined), spaces collapsed."""
    assert done.returncode == 0, done.stderr
    joined = done.stdout.replace("\\\n", " ")
    return [" ".join(line.split()) for line in joined.splitlines() if line.strip()]


def test_at_most_150_lines() -> None:
    assert len((REPO / "Makefile").read_text().splitlines()) <= 150


def test_bench_passes_its_shortcuts_and_args_through(venv: Path) -> None:
    done = make(
        venv,
        "bench",
        "MODEL=gpt3",
        "SIZE=tiny",
        "SET=train.seed=1 train.steps=6",
        "ARGS=--no-ingest --nightly",
    )
    assert commands(done) == [
        f"{venv}/bin/jaxbench run gpt3 --size tiny --set train.seed=1 --set train.steps=6 --out runs "
        "--no-ingest --nightly"
    ]
    cluster = make(venv, "bench", "IMAGE=img", "ARGS=--launcher slurm --nodes 2 --dry-run")
    assert commands(cluster) == [
        f"{venv}/bin/jaxbench run llama2 --image img --out runs --launcher slurm --nodes 2 --dry-run"
    ]


@pytest.mark.slow
def test_a_framework_gets_its_virtualenv_made_on_first_use(venv: Path) -> None:
    """Which backends are frameworks, make asks `jaxbench backends --frameworks`; inside an image none."""
    assert (
        commands(make(venv, "bench", "BACKEND=maxtext"))[0]
        == "make --no-print-directory .venv-maxtext/.installed-cpu"
    )
    assert commands(make(venv, "bench", "BACKEND=native"))[0].startswith(f"{venv}/bin/jaxbench run")
    assert commands(make(venv, "bench", "BACKEND=maxtext", "IMAGE=img"))[0].startswith(
        f"{venv}/bin/jaxbench run"
    )
    assert commands(make(venv, "venv", "FLAVOR=levanter")) == [
        "make --no-print-directory .venv-levanter/.installed-cpu"
    ]
    smoke = commands(make(venv, "smoke", "OUT=/tmp/o"))
    venvs = (
        "make --no-print-directory .venv-maxtext/.installed-cpu .venv-levanter/.installed-cpu"
        " .venv-pax/.installed-cpu"
    )
    assert [smoke[0], smoke[-1]] == [venvs, f"{venv}/bin/jaxbench smoke --out /tmp/o/smoke"]
    in_image = make(venv, "smoke", "IMAGE=img", "SMOKE_BACKENDS=native maxtext")
    assert commands(in_image) == [
        f"{venv}/bin/jaxbench smoke --out runs/smoke --image img --backends native maxtext"
    ]


def _overlay(folder: Path) -> Path:
    (folder / "site").mkdir(parents=True)
    (folder / "manifest.yaml").write_text("kind: virtualenv-overlay\ncomponents: {}\n")
    return folder


def test_an_overlay_with_an_image_is_refused_by_the_command_in_one_line(venv: Path, tmp_path: Path) -> None:
    overlay = _overlay(tmp_path / "overlay")
    done = make(
        venv, "bench", f"OVERLAY={overlay}", "IMAGE=ghcr.io/me/jax:cpu", f"OUT={tmp_path}/runs", dry_run=False
    )
    assert done.returncode != 0
    refusal = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert refusal == [
        f"error: JAXBENCH_MANIFEST={overlay}/manifest.yaml is an overlay of this virtualenv: it runs with "
        "--backend native and no --image, got --backend native --image ghcr.io/me/jax:cpu"
    ]
    assert not (tmp_path / "runs").exists()


def test_an_overlay_runs_natively_in_this_environment_only(tmp_path: Path) -> None:
    overlay = {"JAXBENCH_MANIFEST": str(_overlay(tmp_path / "overlay") / "manifest.yaml")}
    refuse_overlay_elsewhere("native", None, overlay)
    with pytest.raises(InvalidInput, match="got --backend maxtext$"):
        refuse_overlay_elsewhere("maxtext", None, overlay)
    # An image's own manifest is no overlay: a framework runs inside its image with it.
    (tmp_path / "image.yaml").write_text("components: {}\n")
    refuse_overlay_elsewhere("maxtext", None, {"JAXBENCH_MANIFEST": str(tmp_path / "image.yaml")})
