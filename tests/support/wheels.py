"""Wheels built here, offline, for tests that install them: a project folder, or a package folder given a
name and version of its own (setuptools and pip from the test's own environment, no build isolation)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def build_wheel(project: Path, out: Path) -> Path:
    """`pip wheel` of the project in `project` into `out`; the wheel's path."""
    before = set(out.glob("*.whl")) if out.is_dir() else set()
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run([*command, "-w", str(out), "."], cwd=project, check=True, capture_output=True)
    (built,) = set(out.glob("*.whl")) - before
    return built


def package_wheel(
    package: Path, name: str, version: str, project: Path, out: Path, requires: str = ""
) -> Path:
    """A wheel of the Python package folder `package` as distribution `name` at `version`."""
    shutil.copytree(package, project / package.name, ignore=shutil.ignore_patterns("__pycache__"))
    dependencies = f"dependencies = [{requires}]\n" if requires else ""
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=69"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\n{dependencies}\n'
        f'[tool.setuptools.packages.find]\ninclude = ["{package.name}*"]\n'
    )
    return build_wheel(project, out)
