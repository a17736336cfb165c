"""A framework's own virtualenv on this host (`make venv FLAVOR=maxtext`, `.venv-maxtext`): the same manifest
flavor's wheel pins its image installs, through the same installer (containers/install_stage.py), for this
host's accelerator. Frameworks pin their own jax, so they never share the harness's `.venv`; the harness
starts their trainers with this environment's interpreter (harness/backends/framework/).

Only components with a published release can go in: a source build needs the upstream repository, which a
virtualenv on a build host does not clone. The environment records what it holds as an image does
(share/jaxbench/manifest.yaml and packages.txt, read into every result's provenance).
"""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jaxbench.containers import install_stage, record
from jaxbench.containers.build import stage_plan
from jaxbench.containers.manifest import Accelerator
from jaxbench.containers.resolve import Resolved
from jaxbench.core.errors import InvalidInput, RunFailed
from jaxbench.core.files import PROJECT_DIR
from jaxbench.harness.backends import BACKENDS, get_backend
from jaxbench.harness.backends.framework.program import FrameworkBackend
from jaxbench.harness.provenance.collection import VENV_MANIFEST

INSTALLER = Path(__file__).resolve().parent / "install_stage.py"
PATCHES = Path(__file__).resolve().parent / "patches"
FIND_PYTHON = PROJECT_DIR / "scripts" / "find-python"
STATE = VENV_MANIFEST.parent
"""Under the virtualenv's prefix, beside the recorded manifest: the stage plans and the installer's
records."""

PIP_CONFIG = "[install]\ncompile = no\n"
"""The virtualenv's own pip.conf: pip byte-compiles none of the tens of thousands of modules it installs
(maxtext's 27,000: a minute of CPU); the framework's trainer is imported once instead (`trainer_import`),
which compiles the quarter of them a run imports. (`no-compile = yes` in a config file reads as compile.)"""

VenvCommandRunner = Callable[[list[str]], None]
"""Runs one command of the virtualenv's making (venv, pip, the stage installer) to its end."""


def host_accelerator(accel: str) -> Accelerator:
    """The Makefile's ACCEL (cpu, cuda12, cuda13) as a manifest accelerator."""
    if accel == "cpu":
        return "cpu"
    if accel.startswith("cuda"):
        return "cuda"
    raise InvalidInput(f"ACCEL={accel}: expected cpu, cuda12 or cuda13")


def install_plans(resolved: Resolved) -> list[dict[str, Any]]:
    """One installer plan per stage that installs something, in the flavor's order. Refuses a component
    that only a source build can install, naming it, before anything is created."""
    plans = []
    own_python = {stage.name for stage in resolved.stages if stage.python is not None}
    for index, stage in enumerate(resolved.stages):
        if own_python and stage.name not in own_python:
            continue  # the flavor's own stack, which the image keeps in /opt/venv beside the stage's Python
        for name, component in stage.components.items():
            if component.install == "source" and component.build != "with-jax":
                raise InvalidInput(
                    f"FLAVOR={resolved.flavor}: components.{name} has no published release to install in a "
                    "virtualenv (only its image builds it from source); use its image (--image) instead"
                )
        if stage.components:
            plans.append(stage_plan(resolved, index))
    if not plans:
        raise InvalidInput(f"FLAVOR={resolved.flavor}: the flavor installs no components")
    return plans


def stage_python(resolved: Resolved) -> str | None:
    """The Python version the virtualenv must be made of, where the flavor's framework stage has its own
    (Pax's 3.10); None: the harness's own will do."""
    versions = {stage.python for stage in resolved.stages if stage.python is not None}
    if len(versions) > 1:
        raise InvalidInput(
            f"FLAVOR={resolved.flavor}: its stages ask for Pythons {', '.join(sorted(versions))}; a "
            "virtualenv has one"
        )
    return versions.pop() if versions else None


def interpreter(resolved: Resolved, given: str | None, find: Callable[[str], str] | None = None) -> str:
    """The Python to make the virtualenv of: `given` (make's PYTHON, the harness's), unless the flavor's
    stage needs another version, which `find` then looks for (scripts/find-python VERSION)."""
    wanted = stage_python(resolved)
    if wanted is None:
        return given or sys.executable
    if given is not None and _python_version(given).rsplit(".", 1)[0] == wanted:
        return given
    return (find or find_python)(wanted)


def find_python(version: str) -> str:
    done = subprocess.run([str(FIND_PYTHON), version], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = " ".join(line.strip() for line in done.stderr.splitlines()).removeprefix("error: ")
        raise InvalidInput(said or f"{FIND_PYTHON} {version} found no Python {version}")
    return done.stdout.strip()


def trainer_import(flavor: str, python: str) -> list[str] | None:
    """The command that imports the flavor's framework trainer (harness/backends/) in its virtualenv with
    byte-code written (even where PYTHONDONTWRITEBYTECODE is set: a run would otherwise compile its imports
    every time); None for a flavor without a framework backend."""
    entry = BACKENDS.get(flavor)
    backend = get_backend(flavor) if entry is not None and entry.framework else None
    if not isinstance(backend, FrameworkBackend):
        return None
    framework = backend.framework
    code = f"import sys; sys.dont_write_bytecode = False; import {framework.trainer}"
    return ["env", *(f"{name}={value}" for name, value in framework.extra_env.items()), python, "-c", code]


def replaceable(directory: Path) -> None:
    """Refuse a `directory` that making the virtualenv would destroy or follow elsewhere: one that holds
    anything but a virtualenv (a folder of the user's, named by mistake), or a symbolic link. A virtualenv,
    half-made or stale, is replaced."""
    if directory.is_symlink():
        raise InvalidInput(f"--dir {directory}: a symbolic link; expected the virtualenv's own folder")
    if directory.exists() and not directory.is_dir():
        raise InvalidInput(f"--dir {directory}: a file; expected a folder for the virtualenv")
    if directory.is_dir() and any(directory.iterdir()) and not (directory / "pyvenv.cfg").is_file():
        raise InvalidInput(
            f"--dir {directory}: holds files but no virtualenv (no pyvenv.cfg), which it would replace; "
            "expected a new folder or a virtualenv"
        )


class _TrainerDoesNotImport(Exception):
    """The pins installed and the framework's trainer module fails to import among them."""


def create(
    resolved: Resolved, directory: Path, python: str, *, run: VenvCommandRunner = install_stage.run
) -> dict[str, Any]:
    """Make `directory` a virtualenv of `python` holding the flavor's pins, and record them in it. A failed
    install removes the half-made environment, so the next `make` starts again rather than trusting it."""
    plans = install_plans(resolved)
    replaceable(directory)
    venv_python = str(directory / "bin" / "python")
    compile_imports = trainer_import(resolved.flavor, venv_python)
    if directory.exists():
        shutil.rmtree(directory)
    try:
        run([python, "-m", "venv", str(directory)])
        (directory / "pip.conf").write_text(PIP_CONFIG)
        run([venv_python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
        state = directory / STATE
        (state / "plans").mkdir(parents=True)
        for plan in plans:
            plan_path = state / "plans" / f"{plan['index']:02d}-{plan['stage']}.json"
            plan_path.write_text(json.dumps(plan, indent=2) + "\n")
            run(
                [
                    sys.executable,
                    str(INSTALLER),
                    str(plan_path),
                    "--python",
                    venv_python,
                    "--records",
                    str(state / "stages"),
                    "--patches",
                    str(PATCHES),
                ]
            )
        if compile_imports is not None:
            try:
                run(compile_imports)
            except subprocess.CalledProcessError as error:
                raise _TrainerDoesNotImport(f"its trainer does not import ({error})") from error
        header = {
            "kind": "virtualenv",
            "flavor": resolved.flavor,
            "accelerator": resolved.accelerator,
            "python": _python_version(venv_python),
            "prefix": str(directory.resolve()),
            "machine": platform.machine(),
        }
        return record.record_image(
            state / "stages", header, _packages(venv_python), directory / VENV_MANIFEST
        )
    except (subprocess.CalledProcessError, OSError, _TrainerDoesNotImport) as error:
        shutil.rmtree(directory, ignore_errors=True)
        what = error if isinstance(error, _TrainerDoesNotImport) else f"installing its pins failed ({error})"
        raise RunFailed(
            f"{directory}: flavor {resolved.flavor}: {what}; its output is above, and the half-made "
            "virtualenv was removed"
        ) from error


def _python_version(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _packages(python: str) -> list[str]:
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=json"], check=True, capture_output=True, text=True
    ).stdout
    return [f"{p['name']}=={p['version']}" for p in json.loads(listed)]
