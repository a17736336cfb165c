"""Runs inside the last build stage, before the runtime stage copies /opt (standard library and pip only, like
install_stage.py): takes out of each Python environment what only built something, so that it never reaches
the final image.

What goes: build requirements and what only they pulled in (pip has no "autoremove", so the closure is
computed here), static libraries, packages' own test suites and the source checkouts of source builds.
Each and why: docs/design.md, "Slimming the image".

    python3 slim.py [--records /opt/jaxbench/stages] [--dry-run]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Inside the image both scripts sit in /opt/jaxbench, which is this script's sys.path[0]; on the host (tests)
# they are the containers package's modules.
try:
    from install_stage import normalize, requirement_name
except ImportError:
    from jaxbench.containers.install_stage import normalize, requirement_name

ROOT = Path("/opt/jaxbench")
SOURCES = Path("/opt/src")

DEPENDENCIES = """
import importlib.metadata, json
from pip._vendor.packaging.requirements import Requirement

def normal(name):
    return name.lower().replace("_", "-").replace(".", "-")

graph = {}
for distribution in importlib.metadata.distributions():
    extras = {"": []}
    for extra in distribution.metadata.get_all("Provides-Extra") or []:
        extras[normal(extra)] = []
    for line in distribution.requires or []:
        requirement = Requirement(line)
        edge = [normal(requirement.name), sorted(normal(e) for e in requirement.extras)]
        always = requirement.marker is None or requirement.marker.evaluate({"extra": ""})
        if always:
            extras[""].append(edge)
            continue
        for extra in extras:
            if extra and requirement.marker.evaluate({"extra": extra}):
                extras[extra].append(edge)
    graph[normal(distribution.metadata["Name"] or "")] = extras
print(json.dumps(graph))
"""
"""Run by the target Python: every installed distribution -> {extra ("" for none) -> [[requirement, its
extras]]}, markers evaluated for this interpreter; an extra lists only what the extra adds."""

Graph = dict[str, dict[str, list[list[Any]]]]
"""distribution -> extra -> [[required distribution, [its extras]]] (names normalised)."""


def closure(
    roots: dict[str, set[str]], graph: Graph, cut: frozenset[tuple[str, str]] = frozenset()
) -> set[str]:
    """Every installed distribution that `roots` (name -> extras asked for) need, following extras as pip
    does; `cut`: (from, to) requirements not followed."""
    seen: set[tuple[str, str]] = set()
    pending = [(name, extra) for name, extras in roots.items() for extra in {"", *extras}]
    while pending:
        name, extra = pending.pop()
        if (name, extra) in seen or name not in graph:
            continue
        seen.add((name, extra))
        for required, extras in graph[name].get(extra, []):
            if (name, required) not in cut:
                pending += [(required, e) for e in ("", *extras)]
    return {name for name, _ in seen}


def removable(
    build: Mapping[str, set[str]],
    graph: Graph,
    asked: dict[str, set[str]] | None = None,
    cut: frozenset[tuple[str, str]] = frozenset(),
) -> set[str]:
    """What the build requirements (name -> extras asked for, e.g. pybind11[global]; and build-only
    requirements) brought in that nothing else installed needs. `asked`: extras the stages' own
    requirements ask for (jax-cuda13-plugin[with-cuda]); `cut`: requirements declared but only used to
    build."""
    asked = asked or {}
    built_with = closure(dict(build), graph, cut)
    # Roots: whatever the build did not bring in, and what a stage asked for by name.
    roots = [name for name in graph if name not in built_with or (name in asked and name not in build)]
    return built_with - closure({name: asked.get(name, set()) for name in roots}, graph, cut)


def _extras(requirement: str) -> set[str]:
    inside = requirement.partition("[")[2].partition("]")[0]
    return {normalize(e.strip()) for e in inside.split(",") if e.strip()}


@dataclasses.dataclass
class Environment:
    """What the stage records say of one Python environment."""

    build: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    """Build and build-only requirements -> the extras asked for."""
    asked: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    cut: set[tuple[str, str]] = dataclasses.field(default_factory=set)


def environments(records: Path) -> dict[str, Environment]:
    """Python environment -> its build requirements, the extras its components ask for, and the
    build-only requirements of each component's distributions."""
    found: dict[str, Environment] = {}
    for record in sorted(records.glob("*.json")):
        for component in json.loads(record.read_text())["components"].values():
            if not component.get("python"):
                continue
            environment = found.setdefault(component["python"], Environment())
            for requirement in component.get("build_requires") or []:
                environment.build.setdefault(requirement_name(requirement), set()).update(
                    _extras(requirement)
                )
            own = [requirement_name(r) for r in component.get("requirements") or []]
            own += [normalize(component["distribution"])] if component.get("distribution") else []
            for requirement in component.get("requirements") or []:
                environment.asked.setdefault(requirement_name(requirement), set()).update(
                    _extras(requirement)
                )
            for name in component.get("build_only") or []:
                environment.build.setdefault(requirement_name(name), set())
                environment.cut.update((distribution, requirement_name(name)) for distribution in own)
    return found


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _static_libraries_and_test_suites(root: Path) -> tuple[list[Path], list[Path]]:
    """One walk of `root`: its static libraries, and the outermost `tests` folders inside site-packages
    (whose insides are not walked)."""
    archives, suites = [], []
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        archives += [here / f for f in files if f.endswith(".a") and not (here / f).is_symlink()]
        if "site-packages" in here.parts and "tests" in subfolders:
            suites.append(here / "tests")
            subfolders.remove("tests")
    return sorted(archives), sorted(suites)


def slim(records: Path, roots: list[Path], sources: Path, dry_run: bool) -> int:
    freed = 0
    for python, environment in environments(records).items():
        listed = subprocess.run([python, "-c", DEPENDENCIES], check=True, capture_output=True, text=True)
        graph: Graph = json.loads(listed.stdout)
        gone = sorted(removable(environment.build, graph, environment.asked, frozenset(environment.cut)))
        print(f"{python}: build requirements out: {' '.join(gone) or '(none)'}", flush=True)
        if gone and not dry_run:
            prefix = Path(python).parent.parent
            before = tree_bytes(prefix)
            subprocess.run([python, "-m", "pip", "uninstall", "--yes", "--quiet", *gone], check=True)
            freed += before - tree_bytes(prefix)
    for root in roots:
        archives, suites = _static_libraries_and_test_suites(root)
        for archive in archives:
            freed += archive.stat().st_size
            print(f"static library out: {archive}", flush=True)
            if not dry_run:
                archive.unlink()
        for suite in suites:
            freed += tree_bytes(suite)
            if not dry_run:
                shutil.rmtree(suite)
        if suites:
            print(f"test suites out: {len(suites)} tests folders in site-packages under {root}", flush=True)
    if sources.is_dir():
        freed += tree_bytes(sources)
        print(f"source checkouts out: {sources}", flush=True)
        if not dry_run:
            shutil.rmtree(sources)
    # A dry run cannot weigh the packages pip would uninstall: its figure is the files' alone.
    print(f"slim: {freed / 1e6:.0f} MB {'would be ' if dry_run else ''}freed", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=ROOT / "stages")
    parser.add_argument(
        "--root", type=Path, action="append", help="where static libraries are removed (default: /opt)"
    )
    parser.add_argument(
        "--sources", type=Path, default=SOURCES, help="the source checkouts (default: /opt/src)"
    )
    parser.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    args = parser.parse_args()
    return slim(args.records, args.root or [Path("/opt")], args.sources, args.dry_run)


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
