"""Where the packages' seams meet: the launchers a run can use (from the harness and from the containers
package), where a run's results go (the results store), and where a triage posts its outcome (the nightly's
issue tracker). A new launcher is one line in LAUNCHERS.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from jaxbench.harness.cli import RunWiring
from jaxbench.harness.launch import Launcher, LauncherFactory, LaunchOptions

if TYPE_CHECKING:
    from jaxbench.triage.commands import Post


def _local(options: LaunchOptions) -> Launcher:
    from jaxbench.harness.launch.local import LocalLauncher

    return LocalLauncher(options)


def _image(options: LaunchOptions) -> Launcher:
    from jaxbench.containers.launch import ImageLauncher

    return ImageLauncher(options)


def _slurm(options: LaunchOptions) -> Launcher:
    from jaxbench.harness.launch.slurm import SlurmLauncher

    return SlurmLauncher(options)


def _k8s(options: LaunchOptions) -> Launcher:
    from jaxbench.harness.launch.k8s import K8sLauncher

    return K8sLauncher(options)


LAUNCHERS: dict[str, LauncherFactory] = {"local": _local, "image": _image, "slurm": _slurm, "k8s": _k8s}
"""Launcher name -> factory, imported when chosen (the image launcher drives Docker)."""


def ingest_into_store(path: Path, console: Console) -> None:
    from jaxbench.results.commands import ingest_result

    ingest_result(path, console)


def run_wiring() -> RunWiring:
    return RunWiring(launchers=LAUNCHERS, sink=ingest_into_store)


def post_to_tracker(repo: str | None, github_dir: Path | None) -> Post | None:
    """Where `jaxbench triage` posts its outcome: the incident's issue on GitHub (--repo) or in the folder
    standing in for it (--github-dir); None where neither is given."""
    if not (repo or github_dir):
        return None
    from jaxbench.nightly.github import repository_from
    from jaxbench.nightly.triage import commenter

    return commenter(repository_from(repo, github_dir, os.environ))
