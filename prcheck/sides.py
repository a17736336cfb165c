"""The two stacks a pull request is measured on: its base and its head.

- A change to an ecosystem component (`--source flax=URL#REF`, as the nightly's bump takes it): this
  checkout's virtualenv with the component overlaid at the base commit, and at the head commit
  (containers/overlay.py, as triage's probes are made). Only pure-Python components can be overlaid.
- A change to this repository (or a fork of it): the harness itself at each commit, exported with
  `git archive` (no worktree to register or clean up). Where the commit's `pyproject.toml` and
  `containers/manifest.yaml` equal this checkout's, the checkout's virtualenv runs it (its packages are the
  ones that commit asks for) with the exported tree first on PYTHONPATH; otherwise the commit gets a
  virtualenv of its own, built by its own Makefile (`make venv`, from PyPI: minutes).
"""

from __future__ import annotations

import dataclasses
import sys
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jaxbench.containers.bump import SourceOverride
from jaxbench.containers.git import file_at, git_argument, run_git
from jaxbench.containers.overlay import Pin, create_overlay
from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.core.processes import run_child
from jaxbench.harness.provenance.collection import GIT_COMMIT_ENV
from jaxbench.triage.bench import COMPILED, commit_of, mirror

ENVIRONMENT_FILES = ("pyproject.toml", "containers/manifest.yaml")
"""What decides a virtualenv's packages (the Makefile installs the project's extras under the manifest's
pins): equal files, the same virtualenv serves."""


@dataclasses.dataclass(frozen=True)
class Side:
    name: str
    """base or head."""
    label: str
    """What runs, for tables: `optax@1a2b3c4d5e6f`, `jaxbench@1a2b3c4d5e6f`."""
    commit: str
    environ: Mapping[str, str]
    """Added to this process's environment for the side's runs."""
    python: str = sys.executable
    cwd: Path | None = None


def component_sides(
    source: SourceOverride,
    base_ref: str,
    work: Path,
    *,
    base_manifest: Mapping[str, Any] | None,
) -> tuple[Side, Side]:
    """The component at `base_ref` and at the source's ref, each overlaid on this checkout's virtualenv."""
    name = source.component
    if name in COMPILED:
        raise InvalidInput(
            f"--source {name}=...: {name} is compiled (jaxlib, XLA or TransformerEngine): its sides need "
            "an image build each; pr-check overlays pure-Python components (flax, optax, orbax, a framework)"
        )
    # Git clones from the URL as given (a private fork's token in it); only the scrubbed one is shown.
    git = mirror(work / "repositories", name, source.clone_url)
    commits = {
        "base": commit_of(git, base_ref, name, source.repository),
        "head": commit_of(git, source.ref, name, source.repository),
    }
    sides = []
    for side, commit in commits.items():
        overlay = create_overlay(
            {name: Pin(source.clone_url, commit)},
            work / "stacks" / f"{name}-{commit[:12]}",
            base_manifest=base_manifest,
        )
        sides.append(Side(side, f"{name}@{commit[:12]}", commit, overlay.environ()))
    return sides[0], sides[1]


VenvBuilder = Callable[[Path, Path], Path]
"""(exported tree, virtualenv folder) -> the virtualenv's python, built by the tree's own Makefile."""


def build_venv(tree: Path, venv: Path) -> Path:
    done = run_child(["make", "-C", str(tree), "venv", f"VENV={venv}"], capture=True)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ExternalFailure(f"building the virtualenv of {tree.name} failed: {tail}")
    return venv / "bin" / "python"


def repository_sides(
    repository: Path,
    base_ref: str,
    head_ref: str,
    work: Path,
    *,
    build: VenvBuilder = build_venv,
) -> tuple[Side, Side]:
    """This repository's harness at `base_ref` and `head_ref`, each exported under `work/trees`."""
    sides = []
    for side, ref in (("base", base_ref), ("head", head_ref)):
        commit = commit_of(["-C", str(repository)], ref, "this repository", str(repository))
        tree = export_tree(repository, commit, work / "trees" / commit[:12])
        environ = {
            GIT_COMMIT_ENV: commit,
            # The tree sits inside no repository of its own: git must not report an enclosing one's HEAD.
            "GIT_CEILING_DIRECTORIES": str(tree.parent),
        }
        if same_environment(repository, commit):
            python = sys.executable
            environ["PYTHONPATH"] = str(tree)
        else:
            python = str(build(tree, work / "venvs" / commit[:12]))
        sides.append(Side(side, f"jaxbench@{commit[:12]}", commit, environ, python, cwd=tree))
    return sides[0], sides[1]


def same_environment(repository: Path, commit: str) -> bool:
    """Whether the commit asks for the packages this checkout's virtualenv was built with."""
    for path in ENVIRONMENT_FILES:
        try:
            committed = file_at(repository, commit, path)
        except ExternalFailure:
            return False
        if not (repository / path).is_file() or (repository / path).read_text() != committed:
            return False
    return True


def export_tree(repository: Path, commit: str, tree: Path) -> Path:
    """The files of `commit` under `tree` (made once: a complete tree is reused as it is)."""
    done_marker = tree / ".jaxbench-exported"
    if done_marker.is_file():
        return tree
    tree.mkdir(parents=True, exist_ok=True)
    archive = tree.with_name(f"{tree.name}.tar")
    run_git(
        [
            "-C",
            str(repository),
            "archive",
            "--format=tar",
            f"--output={archive}",
            git_argument(commit, "commit"),
        ],
        f"exporting {commit[:12]}",
    )
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    done_marker.write_text(commit + "\n")
    return tree


def repository_root(start: Path) -> Path:
    """The top folder of the git checkout holding `start`."""
    return Path(
        run_git(["-C", str(start), "rev-parse", "--show-toplevel"], "finding this repository").strip()
    )
