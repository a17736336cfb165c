"""A manifest component's published releases, as backfill and triage by wheels walk them: its pip
requirements at a version, the flavor's other released components beside it, and its releases between two
pins (containers/package_index.py lists them).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/backfill/test_backfill_nights.py
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from packaging.version import InvalidVersion, Version

from jaxbench.containers.install_stage import requirement_name
from jaxbench.containers.manifest import Component
from jaxbench.containers.package_index import Release, between, fetch_releases
from jaxbench.core.errors import InvalidInput


def requirements_of(component: Component, version: Version, accelerator: str) -> tuple[str, ...]:
    """A component's pip requirements at `version` (its manifest `pip`, and `cuda_pip` on CUDA hosts)."""
    templates = [*component.pip, *(component.cuda_pip if accelerator == "cuda" else [])]
    return tuple(template.format(version=version) for template in templates)


def companions_of(components: Mapping[str, Component], name: str) -> tuple[str, ...]:
    """The distributions of the flavor's other released components (flax and optax beside jax), without a
    version: the stack's companions, resolved at each night."""
    names: list[str] = []
    for other, component in components.items():
        if other != name and component.release is not None and component.build != "with-jax":
            names += [requirement_name(template) for template in component.pip]
    return tuple(dict.fromkeys(names))


def released_component(components: Mapping[str, Component], name: str, flavor: str) -> Component:
    """The component a backfill walks, refused where it has no published releases to walk."""
    component = components.get(name)
    if component is None:
        raise InvalidInput(
            f"component {name!r}: not in the {flavor} flavor (expected one of {', '.join(components)})"
        )
    if component.release is None or not component.pip:
        raise InvalidInput(
            f"component {name!r}: no published releases to install (it is built from source, or with jax)"
        )
    return component


def releases_between(
    name: str,
    component: Component,
    good: str,
    bad: str,
    index: str | None,
    releases: Callable[[str, str | None], list[Release]] = fetch_releases,
) -> list[str]:
    """The component's releases from `good` to `bad` (versions as recorded), oldest first, both ends
    included: the steps of a bisection by wheels."""
    try:
        first, last = Version(good), Version(bad)
    except InvalidVersion:
        raise InvalidInput(f"{name}: {good}..{bad}: not two release versions to bisect between") from None
    if first >= last:
        raise InvalidInput(f"{name}: {good}..{bad}: the last good release is not older than the first bad")
    distribution = requirement_name(component.pip[0])
    found = between(releases(distribution, index), first, last)
    versions = [str(r.version) for r in found]
    if not found or found[0].version != first or found[-1].version != last:
        raise InvalidInput(
            f"{name}: {good} and {bad} are not both releases of {distribution} on {index or 'PyPI'} "
            f"(found {', '.join(versions) or 'none'} between them)"
        )
    return [good, *versions[1:-1], bad]
