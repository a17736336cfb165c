"""The adapter that starts a framework's trainer: one process, its output (stdout and stderr together) kept
line by line in a log file and shown to a callback as it comes, and a SIGINT or SIGTERM sent to jaxbench
passed on to the trainer, which then gets a grace period to stop before it is killed.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from jaxbench.harness.runtime.outcome import Terminated, sigterm_raises

STOP_GRACE_S = 30.0
"""How long an interrupted trainer may take to stop before it is killed."""


@dataclasses.dataclass(frozen=True)
class TrainerExit:
    returncode: int | None
    """None when the trainer could not be started."""
    interrupted: str | None
    """"SIGINT" or "SIGTERM" when jaxbench was stopped while the trainer ran."""
    error: str | None = None
    """Why the trainer could not be started."""


def _stop(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        process.wait()


def run_trainer(
    argv: list[str],
    env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    on_line: Callable[[str], None],
) -> TrainerExit:
    """Run `argv` to its end (or until jaxbench is interrupted), writing its output to `log_path`."""
    with log_path.open("w", encoding="utf-8") as log, sigterm_raises():
        try:
            # Its own session: a terminal's Ctrl-C reaches jaxbench, which stops the trainer and writes the
            # result, rather than both at once.
            process = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
                env={**env, "PYTHONUNBUFFERED": "1"},
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as error:
            log.write(f"jaxbench: could not start {argv[0]}: {error}\n")
            return TrainerExit(None, None, f"could not start {argv[0]}: {error}")
        try:
            assert process.stdout is not None
            for line in process.stdout:
                log.write(line)
                log.flush()
                on_line(line.rstrip("\n"))
            return TrainerExit(process.wait(), None)
        except (KeyboardInterrupt, Terminated) as stop:
            _stop(process)
            name = "SIGINT" if isinstance(stop, KeyboardInterrupt) else "SIGTERM"
            log.write(f"jaxbench: stopped the trainer on {name}\n")
            return TrainerExit(process.returncode, name)
