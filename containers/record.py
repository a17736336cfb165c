"""The resolved manifest an image or virtualenv carries: which commit and version of each component is
installed, and the full package list beside it. The harness reads both into every result
(`harness.provenance.read_image_info`), and the store takes the component commits from it.

`jaxbench manifest record` writes them: inside an image from the stage records of
`containers/install_stage.py`; in the local virtualenv from the manifest and the installed distributions.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from jaxbench.containers.install_stage import requirement_name
from jaxbench.containers.resolve import Resolved
from jaxbench.core.errors import InvalidInput
from jaxbench.core.urls import scrub_url
from jaxbench.harness.provenance.collection import PACKAGES_FILE, VENV_MANIFEST

_ENTRY_KEYS = ("repository", "ref", "commit", "version", "install", "release_tag", "patches")


def component_entry(component: Mapping[str, Any], stage: str) -> dict[str, Any]:
    """A component as a resolved manifest records it: its repository without credentials (core/urls.py),
    whatever the stage record, plan or pin it comes from held."""
    entry = {key: component.get(key) for key in _ENTRY_KEYS} | {"stage": stage}
    if isinstance(entry["repository"], str):
        entry["repository"] = scrub_url(entry["repository"])
    return entry


def resolved_manifest(
    header: Mapping[str, Any], stages: list[tuple[str, Mapping[str, Mapping[str, Any]]]]
) -> dict[str, Any]:
    """The document written into images and virtualenvs: header fields, then `components` in stage order."""
    components = {
        name: component_entry(component, stage)
        for stage, entries in stages
        for name, component in entries.items()
    }
    return {"schema_version": 1, **header, "components": components}


def write(manifest: Mapping[str, Any], packages: list[str], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(dict(manifest), sort_keys=False))
    (out.parent / PACKAGES_FILE).write_text("".join(f"{p}\n" for p in sorted(packages, key=str.lower)))


def installed_packages() -> list[str]:
    return sorted(
        {
            f"{d.metadata['Name']}=={d.version}"
            for d in importlib.metadata.distributions()
            if d.metadata["Name"]
        },
        key=str.lower,
    )


def record_image(
    stages_dir: Path, header: Mapping[str, Any], packages: list[str], out: Path
) -> dict[str, Any]:
    """Merge the stage records of an image build (files `NN-<stage>.json`, in build order)."""
    records = sorted(stages_dir.glob("*.json"))
    if not records:
        raise InvalidInput(f"{stages_dir}: no stage records (was the image built by `make build`?)")
    stages = []
    for path in records:
        record = json.loads(path.read_text())
        stages.append((record["stage"], record["components"]))
    manifest = resolved_manifest(header, stages)
    write(manifest, packages, out)
    return manifest


def wheel_commit(where: str) -> str | None:
    module, _, attribute = where.rpartition(".")
    try:
        return str(getattr(importlib.import_module(module), attribute))
    except (ImportError, AttributeError):
        return None


def record_venv(resolved: Resolved, prefix: Path = Path(sys.prefix)) -> dict[str, Any]:
    """Check the virtualenv holds the manifest's wheel pins and record them under its prefix."""
    entries: dict[str, dict[str, Any]] = {}
    for name, component in resolved.components.items():
        entry = component.model_dump(mode="json")
        if component.requirements and component.version is not None:
            distribution = requirement_name(component.requirements[0])
            try:
                installed = importlib.metadata.version(distribution)
            except importlib.metadata.PackageNotFoundError:
                installed = None
            if installed != component.version:
                raise InvalidInput(
                    f"{prefix}: {distribution} {installed or 'is not installed'}, but the manifest pins "
                    f"{component.version} (components.{name}); rebuild the virtualenv with `make build`"
                )
        if component.wheel_commit:
            built_from = wheel_commit(component.wheel_commit)
            if component.commit is None:
                entry["commit"] = built_from
            elif built_from not in (None, component.commit):
                raise InvalidInput(
                    f"components.{name}: the installed wheel was built from {built_from} "
                    f"({component.wheel_commit}), but the manifest pins {component.commit}"
                )
        entries[name] = entry
    header = {
        "kind": "virtualenv",
        "flavor": resolved.flavor,
        "accelerator": resolved.accelerator,
        "python": platform.python_version(),
        "prefix": str(prefix),
    }
    manifest = resolved_manifest(header, [("virtualenv", entries)])
    write(manifest, installed_packages(), prefix / VENV_MANIFEST)
    return manifest
