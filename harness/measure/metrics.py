"""Every metric a run reports, declared once with its unit and which direction is better.

Names carry a namespace and unit (`perf/step_time_s`). The results store uses `direction` to decide whether
a change is a regression; an inverted direction would make a doubled step time look like an improvement,
so it is declared here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import enum


class Direction(enum.StrEnum):
    HIGHER = "higher_is_better"
    LOWER = "lower_is_better"


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    direction: Direction
    description: str


STEP_TIME = "perf/step_time_s"
"""The step time's name, which the results side reads directly (two runs compared, a run's step samples)."""


def _declare(*metrics: Metric) -> dict[str, Metric]:
    return {metric.name: metric for metric in metrics}


METRICS: dict[str, Metric] = _declare(
    Metric(STEP_TIME, "s", Direction.LOWER, "median wall time of a timed training step"),
    Metric("perf/tokens_per_s", "tokens/s", Direction.HIGHER, "global training throughput (language models)"),
    Metric("perf/tokens_per_s_per_device", "tokens/s", Direction.HIGHER, "throughput per device"),
    Metric("perf/images_per_s", "images/s", Direction.HIGHER, "global training throughput (vision models)"),
    Metric("perf/images_per_s_per_device", "images/s", Direction.HIGHER, "throughput per device"),
    Metric("perf/model_tflops_per_device", "TFLOP/s", Direction.HIGHER, "model FLOPs per second per device"),
    Metric("perf/mfu", "fraction", Direction.HIGHER, "model FLOPs utilisation against the dense peak"),
    Metric(
        "perf/process_step_spread",
        "fraction",
        Direction.LOWER,
        "slowest process's median step time over the fastest's, minus 1 (multi-process runs): a slow host",
    ),
    Metric("perf/compile_time_s", "s", Direction.LOWER, "time to lower and compile the training step"),
    Metric("memory/peak_bytes_per_device", "bytes", Direction.LOWER, "largest peak device memory in use"),
    Metric("loss/final_window", "nats", Direction.LOWER, "mean training loss over the last steps"),
    Metric("loss/excess_over_optimal", "nats", Direction.LOWER, "final-window loss minus the data's optimum"),
)


def throughput_metric(unit: str, per_device: bool = False) -> str:
    """Name of the throughput metric for a model's unit ("token" or "image")."""
    return f"perf/{unit}s_per_s" + ("_per_device" if per_device else "")
