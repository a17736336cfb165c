"""A stack of published releases without an image or a source build: the harness's virtualenv with some
components at released versions, installed by pip from a package index (or a local wheelhouse) into one
folder that goes in front on `PYTHONPATH`, as containers/overlay.py does for commits.

With `as_of`, the companions named without a version (flax, optax beside a jax release) are what pip
resolves among the releases uploaded before then (`--uploaded-prior-to`): the stack a nightly would have
installed that night, each pin as their own requirements allow. The overlay's manifest records each
component's installed version, its release tag and, where the wheel says (`jax.version._git_hash`), the
commit it was built from: the runs inside it name what ran.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_wheel_overlay.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from jaxbench.containers import record
from jaxbench.containers.install_stage import normalize, requirement_name
from jaxbench.containers.manifest import Component, Manifest, TagRelease
from jaxbench.containers.overlay import (
    MANIFEST_FILE,
    PINS_FILE,
    SITE,
    Overlay,
    made_from,
    overlay_manifest,
    overlay_packages,
    replace_folder,
    run_pip,
)
from jaxbench.containers.package_index import PYPI, is_wheelhouse, wheelhouse_path
from jaxbench.containers.resolve import resolve
from jaxbench.core.errors import InvalidInput, RunFailed

STAGE = "wheels"
LEAKING_SOURCES = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONSTRAINT")
"""pip settings that add sources or pins besides the one index an as-of stack is resolved from: a local
mirror or a folder of wheels carries no upload times, so pip would take their newest releases whatever the
date (as it does from config files, which an as-of install does not read either)."""

WheelPipRunner = Callable[[list[str], Mapping[str, str], str], None]
"""Runs one `pip install` (argv, environment, what it installs in words) to its end, or raises RunFailed
(overlay.run_pip)."""


@dataclasses.dataclass(frozen=True)
class WheelPins:
    """What goes into a wheel overlay."""

    requirements: tuple[str, ...]
    """Pinned requirements, as pip reads them ("jax==0.6.0", "jaxlib==0.6.0")."""
    companions: tuple[str, ...] = ()
    """Distributions without a version: pip picks the newest that fits, uploaded before `as_of`."""
    as_of: dt.datetime | None = None
    index: str | None = None
    """A simple-API URL or a wheelhouse folder; None: pip's own configuration (PyPI)."""
    with_dependencies: bool = True
    """Resolve the stack's dependencies into the overlay too; False installs the named distributions alone
    and leaves every dependency to the harness's virtualenv (a pure-Python component from a wheelhouse)."""

    def __post_init__(self) -> None:
        if not self.requirements:
            raise InvalidInput("a wheel overlay needs at least one pinned requirement")
        for text in (*self.requirements, *self.companions):
            try:
                Requirement(text)
            except InvalidRequirement:
                raise InvalidInput(f"requirement {text!r}: not a requirement pip reads") from None
        if self.as_of is not None and self.index is not None and is_wheelhouse(self.index):
            raise InvalidInput("a wheelhouse has no upload times: as_of needs a package index")

    def document(self) -> dict[str, Any]:
        """pins.json: a later call with the same document reuses the folder."""
        return {
            "wheels": {
                "requirements": list(self.requirements),
                "companions": list(self.companions),
                "as_of": None if self.as_of is None else self.as_of.isoformat(),
                "index": self.index,
                "with_dependencies": self.with_dependencies,
            }
        }

    def key(self) -> str:
        """A short name for the folder of these pins."""
        return hashlib.sha256(json.dumps(self.document(), sort_keys=True).encode()).hexdigest()[:16]


def pip_command(python: str, pins: WheelPins, site: Path) -> list[str]:
    argv = [python, "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check"]
    argv += ["--target", str(site), "--only-binary", ":all:"]
    if not pins.with_dependencies:
        argv.append("--no-deps")
    if pins.as_of is not None:
        argv += ["--uploaded-prior-to", pins.as_of.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")]
    if pins.index is not None and is_wheelhouse(pins.index):
        argv += ["--no-index", "--find-links", str(wheelhouse_path(pins.index))]
    elif pins.index is not None or pins.as_of is not None:
        argv += ["--index-url", pins.index or PYPI]
    return [*argv, *pins.requirements, *pins.companions]


def pip_environ(pins: WheelPins, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of the install: as given, but for an as-of stack no pip configuration file and none
    of the settings that bring other sources (LEAKING_SOURCES); its certificates and timeouts stay."""
    if pins.as_of is None:
        return dict(environ)
    kept = {key: value for key, value in environ.items() if key not in LEAKING_SOURCES}
    return kept | {"PIP_CONFIG_FILE": os.devnull}


def distribution_of(component: Component) -> str | None:
    """The distribution a component's published release installs (its first pip requirement), normalized;
    None for one without releases (its `pip` lists dependencies of a source build)."""
    if component.release is None or not component.pip:
        return None
    return normalize(requirement_name(component.pip[0]))


def release_tag(component: Component, version: str) -> str | None:
    """The tag a component's release of `version` carries (jax-v0.6.0), where its releases are tags."""
    if isinstance(component.release, TagRelease) and "*" in component.release.tags:
        return component.release.version_prefix + version
    return None


def wheel_entries(
    components: Mapping[str, Component], installed: Mapping[str, str], commits: Mapping[str, str | None]
) -> dict[str, dict[str, Any]]:
    """Manifest entries of the components whose release is among the `installed` distributions (name ->
    version), each with its tag and the commit its wheel records (`commits`, by component); a component
    built into jax's wheels (XLA) follows jax's release."""
    versions = {normalize(name): version for name, version in installed.items()}
    entries: dict[str, dict[str, Any]] = {}
    for name, component in components.items():
        distribution = distribution_of(component)
        if distribution is None or distribution not in versions:
            continue
        entries[name] = _entry(component, versions[distribution], commits.get(name))
    jax = entries.get("jax")
    for name, component in components.items():
        if jax is not None and component.build == "with-jax":
            entries[name] = _entry(component, None, None) | {"release_tag": jax["release_tag"]}
    return entries


def _entry(component: Component, version: str | None, commit: str | None) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "repository": component.repository,
        "ref": None,
        "commit": commit,
        "version": version,
        "install": "wheel",
        "release_tag": None if version is None else release_tag(component, version),
        "patches": [],
    }
    return record.component_entry(fields, STAGE)


def built_from(
    components: Mapping[str, Component], site: Path, installed: Mapping[str, str], python: str
) -> dict[str, str | None]:
    """The commit each installed component's wheel records (`wheel_commit`), read in a child process with
    the overlay in front: this process has its own versions imported."""
    versions = {normalize(name) for name in installed}
    found: dict[str, str | None] = {}
    for name, component in components.items():
        if not component.wheel_commit or distribution_of(component) not in versions:
            continue
        module, _, attribute = component.wheel_commit.rpartition(".")
        code = f"import {module}; print(getattr({module}, {attribute!r}, ''))"
        environ = os.environ | {"PYTHONPATH": str(site), "JAX_PLATFORMS": "cpu"}
        done = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, env=environ, check=False, timeout=300
        )
        commit = done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else ""
        found[name] = commit if len(commit) == 40 else None
    return found


def harness_owned(stack: set[str], harness: str = "jaxbench") -> set[str]:
    """Normalized names of the harness's own requirements and theirs, as installed in this environment,
    leaving out the `stack`'s distributions and what only they bring in."""
    owned: set[str] = set()
    todo = [harness]
    while todo:
        try:
            requires = importlib.metadata.requires(todo.pop()) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            name = normalize(requirement.name)
            if name not in stack and name not in owned:
                owned.add(name)
                todo.append(name)
    return owned


def keep_the_harness_own(site: Path, stack: set[str]) -> list[str]:
    """Take out of `site` what the harness's own requirements bring (`harness_owned`), so that the harness
    runs on its own versions: an older typing_extensions beside its pydantic stops it before the stack
    under test ever runs. What went, by name."""
    owned = harness_owned(stack)
    removed = []
    for distribution in importlib.metadata.distributions(path=[str(site)]):
        name = distribution.metadata["Name"]
        if not name or normalize(name) not in owned:
            continue
        folders = set()
        for file in distribution.files or []:  # its RECORD: every file it installed, its .dist-info too
            path = site / file
            folders.add(path.parent)
            path.unlink(missing_ok=True)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            while folder != site and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent
        removed.append(name)
    return sorted(removed)


def _installed(site: Path) -> dict[str, str]:
    return {
        d.metadata["Name"]: d.version
        for d in importlib.metadata.distributions(path=[str(site)])
        if d.metadata["Name"]
    }


def create_wheel_overlay(
    pins: WheelPins,
    out: Path,
    *,
    components: Mapping[str, Component],
    base_manifest: Mapping[str, Any] | None,
    base_packages: Sequence[str] = (),
    python: str = sys.executable,
    run: WheelPipRunner = run_pip,
    environ: Mapping[str, str] | None = None,
) -> Overlay:
    """Install `pins` into `out/site` and write the manifest and package list beside it: built in a
    temporary sibling and renamed into place, so `out` is whole or absent; reused when it holds these
    pins. A stack pip cannot install raises RunFailed with pip's last lines."""
    out = out.absolute()
    if made_from(out, pins.document()):
        return Overlay(out, {}, reused=True)
    if out.exists() and not (out / PINS_FILE).is_file() and (not out.is_dir() or any(out.iterdir())):
        raise InvalidInput(f"{out}: exists and is not an overlay; expected a new or empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.new-"))
    building.chmod(0o755)
    try:
        site = building / SITE
        environ = pip_environ(pins, os.environ if environ is None else environ)
        run(pip_command(python, pins, site), environ, " ".join((*pins.requirements, *pins.companions)))
        keep_the_harness_own(
            site, {normalize(requirement_name(r)) for r in (*pins.requirements, *pins.companions)}
        )
        installed = _installed(site)
        if not installed:
            raise RunFailed(f"pip installed nothing for {' '.join(pins.requirements)}")
        entries = wheel_entries(components, installed, built_from(components, site, installed, python))
        document = overlay_manifest(base_manifest, entries)
        record.write(document, overlay_packages(base_packages, installed), building / MANIFEST_FILE)
        (building / PINS_FILE).write_text(json.dumps(pins.document(), indent=2) + "\n")
        replace_folder(out, building)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return Overlay(out, {})


def flavor_components(manifest: Manifest, flavor: str) -> dict[str, Component]:
    """The manifest's components that `flavor` installs (the cpu flavor: XLA, jax, flax, optax, orbax)."""
    return {name: manifest.components[name] for name in resolve(manifest, flavor, "wheel").components}
