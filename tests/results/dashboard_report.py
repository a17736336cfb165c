"""The report the dashboard's tests render: the sample report (tests/support/sample_report.py) plus what the
interactive pages show: the runs behind the points but one, a settings variant, findings of every kind, a
gap night beside a failed one, and each run's compiled program and profile.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from jaxbench.harness.measure.hlo import ProgramSummary
from jaxbench.results.report.model import (
    Baseline,
    ComponentView,
    Marker,
    Report,
    RunResultView,
    RunView,
    SeriesPoint,
    SeriesView,
)
from tests.support.sample_report import SPECIAL, START, sample_report

JAX_BEFORE, JAX_AFTER = "a1b2c3d4e5f6a7b8", "0f9e8d7c6b5a4f3e"
"""jax's commit before and from the night of the step (night 45 of the sample)."""


HIDDEN_RUN = 1003
"""A run behind a point that the report does not carry: its night links nowhere."""


def night(index: int) -> dt.date:
    return START + dt.timedelta(days=index)


def _run(run_id: int, members: list[tuple[SeriesView, SeriesPoint]]) -> RunView:
    index = (members[0][1].night - START).days
    precision = members[0][0].settings.get("precision", "bf16")
    started = dt.datetime.combine(night(index), dt.time(2, 0), dt.UTC)
    jax = JAX_BEFORE if index < 45 else JAX_AFTER
    return RunView(
        id=run_id, night=night(index), status="ok", reason=None, source_kind="harness",
        run_uid=f"uid-{run_id}", started_at=started, finished_at=started + dt.timedelta(minutes=41),
        image_ref=f"ghcr.io/example/jax:nightly-{night(index)}", image_digest="sha256:" + "ab" * 32,
        ci_job_url="https://github.com/example/jaxbench/actions/runs/1", hostname="gpu-node-07", hosts=1,
        config={"model": {"family": "llama2", "num_layers": 32}, "train": {"precision": precision,
                "global_batch": 256, "note": SPECIAL}, "xla_flags": "auto"},
        environment={"NCCL_PROTO": "LL128", "XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true"},
        components=[
            ComponentView("jax", "https://github.com/jax-ml/jax", jax, "0.7"),
            ComponentView("xla", "https://github.com/openxla/xla", "5e6f7a8b9c0d", None),
        ],
        results=[
            RunResultView(s.key, s.benchmark, s.metric, s.unit, p.value, p.status, None) for s, p in members
        ],
        schedule="nightly" if index % 10 else "ad-hoc", source_hash="cd" * 32,
        program=_program(index), profile=_profile(index),
    )  # fmt: skip


def _program(index: int) -> dict[str, Any]:
    """As runs.program stores it: the program changed with jax on night 45 (two more kLoop fusions)."""
    fusions = 12 if index < 45 else 14
    summary = ProgramSummary(
        fingerprint=("a" if index < 45 else "b") * 64, instructions=900 + fusions,
        fusions={"kLoop": fusions, "kCustom": 4}, ops={"fusion": fusions + 4, "other": 900},
        collectives={"all-reduce": 3}, custom_calls={"__cublas$lt$matmul": 4},
    )  # fmt: skip
    return {"summary": summary.model_dump(mode="json"), "cost": {"flops": 1.5e12, "bytes accessed": 3e9}}


TRACE_URL = "https://traces.example.org/nightly/run-1057/host0.trace.json.gz"
"""Where run 1057's profile trace was kept (the newer runs' traces are kept under a folder of the results)."""


def _profile(index: int) -> dict[str, Any]:
    matmul = 0.009 if index < 45 else 0.013
    trace = TRACE_URL if index == 57 else f"profile-{index}/trace" if index > 50 else None
    return {"steps": 3, "wall_s": 0.1, "seconds_per_step": {"matmul": matmul, "host": 0.001}, "problem": None,
            "trace": trace}  # fmt: skip


def dashboard_report() -> Report:
    """The sample report plus what the interactive pages show: the runs behind the points (but one), a fp8
    variant of llama2-7b's step time on H100 (a settings group), findings of every kind on the bf16 one,
    and a gap night beside its failed (oom) night."""
    base = sample_report()
    step = base.series[0]
    assert step.key == "llama2-7b.step.h100"
    points = list(step.points)
    points[30] = dataclasses.replace(points[30], run_id=1030)  # the oom run: stored, without a value
    points[31] = SeriesPoint(points[31].night, None, "gap", None, runs=0)
    points[50] = dataclasses.replace(points[50], runs=3, run_ids=(1950, 1951, 1050))
    bf16 = dataclasses.replace(
        step, points=points,
        markers=[Marker("step", night(45), night(45), "step +8.0% (worse, p = 1e-06)"),
                 Marker("drift", night(10), night(20), "drift +2.1% over 11 nights"),
                 Marker("transient", night(36), night(37), "transient +5.0%, back the next night")],
    )  # fmt: skip
    assert step.baseline is not None
    fp8 = dataclasses.replace(
        step, key="llama2-7b.step.h100.fp8", settings={**step.settings, "precision": "fp8"},
        variant="precision=fp8", change_points=[], segments=[], markers=[],
        baseline=Baseline(0.8 * step.baseline.median, 0.8 * step.baseline.low, 0.8 * step.baseline.high),
        points=[dataclasses.replace(p, value=p.value * 0.8 if p.value is not None else None,
                                    run_id=p.run_id + 1000 if p.run_id is not None else None,
                                    run_ids=tuple(r + 1000 for r in p.run_ids)) for p in points],
    )  # fmt: skip
    series = [bf16, fp8, *(_on_own_runs(s) for s in base.series[1:])]
    members: dict[int, list[tuple[SeriesView, SeriesPoint]]] = {}
    for s in series:
        for p in s.points:
            for run_id in {p.run_id, *p.run_ids} - {None, HIDDEN_RUN}:
                assert run_id is not None
                members.setdefault(run_id, []).append((s, p))
    runs = {run_id: _run(run_id, m) for run_id, m in sorted(members.items())}
    return dataclasses.replace(base, series=series, runs=runs)


def _on_own_runs(series: SeriesView) -> SeriesView:
    """The sample numbers runs by night alone; a run is on one hardware class, so the A100's get their own."""
    if "A100" not in series.hardware:
        return series
    points = [
        dataclasses.replace(p, run_id=p.run_id + 3000) if p.run_id is not None else p for p in series.points
    ]
    return dataclasses.replace(series, points=points)
