"""Where the packages' seams meet: the launchers a run can use (from the harness and from the containers
package) and where a run's results go (the results store). A new launcher is one line here.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness.cli import RunWiring
from harness.launch import Launcher, LauncherFactory, LaunchOptions


def _local(options: LaunchOptions) -> Launcher:
    from harness.launch.local import LocalLauncher

    return LocalLauncher(options)


def _image(options: LaunchOptions) -> Launcher:
    from containers.launch import ImageLauncher

    return ImageLauncher(options)


def _slurm(options: LaunchOptions) -> Launcher:
    from harness.launch.slurm import SlurmLauncher

    return SlurmLauncher(options)


def _k8s(options: LaunchOptions) -> Launcher:
    from harness.launch.k8s import K8sLauncher

    return K8sLauncher(options)


LAUNCHERS: dict[str, LauncherFactory] = {"local": _local, "image": _image, "slurm": _slurm, "k8s": _k8s}
"""Launcher name -> factory, imported when chosen (the image launcher drives Docker)."""


def ingest_into_store(path: Path, console: Console) -> None:
    from results.commands import ingest_result

    ingest_result(path, console)


def run_wiring() -> RunWiring:
    return RunWiring(launchers=LAUNCHERS, sink=ingest_into_store)
