"""A JAX profiler trace of a few training steps reduced to where their time went: per step, the seconds of
the step's ops by kind (harness/measure/hlo.py: TIME_CATEGORIES, from the compiled step's HLO) and "host",
the part of the steps' wall time in which none of them ran (dispatch, Python, waiting).

It reads the Chrome-trace JSON that `jax.profiler.trace` writes; overlapping ops share each instant equally,
so the categories and "host" add up to a step's wall time. Which events count as ops, and on XLA:CPU the
flag they need: docs/design.md, "Where a profiled step's time went".

    breakdown(read_trace(folder), hlo.time_categories(text), "jit_train_step", wall_s=0.9, steps=3)
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from jaxbench.harness.measure.hlo import CONTAINER, TIME_CATEGORIES

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
    `events`; an op of the module that `categories` does not know counts as "other". They add up to the
    wall time per step (or to the ops' span, where that is longer)."""
    if steps < 1 or wall_s < 0:
        raise ValueError(f"steps {steps}, wall_s {wall_s}: expected at least one step and a wall time")
    ops = []
    for event in events:
        args = event.get("args") or {}
        if event.get("ph") != "X" or not isinstance(args, Mapping) or args.get("hlo_module") != module:
            continue
        op, start, duration = args.get("hlo_op") or event.get("name"), event.get("ts"), event.get("dur")
        if isinstance(start, int | float) and isinstance(duration, int | float) and duration >= 0:
            ops.append((float(start), float(start) + float(duration), categories.get(str(op), "other")))
    seconds = _attribute(ops)
    busy = sum(seconds.values())
    seconds[HOST] = max(wall_s - busy, 0.0)
    return {category: value / steps for category, value in seconds.items()}


def _attribute(ops: list[tuple[float, float, str]]) -> dict[str, float]:
    """Seconds by category of the time the ops cover, each instant once: shared equally among the ops
    running then (threads and streams overlap), a loop's own time (no op of its body running) as "other".
    A sweep over the ops' ends, since a plain sum would count overlapping time twice."""
    seconds = dict.fromkeys(TIME_CATEGORIES, 0.0)
    edges = sorted(
        [(start, 1, category) for start, _, category in ops]
        + [(end, -1, category) for _, end, category in ops]
    )
    running: dict[str, int] = dict.fromkeys([*TIME_CATEGORIES, CONTAINER], 0)
    previous = None
    for time, change, category in edges:
        if previous is not None and time > previous:
            length = (time - previous) * MICROSECONDS
            working = {kind: count for kind, count in running.items() if count and kind != CONTAINER}
            if working:
                total = sum(working.values())
                for kind, count in working.items():
                    seconds[kind] += length * count / total
            elif running[CONTAINER]:
                seconds["other"] += length
        running[category] = running.get(category, 0) + change
        previous = time
    return seconds
