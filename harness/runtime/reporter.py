"""What a run shows while it runs and when it ends: a progress bar with live step time and loss, then a table.

Behind one small interface (`RunReporter`) with a silent implementation, so tests and the overhead benchmark
run the same loop without a terminal.
"""

from __future__ import annotations

from typing import Protocol

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from jaxbench.core.terminal import console_for
from jaxbench.harness.runtime.options import DEFAULT_BACKEND
from jaxbench.harness.runtime.result import RunResult, Status
from jaxbench.harness.tables import add_plain_row


class RunReporter(Protocol):
    def compiling(self, recipe_name: str, mesh: str) -> None: ...

    def compiled(self, seconds: float) -> None: ...

    def steps_started(self, total: int) -> None: ...

    def step_done(self, step: int, seconds: float, loss: float) -> None: ...

    def finished(self, result: RunResult, path: str | None) -> None: ...


class SilentReporter:
    def compiling(self, recipe_name: str, mesh: str) -> None:
        pass

    def compiled(self, seconds: float) -> None:
        pass

    def steps_started(self, total: int) -> None:
        pass

    def step_done(self, step: int, seconds: float, loss: float) -> None:
        pass

    def finished(self, result: RunResult, path: str | None) -> None:
        pass


class RichReporter:
    """Progress on stderr, summary table on stdout."""

    def __init__(self, stdout: Console | None = None, stderr: Console | None = None):
        self.out = stdout or console_for()
        self.err = stderr or console_for(stderr=True)
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def compiling(self, recipe_name: str, mesh: str) -> None:
        self.err.print(
            f"[bold]{escape(recipe_name)}[/]: building and compiling the training step (mesh {escape(mesh)})"
        )

    def compiled(self, seconds: float) -> None:
        self.err.print(f"compiled in {seconds:.1f} s")

    def steps_started(self, total: int) -> None:
        self.progress = Progress(
            TextColumn("steps"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("step {task.fields[step_time]}"),
            TextColumn("loss {task.fields[loss]}"),
            TimeElapsedColumn(),
            console=self.err,
            transient=True,
            # Rendering competes with XLA for host cores (a CPU backend computes on them): redraw rarely.
            refresh_per_second=1,
        )
        self.progress.start()
        self.task = self.progress.add_task("train", total=total, step_time="-", loss="-")

    def step_done(self, step: int, seconds: float, loss: float) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(
                self.task, advance=1, step_time=f"{seconds * 1e3:.1f} ms", loss=f"{loss:.4f}"
            )

    def finished(self, result: RunResult, path: str | None) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        self.out.print(summary_table(result))
        warning = few_steps_warning(result)
        if warning:
            self.err.print(warning, style="yellow", markup=False, soft_wrap=True)
        if result.status is not Status.OK:
            self.err.print(
                f"{result.status.value}: {result.reason}", style="bold red", markup=False, soft_wrap=True
            )
        if path:
            self.out.print(f"result: {path}", markup=False)


FEW_TIMED_STEPS = 10
"""Below this many timed steps the percentiles are of a handful of samples: the run says so."""


def few_steps_warning(result: RunResult) -> str | None:
    """A warning where a run that ended ok timed fewer than FEW_TIMED_STEPS steps; None otherwise."""
    stats = result.timing.step_time_s
    if stats is None or stats.count >= FEW_TIMED_STEPS:
        return None
    enough = result.timing.warmup_steps + FEW_TIMED_STEPS
    return (
        f"warning: only {stats.count} steps timed (after {result.timing.warmup_steps} warmup steps): the "
        f"median and p10/p90 are of {stats.count} samples; --steps {enough} or more for steadier figures"
    )


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def summary_table(result: RunResult) -> Table:
    """The headline numbers of one run, in the order a performance engineer reads them."""
    trainer = "" if result.backend == DEFAULT_BACKEND else f" by {result.backend}"
    title = f"{result.recipe.name}{trainer}  [{result.status.value}]"
    table = Table(title=escape(title), show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    devices = result.provenance.devices
    add_plain_row(table, "devices", f"{devices.count} x {devices.kind}")
    if result.parallelism is not None:
        add_plain_row(table, "mesh", " ".join(f"{k}={v}" for k, v in result.parallelism.mesh.items()))
    add_plain_row(table, "precision", str(result.recipe.resolved["train"]["precision"]))
    add_plain_row(table, "compile time", _fmt(result.timing.compile_s, ".2f", " s"))
    stats = result.timing.step_time_s
    if stats is not None:
        add_plain_row(table, f"step time (median of {stats.count})", f"{stats.median * 1e3:.2f} ms")
        add_plain_row(table, "step time p10 / p90", f"{stats.p10 * 1e3:.2f} / {stats.p90 * 1e3:.2f} ms")
        add_plain_row(table, "step time IQR", f"{stats.iqr * 1e3:.3f} ms")
    tp = result.throughput
    if tp is not None:
        add_plain_row(table, f"{tp.unit}s/s (global)", f"{tp.per_s:,.1f}")
        add_plain_row(table, f"{tp.unit}s/s per device", f"{tp.per_s_per_device:,.1f}")
        add_plain_row(table, "model TFLOP/s per device", f"{tp.model_tflops_per_device:.4g}")
        add_plain_row(table, "MFU", "- (peak unknown for this device)" if tp.mfu is None else f"{tp.mfu:.1%}")
    framework = result.framework
    if framework is not None:
        reported = framework.reported_tflops_per_device
        add_plain_row(table, f"{result.backend}'s own TFLOP/s per device", _fmt(reported, ".4g"))
        add_plain_row(
            table,
            "parameters (built / recipe)",
            f"{_fmt(framework.parameter_count, ',')} / {framework.expected_parameter_count:,}",
        )
    peak = result.memory.peak_bytes_per_device
    add_plain_row(
        table, "peak memory per device", "- (not reported)" if peak is None else f"{peak / 2**30:.2f} GiB"
    )
    if result.loss is not None:
        add_plain_row(
            table,
            f"loss (last {result.loss.window_steps} steps)",
            f"{_fmt(result.loss.final_window, '.4f')}  (optimum {result.loss.optimal:.4f})",
        )
    return table
