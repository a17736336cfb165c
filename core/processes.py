"""Child processes a command waits for, stopped cleanly when the command is stopped, by SIGINT or SIGTERM.

`jaxbench` turns SIGTERM into the KeyboardInterrupt that Ctrl-C raises (`sigterm_interrupts`), so every
command stops one way: one `interrupted` line, exit 130. A child (`run_child`) runs in a process group of its
own, so the signal reaches it once, from here: the child's group gets the signal this process got, may
finish writing what it has (a result, a report) for up to STOP_GRACE_S, and is then killed; a second signal
kills it at once. No child is left running after its command.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_processes.py
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

STOP_GRACE_S = 60.0
"""How long a stopped child may take to write what it has: a run's interrupted result, pytest-benchmark's
report. A compile in progress finishes before the run sees the signal."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so that both take the same path."""


@contextlib.contextmanager
def sigterm_handled_by(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """SIGTERM goes to `handler` inside, to what it went to before after; outside the main thread, where
    Python cannot set handlers, nothing changes."""
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def sigterm_interrupts() -> contextlib.AbstractContextManager[None]:
    """Inside, SIGTERM raises Terminated, the KeyboardInterrupt Ctrl-C raises."""
    return sigterm_handled_by(_raise_terminated)


def run_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float | None = None,
    capture: bool = False,
    capture_stderr: bool = False,
    grace_s: float = STOP_GRACE_S,
) -> subprocess.CompletedProcess[str]:
    """Run `argv` in its own process group to its end; with `capture` its stdout and stderr come back as
    text, otherwise they are this process's; `capture_stderr` brings stderr back alone (stdout streams on).
    On SIGINT or SIGTERM here the group gets the same signal and `grace_s` to end, then the interruption is
    raised again; on `timeout_s` the group is killed and subprocess.TimeoutExpired raised, as
    subprocess.run does."""
    pipe = subprocess.PIPE if capture else None
    process = subprocess.Popen(
        list(argv),
        env=None if env is None else dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=pipe,
        stderr=subprocess.PIPE if capture_stderr else pipe,
        text=True,
        errors="replace",
        # A new session: a terminal's Ctrl-C reaches this process only, which passes it on once; and a
        # child cannot wait on a prompt of the terminal (git's for a password).
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(process)
        raise
    except BaseException as stop:
        interrupted = isinstance(stop, KeyboardInterrupt) and not isinstance(stop, Terminated)
        _stop(process, signal.SIGINT if interrupted else signal.SIGTERM, grace_s)
        raise
    return subprocess.CompletedProcess(list(argv), process.returncode, stdout, stderr)


def run_to_its_end(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Run `argv` with this process's output and return its exit code. On Ctrl-C or SIGTERM the child is
    passed the signal and waited for while it writes what it has (a result, a report), then
    KeyboardInterrupt is raised: subprocess.run would kill it a quarter of a second later, mid-write (a
    microbenchmark report was left empty that way)."""
    return run_child(argv, env=env).returncode


def _signal_group(process: subprocess.Popen[str], signum: int) -> None:
    """`signum` to the child's process group (its id is the child's: a new session), while it lives."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)


def _stop(process: subprocess.Popen[str], signum: int, grace_s: float) -> None:
    _signal_group(process, signum)
    try:
        # Reading on: a child that writes its last lines must not block on a full pipe.
        process.communicate(timeout=grace_s)
    except BaseException:  # too slow, or a second signal: now
        _kill(process)


def _kill(process: subprocess.Popen[str]) -> None:
    _signal_group(process, signal.SIGKILL)
    process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
