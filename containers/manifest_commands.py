"""The manifest subcommands as plain functions (the CLI parses, these act; tests call them): bump the pins,
diff two manifests, show a flavor, record what an image or a virtualenv holds, make a framework's own
virtualenv.

jaxbench manifest bump [--only jax] | diff OLD NEW | show FLAVOR | record
jaxbench venv --flavor maxtext         (make venv FLAVOR=maxtext)
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from jaxbench.containers import bump, record
from jaxbench.containers.diff import manifest_diff, read_manifest_source
from jaxbench.containers.git import GitRemote, Remote
from jaxbench.containers.manifest import load_manifest
from jaxbench.containers.resolve import InstallMode, resolve
from jaxbench.core.errors import ExitCode
from jaxbench.core.files import file_to_write
from jaxbench.core.json_output import print_json
from jaxbench.harness.provenance.collection import VENV_MANIFEST
from jaxbench.harness.tables import add_plain_row
from jaxbench.results.judgement.components import compare_url


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


def manifest_diff_command(old: str, new: str, repo_dir: Path, console: Console, as_json: bool = False) -> int:
    ranges = manifest_diff(
        read_manifest_source(old, repo_dir, what="manifest diff OLD"),
        read_manifest_source(new, repo_dir, what="manifest diff NEW"),
    )
    if as_json:
        print_json(console, "manifest diff", {"old": old, "new": new, "components": ranges})
        return ExitCode.OK
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


def manifest_show(flavor: str, install: InstallMode | None, console: Console, as_json: bool = False) -> int:
    resolved = resolve(load_manifest(), flavor, install)
    if as_json:  # every field of the resolved flavor, of which the table shows the main ones
        print_json(console, "manifest show", resolved.model_dump(mode="json"))
        return ExitCode.OK
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
    from jaxbench.containers import venv
    from jaxbench.harness.backends.framework.environment import framework_venv_dir

    resolved = resolve(load_manifest(), flavor, "wheel", accelerator=venv.host_accelerator(accel))
    target = directory or framework_venv_dir(repo_dir, flavor)
    manifest = venv.create(resolved, target, venv.interpreter(resolved, python))
    console.print(
        f"{target}: flavor {flavor} for {resolved.accelerator}, {len(manifest['components'])} components "
        f"recorded in {target / VENV_MANIFEST}",
        markup=False,
    )
    return ExitCode.OK
