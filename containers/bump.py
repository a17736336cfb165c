"""`jaxbench manifest bump`: move every component to the head of its tracked branch and its newest release.

`--source COMPONENT=URL#REF` points a component at another repository or branch first (a fork, a pull
request's branch): its pin becomes that branch's head, and its release (the published wheels) stays as is,
since a fork's tags say nothing about what PyPI serves.

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

from jaxbench.containers.git import Remote, git_repository
from jaxbench.containers.manifest import Manifest, PinnedRelease, TagRelease
from jaxbench.core.errors import InvalidInput
from jaxbench.core.urls import scrub_url, scrub_urls

_PEELED = "^{}"


@dataclasses.dataclass(frozen=True)
class Move:
    component: str
    field: str
    """`source` (repository#ref, from an override), `commit` (the tracked branch) or `release`."""
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


@dataclasses.dataclass(frozen=True)
class SourceOverride:
    component: str
    clone_url: str = dataclasses.field(repr=False)
    """The repository as given, credentials and all: for this process's git commands only."""
    ref: str

    @property
    def repository(self) -> str:
        """The repository without credentials (core/urls.py): what the manifest and every table record."""
        return scrub_url(self.clone_url)

    @property
    def spec(self) -> str:
        return f"{self.repository}#{self.ref}"


def parse_source_override(text: str, manifest: Manifest) -> SourceOverride:
    """`COMPONENT=URL#REF` (the nightly's `sources` input), checked against the manifest."""
    shown = scrub_urls(text)  # refusals are printed, and logs are published
    name, equals, rest = text.partition("=")
    repository, hash_, ref = rest.rpartition("#")
    if not (equals and hash_ and name.strip() and repository.strip() and ref.strip()):
        raise InvalidInput(
            f"--source {shown!r}: expected COMPONENT=URL#REF, e.g. jax=https://github.com/me/jax#fix"
        )
    name = name.strip()
    if name not in manifest.components:
        raise InvalidInput(
            f"--source {shown!r}: no component {name!r} in the manifest "
            f"({', '.join(sorted(manifest.components))})"
        )
    if any(c.isspace() for c in repository + ref) or ref.startswith("-") or repository.startswith("-"):
        raise InvalidInput(f"--source {shown!r}: URL and REF may not contain spaces or start with '-'")
    # Before any clone: a remote helper (fd::3 hangs, ext:: runs a command) is refused here, exit 1.
    git_repository(repository.strip(), f"--source {name}: URL")
    return SourceOverride(name, repository.strip(), ref.strip())


def pinned_commit(text: str, pattern: str, where: str) -> str:
    match = re.search(pattern, text)
    if match is None or not re.fullmatch(r"[0-9a-f]{40}", match.group(1)):
        raise InvalidInput(f"{where}: no 40-hex commit matches pattern {pattern!r}")
    return match.group(1)


def commit_pinned_at(
    remote: Remote, repository: str, tag: str, release: PinnedRelease, *, shown: str | None = None
) -> str:
    """The commit `release` is pinned at in its pinner's tree at `tag` (XLA's, in jax's revision.bzl);
    `shown` names the repository in an error where `repository` is not to be printed (a clone URL)."""
    text = remote.read_file(repository, f"refs/tags/{tag}", release.file)
    return pinned_commit(text, release.pattern, f"{release.file} at {tag} of {shown or repository}")


def plan_bump(
    manifest: Manifest,
    remote: Remote,
    only: Sequence[str] = (),
    sources: Sequence[SourceOverride] = (),
) -> list[Move]:
    """Every component's (or only those named) branch head and newest release, as moves (moved or not).
    A component with a source override moves to that repository's branch and keeps its release."""
    overrides = {source.component: source for source in sources}
    unknown = [name for name in only if name not in manifest.components]
    if unknown:
        raise InvalidInput(
            f"--only {', '.join(unknown)}: expected components of the manifest "
            f"({', '.join(sorted(manifest.components))})"
        )
    names = [*only, *(name for name in overrides if name not in only)] if only else list(manifest.components)
    moves: list[Move] = []
    new_tags: dict[str, tuple[str, str]] = {}
    for name in names:
        component = manifest.components[name]
        repository, ref = component.repository, component.ref
        override = overrides.get(name)
        if override is not None:
            moves.append(Move(name, "source", f"{repository}#{ref}", override.spec))
            repository, ref = override.repository, override.ref
        branch = f"refs/heads/{ref}"
        patterns = [branch]
        if isinstance(component.release, TagRelease) and override is None:
            patterns.append(f"refs/tags/{component.release.tags}")
        refs = remote.refs(override.clone_url if override else component.clone_url, patterns)
        if branch not in refs:
            field = "--source" if override else f"components.{name}.ref"
            raise InvalidInput(f"{field}: no branch {ref!r} in {repository}")
        moves.append(Move(name, "commit", component.commit, refs[branch]))
        release = component.release
        if isinstance(release, TagRelease) and override is None:
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
        commit = commit_pinned_at(remote, pinner.clone_url, tag, release, shown=pinner.repository)
        moves.append(Move(name, "release", release.commit, commit))
    return moves


def apply_moves(text: str, moves: Sequence[Move]) -> str:
    """The manifest's YAML text with the moves applied; comments, order and quoting are kept."""
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    document = yaml.load(text)
    for move in moves:
        entry = document["components"][move.component]
        if move.field == "source":
            entry["repository"], _, entry["ref"] = move.new.rpartition("#")
        elif move.field == "commit":
            entry["commit"] = move.new
        else:
            entry["release"]["commit"] = move.new
            if move.new_tag is not None:
                entry["release"]["tag"] = move.new_tag
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()
