"""`jaxbench manifest diff OLD NEW`: per-component commit ranges with compare links between two manifests.

OLD and NEW are manifest files (containers/manifest.yaml or an image's resolved manifest) or git revisions
of this checkout's containers/manifest.yaml. The ranges and links come from `results.judgement.components`,
the code the store's regression incidents use, so a diff here and an incident name a change the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxbench.containers.git import file_at, git_argument
from jaxbench.containers.manifest import IndexRelease, TagRelease
from jaxbench.core.documents import parse_yaml
from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.core.files import read_text
from jaxbench.results.judgement.components import ComponentPin, component_ranges
from jaxbench.results.judgement.vocabulary import ComponentRange
from jaxbench.results.records import manifest_components

RELEASE_SUFFIX = " (release)"


def manifest_pins(data: Mapping[str, Any]) -> dict[str, ComponentPin]:
    """(repository, commit, version) per component; a source manifest's release is its own entry."""
    pins: dict[str, ComponentPin] = {
        c.name: (c.repository, c.commit, c.version) for c in manifest_components(data)
    }
    for name, entry in data.get("components", {}).items():
        release = entry.get("release") if isinstance(entry, Mapping) else None
        if isinstance(release, Mapping) and (release.get("commit") or release.get("tag")):
            # A release pinned from the package index alone has a tag and no commit yet: its version moves.
            pins[f"{name}{RELEASE_SUFFIX}"] = (
                entry.get("repository"),
                release.get("commit"),
                _release_version(release),
            )
    return pins


def manifest_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[ComponentRange]:
    return component_ranges(manifest_pins(old), manifest_pins(new))


def read_manifest_source(
    spec: str, repo_dir: Path, manifest_path: str = "containers/manifest.yaml", *, what: str = "manifest"
) -> Any:
    """A manifest file's parsed YAML, or, when `spec` is not a file, the manifest at git revision `spec`.
    `what` names the argument `spec` came from, for errors."""
    path = Path(spec)
    if path.is_file():
        text = read_text(path)
    else:
        revision = git_argument(spec, what)
        unknown = f"{spec}: neither a manifest file nor a git revision with {manifest_path}"
        try:
            text = file_at(repo_dir, revision, manifest_path, unknown)
        except ExternalFailure as e:  # git's words follow: a bad revision, or a path missing at it
            raise InvalidInput(str(e)) from e
    data = parse_yaml(text, spec)
    if not isinstance(data, Mapping) or not isinstance(data.get("components"), Mapping):
        raise InvalidInput(f"{spec}: expected a manifest with a 'components' mapping")
    _check_pins(data["components"], spec)
    return data


PIN_FIELDS = ("repository", "url", "commit")


def _check_pins(components: Mapping[Any, Any], spec: str) -> None:
    """InvalidInput where a field that names a repository or commit is not text (`commit: 1.5`): the diff
    shortens commits and builds compare links from them."""
    for name, entry in components.items():
        if not isinstance(entry, Mapping):
            continue
        release = entry.get("release")
        fields = [(f"{name}.{key}", entry.get(key)) for key in PIN_FIELDS]
        if isinstance(release, Mapping):
            fields += [(f"{name}.release.{key}", release.get(key)) for key in ("commit", "tag")]
        for field, value in fields:
            if value is not None and not isinstance(value, str):
                raise InvalidInput(
                    f"{spec}: components.{field}: expected text, got {type(value).__name__} {value!r}"
                )


def _release_version(release: Mapping[str, Any]) -> str | None:
    for kind in (TagRelease, IndexRelease):
        try:
            return kind.model_validate(release).version
        except ValueError:  # a pinned release (XLA) has no version; an older manifest may lack fields
            continue
    return None
