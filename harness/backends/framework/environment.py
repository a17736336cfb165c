"""Where a framework's trainer runs: which interpreter, and what that environment holds and runs on.

The interpreter is, first found: `JAXBENCH_<FRAMEWORK>_PYTHON`; the framework's virtualenv in the checkout
(`make venv FLAVOR=<framework>` makes `.venv-<framework>`); this interpreter, where the framework is installed
beside the harness (inside the framework's image). Nothing else: a framework pins its own jax, so the
harness's `.venv` never holds one.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.harness.provenance import collection
from jaxbench.harness.provenance.record import DeviceInfo, ImageInfo, Versions

PROBE = Path(__file__).resolve().parent / "probe.py"
VENV_PREFIX = ".venv-"
IMAGE_MANIFEST = collection.DEFAULT_MANIFEST_PATHS[0]
PROBE_TIMEOUT_S = 300.0
"""Importing jax and starting its backend; minutes only where a GPU driver is slow to come up."""


def framework_venv_dir(project_dir: Path, framework: str) -> Path:
    """The framework's virtualenv in a checkout, as `make venv FLAVOR=<framework>` makes it."""
    return project_dir / f"{VENV_PREFIX}{framework}"


def python_variable(framework: str) -> str:
    return f"JAXBENCH_{framework.upper()}_PYTHON"


@dataclasses.dataclass(frozen=True)
class Interpreter:
    python: Path
    where: str
    """How it was found, for messages: "JAXBENCH_MAXTEXT_PYTHON", ".venv-maxtext", "this environment"."""


def locate(
    framework: str,
    module: str,
    project_dir: Path,
    environ: Mapping[str, str],
    *,
    importable: Callable[[str], bool] = lambda name: importlib.util.find_spec(name) is not None,
) -> Interpreter:
    variable = python_variable(framework)
    if environ.get(variable):
        python = Path(environ[variable])
        if not python.is_file():
            raise InvalidInput(f"{variable}={python}: no such interpreter")
        return Interpreter(python, variable)
    venv_python = framework_venv_dir(project_dir, framework) / "bin" / "python"
    if venv_python.is_file():
        return Interpreter(venv_python, str(venv_python.parent.parent.name))
    if importable(module):
        return Interpreter(Path(sys.executable), "this environment")
    raise InvalidInput(
        f"--backend {framework}: {module} is not installed here and there is no "
        f"{framework_venv_dir(project_dir, framework).name}; make one with `make venv FLAVOR={framework}` "
        f"(or run inside its image: --image ...:{framework}, or set {variable})"
    )


@dataclasses.dataclass(frozen=True)
class Probe:
    """What the framework's interpreter says of itself (probe.py)."""

    python: str
    executable: str
    prefix: str
    versions: dict[str, str | None]
    devices: DeviceInfo

    def provenance_versions(self) -> Versions:
        return collection.collect_versions(
            distribution_version=lambda name: self.versions.get(name), python=self.python
        )

    def image_info(self, environ: Mapping[str, str]) -> ImageInfo:
        """The environment's resolved manifest: an image's, else the one its virtualenv recorded."""
        paths = (IMAGE_MANIFEST, Path(self.prefix) / collection.VENV_MANIFEST)
        return collection.read_image_info(environ, paths)


def parse_probe(text: str, python: Path) -> Probe:
    try:
        report: dict[str, Any] = json.loads(text.strip().splitlines()[-1])
        return Probe(
            python=report["python"],
            executable=report["executable"],
            prefix=report["prefix"],
            versions=report["versions"],
            devices=DeviceInfo.model_validate(report["devices"]),
        )
    except (IndexError, KeyError, TypeError, ValueError) as error:
        raise ExternalFailure(f"{python}: its environment probe answered {text[-300:]!r}: {error}") from error


def probe(interpreter: Interpreter, distributions: list[str], env: Mapping[str, str]) -> Probe:
    """Ask the framework's interpreter what it holds and runs on, with the run's environment (its XLA flags
    and platform choice), before the trainer starts."""
    argv = [str(interpreter.python), str(PROBE), *distributions]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=dict(env), timeout=PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ExternalFailure(f"{interpreter.python} ({interpreter.where}): {error}") from error
    if done.returncode != 0:
        raise ExternalFailure(
            f"{interpreter.python} ({interpreter.where}) could not start jax: {done.stderr.strip()[-1500:]}"
        )
    return parse_probe(done.stdout, interpreter.python)


def component_commit(image: ImageInfo, component: str) -> str | None:
    """The framework's commit as its environment's resolved manifest records it."""
    entries = (image.manifest or {}).get("components") or {}
    entry = entries.get(component) if isinstance(entries, dict) else None
    commit = entry.get("commit") if isinstance(entry, dict) else None
    return commit if isinstance(commit, str) else None
