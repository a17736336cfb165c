"""Launchers: where the processes of a run happen. `local` in this process (local.py); `image` inside one of
our container images (containers/launch.py, since it drives Docker); `slurm` as a batch job of one task per
GPU (slurm.py); `k8s` as a Kubernetes JobSet of one pod per node (k8s.py); the cluster ones share how a
failed job becomes a result (job_result.py) and how it is watched (job_watch.py). Each returns the exit code
and the result files, which `jaxbench run` hands to its result sink after checking the run's inputs against
the devices and environment the launcher's `processes` will find.

A new launcher: one module that implements `Launcher`, and one line in jaxbench/wiring.py's launchers.

    jaxbench run llama2 --launcher image --image ghcr.io/jaxbench/jax:cpu
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from jaxbench.core.errors import InvalidInput, one_line

if TYPE_CHECKING:
    from rich.console import Console

    from jaxbench.harness.flags.environment import DeviceHint
    from jaxbench.harness.runtime.options import RunOptions


# sbatch --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
# days-hours:minutes:seconds (sbatch(1), --time). Whole-string matches (fullmatch): `$` would take "30\n".
_TIME = re.compile(r"\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+|\d+-\d+:\d{2}|\d+-\d+:\d{2}:\d{2}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
TIME_LIMIT_MINUTES = 2**32 - 3
"""The longest --time: SLURM keeps a job's limit as a 32-bit count of minutes, its two top values meaning
"infinite" and "not set" (slurm.h: INFINITE, NO_VAL); in seconds it is well within the 64 bits of a pod's
activeDeadlineSeconds."""
COUNT_LIMIT = 2**31 - 1
"""The most nodes, tasks or GPUs per node: Kubernetes counts a Job's pods in 32 bits (int32), SLURM its
nodes and tasks in 32 bits too."""


def time_limit_seconds(limit: str) -> int | None:
    """sbatch's --time formats in seconds, None for 0 (no limit, as in sbatch); InvalidInput naming --time
    for any other text or a limit past TIME_LIMIT_MINUTES. Minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM,
    D-HH:MM:SS."""
    expected = "expected minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]] as sbatch takes"
    if not _TIME.fullmatch(limit):
        raise InvalidInput(f"--time {limit!r}: {expected}")
    longest = f"{TIME_LIMIT_MINUTES} minutes, as SLURM keeps a time limit in 32 bits"
    # int() of thousands of digits is refused (and slow): no limit within bounds has more than a dozen.
    if max(len(part) for part in re.split(r"[-:]", limit)) > 12:
        raise InvalidInput(f"--time {limit!r}: expected at most {longest}")
    days, _, clock = limit.rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    if days:
        hours, minutes, seconds = [*parts, 0, 0][:3]
    else:
        hours, minutes, seconds = {1: [0, *parts, 0], 2: [0, *parts], 3: parts}[len(parts)]
    total = ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds
    if total > TIME_LIMIT_MINUTES * 60:
        raise InvalidInput(f"--time {limit!r}: expected at most {longest}")
    return total or None


# An image reference as Docker and Kubernetes read it: the OCI distribution grammar (distribution/reference,
# regexp.go), in ASCII (Go's \w) and matched whole.
_ALPHANUMERIC = r"[a-z0-9]+"
_PATH_COMPONENT = rf"{_ALPHANUMERIC}(?:(?:[._]|__|-+){_ALPHANUMERIC})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_IMAGE_NAME = rf"(?:(?P<domain>{_HOST}(?::[0-9]+)?)/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(rf"(?P<name>{_IMAGE_NAME})(?::{_TAG})?(?:@{_DIGEST})?")
IMAGE_NAME_LIMIT = 255
"""The most characters of an image's name, registry included (distribution/reference: NameTotalLengthMax)."""


def image_reference(image: str, flag: str = "--image") -> str:
    """`image` unchanged where it is an OCI image reference (registry/name[:tag][@digest]); InvalidInput
    naming `flag` otherwise: spaces, line breaks, upper-case names never reach a manifest or `docker`."""
    # Python's regular expressions backtrack; the grammar's longest reference is far below this.
    match = IMAGE_REFERENCE.fullmatch(image) if len(image) <= 4 * IMAGE_NAME_LIMIT else None
    domain = match["domain"] if match else None
    # A first component is a registry only with a '.' or a ':' in it, or as localhost (Docker's
    # normalisation): otherwise it is part of the name, in lower case.
    if domain and not ({".", ":"} & set(domain) or domain == "localhost"):
        match = match if re.fullmatch(_PATH_COMPONENT, domain) else None
    if match is None or len(match["name"]) > IMAGE_NAME_LIMIT:
        raise InvalidInput(
            f"{flag} {one_line(repr(image), 80)}: expected an image reference, "
            f"[registry/]name[:tag][@digest] (the name in lower case, at most {IMAGE_NAME_LIMIT} "
            "characters; no spaces), e.g. ghcr.io/jaxbench/jax:cuda"
        )
    return image


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
        for flag, value in (
            ("--nodes", self.nodes),
            ("--tasks-per-node", self.tasks_per_node),
            ("--gpus-per-node", self.gpus_per_node),
        ):
            if value is not None and value < 1:
                raise InvalidInput(f"{flag} {value}: expected a whole number of at least 1")
            if value is not None and value > COUNT_LIMIT:
                raise InvalidInput(f"{flag} {value}: expected at most {COUNT_LIMIT} (32-bit counts)")
        if self.nodes * self.tasks_per_node_resolved > COUNT_LIMIT:
            raise InvalidInput(
                f"--nodes {self.nodes} x {self.tasks_per_node_resolved} tasks per node: expected at most "
                f"{COUNT_LIMIT} tasks"
            )
        for flag, name in (("--partition", self.partition), ("--account", self.account)):
            if name is not None and not _NAME.fullmatch(name):
                raise InvalidInput(f"{flag} {name!r}: expected a SLURM name (letters, digits, '_', '.', '-')")
        if self.time is not None:
            time_limit_seconds(self.time)

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
class Processes:
    """What a run's processes will find where a launcher starts them, as far as it can tell before anything
    starts: their devices (which choose the default size and the flag profile) and the environment they
    start with (your XLA_FLAGS, where it reaches them). The run's inputs are checked against these
    (harness/run/inputs.py: check_run) whichever the launcher."""

    hint: DeviceHint
    environ: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class Launched:
    exit_code: int
    results: list[Path]
    """The result files the run wrote, on this machine."""


class Launcher(Protocol):
    name: str

    def processes(self, environ: Mapping[str, str]) -> Processes:
        """Where the run's processes start, given this process's environment `environ`."""
        ...

    def launch(self, run: RunOptions, console: Console) -> Launched:
        """Run it; the run's inputs were checked before (harness/commands.py: run_recipe)."""
        ...


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
