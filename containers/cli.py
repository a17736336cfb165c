"""The containers package's subcommands for the `jaxbench` command: the pin manifest and the images.

    jaxbench manifest show cpu

The Docker, git and registry adapters are imported when a command runs, not when `jaxbench` starts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from jaxbench.containers import DEFAULT_REGISTRY
from jaxbench.core.cli import Subcommand
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.core.json_output import add_json_option

REPO_DIR = Path(__file__).resolve().parent.parent


def _add_bump(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", action="append", default=[], metavar="COMPONENT", help="repeatable")
    parser.add_argument("--manifest", type=Path, default=None, help="default: containers/manifest.yaml")
    parser.add_argument("--dry-run", action="store_true", help="print the moves, change nothing")
    parser.add_argument("--out", type=Path, help="write the bumped manifest here instead of in place")
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="COMPONENT=URL#REF",
        help="track another repository or branch for a component (repeatable; space- or comma-separated)",
    )


def _bump(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import manifest_commands
    from jaxbench.containers.manifest import MANIFEST_PATH

    only = [name for item in args.only for name in item.split(",") if name]
    sources = [text for item in args.source for text in item.replace(",", " ").split()]
    path = args.manifest or MANIFEST_PATH
    return manifest_commands.manifest_bump(only, path, args.dry_run, console, sources=sources, out=args.out)


def _add_diff(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old")
    parser.add_argument("new")
    add_json_option(parser)


def _diff(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import manifest_commands

    return manifest_commands.manifest_diff_command(args.old, args.new, REPO_DIR, console, as_json=args.json)


def _add_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("flavor")
    parser.add_argument("--install", choices=["source", "wheel"], help="default: the flavor's")
    add_json_option(parser)


def _show(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import manifest_commands

    return manifest_commands.manifest_show(args.flavor, args.install, console, as_json=args.json)


def _add_record(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--venv", metavar="FLAVOR", help="record this virtualenv against FLAVOR's wheel pins")
    parser.add_argument("--plan", type=Path, help="(images) the last stage's plan")
    parser.add_argument("--stages", type=Path, help="(images) the stage records")
    parser.add_argument("--image", default="", help="(images) the image reference")
    parser.add_argument("--revision", default="")
    parser.add_argument("--created", default="")
    parser.add_argument("--out", type=Path, help="(images) where the resolved manifest goes")


def _record(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import manifest_commands

    if args.venv:
        return manifest_commands.manifest_record_venv(args.venv, console)
    if not (args.plan and args.stages and args.out):
        raise InvalidInput("manifest record: give --venv FLAVOR, or --plan, --stages and --out (in an image)")
    return manifest_commands.manifest_record_image(
        args.plan, args.stages, args.image, args.revision, args.created, args.out, console
    )


MANIFEST_COMMANDS = (
    Subcommand(
        "bump", "move each component to its branch head and newest release (git, no token)", _add_bump, _bump
    ),
    Subcommand(
        "diff", "per-component commit ranges with compare links (files or git revisions)", _add_diff, _diff
    ),
    Subcommand("show", "what a flavor installs, stage by stage", _add_show, _show),
    Subcommand("record", "write the resolved manifest of an image or virtualenv", _add_record, _record),
)


def _add_build(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--flavor", default="cpu")
    parser.add_argument("--install", choices=["source", "wheel"], help="default: the flavor's")
    parser.add_argument("--registry", default=None, help=f"default: {DEFAULT_REGISTRY}")
    parser.add_argument("--date", help="the image's date tag, YYYY-MM-DD (default: today, UTC)")
    parser.add_argument("--base-image", help="overrides the flavor's base image")
    parser.add_argument(
        "--local-base",
        action="store_true",
        help="build on the flavor's local base (scripts/os-base-image: Debian, no registry; wheels only)",
    )
    parser.add_argument(
        "--ca-cert", action="append", type=Path, default=[], help="extra CA certificate for pip (repeatable)"
    )
    parser.add_argument("--pip-index-url")
    parser.add_argument("--pip-extra-index-url")
    parser.add_argument("--manifest", type=Path, help="default: containers/manifest.yaml")
    recorded = parser.add_mutually_exclusive_group()
    recorded.add_argument(
        "--records",
        type=Path,
        default=Path("build/records"),
        help="where the build record goes: stage times, sizes, contents (default: build/records)",
    )
    recorded.add_argument(
        "--no-record", action="store_true", help="no build record, so no size measurement (minutes for CUDA)"
    )


def _build(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import image_commands

    options = image_commands.BuildOptions(
        flavor=args.flavor,
        install=args.install,
        registry=args.registry or DEFAULT_REGISTRY,
        date=args.date,
        base_image=args.base_image,
        local_base=args.local_base,
        ca_certs=tuple(args.ca_cert),
        pip_index_url=args.pip_index_url,
        pip_extra_index_url=args.pip_extra_index_url,
        manifest_path=args.manifest,
        record_dir=None if args.no_record else args.records,
    )
    return image_commands.build_images(options, REPO_DIR, console)


def _add_overlay(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--manifest", type=Path, required=True, help="a pin manifest (the nightly's bumped one)"
    )
    parser.add_argument(
        "--components",
        action="append",
        required=True,
        metavar="NAME[,NAME]",
        help="the pure-Python components to install at the manifest's commits (repeatable)",
    )
    parser.add_argument("--out", type=Path, required=True, help="the overlay's folder (reused if same pins)")


def _overlay(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import overlay
    from jaxbench.containers.manifest import parse_manifest
    from jaxbench.core.documents import parse_yaml
    from jaxbench.core.files import read_text
    from jaxbench.harness.provenance.collection import read_image_info

    path = args.manifest
    manifest = parse_manifest(parse_yaml(read_text(path), f"manifest {path}"), str(path))
    names = [name for item in args.components for name in item.split(",") if name]
    pins = overlay.manifest_pins(manifest.components, names, str(path))
    # The base: this virtualenv's recorded manifest (or the image's), never an overlay's (JAXBENCH_MANIFEST).
    base = read_image_info({})
    made = overlay.create_overlay(
        pins, args.out, base_manifest=base.manifest, base_packages=base.packages or ()
    )
    console.print(str(made.path), markup=False, highlight=False, soft_wrap=True)
    return ExitCode.OK


def _add_image_target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--flavor", default="cpu")
    parser.add_argument("--registry", default=None, help=f"default: {DEFAULT_REGISTRY}")
    parser.add_argument("--date", help="the night's date tag, YYYY-MM-DD (default: today, UTC)")


def _push(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import image_commands

    return image_commands.push_image(args.flavor, args.registry or DEFAULT_REGISTRY, args.date, console)


def _add_publish(parser: argparse.ArgumentParser) -> None:
    _add_image_target(parser)
    parser.add_argument(
        "--arches",
        action="append",
        default=[],
        help="architectures that must all be present to move the undated tag (default amd64,arm64)",
    )


def _publish(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import image_commands
    from jaxbench.containers.publish import ARCHES

    registry, arches = args.registry or DEFAULT_REGISTRY, args.arches or ARCHES
    return image_commands.publish_images(args.flavor, registry, args.date, arches, console)


def _add_image_size(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", help="a local image, e.g. ghcr.io/jaxbench/jax:jax-2026-11-24")
    add_json_option(parser)


def _image_size(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import image_commands

    return image_commands.image_size(args.image, args.json, console)


def _add_venv(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--flavor", required=True, help="a framework flavor of the manifest, e.g. maxtext")
    parser.add_argument("--accelerator", default="cpu", help="cpu, cuda12 or cuda13 (make's ACCEL)")
    parser.add_argument(
        "--python",
        default=None,
        help="the interpreter to make it from (default: this one); a flavor whose stage has a Python of its "
        "own (pax: 3.10) takes it only at that version, else finds one (scripts/find-python)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="default: .venv-<flavor> in the checkout")


def _venv(args: argparse.Namespace, console: Console) -> int:
    from jaxbench.containers import manifest_commands

    return manifest_commands.framework_venv(
        args.flavor, args.accelerator, args.python, args.dir, REPO_DIR, console
    )


PUBLISH_DESCRIPTION = (
    "Make <registry>/jax:<flavor>-<date> the list of the requested architectures' images in the registry; "
    "move <registry>/jax:<flavor> to it only when all of them are there. Exit 0: all published; 5: some "
    "architecture missing (the dated list of the others was pushed, the undated tag not moved); 3: a docker "
    "command failed; 6: the Docker engine or the registry did not answer; 1: invalid input, nothing done."
)


def subcommands() -> list[Subcommand]:
    """In workflow order: pin the stack, build it, push this machine's image, publish the shared tags."""
    return [
        Subcommand("manifest", "the pin manifest: bump, diff, show, record", subcommands=MANIFEST_COMMANDS),
        Subcommand("build", "build a flavor's images from the manifest (make build)", _add_build, _build),
        Subcommand(
            "overlay",
            "this virtualenv with pure-Python components installed at a manifest's commits, without an image "
            "(make bench OVERLAY=)",
            _add_overlay,
            _overlay,
        ),
        Subcommand(
            "venv",
            "a framework's own virtualenv (.venv-<flavor>) from the flavor's wheel pins (make venv FLAVOR=)",
            _add_venv,
            _venv,
        ),
        Subcommand(
            "push",
            "push this machine's image of a flavor as <flavor>-<date>-<arch> (make push)",
            _add_image_target,
            _push,
        ),
        Subcommand(
            "publish",
            "the manifest lists <flavor>-<date> and <flavor> from the per-architecture tags (make publish)",
            _add_publish,
            _publish,
            description=PUBLISH_DESCRIPTION,
        ),
        Subcommand(
            "image-size",
            "an image's size per layer and per package group, compressed (as a registry stores it) and not",
            _add_image_size,
            _image_size,
        ),
    ]
