"""Launchers: where the processes of a run happen. `local` runs it in this process (harness/launch/local.py);
`image` inside one of our container images (containers/launch.py, since it drives Docker). Each returns the
exit code and the result files the run wrote; the `jaxbench run` command then hands every result file to its
result sink (the store, unless --no-ingest).

A new launcher (a scheduler, a cluster): one module that implements `Launcher`, and one line in the table
of launchers of the `jaxbench` command (jaxbench/wiring.py), where launchers from every package meet.

    jaxbench run llama2 --launcher image --image ghcr.io/jaxbench/jax:cpu
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from core.errors import InvalidInput

if TYPE_CHECKING:
    from rich.console import Console

    from harness.run.options import RunOptions


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    """Where to run, as the user asked; each launcher refuses the options it cannot honour."""

    launcher: str
    image: str | None = None
    """The container image (`--image`), for launchers that run one."""


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
