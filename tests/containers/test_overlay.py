"""Overlays (containers/overlay.py): the virtualenv with a pure-Python component installed at another commit
from its git repository, for real with pip, from a tiny local repository of two commits.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_overlay.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from jaxbench.containers.overlay import Overlay, Pin, create_overlay
from jaxbench.core.errors import InvalidInput, RunFailed
from jaxbench.harness.provenance.collection import read_image_info
from jaxbench.main import main
from tests.conftest import REPO

IDENTITY = ("-c", "user.name=test", "-c", "user.email=test@localhost", "-c", "commit.gpgsign=false")
BASE = {
    "schema_version": 1,
    "kind": "virtualenv",
    "flavor": "cpu",
    "components": {
        "jax": {"repository": "https://github.com/jax-ml/jax.git", "commit": "a" * 40, "stage": "virtualenv"},
        "tinypkg": {"repository": "https://example.org/tinypkg.git", "commit": "b" * 40, "version": "0.1"},
    },
}
PACKAGES = ["jax==0.12.0", "tinypkg==0.1"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit_version(repo: Path, version: str) -> str:
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=69"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "tinypkg"\nversion = "{version}"\n\n'
        '[tool.setuptools.packages.find]\ninclude = ["tinypkg*"]\n'
    )
    (repo / "tinypkg").mkdir(exist_ok=True)
    (repo / "tinypkg" / "__init__.py").write_text(f"VALUE = {version!r}\n")
    git(repo, "add", "-A")
    git(repo, *IDENTITY, "commit", "--quiet", "-m", f"tinypkg {version}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A repository of a tiny pure-Python package: version 1.0, then 2.0."""
    repo = tmp_path_factory.mktemp("upstream") / "tinypkg"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    return repo, commit_version(repo, "1.0"), commit_version(repo, "2.0")


def no_pip(argv: list[str]) -> None:
    raise AssertionError(f"pip ran: {argv}")


def imported(overlay: Overlay) -> tuple[str, str, str]:
    """Version, code and file of tinypkg as a process inside the overlay imports it."""
    code = "import importlib.metadata as m, tinypkg as t; print(m.version('tinypkg'), t.VALUE, t.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=os.environ | overlay.environ(),
        check=True,
        capture_output=True,
        text=True,
    )
    version, value, file = done.stdout.split()
    return version, value, file


@pytest.mark.slow
def test_overlays_at_two_commits_import_each_commit_and_record_it(
    upstream: tuple[Path, str, str], tmp_path: Path
) -> None:
    repo, first, second = upstream
    for version, commit in (("1.0", first), ("2.0", second)):
        out = tmp_path / f"overlay-{version}"
        overlay = create_overlay(
            {"tinypkg": Pin(str(repo), commit)}, out, base_manifest=BASE, base_packages=PACKAGES
        )
        assert overlay.path == out and not overlay.reused
        assert imported(overlay) == (version, version, str(out / "site" / "tinypkg" / "__init__.py"))

        # The harness reads the overlay's manifest into results: the overlaid entry replaced, the rest kept.
        info = read_image_info(overlay.environ())
        assert info.manifest is not None
        assert info.manifest["kind"] == "virtualenv-overlay" and info.manifest["flavor"] == "cpu"
        assert list(info.manifest["components"]) == ["jax", "tinypkg"]
        assert info.manifest["components"]["jax"] == BASE["components"]["jax"]
        assert info.manifest["components"]["tinypkg"] == {
            "repository": str(repo),
            "ref": None,
            "commit": commit,
            "version": version,
            "install": "source",
            "release_tag": None,
            "patches": [],
            "stage": "overlay",
        }
        assert info.packages == ["jax==0.12.0", f"tinypkg=={version}"]
        # Nothing half-made is left beside it.
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.slow
def test_same_pins_reuse_the_overlay_without_pip(upstream: tuple[Path, str, str], tmp_path: Path) -> None:
    repo, first, second = upstream
    out = tmp_path / "overlay"
    made = create_overlay({"tinypkg": Pin(str(repo), first)}, out, base_manifest=None)
    # The same repository as a file:// URL is the same pin.
    again = create_overlay({"tinypkg": Pin(repo.as_uri(), first)}, out, base_manifest=None, run=no_pip)
    assert again.reused and again.path == made.path
    assert imported(again)[0] == "1.0"
    manifest = yaml.safe_load((out / "manifest.yaml").read_text())
    assert list(manifest["components"]) == ["tinypkg"] and manifest["kind"] == "virtualenv-overlay"

    # Other pins replace it whole.
    moved = create_overlay({"tinypkg": Pin(str(repo), second)}, out, base_manifest=None)
    assert not moved.reused and imported(moved)[0] == "2.0"
    assert json.loads((out / "pins.json").read_text())["pins"]["tinypkg"]["commit"] == second


@pytest.mark.parametrize(
    ("repository", "commit", "field"),
    [
        ("", "c" * 40, "components.tinypkg.repository"),
        ("/no/such/repository", "c" * 40, "components.tinypkg.repository"),
        ("file:///no/such/repository", "c" * 40, "components.tinypkg.repository"),
        ("--upload-pack=touch /tmp/x", "c" * 40, "components.tinypkg.repository"),
        ("UPSTREAM", "", "components.tinypkg.commit"),
        ("UPSTREAM", "main", "components.tinypkg.commit"),
        ("UPSTREAM", "c" * 12, "components.tinypkg.commit"),
    ],
)
def test_bad_pins_are_refused_before_pip(
    upstream: tuple[Path, str, str], tmp_path: Path, repository: str, commit: str, field: str
) -> None:
    repository = repository.replace("UPSTREAM", str(upstream[0]))
    out = tmp_path / "overlay"
    with pytest.raises(InvalidInput, match=field):
        create_overlay({"tinypkg": Pin(repository, commit)}, out, base_manifest=BASE, run=no_pip)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_is_not_an_overlay_is_never_replaced(
    upstream: tuple[Path, str, str], tmp_path: Path
) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(InvalidInput, match="is not an overlay"):
        create_overlay({"tinypkg": Pin(str(upstream[0]), upstream[1])}, out, base_manifest=None, run=no_pip)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_a_pip_failure_leaves_no_overlay(upstream: tuple[Path, str, str], tmp_path: Path) -> None:
    out = tmp_path / "overlay"
    missing_commit = "0" * 40
    with pytest.raises(RunFailed, match="exited with status"):
        create_overlay({"tinypkg": Pin(str(upstream[0]), missing_commit)}, out, base_manifest=BASE)
    assert list(tmp_path.iterdir()) == []


def test_the_overlay_command_takes_the_pins_from_a_manifest(
    upstream: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, _, second = upstream
    manifest = yaml.safe_load((REPO / "containers" / "manifest.yaml").read_text())
    manifest["components"]["optax"] |= {"repository": str(repo), "commit": second}
    (tmp_path / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    out = tmp_path / "overlay"

    argv = [
        "overlay",
        "--manifest",
        str(tmp_path / "manifest.yaml"),
        "--components",
        "optax",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == str(out)
    written = yaml.safe_load((out / "manifest.yaml").read_text())
    assert written["components"]["optax"]["commit"] == second
    assert written["components"]["optax"]["version"] == "2.0"  # the distribution pip installed

    assert main([*argv[:-3], "optax,no-such-component", "--out", str(out)]) == 1
    assert "components.no-such-component: no such component" in capsys.readouterr().err


def test_the_optax_stand_in_edits_apply_to_the_installed_optax(tmp_path: Path) -> None:
    """scripts/standin-optax patches the installed optax's text: its anchors must still be there."""
    script = [sys.executable, str(REPO / "scripts" / "standin-optax")]
    repo = tmp_path / "optax"

    def standin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*script, *args], capture_output=True, text=True, check=False)

    shas = [standin("init", str(repo)).stdout.strip()]
    for kind in ("ordinary", "slow", "ordinary", "numerics"):
        done = standin("commit", str(repo), kind)
        assert done.returncode == 0, done.stderr
        shas.append(done.stdout.strip())
    assert len(set(shas)) == 5 and all(len(sha) == 40 for sha in shas)
    assert git(repo, "log", "--format=%H") == "\n".join(reversed(shas))
    assert not list(repo.rglob("*_test.py")) and not list(repo.rglob("__pycache__"))
    compile((repo / "optax" / "_src" / "transform.py").read_text(), "transform.py", "exec")

    again = standin("commit", str(repo), "slow")
    assert again.returncode == 1 and "optax/_src/transform.py" in again.stderr
