"""A command's children stop with it (core/processes.py): SIGTERM takes Ctrl-C's path, the child's whole
process group gets the signal the command got, may write what it has, and is killed after its grace or on a
second signal; a timeout kills the group. Then a real `pr-check` stopped by SIGTERM while its run is going:
exit 130, an `interrupted` line, and no process of it left alive.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/core/test_processes.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxbench.core.errors import ExitCode
from jaxbench.core.processes import run_child
from tests.conftest import REPO

CHILD = """
import os, signal, sys, time
from pathlib import Path

folder, grandchild = Path(sys.argv[1]), None
def stop(signum, frame):
    (folder / "signals").open("a").write(signal.Signals(signum).name + "\\n")
    if folder.joinpath("stubborn").exists():
        return  # ignores it: only SIGKILL ends it
    time.sleep(0.3)  # writing what it has
    (folder / "wrote").write_text("result")
    sys.exit(130)
signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
grandchild = __import__("subprocess").Popen(["sleep", "300"])
(folder / "pids").write_text(f"{os.getpid()} {grandchild.pid}")
while True:
    time.sleep(0.05)
"""
DRIVER = """
import sys
from jaxbench.core.processes import run_child, sigterm_interrupts

try:
    with sigterm_interrupts():
        run_child([sys.executable, "-c", sys.argv[1], sys.argv[2]], grace_s=float(sys.argv[3]))
except KeyboardInterrupt as stop:
    print(type(stop).__name__, flush=True)
    sys.exit(130)
"""


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its parent counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def gone(*pids: int, within_s: float = 30.0) -> bool:
    """Whether every pid has ended within `within_s`: a SIGKILL sent to a process group is delivered to
    each member as the kernel schedules it, which on a loaded machine can be after the kill call returned."""
    deadline = time.monotonic() + within_s
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_for(path: Path, process: subprocess.Popen[str] | None = None, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists() and (process is None or process.poll() is None) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), f"{path} never appeared"


@pytest.fixture
def reaper() -> Iterator[list[int]]:
    """Pids the test started; whatever is left of them is killed at the end, pass or fail."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def start_driver(
    tmp_path: Path, reaper: list[int], grace_s: float = 60.0
) -> tuple[subprocess.Popen[str], int, int]:
    driver = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(DRIVER), textwrap.dedent(CHILD), str(tmp_path), str(grace_s)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a terminal's process group of its own, as a shell gives a command
    )
    reaper.append(driver.pid)
    wait_for(tmp_path / "pids", driver)
    child, grandchild = map(int, (tmp_path / "pids").read_text().split())
    reaper += [child, grandchild]
    return driver, child, grandchild


@pytest.mark.parametrize(("send", "raised"), [("SIGTERM", "Terminated"), ("SIGINT", "KeyboardInterrupt")])
def test_a_stopped_command_passes_its_signal_on_once_and_waits_for_its_child(
    tmp_path: Path, reaper: list[int], send: str, raised: str
) -> None:
    driver, child, grandchild = start_driver(tmp_path, reaper)
    signum = signal.Signals[send]
    if signum is signal.SIGINT:
        os.killpg(driver.pid, signum)  # Ctrl-C: to the terminal's process group
    else:
        os.kill(driver.pid, signum)  # SIGTERM: to the command alone, as a scheduler or `kill` sends it
    stdout, _ = driver.communicate(timeout=60)
    assert driver.returncode == ExitCode.INTERRUPTED and stdout.strip() == raised
    assert (tmp_path / "signals").read_text() == f"{send}\n", "the child got the signal once"
    assert (tmp_path / "wrote").read_text() == "result", "the child could finish writing"
    assert gone(child, grandchild), "nothing of the child's group is left"


def test_a_child_that_ignores_the_signal_is_killed_after_its_grace(tmp_path: Path, reaper: list[int]) -> None:
    (tmp_path / "stubborn").touch()
    driver, child, grandchild = start_driver(tmp_path, reaper, grace_s=0.5)
    os.kill(driver.pid, signal.SIGTERM)
    assert driver.wait(timeout=60) == ExitCode.INTERRUPTED
    assert (tmp_path / "signals").read_text() == "SIGTERM\n"
    assert gone(child, grandchild)


def test_a_second_signal_kills_at_once(tmp_path: Path, reaper: list[int]) -> None:
    (tmp_path / "stubborn").touch()
    driver, child, grandchild = start_driver(tmp_path, reaper, grace_s=3600)
    os.kill(driver.pid, signal.SIGTERM)
    wait_for(tmp_path / "signals", driver)
    os.kill(driver.pid, signal.SIGTERM)
    assert driver.wait(timeout=60) == ExitCode.INTERRUPTED
    assert gone(child, grandchild)


def test_a_timeout_kills_the_whole_group(tmp_path: Path, reaper: list[int]) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $! > {pids}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        run_child(["sh", "-c", f"{script}"], capture=True, timeout_s=2)
    [grandchild] = map(int, pids.read_text().split())
    reaper.append(grandchild)
    assert gone(grandchild), "subprocess.run kills the shell only: its sleep ran on"


def test_output_comes_back_as_text_with_the_exit_code() -> None:
    done = run_child([sys.executable, "-c", "import sys; print('out'); sys.exit('err')"], capture=True)
    assert (done.returncode, done.stdout, done.stderr) == (1, "out\n", "err\n")


def test_stderr_alone_comes_back_while_stdout_streams(capfd: pytest.CaptureFixture[str]) -> None:
    done = run_child([sys.executable, "-c", "import sys; print('out'); sys.exit('err')"], capture_stderr=True)
    assert (done.returncode, done.stdout, done.stderr) == (1, None, "err\n")
    assert capfd.readouterr().out == "out\n"


def children_of(pid: int) -> list[int]:
    """The processes `pid` started that still run (Linux's /proc)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


@pytest.mark.slow
def test_pr_check_stopped_by_sigterm_stops_its_run_and_says_interrupted(
    tmp_path: Path, reaper: list[int]
) -> None:
    """A real pr-check of this repository's HEAD against itself on the tiny llama2: SIGTERM once its first
    `jaxbench run` has started (as a CI job's cancellation or a scheduler sends it)."""
    command = [sys.executable, "-m", "jaxbench", "pr-check", "--base", "HEAD", "--head", "HEAD"]
    command += ["--recipes", "llama2:tiny", "--repeats", "2", "--max-rounds", "1"]
    command += ["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    reaper.append(process.pid)
    children: list[int] = []
    deadline = time.monotonic() + 120
    while not children and process.poll() is None and time.monotonic() < deadline:
        # The run's folder is made just before it starts; git (exporting the trees) comes and goes before.
        if (tmp_path / "work" / "runs").exists():
            children = children_of(process.pid)
        time.sleep(0.05)
    assert children, "pr-check never started its run"
    reaper += children
    os.kill(process.pid, signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == ExitCode.INTERRUPTED, err
    assert err.strip().splitlines()[-1] == "interrupted"
    assert not any(alive(pid) for pid in children), "the run was left running"
    assert not (tmp_path / "out" / "pr-check.json").exists(), "no verdict from runs that were stopped"
