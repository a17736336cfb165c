"""A JAX profiler trace of a few training steps reduced to where their time went: per step, the seconds of
the step's ops by kind (harness/measure/hlo.py: TIME_CATEGORIES, from the compiled step's HLO) and "host",
the part of the steps' wall time in which none of them ran (dispatch, Python, waiting).

The trace is the Chrome-trace JSON that `jax.profiler.trace` writes beside its XPlane file
(`plugins/profile/<time>/<host>.trace.json.gz`, which Perfetto and XProf open too). An op is an event that
names its HLO instruction and module (`args.hlo_op`, `args.hlo_module`): GPU kernels always do; XLA:CPU only
with `--xla_cpu_enable_xprof_traceme=true` in XLA_FLAGS, and without it a CPU profile is all host time.
Ops overlap (streams, threads, async collectives): each category sums its own ops' time, while "host" is the
wall time outside their union, so the categories may add up to more than the wall time, never "host" below 0.
A loop or call is no category of its own: the ops it runs are named and counted.

    breakdown(read_trace(folder), hlo.time_categories(text), "jit_train_step", wall_s=0.9, steps=3)
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.measure.hlo import CONTAINER, TIME_CATEGORIES

HOST = "host"
TRACE_GLOB = "plugins/profile/*/*.trace.json.gz"
MICROSECONDS = 1e-6


def read_trace(folder: Path) -> list[dict[str, Any]]:
    """The events of the newest trace that `jax.profiler.trace(folder)` wrote; [] where it wrote none."""
    traces = sorted(folder.glob(TRACE_GLOB))
    if not traces:
        return []
    document = json.loads(gzip.decompress(traces[-1].read_bytes()))
    events = document.get("traceEvents", []) if isinstance(document, dict) else document
    return [event for event in events if isinstance(event, dict)]


def module_name(hlo_text: str) -> str:
    """The module's name in its HLO text ("HloModule jit_train_step, ..."), as trace events name it."""
    first = hlo_text.lstrip().split(None, 2)
    return first[1].rstrip(",") if len(first) > 1 and first[0] == "HloModule" else ""


def breakdown(
    events: Iterable[Mapping[str, Any]],
    categories: Mapping[str, str],
    module: str,
    *,
    wall_s: float,
    steps: int,
) -> dict[str, float]:
    """Seconds per step by category (every one of TIME_CATEGORIES, then HOST) of the ops of `module` in
    `events`; an op of the module that `categories` does not know counts as "other"."""
    if steps < 1 or wall_s < 0:
        raise ValueError(f"steps {steps}, wall_s {wall_s}: expected at least one step and a wall time")
    seconds = dict.fromkeys(TIME_CATEGORIES, 0.0)
    intervals = []
    for event in events:
        args = event.get("args") or {}
        if event.get("ph") != "X" or not isinstance(args, Mapping) or args.get("hlo_module") != module:
            continue
        op, start, duration = args.get("hlo_op") or event.get("name"), event.get("ts"), event.get("dur")
        if not isinstance(start, int | float) or not isinstance(duration, int | float) or duration < 0:
            continue
        category = categories.get(str(op), "other")
        if category != CONTAINER:
            seconds[category] += duration * MICROSECONDS
        intervals.append((float(start), float(start) + float(duration)))
    busy = _union_length(intervals) * MICROSECONDS
    seconds[HOST] = max(wall_s - busy, 0.0)
    return {category: value / steps for category, value in seconds.items()}


def _union_length(intervals: list[tuple[float, float]]) -> float:
    """The length covered by the intervals, overlaps counted once."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
