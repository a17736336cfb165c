"""Result files -> plain records for the store: harness results and pytest-benchmark JSON.

Parsing is pure and complete before anything is written: a malformed file is rejected whole, with a message
naming the file, the field and what was expected, and the store sees nothing of it.

    jaxbench ingest runs/*.json .benchmarks/*.json
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.schema import first_problem
from harness.families import FAMILIES
from harness.measure.metrics import METRICS, throughput_metric
from harness.measure.peaks import PRECISIONS, peak_flops_per_device
from harness.run.options import LEGACY_SCHEDULE
from harness.run.result import RunResult, Status
from results.build_record import RECORD_KIND, is_build_record, parse_build_run
from results.identity import HardwareClass, SeriesIdentity, flavor_of, recipe_settings, settings_tuple
from results.pytest_benchmark import parse_pytest_benchmark
from results.records import (
    IngestError,
    ParsedResult,
    ParsedRun,
    night_of,
    provenance_components,
)

__all__ = ["IngestError", "ParsedResult", "ParsedRun", "parse_file"]


def parse_file(path: Path, *, ci_job_url: str | None = None, night: dt.date | None = None) -> ParsedRun:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise IngestError(f"{path}: cannot read: {error}") from error
    try:
        document = json.loads(data)
    except json.JSONDecodeError as error:
        raise IngestError(f"{path}: not valid JSON: {error}") from error
    source_hash = hashlib.sha256(data).hexdigest()
    if isinstance(document, dict) and "provenance" in document and "schema_version" in document:
        return parse_harness_result(document, source_hash, path, ci_job_url=ci_job_url, night=night)
    if isinstance(document, dict) and "benchmarks" in document and "machine_info" in document:
        return parse_pytest_benchmark(document, source_hash, path, ci_job_url=ci_job_url, night=night)
    if is_build_record(document):
        return parse_build_run(document, source_hash, path, ci_job_url=ci_job_url, night=night)
    raise IngestError(
        f"{path}: not a jaxbench result (schema_version, provenance), a pytest-benchmark file "
        f"(benchmarks, machine_info) nor a build record (kind: {RECORD_KIND})"
    )


def _throughput_unit(run: RunResult, path: Path) -> str:
    """What one throughput unit is for this run: as it reported, else its family's (a failed run reports
    none)."""
    if run.throughput:
        return run.throughput.unit
    family = FAMILIES.get(run.recipe.family)
    if family is None:
        raise IngestError(
            f"{path}: recipe.family: {run.recipe.family!r} is not a known family; "
            f"expected one of {sorted(FAMILIES)}"
        )
    return family.unit


def _expected_metrics(run: RunResult, path: Path) -> list[str]:
    """The metrics a successful run of this recipe reports, so that a failed run leaves a mark on each."""
    unit = _throughput_unit(run, path)
    names = [
        "perf/step_time_s",
        throughput_metric(unit),
        throughput_metric(unit, per_device=True),
        "perf/model_tflops_per_device",
        "perf/compile_time_s",
        "loss/final_window",
    ]
    # MFU exists where the device's peak is known (never on a CPU): a failed run marks it there only, or
    # every CPU failure would start an MFU series of failures alone.
    precision = run.recipe.resolved.get("train", {}).get("precision")
    if precision in PRECISIONS and peak_flops_per_device(run.provenance.devices.kind, precision) is not None:
        names.append("perf/mfu")
    return names


def parse_harness_result(
    document: dict[str, Any], source_hash: str, path: Path, *, ci_job_url: str | None, night: dt.date | None
) -> ParsedRun:
    try:
        run = RunResult.model_validate(document)
    except ValidationError as error:
        raise IngestError(f"{path}: {first_problem(error)}") from error
    origin = run.provenance
    hardware = HardwareClass(origin.devices.kind, origin.devices.local_count, origin.devices.process_count)
    flavor = flavor_of(origin.image.reference, origin.image.manifest)
    mesh = run.parallelism.mesh if run.parallelism else None
    settings = settings_tuple(
        recipe_settings(run.recipe.resolved, mesh, run.flags.identity if run.flags else None)
    )
    stats = run.timing.step_time_s
    timed = run.timing.raw_step_times_s[run.timing.warmup_steps :]

    def identity(name: str, unit: str, higher_is_better: bool) -> SeriesIdentity:
        return SeriesIdentity(
            run.recipe.name,
            "recipe",
            settings,
            hardware,
            flavor,
            name,
            unit,
            higher_is_better,
            backend=run.backend,
        )

    results = []
    reported = {m.name: m for m in run.metrics}
    for metric in run.metrics:
        samples = timed if metric.name == "perf/step_time_s" else None
        spread = (stats.iqr / stats.median) if metric.name == "perf/step_time_s" and stats else None
        higher = metric.direction.value == "higher_is_better"
        results.append(
            ParsedResult(
                identity(metric.name, metric.unit, higher), metric.value, samples, spread, Status.OK.value
            )
        )
    if run.status is not Status.OK:
        for name in _expected_metrics(run, path):
            if name not in reported:
                declared = METRICS[name]
                higher = declared.direction.value == "higher_is_better"
                results.append(
                    ParsedResult(
                        identity(name, declared.unit, higher), None, None, None, run.status.value, run.reason
                    )
                )
    try:
        started = dt.datetime.fromisoformat(run.started_at)
        finished = dt.datetime.fromisoformat(run.finished_at)
    except ValueError as error:
        raise IngestError(f"{path}: started_at, finished_at: expected ISO 8601 times: {error}") from error
    try:
        run_night = night_of(started, origin.image.reference, night)
    except ValueError as error:
        raise IngestError(f"{path}: started_at: cannot tell the night of this run") from error
    loss = run.loss
    return ParsedRun(
        source_hash=source_hash,
        source_kind="harness",
        run_uid=run.run_id,
        schedule=(run.schedule or LEGACY_SCHEDULE).value,
        night=run_night,
        started_at=started,
        finished_at=finished,
        image_ref=origin.image.reference,
        image_digest=(origin.image.manifest or {}).get("digest"),
        ci_job_url=ci_job_url,
        hostname=origin.devices.hostname,
        hosts=origin.devices.process_count,
        status=run.status.value,
        reason=run.reason,
        config_hash=run.recipe.hash,
        config=run.recipe.resolved,
        environment=dict(origin.env),
        loss_curve=list(loss.per_step) if loss else None,
        loss_optimum=loss.optimal if loss else None,
        components=provenance_components(run.provenance),
        results=results,
    )
