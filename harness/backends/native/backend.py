"""The native backend: our own Flax NNX models (harness/models/), compiled ahead of time and trained by our
own timed loop. The default backend, and the only one that runs in the harness's own process.

Its runtime starts in `prepare`: the run's XLA flags go into the environment first (XLA reads them once, when
its backend starts), then jax.distributed (multi-process runs), then the devices are checked against the
recipe, all before anything is compiled.

    jaxbench run llama2 --backend native
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

from core.errors import InvalidInput
from harness.backends import TrainerEnvironment
from harness.backends.native import distributed, train
from harness.config import Recipe
from harness.flags import environment
from harness.flags.environment import DeviceHint
from harness.flags.profiles import FlagSet
from harness.provenance import collect_devices
from harness.run import preflight
from harness.run.options import NATIVE_BACKEND
from harness.run.outcome import NonFiniteLoss, Outcome, StepLog, Terminated, classify, sigterm_raises
from harness.run.reporter import RunReporter


def run_steps(
    step: train.StepFn,
    state: train.TrainState,
    count: int,
    log: StepLog,
    *,
    on_step: Callable[[int, float, float], None],
    clock: Callable[[], float] = time.perf_counter,
) -> train.TrainState:
    """The timed loop. Each step is synchronised on its whole output before the clock is read again."""
    for index in range(count):
        start = clock()
        state, metrics = step(state)
        jax.block_until_ready((state, metrics))
        elapsed = clock() - start
        loss = float(metrics["loss"])
        log.times.append(elapsed)
        log.losses.append(loss)
        on_step(index, elapsed, loss)
        if not math.isfinite(loss):
            raise NonFiniteLoss(index, loss)
    return state


def machine_of(devices: Sequence[Any]) -> preflight.Machine:
    return preflight.Machine(devices[0].platform, devices[0].device_kind, len(devices))


def peak_memory_bytes(devices: Sequence[Any]) -> int | None:
    peaks_seen = []
    for device in devices:
        memory = device.memory_stats() or {}
        if "peak_bytes_in_use" in memory:
            peaks_seen.append(int(memory["peak_bytes_in_use"]))
    return max(peaks_seen) if peaks_seen else None


def train_and_time(
    recipe: Recipe,
    mesh_shape: dict[str, int],
    devices: Sequence[Any],
    reporter: RunReporter,
) -> Outcome:
    """Compile and run the steps; any failure but invalid input becomes the outcome's status and reason."""
    outcome, phase = Outcome(), "compile"
    with sigterm_raises():
        try:
            reporter.compiling(recipe.name, preflight.describe_mesh(mesh_shape))
            program = train.prepare(recipe, mesh_shape, devices)
            outcome.compile_s, outcome.compiled_memory = program.compile_s, program.compiled_memory
            outcome.program_text, outcome.program_cost = program.hlo_text, program.cost
            reporter.compiled(program.compile_s)
            phase = "train"
            reporter.steps_started(recipe.train.steps)
            run_steps(
                program.step, program.state, recipe.train.steps, outcome.log, on_step=reporter.step_done
            )
        except InvalidInput:  # parameters the rules cannot shard: found before the step is compiled
            raise
        except (Exception, KeyboardInterrupt, Terminated) as error:
            outcome.status, outcome.reason = classify(error, phase)
    return outcome


@dataclasses.dataclass
class NativeProgram:
    recipe: Recipe
    devices: list[Any]
    machine: preflight.Machine
    mesh_shape: dict[str, int]
    optimal_loss: float
    reports: bool

    def environment(self) -> TrainerEnvironment:
        return TrainerEnvironment(devices=collect_devices())

    def run(self, reporter: RunReporter, artifacts: Path) -> Outcome:
        # Nothing of its own to keep beside the result: the result file says everything.
        return train_and_time(self.recipe, self.mesh_shape, self.devices, reporter)

    def peak_memory_bytes(self) -> int | None:
        return peak_memory_bytes(jax.local_devices())


class NativeBackend:
    name = NATIVE_BACKEND

    def prepare(self, recipe: Recipe, flag_set: FlagSet, hint: DeviceHint) -> NativeProgram:
        environment.apply(flag_set)  # before the backend starts: XLA reads its flags then, not at import
        distributed.initialize(os.environ)
        devices = jax.devices()
        machine = machine_of(devices)
        environment.check_platform(hint, machine.platform, machine.device_kind, recipe.xla_flags)
        mesh_shape = preflight.check(recipe, machine)
        optimal_loss = preflight.optimal_loss(recipe)
        # One table and one result per run, from process 0.
        return NativeProgram(recipe, devices, machine, mesh_shape, optimal_loss, jax.process_index() == 0)
