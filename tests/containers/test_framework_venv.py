"""A framework's own virtualenv (containers/venv.py): the flavor's wheel pins for this host's accelerator,
through the images' installer, refused before anything is made when a component has no release."""

from __future__ import annotations

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


def test_a_component_without_a_release_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    resolved = resolve(load_manifest(), "t5x", "wheel", accelerator="cpu")
    calls: list[list[str]] = []
    with pytest.raises(InvalidInput, match=r"FLAVOR=t5x: components.t5x has no published release"):
        venv.create(resolved, tmp_path / "v", "python3", run=calls.append)
    assert calls == [] and not (tmp_path / "v").exists()


def test_each_stage_goes_through_the_installer_into_the_venv(tmp_path: Path) -> None:
    resolved = resolve(load_manifest(), "maxtext", "wheel", accelerator="cpu")
    calls: list[list[str]] = []

    def fail_on_the_installer(argv: list[str]) -> None:
        calls.append(argv)
        if argv[1].endswith("install_stage.py"):
            raise OSError("pip could not reach the index")

    target = tmp_path / ".venv-maxtext"
    with pytest.raises(RunFailed, match=r"half-made virtualenv was removed"):
        venv.create(resolved, target, "python3", run=fail_on_the_installer)
    assert not target.exists()  # nothing half-written is left for make to trust
    assert calls[0] == ["python3", "-m", "venv", str(target)]
    installer = calls[2]
    assert installer[installer.index("--python") + 1] == str(target / "bin" / "python")


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
