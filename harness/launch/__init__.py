"""Launchers: where the processes of a run happen. `local` runs it in this process (harness/launch/local.py);
`image` inside one of our container images (containers/launch.py, since it drives Docker); `slurm` as a
batch job of one task per GPU (harness/launch/slurm.py); `k8s` as a Kubernetes JobSet of one pod per node
(harness/launch/k8s.py). The two cluster launchers share how a job that ended badly becomes a result
(job_result.py) and how it is watched (job_watch.py). Each returns the exit code and the result files the
run wrote; the `jaxbench run` command then hands every result file to its result sink (the store, unless
--no-ingest).

A new launcher (a scheduler, a cluster): one module that implements `Launcher`, and one line in the table
of launchers of the `jaxbench` command (jaxbench/wiring.py), where launchers from every package meet.

    jaxbench run llama2 --launcher image --image ghcr.io/jaxbench/jax:cpu
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core.errors import InvalidInput

if TYPE_CHECKING:
    from rich.console import Console

    from harness.run.options import RunOptions


# sbatch --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
# days-hours:minutes:seconds (sbatch(1), --time).
_TIME = re.compile(r"^(\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+|\d+-\d+:\d{2}|\d+-\d+:\d{2}:\d{2})$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclasses.dataclass(frozen=True)
class ClusterRequest:
    """The job a cluster launcher is asked for (`--nodes`, `--tasks-per-node`, `--gpus-per-node`,
    `--partition`, `--account`, `--time`); invalid values are refused here, before anything is written or
    submitted, naming the flag."""

    nodes: int = 1
    tasks_per_node: int | None = None
    """Processes per node; default: one per GPU (`gpus_per_node`), else one."""
    gpus_per_node: int | None = None
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    """sbatch's --time limit, in its own formats (30, 1:30:00, 2-00:00:00)."""

    def __post_init__(self) -> None:
        for flag, value, least in (
            ("--nodes", self.nodes, 1),
            ("--tasks-per-node", self.tasks_per_node, 1),
            ("--gpus-per-node", self.gpus_per_node, 1),
        ):
            if value is not None and value < least:
                raise InvalidInput(f"{flag} {value}: expected a whole number of at least {least}")
        for flag, name in (("--partition", self.partition), ("--account", self.account)):
            if name is not None and not _NAME.match(name):
                raise InvalidInput(f"{flag} {name!r}: expected a SLURM name (letters, digits, '_', '.', '-')")
        if self.time is not None and not _TIME.match(self.time):
            raise InvalidInput(
                f"--time {self.time!r}: expected minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]] as sbatch takes"
            )

    @property
    def tasks_per_node_resolved(self) -> int:
        return self.tasks_per_node or self.gpus_per_node or 1

    @property
    def tasks(self) -> int:
        return self.nodes * self.tasks_per_node_resolved


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """Where to run, as the user asked; each launcher refuses the options it cannot honour."""

    launcher: str
    image: str | None = None
    """The container image (`--image`), for launchers that run one."""
    cluster: ClusterRequest = ClusterRequest()
    """The job's shape and place, for cluster launchers."""
    dry_run: bool = False
    """Print what would be submitted (`--dry-run`), run nothing."""
    namespace: str | None = None
    """The Kubernetes namespace (`--namespace`) for the k8s launcher; default: the kubeconfig context's."""

    def refuse_cluster_options(self) -> None:
        """For launchers that run on this machine: the options only a cluster launcher honours are refused."""
        asked = self.cluster
        given = {
            "--nodes": asked.nodes if asked.nodes != 1 else None,
            "--tasks-per-node": asked.tasks_per_node,
            "--gpus-per-node": asked.gpus_per_node,
            "--partition": asked.partition,
            "--account": asked.account,
            "--time": asked.time,
            "--namespace": self.namespace,
        }
        named = [f"{flag} {value}" for flag, value in given.items() if value is not None]
        named += ["--dry-run"] if self.dry_run else []
        if named:
            raise InvalidInput(
                f"{', '.join(named)}: the {self.launcher} launcher runs on this machine; "
                "these are for --launcher slurm or k8s"
            )


@dataclasses.dataclass(frozen=True)
class Launched:
    exit_code: int
    results: list[Path]
    """The result files the run wrote, on this machine."""


class Launcher(Protocol):
    name: str

    def launch(self, run: RunOptions, console: Console) -> Launched: ...


LauncherFactory = Callable[[LaunchOptions], Launcher]
"""Makes a launcher from the options, raising InvalidInput (before anything runs) for options it refuses."""

ResultSink = Callable[[Path, "Console"], None]
"""Receives every result file a run wrote (the store's ingest; a no-op with --no-ingest). A sink must never
lose the run: a failure to take it is a warning, the file stays."""


def choose(options: LaunchOptions, launchers: Mapping[str, LauncherFactory]) -> Launcher:
    try:
        factory = launchers[options.launcher]
    except KeyError:
        raise InvalidInput(f"--launcher {options.launcher}: expected one of {', '.join(launchers)}") from None
    return factory(options)


def no_sink(path: Path, console: Console) -> None:
    """--no-ingest: the result file is all there is."""
