"""The container and manifest subcommands as plain functions (the CLI parses, these act; tests call them).

jaxbench manifest bump [--only jax] | diff OLD NEW | show FLAVOR | record
jaxbench build --flavor cpu            (make build)
jaxbench push --flavor cpu --date D    (make push: this machine's image as <flavor>-<date>-<arch>)
jaxbench publish --flavor cpu --date D --arches amd64,arm64     (make publish: the multi-arch tags)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from containers import DEFAULT_REGISTRY, bump, docker, measure, record
from containers import image_size as sizes
from containers.build import BuildRequest, image_tags, plan_build
from containers.diff import manifest_diff, read_manifest_source
from containers.git import GitRemote, Remote, head_commit
from containers.manifest import MANIFEST_PATH, Resolved, load_manifest, resolve
from containers.publish import arch_tag, known_arch, normalise_arch, parse_arches, plan_publish
from core.errors import ExitCode, ExternalFailure, InvalidInput
from core.files import file_to_write, folder_to_write
from harness.provenance.collection import VENV_MANIFEST
from harness.tables import add_plain_row
from results.build_record import RECORD_DIR, StageTime
from results.judgement.components import compare_url

PROJECT_SOURCE = "https://github.com/jaxbench/jaxbench"
LOCAL_BASES = ("local/debian:",)
"""Base images made here by scripts/os-base-image (from Debian's archive) rather than pulled."""

InstallMode = Literal["source", "wheel"]


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "unknown"


def manifest_bump(
    only: Sequence[str],
    path: Path,
    dry_run: bool,
    console: Console,
    remote: Remote | None = None,
    sources: Sequence[str] = (),
    out: Path | None = None,
) -> int:
    """Bump `path` in place, or write the bumped manifest to `out` (which always gets a manifest, moved or
    not, so the nightly's next jobs find one)."""
    manifest = load_manifest(path)
    overrides = [bump.parse_source_override(text, manifest) for text in sources]
    if not dry_run:  # before the remotes are asked
        file_to_write(out or path, "--out" if out else "--manifest")
    moves = bump.plan_bump(manifest, remote or GitRemote(), only, overrides)
    table = Table(title=f"{'would bump' if dry_run else 'bumped'} {path}")
    for column in ("component", "pin", "old", "new", "compare"):
        table.add_column(column)
    for move in moves:
        if not move.moved:
            continue
        repository = manifest.components[move.component].repository
        if move.field == "source":
            table.add_row(move.component, "source", move.old or "", move.new, "")
            continue
        label = manifest.components[move.component].ref if move.field == "commit" else "release"
        old = f"{move.old_tag} {_short(move.old)}" if move.old_tag else _short(move.old)
        new = f"{move.new_tag} {_short(move.new)}" if move.new_tag else _short(move.new)
        table.add_row(move.component, label, old, new, compare_url(repository, move.old, move.new) or "")
    moved = [m for m in moves if m.moved]
    target = out or path
    if not moved:
        console.print(f"{path}: every pin is at its newest already", markup=False)
        if out is not None and not dry_run:
            shutil.copyfile(path, out)
        return ExitCode.OK
    console.print(table)
    if not dry_run:
        text = bump.apply_moves(path.read_text(), moved)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(dir=target.parent, suffix=".yaml")
        os.close(handle)
        load_check = Path(name)
        try:
            load_check.write_text(text)
            load_manifest(load_check)  # never write a manifest that does not load
            os.chmod(load_check, stat.S_IMODE(path.stat().st_mode))
            load_check.replace(target)
        finally:
            load_check.unlink(missing_ok=True)
    return ExitCode.OK


def manifest_diff_command(old: str, new: str, repo_dir: Path, console: Console) -> int:
    ranges = manifest_diff(
        read_manifest_source(old, repo_dir, what="manifest diff OLD"),
        read_manifest_source(new, repo_dir, what="manifest diff NEW"),
    )
    if not ranges:
        console.print(f"{old} and {new} pin the same commits", markup=False)
        return ExitCode.OK
    table = Table(title=Text(f"{old} → {new}"))
    for column in ("component", "old", "new", "compare"):
        table.add_column(column)
    for change in ranges:
        add_plain_row(
            table, change.name, _short(change.last_good), _short(change.first_bad), change.compare_url or ""
        )
    console.print(table)
    return ExitCode.OK


def manifest_show(flavor: str, install: InstallMode | None, console: Console) -> int:
    resolved = resolve(load_manifest(), flavor, install)
    table = Table(title=f"flavor {flavor} ({resolved.accelerator}, Python {resolved.python})")
    for column in ("stage", "component", "install", "commit", "version", "pip"):
        table.add_column(column)
    for stage in resolved.stages:
        for name, component in stage.components.items():
            table.add_row(
                stage.name,
                name,
                component.install,
                _short(component.commit),
                component.version or "",
                Text(" ".join(component.requirements)),
            )
    console.print(table)
    return ExitCode.OK


def manifest_record_image(
    plan: Path, stages: Path, image: str, revision: str, created: str, out: Path, console: Console
) -> int:
    header_plan = json.loads(plan.read_text())
    header = {
        "kind": "image",
        "flavor": header_plan["flavor"],
        "accelerator": header_plan["accelerator"],
        "image": image,
        "revision": revision or None,
        "created": created or None,
        "python": ".".join(map(str, sys.version_info[:3])),
    }
    manifest = record.record_image(stages, header, record.installed_packages(), out)
    console.print(f"recorded {len(manifest['components'])} components in {out}", markup=False)
    return ExitCode.OK


def manifest_record_venv(flavor: str, console: Console) -> int:
    manifest = record.record_venv(resolve(load_manifest(), flavor, "wheel"))
    console.print(
        f"virtualenv pins recorded ({len(manifest['components'])} components of flavor {flavor}) in "
        f"{Path(sys.prefix) / VENV_MANIFEST}",
        markup=False,
    )
    return ExitCode.OK


def framework_venv(
    flavor: str, accel: str, python: str | None, directory: Path | None, repo_dir: Path, console: Console
) -> int:
    from containers import venv
    from harness.backends.framework.environment import framework_venv_dir

    resolved = resolve(load_manifest(), flavor, "wheel", accelerator=venv.host_accelerator(accel))
    target = directory or framework_venv_dir(repo_dir, flavor)
    manifest = venv.create(resolved, target, python or sys.executable)
    console.print(
        f"{target}: flavor {flavor} for {resolved.accelerator}, {len(manifest['components'])} components "
        f"recorded in {target / VENV_MANIFEST}",
        markup=False,
    )
    return ExitCode.OK


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
    if version is None:
        console.print(
            f"No Docker engine answers (docker version failed): the local virtualenv {sys.prefix} holds the "
            f"manifest's pins instead, and `make bench` runs natively.",
            markup=False,
            soft_wrap=True,
        )
        return ExitCode.OK
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
    if not as_json:  # stdout is the JSON document alone then
        console.print(f"measuring {image}: its layers (docker save) and its files (inside it)", markup=False)
    report = measure.size_report(image)
    if as_json:
        console.print_json(json.dumps(report.as_json()))
    else:
        sizes.render(report, console)
    return ExitCode.OK
