"""Nightly images per architecture, and the multi-architecture tags only when every architecture built.

Each architecture's image is pushed as `<registry>/jax:<flavor>-<date>-<arch>` (`make push`); `make publish`
then makes the manifest list `<flavor>-<date>` and moves `<flavor>` to it only when every requested
architecture is in it, so the undated tag never loses one (docs/design.md, "Publishing per architecture").
Pure: names, validation and the plan; the docker commands are in containers.docker, the steps and exit
codes in containers.image_commands.

    make push FLAVOR=cpu DATE=2026-11-22 REGISTRY=localhost:5000
    make publish FLAVOR=cpu DATE=2026-11-22 REGISTRY=localhost:5000 ARCHES=amd64,arm64
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from jaxbench.containers.build import image_tags
from jaxbench.core.errors import InvalidInput

ARCHES = ("amd64", "arm64")
"""The architectures images are built for, in the names Docker and OCI platforms use (Go's GOARCH)."""

_ALIASES = {"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64", "aarch64": "arm64"}
"""Kernel names (`uname -m`, `docker info`'s Architecture) to platform names (`docker version`'s
Server.Arch, an image's `architecture`)."""


def known_arch(name: str) -> str | None:
    """The platform name of an architecture (x86_64 → amd64, aarch64 → arm64), None for one not built here."""
    return _ALIASES.get(name.strip().lower())


def normalise_arch(name: str, source: str) -> str:
    """As `known_arch`, raising InvalidInput that names `source` (a flag, or where the name came from)."""
    arch = known_arch(name)
    if arch is None:
        raise InvalidInput(f"{source} {name!r}: expected one of {', '.join(ARCHES)} (or x86_64, aarch64)")
    return arch


def parse_arches(items: Iterable[str]) -> tuple[str, ...]:
    """`--arches amd64,arm64` (comma- or space-separated, repeatable): platform names, in order, once each."""
    names = [name for item in items for name in item.replace(",", " ").split()]
    if not names:
        raise InvalidInput(f"ARCHES/--arches: expected one or more of {', '.join(ARCHES)}, comma-separated")
    return tuple(dict.fromkeys(normalise_arch(name, "ARCHES/--arches") for name in names))


def arch_tag(registry: str, flavor: str, date: str, arch: str) -> str:
    """One architecture's image of a night: `<registry>/jax:<flavor>-<date>-<arch>`."""
    dated, _ = image_tags(registry, flavor, date)
    return f"{dated}-{normalise_arch(arch, 'architecture')}"


@dataclasses.dataclass(frozen=True)
class PublishPlan:
    dated: str
    """`<registry>/jax:<flavor>-<date>`: the list of the architectures present, pushed when there is one."""
    undated: str
    """`<registry>/jax:<flavor>`: moved to the same list only when `move_undated`."""
    sources: tuple[str, ...]
    """The per-architecture tags the dated list is made of, in the requested order; empty: publish nothing."""
    move_undated: bool
    missing: tuple[str, ...]
    """Requested architectures with no image of the night in the registry."""


def plan_publish(
    registry: str,
    flavor: str,
    date: str,
    requested_arches: Iterable[str],
    present_arches: Iterable[str],
) -> PublishPlan:
    """What to publish, given which per-architecture tags of the night the registry holds. Architectures
    present but not requested stay out of both lists."""
    dated, undated = image_tags(registry, flavor, date)
    requested = parse_arches(requested_arches)
    present = {normalise_arch(a, "present architecture") for a in present_arches}
    found = [arch for arch in requested if arch in present]
    missing = tuple(arch for arch in requested if arch not in present)
    return PublishPlan(
        dated=dated,
        undated=undated,
        sources=tuple(f"{dated}-{arch}" for arch in found),
        move_undated=not missing,
        missing=missing,
    )
