"""Run one recipe end to end, whichever backend trains it: resolve the recipe and its XLA flags, let the
backend prepare and run the training program, then derive the statistics, throughput, MFU and metrics on
jaxbench's one FLOPs convention and write the result.

Every outcome is a result: a compile error, out-of-memory, a non-finite loss or an interruption (SIGINT,
SIGTERM) is written with its status and reason (harness/runtime/outcome.py). Only invalid input stops before a
result, and it stops before anything is compiled.

    jaxbench run llama2 --size tiny --steps 20 --out runs/
"""

from __future__ import annotations

import math
import os
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

from jaxbench.core.files import PROJECT_DIR, file_in, writable_folder
from jaxbench.harness import flags as harness_flags
from jaxbench.harness import recipes
from jaxbench.harness.backends import Backend, get_backend
from jaxbench.harness.config import Recipe
from jaxbench.harness.flags import environment
from jaxbench.harness.measure import flops, hlo, peaks, stablehlo, stats
from jaxbench.harness.measure.metrics import throughput_metric
from jaxbench.harness.provenance import collection
from jaxbench.harness.provenance.record import Provenance
from jaxbench.harness.run import inputs
from jaxbench.harness.runtime import preflight, result
from jaxbench.harness.runtime.options import DEFAULT_BACKEND, OUT_FLAG, RunOptions, Schedule
from jaxbench.harness.runtime.outcome import Outcome, sigterm_deferred
from jaxbench.harness.runtime.reporter import RunReporter, SilentReporter
from jaxbench.harness.runtime.result import RunResult, Status


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


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
    processes: list[result.ProcessTiming] | None = None,
) -> list[result.MetricValue]:
    values: dict[str, float | None] = {
        "perf/compile_time_s": compile_s,
        "memory/peak_bytes_per_device": None
        if memory.peak_bytes_per_device is None
        else float(memory.peak_bytes_per_device),
    }
    if step_stats is not None:
        values["perf/step_time_s"] = step_stats.median
    medians = [p.step_time_s.median for p in processes or [] if p.step_time_s is not None]
    if len(medians) > 1:
        values["perf/process_step_spread"] = max(medians) / min(medians) - 1.0
    if tp is not None:
        values[throughput_metric(tp.unit)] = tp.per_s
        values[throughput_metric(tp.unit, per_device=True)] = tp.per_s_per_device
        values["perf/model_tflops_per_device"] = tp.model_tflops_per_device
        values["perf/mfu"] = tp.mfu
    if loss is not None and loss.final_window is not None:
        values["loss/final_window"] = loss.final_window
        values["loss/excess_over_optimal"] = loss.final_window - loss.optimal
    return result.metric_values(values)


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
    origin: Provenance,
    flags: result.FlagsRecord | None = None,
    backend: str = DEFAULT_BACKEND,
    run_id: str | None = None,
    schedule: Schedule = Schedule.AD_HOC,
    hlo_file: str | None = None,
) -> RunResult:
    """The result of a run from its measurements: statistics over the timed steps, throughput, metrics, and
    the compiled program's fingerprint (its HLO kept as `hlo_file`, where it was)."""
    log = outcome.log
    # Only a run that ended ok ran what the recipe says: an interrupted or failed run's step times and loss
    # are kept as they were measured, but none of them becomes a statistic or a metric.
    completed = outcome.status is Status.OK

    def timed_stats(times: list[float]) -> stats.StepTimeStats | None:
        timed = times[recipe.train.warmup_steps :]
        return stats.summarize(timed) if timed and completed else None

    step_stats = timed_stats(log.times)
    # A backend that measured no CPU time (a framework's trainer) leaves cpu_times empty.
    timed_cpu, timed_wall = (sum(t[recipe.train.warmup_steps :]) for t in (log.cpu_times, log.times))
    cpu_per_wall = timed_cpu / timed_wall if completed and log.cpu_times and timed_wall > 0 else None
    processes = [
        result.ProcessTiming(process_index=index, host=host, step_time_s=timed_stats(times))
        for index, (host, times) in enumerate(outcome.process_times)
    ]
    tp = throughput(recipe, step_stats.median, machine) if step_stats else None
    memory = result.Memory(
        peak_bytes_per_device=peak_bytes,
        compiled_temp_bytes=outcome.compiled_memory.get("temp_bytes"),
        compiled_argument_bytes=outcome.compiled_memory.get("argument_bytes"),
    )
    loss = result.Loss(
        per_step=[x if math.isfinite(x) else None for x in log.losses],
        final_window=stats.final_window(log.losses, stats.LOSS_WINDOW_STEPS) if completed else None,
        window_steps=min(stats.LOSS_WINDOW_STEPS, len(log.losses)),
        optimal=optimal_loss,
    )
    return RunResult(
        run_id=run_id or uuid.uuid4().hex,
        backend=backend,
        schedule=schedule,
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
            processes=processes,
            cpu_per_wall=cpu_per_wall,
            cpu_step_time_s=timed_stats(log.cpu_times),
        ),
        throughput=tp,
        memory=memory,
        loss=loss,
        flags=flags,
        metrics=headline_metrics(outcome.compile_s, step_stats, tp, memory, loss, processes),
        provenance=origin,
        framework=outcome.framework,
        program=program_record(outcome, hlo_file),
        profile=outcome.profile,
    )


def program_record(outcome: Outcome, hlo_file: str | None) -> result.Program | None:
    if outcome.program_text is None:
        return None
    try:
        summary = hlo.summarize(outcome.program_text)
    except ValueError:  # text this reader does not understand: the run's figures matter more than this
        return None
    return result.Program(
        summary=summary,
        cost=outcome.program_cost,
        hlo_file=hlo_file,
        input_fingerprint=_input_fingerprint(outcome.program_input_text),
    )


def _input_fingerprint(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return stablehlo.input_fingerprint(text)
    except ValueError:  # not the lowered text this reader expects: the optimized fingerprint still stands
        return None


def recipe_record(recipe: Recipe, options: RunOptions) -> result.RecipeRecord:
    return result.RecipeRecord(
        name=recipe.name,
        family=recipe.family,
        size=recipe.size,
        file=str(recipes.recipe_path(options.recipe)),
        overrides=list(options.overrides),
        hash=recipes.recipe_hash(recipe),
        resolved=recipe.resolved(),
    )


def execute(
    options: RunOptions, reporter: RunReporter, backend: Backend | None = None
) -> tuple[RunResult, Path | None]:
    """Run a recipe and write its result. Raises InvalidInput, before compiling, for invalid input."""
    backend = backend or get_backend(options.backend)
    # Everything that decides the XLA flags happens before the backend starts: XLA reads them only then.
    hint = environment.device_hint(os.environ)
    recipe = inputs.check_inputs(options, hint, os.environ, backend).recipe
    flag_set = harness_flags.for_run(
        recipe.xla_flags,
        recipe.flag_overrides,
        hint,
        os.environ,
        drop_unknown=options.drop_unknown_flags,
        precision=recipe.train.precision.value,
    )
    program = backend.prepare(recipe, flag_set, hint)
    if program.reports:  # the process that writes the result: its folder must take it, before compiling
        writable_folder(options.out_dir, OUT_FLAG)
    else:
        reporter = SilentReporter()
    record = recipe_record(recipe, options)
    started_at, run_id = _now(), uuid.uuid4().hex
    trainer = program.environment()
    origin = collection.collect(
        PROJECT_DIR,
        devices=trainer.devices,
        versions=trainer.versions,
        image=trainer.image,
        framework=trainer.framework,
    )
    stem = result.result_stem(recipe.name, started_at, run_id)
    artifacts = file_in(options.out_dir, f"{stem}.{backend.name}")
    # A scheduler stops a run with SIGTERM, often twice (SLURM at a time limit): the backend turns the first
    # into an interrupted outcome; a later one must not kill the process before its result is written.
    with sigterm_deferred():
        outcome = program.run(reporter, artifacts, options.profile_steps)
        keep_hlo = options.schedule is Schedule.NIGHTLY if options.keep_hlo is None else options.keep_hlo
        hlo_file = None
        if keep_hlo and outcome.program_text is not None and program.reports:
            hlo_file = result.write_program_text(outcome.program_text, options.out_dir, stem)
        run = assemble_result(
            recipe,
            record,
            program.machine,
            program.mesh_shape,
            outcome,
            optimal_loss=program.optimal_loss,
            peak_bytes=program.peak_memory_bytes(),
            started_at=started_at,
            origin=origin,
            flags=result.flags_record(flag_set),
            backend=backend.name,
            run_id=run_id,
            schedule=options.schedule,
            hlo_file=hlo_file,
        )
        path = result.write_result(run, options.out_dir) if program.reports else None
    reporter.finished(run, str(path) if path else None)
    if path is not None:
        result.print_result_for_launcher(path, os.environ)
    return run, path
