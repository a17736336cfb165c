"""Run one recipe end to end: validate, compile (timed), train with per-step timing, write the result.

Every outcome is a result: a compile error, out-of-memory, a non-finite loss or an interruption (SIGINT,
SIGTERM) is written with its status and reason. Only invalid input (RecipeError) stops before a result,
and it stops before anything is compiled.

    jaxbench run llama2 --size tiny --steps 20 --out runs/
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from harness import (
    distributed,
    environment,
    flops,
    peaks,
    preflight,
    provenance,
    recipes,
    result,
    stats,
    train,
)
from harness.config import Recipe
from harness.console import RunReporter, SilentReporter
from harness.metrics import throughput_metric
from harness.result import RunResult, Status

PROJECT_DIR = Path(__file__).resolve().parent.parent


class NonFiniteLoss(RuntimeError):
    def __init__(self, step: int, value: float):
        super().__init__(f"loss became {value} at step {step}")


class Terminated(BaseException):
    """Raised from the SIGTERM handler; a BaseException so that library code does not swallow it."""


@dataclasses.dataclass(frozen=True)
class RunOptions:
    recipe: str
    size: str | None = None
    steps: int | None = None
    overrides: tuple[str, ...] = ()
    out_dir: Path = Path("runs")
    drop_unknown_flags: bool = False


@dataclasses.dataclass
class StepLog:
    times: list[float] = dataclasses.field(default_factory=list)
    losses: list[float] = dataclasses.field(default_factory=list)


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
    import jax

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


def classify(error: BaseException, phase: str) -> tuple[Status, str]:
    """Status and one-paragraph reason of a run that raised `error` while in `phase` ("compile"/"train")."""
    if isinstance(error, KeyboardInterrupt):
        return Status.INTERRUPTED, f"interrupted by SIGINT during {phase}"
    if isinstance(error, Terminated):
        return Status.INTERRUPTED, f"interrupted by SIGTERM during {phase}"
    if isinstance(error, NonFiniteLoss):
        return Status.NAN, str(error)
    text = f"{type(error).__name__}: {error}".strip()
    reason = text if len(text) <= 2000 else text[:2000] + " ..."
    if "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower():
        return Status.OOM, reason
    if phase == "compile":
        return Status.COMPILE_ERROR, reason
    return Status.FAILED, reason


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM (a scheduler's stop) into an exception so the run still writes its result."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def machine_of(devices: list[Any]) -> preflight.Machine:
    return preflight.Machine(devices[0].platform, devices[0].device_kind, len(devices))


def resolve_recipe(options: RunOptions, platform: str) -> Recipe:
    """The recipe at the requested size (default: tiny without a GPU, the file's default size with one)."""
    return recipes.load(
        options.recipe,
        options.size,
        options.overrides,
        default_to_tiny=platform != "gpu",
        steps=options.steps,
    )


def peak_memory_bytes(devices: list[Any]) -> int | None:
    peaks_seen = []
    for device in devices:
        memory = device.memory_stats() or {}
        if "peak_bytes_in_use" in memory:
            peaks_seen.append(int(memory["peak_bytes_in_use"]))
    return max(peaks_seen) if peaks_seen else None


def throughput(
    recipe: Recipe,
    median_step_s: float,
    machine: preflight.Machine,
) -> result.Throughput:
    units_per_step = recipe.train.global_batch * recipe.model.units_per_example()
    per_s = units_per_step / median_step_s
    flops_per_unit = recipe.model.training_flops_per_unit()
    tflops = flops_per_unit * per_s / machine.device_count / 1e12
    peak = peaks.peak_flops_per_device(machine.device_kind, recipe.train.precision.value)
    peak_tflops = peak / 1e12 if peak else None
    return result.Throughput(
        unit=recipe.model.unit,
        units_per_step=units_per_step,
        flops_per_unit=flops_per_unit,
        flops_convention=flops.FLOPS_CONVENTION,
        per_s=per_s,
        per_s_per_device=per_s / machine.device_count,
        model_tflops_per_device=tflops,
        peak_tflops_per_device=peak_tflops,
        mfu=tflops / peak_tflops if peak_tflops else None,
    )


def headline_metrics(
    compile_s: float | None,
    step_stats: stats.StepTimeStats | None,
    tp: result.Throughput | None,
    memory: result.Memory,
    loss: result.Loss | None,
) -> list[result.MetricValue]:
    values: dict[str, float | None] = {
        "perf/compile_time_s": compile_s,
        "memory/peak_bytes_per_device": None
        if memory.peak_bytes_per_device is None
        else float(memory.peak_bytes_per_device),
    }
    if step_stats is not None:
        values["perf/step_time_s"] = step_stats.median
    if tp is not None:
        values[throughput_metric(tp.unit)] = tp.per_s
        values[throughput_metric(tp.unit, per_device=True)] = tp.per_s_per_device
        values["perf/model_tflops_per_device"] = tp.model_tflops_per_device
        values["perf/mfu"] = tp.mfu
    if loss is not None and loss.final_window is not None:
        values["loss/final_window"] = loss.final_window
        values["loss/excess_over_optimal"] = loss.final_window - loss.optimal
    return result.metric_values(values)


@dataclasses.dataclass
class Outcome:
    """What training produced, however it ended."""

    status: Status = Status.OK
    reason: str | None = None
    compile_s: float | None = None
    compiled_memory: dict[str, int | None] = dataclasses.field(default_factory=dict)
    log: StepLog = dataclasses.field(default_factory=StepLog)


def train_and_time(
    recipe: Recipe,
    mesh_shape: dict[str, int],
    devices: list[Any],
    reporter: RunReporter,
) -> Outcome:
    """Compile and run the steps; any failure but invalid input becomes the outcome's status and reason."""
    outcome, phase = Outcome(), "compile"
    with sigterm_raises():
        try:
            reporter.compiling(recipe.name, preflight.describe_mesh(mesh_shape))
            program = train.prepare(recipe, mesh_shape, devices)
            outcome.compile_s, outcome.compiled_memory = program.compile_s, program.compiled_memory
            reporter.compiled(program.compile_s)
            phase = "train"
            reporter.steps_started(recipe.train.steps)
            run_steps(
                program.step, program.state, recipe.train.steps, outcome.log, on_step=reporter.step_done
            )
        except recipes.RecipeError:
            raise
        except (Exception, KeyboardInterrupt, Terminated) as error:
            outcome.status, outcome.reason = classify(error, phase)
    return outcome


def assemble_result(
    recipe: Recipe,
    record: result.RecipeRecord,
    machine: preflight.Machine,
    mesh_shape: dict[str, int],
    outcome: Outcome,
    *,
    optimal_loss: float,
    peak_bytes: int | None,
    started_at: str,
    origin: provenance.Provenance,
    flags: result.FlagsRecord | None = None,
) -> RunResult:
    """The result of a run from its measurements: statistics over the timed steps, throughput, metrics."""
    log = outcome.log
    timed = log.times[recipe.train.warmup_steps :]
    step_stats = stats.summarize(timed) if timed and outcome.status is Status.OK else None
    tp = throughput(recipe, step_stats.median, machine) if step_stats else None
    memory = result.Memory(
        peak_bytes_per_device=peak_bytes,
        compiled_temp_bytes=outcome.compiled_memory.get("temp_bytes"),
        compiled_argument_bytes=outcome.compiled_memory.get("argument_bytes"),
    )
    loss = result.Loss(
        per_step=[x if math.isfinite(x) else None for x in log.losses],
        final_window=stats.final_window(log.losses, stats.LOSS_WINDOW_STEPS),
        window_steps=min(stats.LOSS_WINDOW_STEPS, len(log.losses)),
        optimal=optimal_loss,
    )
    return RunResult(
        run_id=uuid.uuid4().hex,
        status=outcome.status,
        reason=outcome.reason,
        started_at=started_at,
        finished_at=_now(),
        command=sys.argv,
        recipe=record,
        parallelism=result.Parallelism(mesh=mesh_shape, device_count=machine.device_count),
        timing=result.Timing(
            compile_s=outcome.compile_s,
            warmup_steps=recipe.train.warmup_steps,
            step_time_s=step_stats,
            raw_step_times_s=log.times,
        ),
        throughput=tp,
        memory=memory,
        loss=loss,
        flags=flags,
        metrics=headline_metrics(outcome.compile_s, step_stats, tp, memory, loss),
        provenance=origin,
    )


def execute(options: RunOptions, reporter: RunReporter) -> tuple[RunResult, Path | None]:
    """Run a recipe and write its result. Raises InvalidInput, before compiling, for invalid input."""
    # Everything that decides the XLA flags happens before the backend starts: XLA reads them only then.
    hint = environment.device_hint(os.environ)
    recipe = resolve_recipe(options, hint.platform)
    flag_set = environment.run_flags(
        recipe.xla_flags, recipe.flag_overrides, hint, os.environ, drop_unknown=options.drop_unknown_flags
    )
    environment.apply(flag_set)
    import jax

    distributed.initialize(os.environ)
    if jax.process_index() != 0:
        reporter = SilentReporter()  # one table and one result per run, from process 0
    devices = jax.devices()
    machine = machine_of(devices)
    environment.check_platform(hint, machine.platform, machine.device_kind, recipe.xla_flags)
    mesh_shape = preflight.check(recipe, machine)
    optimal_loss = preflight.optimal_loss(recipe)
    record = result.RecipeRecord(
        name=recipe.name,
        family=recipe.family,
        size=recipe.size,
        file=str(recipes.recipe_path(options.recipe)),
        overrides=list(options.overrides),
        hash=recipes.recipe_hash(recipe),
        resolved=recipe.resolved(),
    )
    started_at = _now()
    origin = provenance.collect(PROJECT_DIR)
    outcome = train_and_time(recipe, mesh_shape, devices, reporter)
    run = assemble_result(
        recipe,
        record,
        machine,
        mesh_shape,
        outcome,
        optimal_loss=optimal_loss,
        peak_bytes=peak_memory_bytes(jax.local_devices()),
        started_at=started_at,
        origin=origin,
        flags=result.flags_record(flag_set),
    )
    path = result.write_result(run, options.out_dir) if jax.process_index() == 0 else None
    reporter.finished(run, str(path) if path else None)
    return run, path
