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

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.backends import TrainerEnvironment
from jaxbench.harness.backends.native import data, distributed, train
from jaxbench.harness.config import Recipe
from jaxbench.harness.flags import environment
from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.flags.profiles import FlagSet
from jaxbench.harness.measure import hlo, profile
from jaxbench.harness.provenance.collection import collect_devices
from jaxbench.harness.runtime import preflight
from jaxbench.harness.runtime.options import NATIVE_BACKEND
from jaxbench.harness.runtime.outcome import (
    REASON_CHARACTERS,
    NonFiniteLoss,
    Outcome,
    StepLog,
    Terminated,
    classify,
    sigterm_raises,
)
from jaxbench.harness.runtime.reporter import RunReporter
from jaxbench.harness.runtime.result import Profile


def run_steps(
    step: train.StepFn,
    state: train.TrainState,
    count: int,
    log: StepLog,
    *,
    on_step: Callable[[int, float, float], None],
    clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
) -> train.TrainState:
    """The timed loop. Each step is synchronised on its whole output before the clock is read again; the
    process's CPU time is read beside it (a run starved of CPU by other work shows in the ratio)."""
    for index in range(count):
        start, cpu_start = clock(), cpu_clock()
        state, metrics = step(state)
        jax.block_until_ready((state, metrics))
        elapsed, cpu = clock() - start, cpu_clock() - cpu_start
        loss = float(metrics["loss"])
        log.times.append(elapsed)
        log.cpu_times.append(cpu)
        log.losses.append(loss)
        on_step(index, elapsed, loss)
        if not math.isfinite(loss):
            raise NonFiniteLoss(index, loss)
    return state


PROFILE_FOLDER = "profile"


class ProfileFailed(Exception):
    def __init__(self, record: Profile):
        super().__init__(record.problem)
        self.record = record


def profile_steps_of(
    program: train.TrainProgram, state: train.TrainState, count: int, folder: Path
) -> Profile:
    """`count` more steps under the JAX profiler, after the timed ones (so that tracing costs them nothing),
    reduced to where their time went (harness/measure/profile.py); its trace stays in `folder`, named in the
    record relative to the result's folder. ProfileFailed, holding the record, where profiling failed."""
    trace = f"{folder.parent.name}/{folder.name}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # No Python tracer: the breakdown reads the ops' events, and tracing every Python call would slow
        # the profiled steps for nothing.
        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 0
        with jax.profiler.trace(str(folder), profiler_options=options):
            start = time.perf_counter()
            for _ in range(count):
                state, metrics = program.step(state)
            jax.block_until_ready((state, metrics))
            wall_s = time.perf_counter() - start
        text = program.hlo_text or ""
        events = profile.read_trace(folder)
        categories, module = hlo.time_categories(text), profile.module_name(text)
    except (OSError, RuntimeError, ValueError) as error:  # no profiler here, a full disk, HLO not understood
        problem = f"{type(error).__name__}: {error}"[:REASON_CHARACTERS]
        raise ProfileFailed(Profile(steps=count, seconds_per_step={}, trace=None, problem=problem)) from error
    seconds = profile.breakdown(events, categories, module, wall_s=wall_s, steps=count)
    return Profile(steps=count, wall_s=wall_s, seconds_per_step=seconds, trace=trace)


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
    profile_steps: int = 0,
    trace_folder: Path | None = None,
) -> Outcome:
    """Compile and run the steps, then `profile_steps` more under the profiler (its trace in
    `trace_folder`); any failure but invalid input becomes the outcome's status and reason."""
    outcome, phase = Outcome(), "compile"
    with sigterm_raises():
        try:
            reporter.compiling(recipe.name, preflight.describe_mesh(mesh_shape))
            program = train.prepare(recipe, mesh_shape, devices)
            outcome.compile_s, outcome.compiled_memory = program.compile_s, program.compiled_memory
            outcome.program_text, outcome.program_cost = program.hlo_text, program.cost
            outcome.program_input_text = program.input_text
            reporter.compiled(program.compile_s)
            phase = "train"
            reporter.steps_started(recipe.train.steps)
            state = run_steps(
                program.step, program.state, recipe.train.steps, outcome.log, on_step=reporter.step_done
            )
            if jax.process_count() > 1:
                outcome.process_times = distributed.gather_step_times(outcome.log.times)
            if profile_steps and trace_folder is not None:
                outcome.profile = profile_steps_of(program, state, profile_steps, trace_folder)
        except ProfileFailed as failed:  # the timed run stands; only its profile is missing
            outcome.profile = failed.record
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

    def run(self, reporter: RunReporter, artifacts: Path, profile_steps: int = 0) -> Outcome:
        # Nothing of its own to keep beside the result but a profile's trace: the result says the rest.
        return train_and_time(
            self.recipe, self.mesh_shape, self.devices, reporter, profile_steps, artifacts / PROFILE_FOLDER
        )

    def peak_memory_bytes(self) -> int | None:
        return peak_memory_bytes(jax.local_devices())


class NativeBackend:
    name = NATIVE_BACKEND
    profiles = True

    def prepare(self, recipe: Recipe, flag_set: FlagSet, hint: DeviceHint) -> NativeProgram:
        environment.apply(flag_set)  # before the backend starts: XLA reads its flags then, not at import
        distributed.initialize(os.environ)
        devices = jax.devices()
        machine = machine_of(devices)
        environment.check_platform(hint, machine.platform, machine.device_kind, recipe.xla_flags)
        mesh_shape = preflight.check(recipe, machine)
        optimal_loss = data.optimal_loss(recipe)
        # One table and one result per run, from process 0.
        return NativeProgram(recipe, devices, machine, mesh_shape, optimal_loss, jax.process_index() == 0)
