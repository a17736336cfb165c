"""The image subcommands as plain functions (the CLI parses, these act; tests call them): build a flavor's
images, push this machine's image, publish the multi-architecture tags, measure an image's size.

jaxbench build --flavor cpu            (make build)
jaxbench push --flavor cpu --date D    (make push: this machine's image as <flavor>-<date>-<arch>)
jaxbench publish --flavor cpu --date D --arches amd64,arm64     (make publish: the multi-arch tags)
jaxbench image-size IMAGE [--json]
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from jaxbench.containers import DEFAULT_REGISTRY, docker, measure
from jaxbench.containers import image_size as sizes
from jaxbench.containers.build import BuildRequest, image_tags, plan_build
from jaxbench.containers.git import head_commit
from jaxbench.containers.manifest import MANIFEST_PATH, load_manifest
from jaxbench.containers.publish import arch_tag, known_arch, normalise_arch, parse_arches, plan_publish
from jaxbench.containers.resolve import InstallMode, Resolved, resolve
from jaxbench.core.errors import ExitCode, ExternalFailure, InvalidInput
from jaxbench.core.files import folder_to_write
from jaxbench.core.json_output import print_json
from jaxbench.core.terminal import console_for
from jaxbench.results.build_record import RECORD_DIR, StageTime

PROJECT_SOURCE = "https://github.com/jaxbench/jaxbench"
LOCAL_BASES = ("local/debian:",)
"""Base images made here by scripts/os-base-image (from Debian's archive) rather than pulled."""


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    flavor: str = "cpu"
    install: InstallMode | None = None
    """source or wheel; default: the flavor's."""
    registry: str = DEFAULT_REGISTRY
    date: str | None = None
    """The images' date tag, YYYY-MM-DD (default: today, UTC)."""
    base_image: str | None = None
    """Overrides the flavor's base image."""
    local_base: bool = False
    """Build on the flavor's local base (made here from Debian's archive) and its Python."""
    ca_certs: tuple[Path, ...] = ()
    """Extra CA certificates pip needs inside the build (served to it, never stored in an image)."""
    pip_index_url: str | None = None
    pip_extra_index_url: str | None = None
    manifest_path: Path | None = None
    """Another manifest than the repository's (the nightly builds its bumped copy)."""
    record_dir: Path | None = RECORD_DIR
    """Where the build record goes (stage times, sizes, contents; results/build_record.py); None: no
    record and no size measurement (minutes for a CUDA image)."""


def build_images(options: BuildOptions, repo_dir: Path, console: Console) -> int:
    flavor = options.flavor
    if options.local_base and options.base_image:
        raise InvalidInput(
            f"BASE_IMAGE={options.base_image} and LOCAL_BASE=1: give one of them (LOCAL_BASE=1 builds on the "
            "flavor's local_base in the manifest)"
        )
    # bad flavor or manifest: fail before any work
    manifest = load_manifest(options.manifest_path or MANIFEST_PATH)
    resolved = resolve(manifest, flavor, options.install, local_base=options.local_base)
    if options.record_dir is not None:
        folder_to_write(options.record_dir, "--records")
    now = dt.datetime.now(dt.UTC)
    request = BuildRequest(
        registry=options.registry,
        date=options.date or now.date().isoformat(),
        created=now.isoformat(timespec="seconds"),
        revision=head_commit(repo_dir),
        source=PROJECT_SOURCE,
        base_image=options.base_image,
        pip_index_url=options.pip_index_url,
        pip_extra_index_url=options.pip_extra_index_url,
    )
    builds = plan_build(resolved, request)
    for build in builds:
        if not (repo_dir / build.dockerfile).is_file():
            raise InvalidInput(
                f"containers/manifest.yaml: stages.{build.stage}.dockerfile: no {build.dockerfile}"
            )
    version = docker.engine_version()
    if version is None:  # a failure, not a skip: a script or CI step that asked for an image must not go on
        raise ExternalFailure(
            f"no Docker engine answers (docker version failed): no image built; `make bench` runs natively "
            f"in the virtualenv {sys.prefix}, which holds the manifest's pins"
        )
    base = builds[0].build_args["BASE_IMAGE"]
    if base.startswith(LOCAL_BASES) and not docker.image_exists(base):
        # No registry has local/ images: docker would try Docker Hub and fail far less clearly.
        suite = base.rpartition(":")[2]
        raise InvalidInput(
            f"BASE_IMAGE={base}: no such local image; make it first with scripts/os-base-image {suite} {base}"
        )
    buildx = docker.has_buildx()
    console.print(
        f"building {flavor} ({' → '.join(b.stage for b in builds)}) with Docker {version}, "
        f"{'BuildKit (buildx)' if buildx else 'the classic builder'}",
        markup=False,
    )
    stage_times = []
    with docker.serve_ca_certificates(options.ca_certs) as ca_url:
        for build in builds:
            started = dt.datetime.now(dt.UTC)
            try:
                docker.build_stage(build, repo_dir, ca_url, buildx)
            except docker.BuildFailed as error:
                console.print(f"error: {error}", style="bold red", markup=False)
                return ExitCode.FAILED
            seconds = (dt.datetime.now(dt.UTC) - started).total_seconds()
            stage_times.append(StageTime(stage=build.stage, seconds=round(seconds, 1), image=build.tags[0]))
    table = Table(title=f"flavor {flavor}")
    for column in ("image", "size", "build time"):
        table.add_column(column)
    for build, timed in zip(builds, stage_times, strict=True):
        size = f"{docker.image_size(timed.image) / 1e9:.2f} GB"
        table.add_row("\n".join(build.tags), size, f"{timed.seconds:.0f} s")
    console.print(table)
    if options.record_dir is not None:
        _record_build(request, resolved, stage_times, options.record_dir, console)
    return ExitCode.OK


def _record_build(
    request: BuildRequest,
    resolved: Resolved,
    stage_times: list[StageTime],
    directory: Path,
    console: Console,
) -> None:
    image = stage_times[-1].image
    console.print(f"measuring {image} for the build record (jaxbench image-size)", markup=False)
    architecture = docker.DockerCli().image_architecture(image) or "unknown"
    path, record = measure.record_build(request, resolved, architecture, stage_times, directory)
    total = record.size
    console.print(
        f"{path}: {total.compressed_bytes / 1e9:.2f} GB compressed, {total.bytes / 1e9:.2f} GB uncompressed, "
        f"built in {record.build_seconds:.0f} s",
        markup=False,
        soft_wrap=True,
    )


def _today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def push_image(
    flavor: str, registry: str, date: str | None, console: Console, cli: docker.DockerCli | None = None
) -> int:
    """Push this machine's `<registry>/jax:<flavor>-<date>` (from `make build`) as
    `<registry>/jax:<flavor>-<date>-<arch>`, arch being the engine's; `publish` makes the shared tags."""
    resolve(load_manifest(), flavor)  # bad flavor or manifest: fail before any work
    date = date or _today()
    dated, _ = image_tags(registry, flavor, date)
    cli = cli or docker.DockerCli()
    engine_arch = cli.engine_architecture()
    if engine_arch is None:
        raise ExternalFailure("no Docker engine answers (docker version failed): nothing pushed")
    arch = normalise_arch(engine_arch, "this Docker engine's architecture")
    image_arch = cli.image_architecture(dated)
    if image_arch is None:
        raise InvalidInput(
            f"{dated}: no such image here (make build FLAVOR={flavor} DATE={date} REGISTRY={registry})"
        )
    if known_arch(image_arch) != arch:
        raise InvalidInput(
            f"{dated} is built for {image_arch}, this engine is {arch}: push it from its own kind"
        )
    target = arch_tag(registry, flavor, date, arch)
    console.print(f"pushing {dated} as {target}", markup=False, soft_wrap=True)
    try:
        cli.push(dated, target)
    except docker.DockerFailed as error:
        console.print(f"error: {error}", style="bold red", markup=False, soft_wrap=True)
        return ExitCode.FAILED
    console.print(f"pushed {target}", markup=False, soft_wrap=True)
    return ExitCode.OK


def _present_arches(
    cli: docker.DockerCli, registry: str, flavor: str, date: str, requested: Sequence[str], console: Console
) -> list[str]:
    """The requested architectures whose tag of the night the registry holds, built for that architecture."""
    present = []
    for arch in requested:
        tag = arch_tag(registry, flavor, date, arch)
        found = cli.remote_architecture(tag)
        if found is None:
            console.print(f"{tag}: not in the registry", markup=False, soft_wrap=True)
        elif known_arch(found) != arch:
            console.print(f"{tag}: holds an image built for {found}, left out", markup=False, soft_wrap=True)
        else:
            present.append(arch)
    return present


def publish_images(
    flavor: str,
    registry: str,
    date: str | None,
    arches: Sequence[str],
    console: Console,
    cli: docker.DockerCli | None = None,
) -> int:
    """The manifest list `<flavor>-<date>` of the requested architectures the registry holds, and
    `<flavor>` moved to it only when it holds all of them. Returns ExitCode.OK, ExitCode.INCOMPLETE or
    ExitCode.FAILED; bad input raises InvalidInput before any docker command. Needs the docker CLI and
    the registry, no engine."""
    resolve(load_manifest(), flavor)
    requested = parse_arches(arches)
    date = date or _today()
    image_tags(registry, flavor, date)
    cli = cli or docker.DockerCli()
    if not cli.has_manifest_command():
        raise InvalidInput(
            "no docker CLI with `docker manifest` (Docker 20.10 or newer) here: nothing published"
        )
    try:
        present = _present_arches(cli, registry, flavor, date, requested, console)
        plan = plan_publish(registry, flavor, date, requested, present)
        if plan.sources:
            digest = cli.push_list(plan.dated, plan.sources)
            console.print(
                f"pushed {plan.dated} ({', '.join(present)}) {digest}", markup=False, soft_wrap=True
            )
        if plan.move_undated:
            digest = cli.push_list(plan.undated, plan.sources)
            console.print(f"moved {plan.undated} to the same list {digest}", markup=False, soft_wrap=True)
    except docker.DockerFailed as error:
        console.print(f"error: {error}", style="bold red", markup=False, soft_wrap=True)
        return ExitCode.FAILED
    if plan.move_undated:
        return ExitCode.OK
    published = f"{plan.dated} has {', '.join(present)}" if present else "nothing published"
    console.print(
        f"incomplete: no {', '.join(plan.missing)} image of {date}; {published}, {plan.undated} not moved",
        style="bold red",
        markup=False,
        soft_wrap=True,
    )
    return ExitCode.INCOMPLETE


def image_size(image: str, as_json: bool, console: Console) -> int:
    """A local image's size per layer and per package group, compressed and not (containers/image_size.py)."""
    docker.require_engine(image)
    if not docker.image_exists(image):
        raise InvalidInput(f"{image}: no such image here (make build FLAVOR=… or make pull FLAVOR=…)")
    progress = console_for(stderr=True) if as_json else console  # stdout: the JSON document alone
    progress.print(
        f"measuring {image}: each layer (docker save) split by who owns its files (asked inside it)",
        markup=False,
    )
    report = measure.size_report(image)
    if as_json:
        print_json(console, "image-size", report.as_json())
    else:
        sizes.render(report, console)
    return ExitCode.OK
