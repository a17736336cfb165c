"""An interrupted `jaxbench microbench` keeps the kernels it timed: pytest-benchmark writes its report when
the Ctrl-C'd session ends, and the command waits for it instead of killing pytest mid-write (which leaves
gpu-check an empty report), also when the interrupt lands inside a kernel's timed rounds: that kernel is
left out (pytest-benchmark fails on its empty statistics and writes nothing)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from jaxbench.core.errors import ExitCode
from tests.conftest import REPO

CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--sizes", default=None)
    parser.addoption("--schedule", default="ad-hoc")
"""
KERNELS = """
import os, pathlib, time

def test_first(benchmark):
    benchmark(sum, range(100))

def wait_for_the_interrupt():
    pathlib.Path(os.environ["REACHED"]).write_text("second")
    time.sleep(120)

rounds_done = []

def kernel():
    if os.environ["INTERRUPTED_IN"] == "round_2" and not rounds_done:
        rounds_done.append(1)  # one timed round, unchecked: the test never ends
        return
    wait_for_the_interrupt()

def test_second(benchmark):
    if os.environ["INTERRUPTED_IN"] == "setup":
        wait_for_the_interrupt()
    benchmark.pedantic(kernel, rounds=3, iterations=1)

def test_third(benchmark):
    benchmark(sum, range(100))
"""
COMMAND = """
import sys
from pathlib import Path
from rich.console import Console
from jaxbench.harness import commands

def sink(report, console):
    Path(sys.argv[3]).write_text(str(report))

options = commands.MicrobenchOptions(out=Path(sys.argv[2]))
sys.exit(int(commands.microbench(options, sink, Console(), suite=Path(sys.argv[1]))))
"""


@pytest.mark.slow
@pytest.mark.parametrize("interrupted_in", ["setup", "round_1", "round_2"])
def test_an_interrupted_microbench_keeps_the_kernels_timed_before(
    tmp_path: Path, interrupted_in: str
) -> None:
    suite = tmp_path / "repo" / "microbench" / "suite"  # the command gives pytest suite.parents[2] as root
    suite.mkdir(parents=True)
    (suite / "conftest.py").write_text(CONFTEST)
    (suite / "test_kernels.py").write_text(KERNELS)
    out, sunk, reached = tmp_path / "out", tmp_path / "sunk", tmp_path / "reached"
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(COMMAND), str(suite), str(out), str(sunk)],
        cwd=REPO,
        env={**os.environ, "REACHED": str(reached), "INTERRUPTED_IN": interrupted_in},
        start_new_session=True,  # its own process group: Ctrl-C reaches the command and pytest, as from a tty
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not reached.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert reached.exists(), "the suite never reached its second kernel"
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=60) == ExitCode.INTERRUPTED
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    (report,) = out.glob("microbench-*.json")
    assert sunk.read_text() == str(report)
    assert [b["name"] for b in json.loads(report.read_text())["benchmarks"]] == ["test_first"]
    assert sorted(p.name for p in out.iterdir()) == [report.name], "no partial report may be left"
