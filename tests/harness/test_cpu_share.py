"""How much CPU a run's process got per wall second of its timed steps (result timing.cpu_per_wall): measured
beside each step's wall time, and low when other work shares the run's CPU, which is how triage tells a
starved run from a slow stack (triage/clocks.py, starved_runs)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jax.numpy as jnp
import pytest

from jaxbench.harness.backends.native.backend import run_steps
from jaxbench.harness.runtime.outcome import StepLog
from jaxbench.harness.runtime.result import read_result
from tests.support.processes import jaxbench


def ticking(*values: float) -> Iterator[float]:
    yield from values


def test_each_step_records_the_cpu_time_beside_its_wall_time() -> None:
    wall = ticking(0.0, 0.1, 1.0, 1.2)
    cpu = ticking(5.0, 5.05, 6.0, 6.2)
    log = StepLog()
    run_steps(
        lambda state: (state, {"loss": jnp.float32(2.0)}),
        {"w": jnp.ones(2)},
        2,
        log,
        on_step=lambda index, elapsed, loss: None,
        clock=lambda: next(wall),
        cpu_clock=lambda: next(cpu),
    )
    assert log.times == pytest.approx([0.1, 0.2])
    assert log.cpu_times == pytest.approx([0.05, 0.2])


def pinned_run(out: Path, cpu: int) -> tuple[float, float, float]:
    """(CPU per wall second, median wall step, median CPU step) of a run pinned to `cpu`."""
    before = set(out.glob("*.json"))
    settings = ["--set", "train.warmup_steps=2", "--set", "train.global_batch=32"]
    done = jaxbench("run", "llama2", "--steps", "12", *settings, out=out, prefix=["taskset", "-c", str(cpu)])
    assert done.returncode == 0, done.stderr
    [path] = set(out.glob("*.json")) - before
    timing = read_result(path).timing
    assert timing.cpu_per_wall is not None and timing.step_time_s and timing.cpu_step_time_s
    return timing.cpu_per_wall, timing.step_time_s.median, timing.cpu_step_time_s.median


@pytest.mark.quiet_cpu
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs CPU affinity (Linux)")
def test_a_run_sharing_its_cpu_with_other_work_gets_less_of_it(tmp_path: Path) -> None:
    """The same run pinned to one CPU, alone and with a busy loop pinned beside it: the scheduler splits
    that CPU between the two, and the run's CPU per wall second falls by about half. Its wall step time
    grows with it; its CPU time per step, the step's own work, does not (the clock triage times by on a
    loaded machine: triage/clocks.py, choose_clock)."""
    cpu = max(os.sched_getaffinity(0))
    alone, alone_wall, alone_cpu = pinned_run(tmp_path, cpu)
    hog = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"])
    try:
        shared, shared_wall, shared_cpu = pinned_run(tmp_path, cpu)
    finally:
        hog.kill()
        hog.wait()
    assert 0.6 < alone <= 1.05  # one CPU: at most one CPU second per second
    assert shared < 0.8 * alone
    # The medians: a step shorter than the scheduler's slice may run whole between the neighbour's turns,
    # so the wall clock grows by less than the share falls; the CPU time grows by less still.
    assert shared_wall > 1.1 * alone_wall
    assert shared_cpu / alone_cpu < shared_wall / alone_wall
