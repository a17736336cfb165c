"""A report with every state and incident kind, awkward names and degenerate series, built as plain data for
the renderer and dashboard tests (tests/results/test_report_render.py, tests/results/test_dashboard.py)."""

from __future__ import annotations

import datetime as dt
import itertools
import random

from jaxbench.results.judgement.vocabulary import (
    ComponentRange,
    HumanVerdict,
    IncidentKind,
    IncidentState,
    SeriesState,
    SettingChange,
)
from jaxbench.results.report.model import (
    Baseline,
    ChangePointView,
    IncidentSeries,
    IncidentView,
    Report,
    Segment,
    SeriesPoint,
    SeriesView,
)

START = dt.date(2025, 9, 1)
NIGHTS = 60
H100 = "8 x NVIDIA H100 80GB HBM3 x 1 host"
A100 = "8 x NVIDIA A100-SXM4-80GB x 1 host"
SPECIAL = "vit-b16 <script>alert(1)</script> & a|b"
"""A benchmark name full of characters that HTML, SVG and Markdown tables must escape."""
XLA_COMPARE = "https://github.com/openxla/xla/compare/1a2b3c4d...5e6f7a8b"


def make_series(
    key: str,
    benchmark: str,
    metric: str,
    hardware: str,
    state: SeriesState,
    *,
    level: float = 1.0,
    shift_at: int | None = None,
    shift: float = 0.0,
    last: float | None = None,
    failed: dict[int, str] | None = None,
    nights: int = NIGHTS,
) -> SeriesView:
    """A series of `nights` with 1 % noise, a step of `shift` (relative) at `shift_at`, failed nights
    (index -> status) and optionally a different newest value `last` (relative to `level`)."""
    rng = random.Random(key)
    failed = failed or {}
    unit, higher_is_better = {"tokens": ("tokens/s", True), "memory": ("bytes", False)}.get(
        metric.split("/")[0].split("_")[0] if "tokens" not in metric else "tokens", ("s", False)
    )
    values: list[float | None] = []
    for i in range(nights):
        step = 1 + shift if shift_at is not None and i >= shift_at else 1.0
        values.append(None if i in failed else level * step * (1 + rng.gauss(0, 0.01)))
    if last is not None:
        values[-1] = level * last
    points = [
        SeriesPoint(START + dt.timedelta(days=i), v, failed.get(i, "ok"), None if i in failed else 1000 + i)
        for i, v in enumerate(values)
    ]
    bounds = [0, shift_at, nights] if shift_at is not None else [0, nights]
    segments = [
        Segment(a, b, _mean(values[a:b]))
        for a, b in itertools.pairwise(bounds)
        if any(v is not None for v in values[a:b])
    ]
    change_points = []
    if shift_at is not None:
        regression = (shift > 0) != higher_is_better
        change_points.append(ChangePointView(shift_at, points[shift_at].night, shift, 1e-6, regression))
    reference = [v for v in values[: shift_at or nights] if v is not None]
    baseline = None
    if len(reference) >= 10:
        median = sorted(reference)[len(reference) // 2]
        baseline = Baseline(median, median * 0.97, median * 1.03)
    newest = values[-1]
    change = newest / baseline.median - 1 if baseline and newest is not None else None
    settings = {"precision": "bf16", "xla_flags": "--xla_gpu_enable_latency_hiding_scheduler=true"}
    if benchmark == SPECIAL:
        settings["note"] = 'tuned by "A & B" <b>bold</b> | piped'
    return SeriesView(
        key, benchmark, metric, unit, higher_is_better, hardware, "", settings,
        points, segments, change_points, baseline, state, change,
    )  # fmt: skip


def _mean(values: list[float | None]) -> float:
    present = [v for v in values if v is not None]
    return sum(present) / len(present)


def sample_report() -> Report:
    """3 benchmarks x 2-3 metrics x 2 hardware classes over 60 nights: two regressions (one series with a
    failed night), an improvement, a suspected night, an invalid newest night, a series too young for a
    baseline; an open regression incident with component ranges and flag/env changes, an open validity
    incident and a resolved one."""
    step, tokens, memory = "perf/step_time_s", "perf/tokens_per_s_per_device", "memory/peak_bytes"
    series = [
        make_series("llama2-7b.step.h100", "llama2-7b", step, H100, SeriesState.REGRESSION,
                    shift_at=45, shift=0.08, failed={30: "oom"}),
        make_series("llama2-7b.tokens.h100", "llama2-7b", tokens, H100, SeriesState.REGRESSION,
                    level=3900.0, shift_at=45, shift=-0.074),
        make_series("llama2-7b.step.a100", "llama2-7b", step, A100, SeriesState.OK, level=2.1),
        make_series("llama2-7b.tokens.a100", "llama2-7b", tokens, A100, SeriesState.OK, level=1850.0),
        make_series("gpt3-5b.step.h100", "gpt3-5b", step, H100, SeriesState.IMPROVEMENT,
                    level=0.8, shift_at=40, shift=-0.06),
        make_series("gpt3-5b.step.a100", "gpt3-5b", step, A100, SeriesState.SUSPECTED, level=1.6, last=1.045),
        make_series("gpt3-5b.memory.h100", "gpt3-5b", memory, H100, SeriesState.INSUFFICIENT_HISTORY,
                    level=5.1e10, nights=5),
        make_series("vit-special.step.h100", SPECIAL, step, H100, SeriesState.OK, level=0.21),
        make_series("vit-special.step.a100", SPECIAL, step, A100, SeriesState.INVALID, level=0.4,
                    failed={NIGHTS - 1: "nan"}),
    ]  # fmt: skip
    return Report(
        generated_at=dt.datetime(2025, 10, 31, 6, 30, tzinfo=dt.UTC),
        store="postgresql://bench-db/jaxbench",
        series=series,
        incidents=[_regression_incident(series), _validity_incident(), _resolved_incident()],
    )


def _regression_incident(series: list[SeriesView]) -> IncidentView:
    members = [
        IncidentSeries(s.key, s.benchmark, s.metric, s.change_points[0].magnitude, s.state)
        for s in series[:2]
    ]
    return IncidentView(
        id=7, fingerprint="throughput:h100:2025-10-16", kind=IncidentKind.THROUGHPUT,
        state=IncidentState.OPEN,
        hardware=H100, night=START + dt.timedelta(days=45), last_good_night=START + dt.timedelta(days=44),
        series=members,
        components=[
            ComponentRange("jax", "https://github.com/jax-ml/jax", "jax-v0.7.0", "jax-v0.7.1",
                           "https://github.com/jax-ml/jax/compare/jax-v0.7.0...jax-v0.7.1"),
            ComponentRange("xla", "https://github.com/openxla/xla", "1a2b3c4d", "5e6f7a8b", XLA_COMPARE),
        ],
        flag_changes=[SettingChange("--xla_gpu_enable_latency_hiding_scheduler", "true", "false")],
        env_changes=[SettingChange("NCCL_PROTO", None, "LL128")],
        verdict=None,
        summary="llama2-7b step time +8.0% on H100 after the jax 0.7.1 / XLA bump",
    )  # fmt: skip


def _validity_incident() -> IncidentView:
    return IncidentView(
        id=8, fingerprint="validity:a100:2025-10-30", kind=IncidentKind.VALIDITY, state=IncidentState.OPEN,
        hardware=A100, night=START + dt.timedelta(days=NIGHTS - 1), last_good_night=None,
        series=[IncidentSeries("vit-special.step.a100", SPECIAL, "perf/step_time_s", 0.0,
                               SeriesState.INVALID)],
        components=[ComponentRange("flax", None, "0.12.0", "0.12.1", "javascript:alert(1)")],
        flag_changes=[], env_changes=[], verdict=None, summary="loss went NaN <after> 3 steps",
    )  # fmt: skip


def _resolved_incident() -> IncidentView:
    return IncidentView(
        id=5, fingerprint="compile_time:a100:2025-09-20", kind=IncidentKind.COMPILE_TIME,
        state=IncidentState.RESOLVED, hardware=A100, night=START + dt.timedelta(days=19),
        last_good_night=START + dt.timedelta(days=18), series=[], components=[], flag_changes=[],
        env_changes=[], verdict=HumanVerdict.NOISE, summary="one slow node",
    )  # fmt: skip
