"""Resolution: a flavor of the pin manifest (containers/manifest.py) turned into the exact list of what each
stage installs, component by component, and the pip constraints of its wheel and pip installs. Pure, and
like the manifest it imports only pydantic and PyYAML, so the Makefile asks it for the virtualenv's
constraints before the rest of the stack is installed.

    .venv/bin/python -m jaxbench.containers.resolve cpu      # the cpu flavor's pins as pip constraints
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Literal

from jaxbench.containers.manifest import (
    Accelerator,
    Commit,
    ExtraRequires,
    FilePatch,
    IndexRelease,
    Install,
    Manifest,
    Name,
    PinnedRelease,
    PullPatch,
    TagRelease,
    load_manifest,
)
from jaxbench.core.errors import InvalidInput
from jaxbench.core.schema import Strict

InstallMode = Literal["source", "wheel"]
"""How a build installs the components that have a release: built from source, or the published wheels."""


class ResolvedComponent(Strict):
    """One component as a build installs it, and as results record it."""

    repository: str
    ref: str
    commit: Commit | None
    """What is installed: the tracked commit for a source build, the release's commit for wheels (None
    when the release's commit is not known yet; an image build then records what the wheel says)."""
    version: str | None
    """The release version for wheel installs; filled from the installed distribution when recorded."""
    install: Install
    build: Literal["pip", "jaxlib", "with-jax"]
    subdirectory: str | None
    wheel_commit: str | None
    requirements: list[str]
    """What pip installs for wheel and pip installs, and the listed dependencies of a `no_deps` build."""
    no_deps: bool
    build_requires: list[str]
    build_only: list[str]
    extra_requires: ExtraRequires | None
    patches: list[PullPatch | FilePatch]
    release_tag: str | None


class ResolvedStage(Strict):
    name: Name
    dockerfile: str
    components: dict[Name, ResolvedComponent]
    python: str | None = None
    """The stage's own Python (manifest `stages.<name>.python`), where it has one."""


class Resolved(Strict):
    flavor: Name
    accelerator: Accelerator
    python: str
    install: InstallMode
    """The install mode asked for (or the flavor's); each component's own `install` says what it got."""
    base_image: str
    runtime_image: str
    """Base of the final image (harness.Dockerfile's runtime stage)."""
    stages: list[ResolvedStage]

    @property
    def components(self) -> dict[str, ResolvedComponent]:
        return {name: c for stage in self.stages for name, c in stage.components.items()}


def _flavor_pinned(release: TagRelease, tag: str | None) -> TagRelease:
    """The release at the tag a flavor pins (its commit unknown until read), or the component's own."""
    if tag is None or tag == release.tag:
        return release
    return release.model_copy(update={"tag": tag, "commit": None})


def resolve_component(
    manifest: Manifest,
    name: str,
    accelerator: Accelerator,
    install: InstallMode,
    pins: Mapping[str, str] | None = None,
) -> ResolvedComponent:
    component = manifest.components[name]
    pins = pins or {}
    method: Install = component.install
    release = component.release
    pinned = name in pins or (isinstance(release, PinnedRelease) and release.pinned_by in pins)
    if (install == "wheel" or pinned) and method == "source" and release is not None:
        if component.patches:
            raise InvalidInput(
                f"components.{name}: has patches, which a published wheel cannot carry; build it from source"
            )
        method = "wheel"
    if isinstance(release, TagRelease):
        release = _flavor_pinned(release, pins.get(name))
    version = release.version if isinstance(release, TagRelease | IndexRelease) else None
    release_tag = release.tag if isinstance(release, TagRelease) else None
    if isinstance(release, PinnedRelease):
        pinner = manifest.components[release.pinned_by].release
        assert isinstance(pinner, TagRelease)  # checked by Manifest
        release_tag = pins.get(release.pinned_by, pinner.tag)
        if release_tag != pinner.tag:
            release = release.model_copy(update={"commit": None})
    requirements: list[str] = []
    if method in ("wheel", "pip") or component.no_deps:
        extra = component.cuda_pip if accelerator == "cuda" else []
        requirements = [r.format(version=version) for r in [*component.pip, *extra]]
    return ResolvedComponent(
        repository=component.repository,
        ref=component.ref,
        commit=release.commit if method == "wheel" and release is not None else component.commit,
        version=version if method == "wheel" else None,
        install=method,
        build=component.build,
        subdirectory=component.subdirectory,
        wheel_commit=component.wheel_commit,
        requirements=requirements,
        no_deps=component.no_deps,
        build_requires=component.build_requires,
        build_only=component.build_only,
        extra_requires=component.extra_requires,
        patches=component.patches,
        release_tag=release_tag if method == "wheel" else None,
    )


def resolve(
    manifest: Manifest,
    flavor_name: str,
    install: InstallMode | None = None,
    *,
    local_base: bool = False,
    accelerator: Accelerator | None = None,
) -> Resolved:
    """The flavor's stages with each component as it will be installed. `install` overrides the flavor's;
    `local_base` builds on the flavor's local base (and its Python) instead of its default base image;
    `accelerator` installs for another accelerator than the flavor's (a framework's virtualenv on a host
    without a GPU takes jax without the CUDA plugin, and no TransformerEngine)."""
    flavor = manifest.flavors.get(flavor_name)
    if flavor is None:
        raise InvalidInput(f"FLAVOR={flavor_name}: expected one of {', '.join(sorted(manifest.flavors))}")
    mode = install or flavor.install
    accelerator = accelerator or flavor.accelerator
    base_image, python = flavor.base_image, flavor.python
    runtime_image = flavor.runtime_image or base_image
    if local_base:
        if flavor.local_base is None:
            raise InvalidInput(
                f"FLAVOR={flavor_name} LOCAL_BASE=1: the flavor names no local_base in the manifest"
            )
        if mode != "wheel":
            raise InvalidInput(
                f"FLAVOR={flavor_name} LOCAL_BASE=1: a local base has no CUDA toolkit to build from source; "
                "use INSTALL=wheel"
            )
        base_image, python = flavor.local_base.image, flavor.local_base.python
        runtime_image = base_image  # debootstrap's minimal Debian: no compilers to leave behind
    stages = []
    for stage_name in flavor.stages:
        stage = manifest.stages[stage_name]
        components = {
            name: resolve_component(manifest, name, accelerator, mode, flavor.pins)
            for name in stage.components
            if accelerator in manifest.components[name].accelerators
        }
        stages.append(
            ResolvedStage(
                name=stage_name, dockerfile=stage.dockerfile, components=components, python=stage.python
            )
        )
    if mode == "wheel":
        _check_wheel_pins(stages)
    return Resolved(
        flavor=flavor_name,
        accelerator=accelerator,
        python=python,
        install=mode,
        base_image=base_image,
        runtime_image=runtime_image,
        stages=stages,
    )


def _check_wheel_pins(stages: list[ResolvedStage]) -> None:
    """A component built `with-jax` can only be recorded as the wheel's when jax comes as a wheel too."""
    components = {name: c for stage in stages for name, c in stage.components.items()}
    for name, component in components.items():
        if component.build == "with-jax" and component.install == "source":
            jax = components.get("jax")
            if jax is not None and jax.install == "wheel":
                raise InvalidInput(f"components.{name}: built into jaxlib from source, but jax is a wheel")


def constraints(resolved: Resolved) -> list[str]:
    """pip requirement lines of every wheel and pip install: the virtualenv's constraints file."""
    return [r for c in resolved.components.values() if c.install != "source" for r in c.requirements]


def main(argv: list[str]) -> int:
    """`python -m jaxbench.containers.resolve FLAVOR`: the flavor's wheel pins as pip constraints, which the
    Makefile asks for before the stack is installed (this needs only pydantic and PyYAML).
    `--local-base FLAVOR`: the flavor's local base image (scripts/image-test and nightly-local make it, then
    build on it)."""
    local = argv[:1] == ["--local-base"]
    if len(argv) != 1 + local:
        print("usage: python -m jaxbench.containers.resolve [--local-base] FLAVOR", file=sys.stderr)
        return 2
    try:
        resolved = resolve(load_manifest(), argv[-1], "wheel", local_base=local)
        print(resolved.base_image if local else "\n".join(constraints(resolved)))
    except InvalidInput as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
