"""A GPU check's summary as Markdown: the verdict and the machine first, then a table of the recipe runs, a
table of the microbenchmark kernels, and the reason of everything that failed.

    jaxbench gpu-check          # prints this and writes it to summary.md
"""

from __future__ import annotations

from jaxbench.core.markdown_escape import escape_markdown
from jaxbench.harness.gpucheck.summary import CheckRow, KernelRow, MicrobenchRow, RunRow, Summary
from jaxbench.harness.runtime.result import Status


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"


def _percent(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction:.1%}"


def _short_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _gib(size: int | None) -> str:
    return "-" if size is None else f"{size / 2**30:.2f} GiB"


def _table(header: list[str], right_aligned_from: int, rows: list[list[str]]) -> list[str]:
    """A Markdown table whose columns from `right_aligned_from` on are numbers (aligned right)."""
    rule = ["---" if i < right_aligned_from else "---:" for i in range(len(header))]
    return ["| " + " | ".join(cells) + " |" for cells in (header, rule, *rows)]


def _run_cells(row: RunRow) -> list[str]:
    throughput = "-" if row.per_s is None else f"{row.per_s:,.0f} {row.unit}s/s"
    return [
        escape_markdown(row.check),
        escape_markdown(row.status),
        _short_time(row.step_time_s),
        throughput,
        _percent(row.mfu),
        _gib(row.peak_bytes_per_device),
        _duration(row.compile_s),
        _duration(row.wall_s),
        row.fingerprint[:12] if row.fingerprint else "-",
    ]


def _kernel_cells(kernel: KernelRow) -> list[str]:
    rate = "-" if kernel.rate is None else f"{kernel.rate:,.1f} {kernel.rate_unit}"
    return [
        escape_markdown(kernel.name),
        escape_markdown(kernel.status),
        _percent(kernel.fraction_of_peak),
        rate,
        _short_time(kernel.median_s),
    ]


def _failures(rows: list[CheckRow], kernels: list[KernelRow]) -> list[str]:
    ok = Status.OK.value
    # A reason is often a traceback: `@jax.jit` in it would mention a user called jax.
    lines = [
        "- " + escape_markdown(f"{row.check}: {row.status}: {row.reason or ''}")
        for row in rows
        if row.status != ok
    ]
    lines += [
        "- " + escape_markdown(f"{k.name}: {k.status}: {k.reason or ''}") for k in kernels if k.status != ok
    ]
    return ["", "Failures:", "", *lines] if lines else []


def _microbench_lines(row: MicrobenchRow) -> list[str]:
    heading = f"## Microbenchmarks ({escape_markdown(row.check)}: {row.status}, {_duration(row.wall_s)})"
    if not row.kernels:
        return ["", heading, "", "No kernels were timed."]
    header = ["kernel", "status", "fraction of peak", "rate", "median"]
    return ["", heading, "", *_table(header, 2, [_kernel_cells(kernel) for kernel in row.kernels])]


def render(summary: Summary) -> str:
    verdict = "passed" if summary.ok else "FAILED"
    count = f"{summary.device_count} x " if summary.device_count else ""
    over_budget = ", over the budget" if summary.wall_s > summary.budget_s else ""
    lines = [
        f"# GPU check {verdict}: {count}{escape_markdown(summary.device)}",
        "",
        f"- XLA flag profile (auto): {escape_markdown(', '.join(summary.auto_profiles)) or 'unknown'}",
        f"- steps per recipe run: {summary.steps}",
        f"- started {summary.started_at}, took {_duration(summary.wall_s)} "
        f"(budget {_duration(summary.budget_s)}){over_budget}",
        f"- results: {escape_markdown(str(summary.folder))}",
        "",
        "## Recipe runs",
        "",
    ]
    header = ["check", "status", "step time (median)", "throughput", "MFU", "peak memory / device"]
    lines += _table([*header, "compile", "wall", "program"], 2, [_run_cells(row) for row in summary.runs])
    for row in summary.microbench:
        lines += _microbench_lines(row)
    kernels = [kernel for row in summary.microbench for kernel in row.kernels]
    lines += _failures([*summary.runs, *summary.microbench], kernels)
    return "\n".join(lines) + "\n"
