"""`jaxbench manifest bump`: move every component to the head of its tracked branch and its newest release.

`plan_bump` asks a `Remote` (git ls-remote; a local repository in tests) and returns the moves; choosing
the newest release is pure (`newest_release`). `apply_moves` rewrites the YAML text in place with
ruamel.yaml's round-trip mode, so the comments and order of the hand-written manifest survive a bump.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import io
import re
from collections.abc import Mapping, Sequence

from packaging.version import InvalidVersion, Version
from ruamel.yaml import YAML

from containers.git import Remote
from containers.manifest import Manifest, PinnedRelease, TagRelease
from harness.config import InvalidInput

_PEELED = "^{}"


@dataclasses.dataclass(frozen=True)
class Move:
    component: str
    field: str
    """`commit` (the tracked branch) or `release`."""
    old: str | None
    """None for a release whose commit was not known yet."""
    new: str
    old_tag: str | None = None
    new_tag: str | None = None

    @property
    def moved(self) -> bool:
        return self.old != self.new or self.old_tag != self.new_tag


def newest_release(refs: Mapping[str, str], release: TagRelease) -> tuple[str, str] | None:
    """(tag, commit) of the highest final release among `refs` (ls-remote output) matching the release's
    tag glob.

    Versions are compared as PEP 440 versions; pre-releases and tags that are not versions are skipped, so
    `jax-v0.10.0` beats `jax-v0.9.9` and `v2.0.0rc1` never becomes the pin. An annotated tag's commit is
    its peeled entry (`<tag>^{}`)."""
    commits: dict[str, str] = {}
    for name, commit in refs.items():
        if not name.startswith("refs/tags/"):
            continue
        tag = name.removeprefix("refs/tags/")
        if tag.endswith(_PEELED):
            commits[tag.removesuffix(_PEELED)] = commit
        else:
            commits.setdefault(tag, commit)
    best: tuple[Version, str] | None = None
    for tag in commits:
        if not fnmatch.fnmatchcase(tag, release.tags) or not tag.startswith(release.version_prefix):
            continue
        try:
            version = Version(release.version_of(tag))
        except InvalidVersion:
            continue
        if version.is_prerelease or version.is_devrelease:
            continue
        if best is None or version > best[0]:
            best = (version, tag)
    return None if best is None else (best[1], commits[best[1]])


def pinned_commit(text: str, pattern: str, where: str) -> str:
    match = re.search(pattern, text)
    if match is None or not re.fullmatch(r"[0-9a-f]{40}", match.group(1)):
        raise InvalidInput(f"{where}: no 40-hex commit matches pattern {pattern!r}")
    return match.group(1)


def plan_bump(manifest: Manifest, remote: Remote, only: Sequence[str] = ()) -> list[Move]:
    """Every component's (or only those named) branch head and newest release, as moves (moved or not)."""
    unknown = [name for name in only if name not in manifest.components]
    if unknown:
        raise InvalidInput(
            f"--only {', '.join(unknown)}: expected components of the manifest "
            f"({', '.join(sorted(manifest.components))})"
        )
    names = list(only) or list(manifest.components)
    moves: list[Move] = []
    new_tags: dict[str, tuple[str, str]] = {}
    for name in names:
        component = manifest.components[name]
        branch = f"refs/heads/{component.ref}"
        patterns = [branch]
        if isinstance(component.release, TagRelease):
            patterns.append(f"refs/tags/{component.release.tags}")
        refs = remote.refs(component.repository, patterns)
        if branch not in refs:
            raise InvalidInput(
                f"components.{name}.ref: no branch {component.ref!r} in {component.repository}"
            )
        moves.append(Move(name, "commit", component.commit, refs[branch]))
        release = component.release
        if isinstance(release, TagRelease):
            newest = newest_release(refs, release)
            if newest is None:
                raise InvalidInput(
                    f"components.{name}.release.tags: no release tag matches {release.tags!r} in "
                    f"{component.repository}"
                )
            new_tags[name] = newest
            moves.append(Move(name, "release", release.commit, newest[1], release.tag, newest[0]))
    for name in names:
        release = manifest.components[name].release
        if not isinstance(release, PinnedRelease):
            continue
        pinner = manifest.components[release.pinned_by]
        assert isinstance(pinner.release, TagRelease)  # checked by Manifest
        tag = new_tags.get(release.pinned_by, (pinner.release.tag, ""))[0]
        where = f"{release.file} at {tag} of {pinner.repository}"
        text = remote.read_file(pinner.repository, f"refs/tags/{tag}", release.file)
        moves.append(Move(name, "release", release.commit, pinned_commit(text, release.pattern, where)))
    return moves


def apply_moves(text: str, moves: Sequence[Move]) -> str:
    """The manifest's YAML text with the moves applied; comments, order and quoting are kept."""
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    document = yaml.load(text)
    for move in moves:
        entry = document["components"][move.component]
        if move.field == "commit":
            entry["commit"] = move.new
        else:
            entry["release"]["commit"] = move.new
            if move.new_tag is not None:
                entry["release"]["tag"] = move.new_tag
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()
