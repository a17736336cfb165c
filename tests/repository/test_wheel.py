"""The wheel installs one top-level package, `jaxbench` (its layers inside it, with their data), and works in
a fresh virtualenv next to a user's own modules named `results` and `core`, which it neither shadows nor
imports.

    JAX_PLATFORMS=cpu python -m pytest -q tests/repository/test_wheel.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import LAYERS, REPO
from tests.support.wheels import build_wheel

pytestmark = pytest.mark.slow


def _tracked_copy(into: Path) -> Path:
    """The repository's tracked files (links kept as links), so the build writes nothing into the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source, target = REPO / name, into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    return into


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = _tracked_copy(tmp_path_factory.mktemp("source"))
    return build_wheel(source, tmp_path_factory.mktemp("wheels"))


def test_the_wheel_installs_one_top_level_package_with_its_layers_and_data(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"jaxbench", wheel.name.split("-py")[0] + ".dist-info"}
    for layer in LAYERS:
        assert f"jaxbench/{layer}/__init__.py" in names
    # the data the commands read: recipes, the result schema, migrations, the dashboard's templates
    assert {"jaxbench/recipes/llama2.yaml", "jaxbench/recipes/flags/base.yaml"} <= set(names)
    assert any(name.startswith("jaxbench/harness/runtime/schema/") for name in names)
    assert "jaxbench/results/migrations/env.py" in names
    assert any(name.startswith("jaxbench/results/report/templates/") for name in names)


def test_the_installed_command_runs_beside_modules_named_like_its_layers(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # Our wheel into the fresh environment; its dependencies (jax, pydantic, ...) from this one, behind it.
    zipfile.ZipFile(wheel).extractall(site)
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    user = tmp_path / "project"
    (user / "core").mkdir(parents=True)
    (user / "core" / "__init__.py").write_text("raise ImportError('the user project core, not jaxbench')\n")
    (user / "results.py").write_text("raise ImportError('the user project results, not jaxbench')\n")
    env = {"PATH": os.environ["PATH"], "JAX_PLATFORMS": "cpu", "HOME": str(tmp_path), "PYTHONPATH": str(user)}

    def jaxbench(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(python), "-m", "jaxbench", *args]
        return subprocess.run(command, cwd=user, env=env, capture_output=True, text=True, timeout=300)

    listed = jaxbench("recipes", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {"llama2", "gpt3", "vit"} <= {row["recipe"] for row in json.loads(listed.stdout)["data"]}
    out = tmp_path / "out"
    ran = jaxbench("run", "llama2", "--steps", "7", "--no-ingest", "--out", str(out))
    assert ran.returncode == 0, ran.stderr[-2000:]
    (result,) = out.glob("*.json")
    assert json.loads(result.read_text())["status"] == "ok"
    # the user's modules are still theirs, and the installation's are found where it put them
    where = subprocess.run(
        [str(python), "-c", "import jaxbench.results.store as s; print(s.__file__)"],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip().startswith(str(site / "jaxbench" / "results"))
