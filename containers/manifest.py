"""The pin manifest, `containers/manifest.yaml`: every component of the image stack (repository, tracked
branch, pinned commit, how it is installed, patches), the build stages and the flavors built from them.

Pure: the typed schema and loading, with errors that name the file and field; containers/resolve.py turns
a flavor into what each stage installs. Everything here imports only pydantic and PyYAML, so `make build`
can read the manifest before the rest of the stack is installed. Each component has two pins, `commit` (a
source install builds it) and `release` (a wheel install uses it): docs/design.md, "Two pins per
component".

    .venv/bin/python -m jaxbench.containers.resolve cpu      # the cpu flavor's pins as pip constraints
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    model_validator,
)

from jaxbench.core.documents import parse_yaml
from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import read_text
from jaxbench.core.schema import Strict, first_problem
from jaxbench.core.urls import scrub_url

MANIFEST_PATH = Path(__file__).parent / "manifest.yaml"
PATCH_DIR = Path(__file__).parent / "patches"

Commit = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*$")]
Install = Literal["source", "wheel", "pip"]
Accelerator = Literal["cpu", "cuda"]
ACCELERATORS: tuple[Accelerator, ...] = ("cpu", "cuda")


class PullPatch(Strict):
    pull: int = Field(gt=0)
    """Upstream pull request number: its head (`refs/pull/N/head`) is merged on top of the pinned commit."""


class FilePatch(Strict):
    file: str
    """A patch in containers/patches/, applied with `git apply` on top of the pinned commit."""

    @model_validator(mode="after")
    def _inside_patch_dir(self) -> FilePatch:
        if "/" in self.file or not self.file.endswith(".patch"):
            raise ValueError(
                f"expected a file name ending in .patch inside containers/patches/, got {self.file!r}"
            )
        return self


class TagRelease(Strict):
    """Releases are git tags: the newest tag matching `tags` is the release; without `prefix` its version."""

    tags: str
    """Glob over tag names, e.g. `jax-v*`, or one exact tag to stay on (`jax-v0.4.26`)."""
    prefix: str | None = None
    """Stripped from a tag to give its version; default: the glob's text before its first `*`."""
    tag: str
    commit: Commit | None
    """The commit the tag points to (peeled): the commit the published wheels were built from. None
    until a bump reads the tag (a release pinned from the package index alone)."""

    @model_validator(mode="after")
    def _tag_matches(self) -> TagRelease:
        if any(c in self.tags for c in "?[") or self.tags.startswith("*"):
            raise ValueError(f"tags: expected a tag or a glob using '*' after a prefix, got {self.tags!r}")
        if not fnmatch.fnmatchcase(self.tag, self.tags):
            raise ValueError(f"tag {self.tag!r} does not match tags {self.tags!r}")
        if not self.tag.startswith(self.version_prefix) or self.tag == self.version_prefix:
            raise ValueError(f"tag {self.tag!r}: expected a version after the prefix {self.version_prefix!r}")
        return self

    @property
    def version_prefix(self) -> str:
        return self.prefix if self.prefix is not None else self.tags.partition("*")[0]

    def version_of(self, tag: str) -> str:
        return tag.removeprefix(self.version_prefix)

    @property
    def version(self) -> str:
        return self.version_of(self.tag)


class PinnedRelease(Strict):
    """A component released only inside another's wheels (XLA inside jaxlib): the release's commit is read
    from a file of that component's release tree."""

    pinned_by: Name
    """The component whose release pins this one, e.g. `jax`."""
    file: str
    """Path inside that component's repository, e.g. `third_party/xla/revision.bzl`."""
    pattern: str
    """Regular expression whose first group is the 40-hex commit."""
    commit: Commit | None
    """None until a bump has read it (the file was not readable when the pinner's release was pinned)."""

    @model_validator(mode="after")
    def _pattern_has_group(self) -> PinnedRelease:
        try:
            groups = re.compile(self.pattern).groups
        except re.error as e:
            raise ValueError(f"pattern is not a regular expression: {e}") from e
        if groups < 1:
            raise ValueError("pattern: expected one capturing group around the commit")
        return self


class IndexRelease(Strict):
    """A component published only to the package index, as one dev build per commit of its branch (Levanter
    and Haliax: their last tags predate current jax). `jaxbench manifest bump` reads tags, not the index, so
    it leaves this pin where it is; move `index_version` by hand when a framework's virtualenv should
    follow."""

    index_version: str = Field(pattern=r"^[0-9][0-9A-Za-z.+!-]*$")
    """The version on PyPI, e.g. `1.2.dev1644`."""
    commit: Commit | None = None
    """The commit that dev build was made from, where known."""

    @property
    def version(self) -> str:
        return self.index_version


class ExtraRequires(Strict):
    extra: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """The extra whose dependencies are the component's runtime dependencies."""
    exclude: list[str] = Field(default_factory=list)
    """Distribution names (globs) left out: what earlier stages pinned, or another CUDA's builds of it."""


class Component(Strict):
    repository: Annotated[str, AfterValidator(scrub_url)] = Field(min_length=1, pattern=r"^[^-]")
    """Clone URL (https://github.com/... for the real stack; a local path works for tests and mirrors).
    Never starting with "-", which git would read as an option (`--upload-pack=...` runs a command).
    Without credentials (core/urls.py): this is what every record, plan and image holds."""
    ref: str = Field(min_length=1, pattern=r"^[^-]")
    """The branch the nightly tracks (never starting with "-", like the repository)."""
    commit: Commit
    """Head of `ref` at the last `jaxbench manifest bump`."""
    install: Install
    """source: built from `commit` (+ patches); wheel: the published release (`release`, `pip`);
    pip: the requirements in `pip` as pinned, with no commit of ours behind them."""
    build: Literal["pip", "jaxlib", "with-jax"] = "pip"
    """How a source install is built: `pip` installs the checkout, `jaxlib` builds jaxlib and the CUDA
    plugin with jax's build script, `with-jax` is a checkout that jax's build compiles in (XLA)."""
    subdirectory: str | None = None
    """The Python project inside the repository, when not at its root (orbax's `checkpoint`)."""
    pip: list[str] = Field(default_factory=list)
    """Requirements of a wheel or pip install; `{version}` is the release's version."""
    cuda_pip: list[str] = Field(default_factory=list)
    """Added to `pip` on CUDA flavors (the CUDA plugin wheels)."""
    accelerators: list[Accelerator] = Field(default_factory=lambda: list(ACCELERATORS))
    """Flavors of which accelerators install it (TransformerEngine is CUDA-only)."""
    wheel_commit: str | None = None
    """`module.attribute` where the published wheel records the commit it was built from
    (`jax.version._git_hash`); image builds check it equals the release's commit."""
    no_deps: bool = False
    """Install the source build without its declared dependencies and install `pip` instead (t5x asks for
    flax and optax from their git heads, which would replace the pinned ones)."""
    build_requires: list[str] = Field(default_factory=list)
    """Build this component in the stage's environment (pip --no-build-isolation) after installing these:
    TransformerEngine's JAX extension compiles against the installed jax and CUDA, and its isolated build
    environment would fetch another jax (and, from source, torch) instead."""
    build_only: list[str] = Field(default_factory=list)
    """Distributions the component declares as run-time requirements but uses only to build (TE's JAX
    extension names cudnn-frontend, whose Python side only TE's PyTorch code imports; it pulls in the
    CUTLASS DSL for two CUDA versions). containers/slim.py takes them out of the final image, and the image
    test's `pip check` accepts exactly these missing requirements of this component."""
    extra_requires: ExtraRequires | None = None
    """Dependencies the component declares only under an extra (maxtext's `cuda12`, which also pins a
    CUDA 12 jax stack): installed after it, without `exclude`, constrained like everything else."""
    release: TagRelease | PinnedRelease | IndexRelease | None = None
    patches: list[PullPatch | FilePatch] = Field(default_factory=list)
    _clone_url: str = PrivateAttr(default="")

    @model_validator(mode="wrap")
    @classmethod
    def _keep_clone_url(cls, data: Any, handler: ModelWrapValidatorHandler[Component]) -> Component:
        """The repository as written, credentials and all, kept out of every field (so out of every dump,
        record and plan) for the git commands of this process alone."""
        component = handler(data)
        written = data.get("repository") if isinstance(data, Mapping) else None
        component._clone_url = written if isinstance(written, str) else component.repository
        return component

    @property
    def clone_url(self) -> str:
        """What git clones or asks (`git ls-remote`): the repository as the manifest wrote it."""
        return self._clone_url or self.repository

    @model_validator(mode="after")
    def _consistent(self) -> Component:
        if self.no_deps and (self.install != "source" or not self.pip):
            raise ValueError("no_deps: true needs install: source and its dependencies listed in pip")
        if self.install == "wheel" and self.release is None:
            raise ValueError("install: wheel needs a release (the published wheels' tag and commit)")
        if self.install in ("wheel", "pip") and not self.pip and self.build != "with-jax":
            raise ValueError(f"install: {self.install} needs the pip requirements to install")
        if self.patches and self.install != "source":
            raise ValueError("patches apply to source builds only: set install: source")
        return self


class Stage(Strict):
    dockerfile: str
    """File in containers/ that builds this stage on top of the previous one."""
    components: list[Name] = Field(default_factory=list)
    """Installed by this stage, in this order."""
    python: str | None = Field(default=None, pattern=r"^3\.\d+$")
    """A Python of its own, for components that cannot run on the flavor's: the stage installs them into an
    environment of that Python (the image's /opt/<stage>, a host's .venv-<flavor>, which holds this stage
    alone), beside the harness's."""


class LocalBase(Strict):
    """A base image made on this machine (scripts/os-base-image: debootstrap from Debian's archive, no
    registry), for builds that install published wheels: what the tests and CI build on."""

    image: str = Field(pattern=r"^local/debian:[a-z]+$")
    """local/debian:<suite>; the suite names the Debian release scripts/os-base-image bootstraps."""
    python: str = Field(pattern=r"^3\.\d+$")
    """The Python of that Debian release (the flavor's own `python` is its default base's)."""

    @property
    def suite(self) -> str:
        return self.image.rpartition(":")[2]


class Flavor(Strict):
    description: str
    base_image: str
    """Default BASE_IMAGE of the first stage (a build argument: any image with the same OS family)."""
    runtime_image: str | None = None
    """Base of the image that ships (the last stage's runtime part, which copies /opt from the build): the
    same OS release as base_image without its compilers and headers, e.g. NVIDIA's CUDA runtime image for
    its devel image. Default: base_image."""
    accelerator: Accelerator
    python: str = Field(pattern=r"^3\.\d+$")
    """Python of the framework environment (/opt/venv)."""
    stages: list[Name] = Field(min_length=1)
    install: Literal["source", "wheel"] = "source"
    """`wheel`: every component with a release installs its published wheels (the fast mode)."""
    local_base: LocalBase | None = None
    """The base `make build LOCAL_BASE=1` uses instead of base_image (wheel installs only)."""
    pins: dict[Name, str] = Field(default_factory=dict)
    """Component -> release tag this flavor installs (as published wheels) instead of the component's own
    pin, for a framework that does not run on the stack's current release (and a component released inside
    another's wheels, XLA in jaxlib, follows its pinner)."""


class Manifest(Strict):
    schema_version: Literal[1] = 1
    components: dict[Name, Component]
    stages: dict[Name, Stage]
    flavors: dict[Name, Flavor]

    @model_validator(mode="after")
    def _references(self) -> Manifest:
        for stage_name, stage in self.stages.items():
            for member in stage.components:
                if member not in self.components:
                    raise ValueError(f"stages.{stage_name}.components: unknown component {member!r}")
        for flavor_name, flavor in self.flavors.items():
            for chained in flavor.stages:
                if chained not in self.stages:
                    raise ValueError(f"flavors.{flavor_name}.stages: unknown stage {chained!r}")
            for pinned, tag in flavor.pins.items():
                release = self.components[pinned].release if pinned in self.components else None
                if not isinstance(release, TagRelease) or not fnmatch.fnmatchcase(tag, release.tags):
                    raise ValueError(
                        f"flavors.{flavor_name}.pins.{pinned}: expected a component released by tags and "
                        f"a tag matching them, got {tag!r}"
                    )
        for name, component in self.components.items():
            release = component.release
            if isinstance(release, PinnedRelease):
                pinner = self.components.get(release.pinned_by)
                if pinner is None or not isinstance(pinner.release, TagRelease):
                    raise ValueError(
                        f"components.{name}.release.pinned_by: {release.pinned_by!r} must be a component "
                        "released by tags"
                    )
        return self


def parse_manifest(data: object, source: str) -> Manifest:
    try:
        return Manifest.model_validate(data)
    except ValidationError as e:
        raise InvalidInput(f"{source}: {first_problem(e)}") from e


def load_manifest(path: Path = MANIFEST_PATH) -> Manifest:
    data = parse_yaml(read_text(path), f"manifest {path}")
    manifest = parse_manifest(data, str(path))
    for name, component in manifest.components.items():
        for patch in component.patches:
            if isinstance(patch, FilePatch) and not (path.parent / "patches" / patch.file).is_file():
                raise InvalidInput(f"{path}: components.{name}.patches: no file patches/{patch.file}")
    return manifest
