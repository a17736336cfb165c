"""Triage by published wheels: a component that cannot be rebuilt at another commit here (jax, jaxlib, XLA,
TransformerEngine: compiled) or that has no repository to build from (installed from PyPI) still moves by
release between an incident's two runs. Its stacks are wheel overlays of its releases
(containers/wheel_overlay.py) and its bisection walks the releases between the two pins; the culprit is the
first bad release, and the commits between it and the last good one are the range a source bisection would
take next: the compare link of their release tags, and of the commits of what the wheels build in (XLA in
jaxlib: read from the file that pins it in jax's tree at each tag).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/triage/test_wheel_triage.py
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from packaging.version import InvalidVersion, Version

from jaxbench.containers.bump import commit_pinned_at
from jaxbench.containers.git import Remote
from jaxbench.containers.install_stage import normalize, requirement_name
from jaxbench.containers.manifest import Component, PinnedRelease
from jaxbench.containers.package_index import Release, fetch_releases, is_wheelhouse
from jaxbench.containers.releases import releases_between, requirements_of
from jaxbench.containers.wheel_overlay import WheelPins, distribution_of, release_tag
from jaxbench.core.errors import ExternalFailure, InvalidInput, one_line
from jaxbench.results.judgement.components import compare_url
from jaxbench.triage.stacks import Move


@dataclasses.dataclass(frozen=True)
class Releases:
    """Where a triage finds components' published releases."""

    components: Mapping[str, Component]
    """The flavor's components (containers/wheel_overlay.py: flavor_components)."""
    accelerator: str
    index: str | None = None
    """A simple-API URL or a wheelhouse folder; None: PyPI."""
    preferred: bool = False
    """Bisect by release even a component that could be rebuilt at its commits (`--index` given)."""
    listing: Callable[[str, str | None], list[Release]] = fetch_releases

    def move(self, name: str, repository: str, good: str | None, bad: str | None) -> Move | None:
        """The component as a move by release between the versions `good` and `bad`, or None where it has
        no published releases or the runs recorded no two versions."""
        component = self.components.get(name)
        if component is None or distribution_of(component) is None or not good or not bad or good == bad:
            return None
        try:
            Version(good), Version(bad)
        except InvalidVersion:
            return None
        return Move(name, repository or component.repository, good, bad, by="release")

    def carries(self, move: Move, name: str) -> bool:
        """Whether every stack of a move by release installs distribution `name` too, at the move's version
        (jaxlib in jax's requirements)."""
        component = self.components.get(move.name)
        if move.by != "release" or component is None:
            return False
        templates = [*component.pip, *component.cuda_pip]
        return normalize(name) in {normalize(requirement_name(template)) for template in templates}

    def between(self, move: Move) -> list[str]:
        """The releases of a move by release, last good to first bad (CommitsBetween)."""
        return releases_between(
            move.name, self.components[move.name], move.good, move.bad, self.index, self.listing
        )

    def pins(self, versions: Mapping[str, str]) -> WheelPins:
        """The wheels of these components at these versions, their dependencies as the index resolves them
        (a wheelhouse: the wheels alone), everything else the harness's."""
        requirements = tuple(
            requirement
            for name, version in sorted(versions.items())
            for requirement in requirements_of(self.components[name], Version(version), self.accelerator)
        )
        wheelhouse = self.index is not None and is_wheelhouse(self.index)
        return WheelPins(requirements, index=self.index, with_dependencies=not wheelhouse)


def release_range(component: Component | None, repository: str, good: str, bad: str) -> str:
    """The commits between two releases, in words: their tags and the compare link where the host has one;
    the range a source bisection on a build runner takes next."""
    if component is None:
        return f"{good}..{bad}"
    tags = release_tag(component, good), release_tag(component, bad)
    if tags[0] is None or tags[1] is None:
        return f"{good}..{bad} (no release tags to compare)"
    # A local clone (--repository jax=PATH) has no compare page: the component's own host has.
    link = compare_url(repository, tags[0], tags[1]) or compare_url(component.repository, tags[0], tags[1])
    return f"{tags[0]}..{tags[1]}" + (f" ({link})" if link else "")


def built_in_ranges(
    components: Mapping[str, Component], name: str, repository: str, good: str, bad: str, remote: Remote
) -> list[str]:
    """The commits, between `name`'s releases `good` and `bad`, of each component built into its wheels
    (XLA into jaxlib), read from the file that pins it in `name`'s tree at the two release tags; one that
    cannot be read is said so, never guessed."""
    component = components.get(name)
    good_tag, bad_tag = (
        (release_tag(component, good), release_tag(component, bad)) if component else (None, None)
    )
    if good_tag is None or bad_tag is None:
        return []
    spans = []
    for built_in, other in components.items():
        pin = other.release
        if not isinstance(pin, PinnedRelease) or pin.pinned_by != name:
            continue
        try:
            old, new = (commit_pinned_at(remote, repository, tag, pin) for tag in (good_tag, bad_tag))
        except (ExternalFailure, InvalidInput) as unread:
            spans.append(f"{built_in}: not read from {repository} ({one_line(str(unread))})")
            continue
        if old == new:
            spans.append(f"{built_in} unchanged ({old[:12]})")
            continue
        link = compare_url(other.repository, old, new)
        spans.append(f"{built_in} {old[:12]}..{new[:12]}" + (f" ({link})" if link else ""))
    return spans
