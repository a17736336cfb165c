"""Result files -> plain records for the store: harness results and pytest-benchmark JSON.

Parsing is pure and complete before anything is written: a malformed file is rejected whole, with a message
naming the file, the field and what was expected, and the store sees nothing of it. Only a regular file of at
most MAX_RESULT_BYTES is read, and none of its strings may be longer than MAX_TEXT_CHARS. A run is
identified by its content (the sha256 of its canonical JSON) and, for harness results, its run id in its
canonical form (results/run_identity.py): the same run written again with other indentation or key order,
or its run id in upper case, is the same run.

    jaxbench ingest runs/*.json .benchmarks/*.json
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from jaxbench.core.documents import parse_json
from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import read_bounded
from jaxbench.core.schema import first_problem
from jaxbench.harness.families import FAMILIES
from jaxbench.harness.measure.metrics import METRICS, Direction, throughput_metric
from jaxbench.harness.measure.peaks import PRECISIONS, peak_flops_per_device
from jaxbench.harness.runtime.options import LEGACY_SCHEDULE
from jaxbench.harness.runtime.result import RunResult, Status, Timing
from jaxbench.results import physical
from jaxbench.results.build_record import RECORD_KIND, is_build_record, parse_build_run
from jaxbench.results.identity import (
    HardwareClass,
    SeriesIdentity,
    flavor_of,
    recipe_settings,
    settings_tuple,
)
from jaxbench.results.pytest_benchmark import PYTEST_BENCHMARK_FIELDS, parse_pytest_benchmark
from jaxbench.results.records import (
    FieldNames,
    IngestError,
    ParsedResult,
    ParsedRun,
    ResultFile,
    as_json,
    night_of,
    non_finite,
    provenance_components,
)
from jaxbench.results.run_identity import canonical_run_id

__all__ = ["IngestError", "ParsedResult", "ParsedRun", "ResultFile", "parse_file", "read_result_file"]

MAX_RESULT_BYTES = 16 * 2**20
"""The largest file ingest reads. A nightly result is about 5 KB (60 steps), a 10,000-step run's 170 KB; a
pytest-benchmark file keeps every round's time, 16 MiB is some 700,000 of them. Parsing takes about ten
times a file's size in memory, so the bound keeps ingest's memory near 200 MB."""
MAX_TEXT_CHARS = 2**16
"""The longest string a result may hold: the longest a result writes is a failed run's reason (at most
2,000 characters, harness/runtime/outcome.py) or XLA_FLAGS (a few KB)."""

HARNESS_FIELDS: FieldNames = {
    "runs.run_uid": "run_id",
    "runs.started_at": "started_at",
    "runs.finished_at": "finished_at",
    "runs.hostname": "provenance.devices.hostname",
    "runs.hosts": "provenance.devices.process_count",
    "runs.image_ref": "provenance.image.reference",
    "runs.image_digest": "provenance.image.manifest.digest",
    "runs.config_hash": "recipe.hash",
    "series.benchmark": "recipe.name",
    "series.backend": "backend",
    "series.device_kind": "provenance.devices.kind",
    "series.devices_per_host": "provenance.devices.local_count",
    "series.hosts": "provenance.devices.process_count",
    "series.flavor": "provenance.image.manifest.flavor",
    "series.metric": "{entry}.name",
    "series.unit": "{entry}.unit",
    "results.value": "{entry}.value",
}
"""Where a harness result's stored values come from, for messages (results/records.py: FieldNames)."""

BUILD_FIELDS: FieldNames = {
    "runs.image_ref": "image",
    "runs.hostname": "builder",
    "series.benchmark": "flavor",
    "series.flavor": "flavor",
    "series.device_kind": "architecture",
}


def content_hash(document: Any) -> str:
    """sha256 of the document's canonical JSON: the same run written with other indentation, spacing or key
    order hashes the same."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _long_text(document: Any) -> tuple[str, str] | None:
    """The first (field, string) of `document` longer than MAX_TEXT_CHARS, a key or a value, or None. A loop:
    the document is as deep as core.documents allowed."""
    pending: list[tuple[str, Any]] = [("", document)]
    while pending:
        where, value = pending.pop()
        if isinstance(value, str):
            if len(value) > MAX_TEXT_CHARS:
                return where or "the document", value
        elif isinstance(value, dict):
            for key, item in value.items():
                child = f"{where}.{key}" if where else str(key)
                pending += [(child, key), (child, item)]
        elif isinstance(value, list):
            pending += [(f"{where}[{index}]", item) for index, item in enumerate(value)]
    return None


def _read_document(path: Path) -> tuple[Any, bytes]:
    """The parsed document and the bytes it was read from, once `path` is a regular file of at most
    MAX_RESULT_BYTES whose strings are at most MAX_TEXT_CHARS long."""
    try:
        data = read_bounded(path, MAX_RESULT_BYTES)
        document = parse_json(data, str(path))
    except InvalidInput as error:
        raise IngestError(str(error)) from error
    # No string can be longer than the file: most results are shorter than the bound, and are not walked.
    found = _long_text(document) if len(data) > MAX_TEXT_CHARS else None
    if found is not None:
        field, text = found
        raise IngestError(
            f"{path}: {field}: expected text of at most {MAX_TEXT_CHARS:,} characters, got {len(text):,}"
        )
    return document, data


def read_result_file(
    path: Path, *, ci_job_url: str | None = None, night: dt.date | None = None
) -> ResultFile:
    document, data = _read_document(path)
    found = non_finite(document)
    if found is not None:
        field, number = found
        raise IngestError(
            f"{path}: {field or 'the document'}: expected a finite number, got {as_json(number)}"
        )
    source_hash = content_hash(document)
    options: dict[str, Any] = {"ci_job_url": ci_job_url, "night": night}
    if isinstance(document, dict) and "provenance" in document and "schema_version" in document:
        run, names = parse_harness_result(document, source_hash, path, **options), HARNESS_FIELDS
    elif isinstance(document, dict) and "benchmarks" in document and "machine_info" in document:
        run, names = parse_pytest_benchmark(document, source_hash, path, **options), PYTEST_BENCHMARK_FIELDS
    elif is_build_record(document):
        run, names = parse_build_run(document, source_hash, path, **options), BUILD_FIELDS
    else:
        raise IngestError(
            f"{path}: not a jaxbench result (schema_version, provenance), a pytest-benchmark file "
            f"(benchmarks, machine_info) nor a build record (kind: {RECORD_KIND})"
        )
    return ResultFile(path, run, names, hashlib.sha256(data).hexdigest())


def parse_file(path: Path, *, ci_job_url: str | None = None, night: dt.date | None = None) -> ParsedRun:
    return read_result_file(path, ci_job_url=ci_job_url, night=night).run


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


KEPT_WHEN_STOPPED_EARLY = frozenset({"perf/compile_time_s", "memory/peak_bytes_per_device"})
"""What a run that did not end ok still measured whole: compilation ends before the first step, and a step's
peak memory is reached within it. Every other metric describes the whole run (the loss of its last steps,
statistics of its timed steps): such a run marks those with its status rather than storing a partial value,
such as the loss after the few steps an interrupted run took, as a measurement of the recipe."""


def _check_timing(timing: Timing, path: Path) -> None:
    """IngestError at the first step time that no step can take (results/physical.py: STEP_TIME): the
    statistics divide by the median, and the timed steps are stored as the step time's samples."""
    step = physical.STEP_TIME
    problems = []
    if (found := physical.first_outside(timing.raw_step_times_s, step)) is not None:
        problems.append((f"timing.raw_step_times_s[{found[0]}]", found[1], step))
    if (stats := timing.step_time_s) is not None:
        named = [
            ("median", stats.median, step),
            ("min", stats.min, step),
            ("iqr", stats.iqr, physical.SECONDS),
        ]
        problems += [
            (f"timing.step_time_s.{n}", v, bounds) for n, v, bounds in named if not bounds.contains(v)
        ]
    if problems:
        field, value, bounds = problems[0]
        raise IngestError(f"{path}: {field}: expected a time in s {bounds.describe()}, got {value:g}")


def _harness_results(run: RunResult, path: Path) -> list[ParsedResult]:
    """One result per reported metric (a run that stopped early: a mark for those it could not measure
    whole), and a mark on each metric a failed run could not report."""
    if run.status is Status.OK and not run.metrics:
        raise IngestError(f"{path}: metrics: expected the metrics of a run with status ok, got none")
    _check_timing(run.timing, path)
    origin = run.provenance
    hardware = HardwareClass(origin.devices.kind, origin.devices.local_count, origin.devices.process_count)
    flavor = flavor_of(origin.image.reference, origin.image.manifest)
    mesh = run.parallelism.mesh if run.parallelism else None
    settings = settings_tuple(
        recipe_settings(run.recipe.resolved, mesh, run.flags.identity if run.flags else None)
    )
    stats = run.timing.step_time_s
    timed = run.timing.raw_step_times_s[run.timing.warmup_steps :]

    def identity(name: str, unit: str, direction: Direction) -> SeriesIdentity:
        higher_is_better = direction is Direction.HIGHER
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

    def mark(series: SeriesIdentity, entry: str = "") -> ParsedResult:
        return ParsedResult(series, None, None, None, run.status.value, run.reason, entry)

    stopped_early = run.status is not Status.OK
    results = []
    for index, metric in enumerate(run.metrics):
        series, entry = identity(metric.name, metric.unit, metric.direction), f"metrics[{index}]"
        if stopped_early and metric.name not in KEPT_WHEN_STOPPED_EARLY:
            results.append(mark(series, entry))
            continue
        step_time = metric.name == "perf/step_time_s"
        samples = timed if step_time else None
        spread = (stats.iqr / stats.median) if step_time and stats else None
        results.append(ParsedResult(series, metric.value, samples, spread, Status.OK.value, entry=entry))
    if stopped_early:
        reported = {m.name for m in run.metrics}
        for name in _expected_metrics(run, path):
            if name not in reported:
                results.append(mark(identity(name, METRICS[name].unit, METRICS[name].direction)))
    return results


def parse_harness_result(
    document: dict[str, Any], source_hash: str, path: Path, *, ci_job_url: str | None, night: dt.date | None
) -> ParsedRun:
    try:
        run = RunResult.model_validate(document)
    except ValidationError as error:
        raise IngestError(f"{path}: {first_problem(error)}") from error
    origin = run.provenance
    results = _harness_results(run, path)
    try:
        run_uid = canonical_run_id(run.run_id)
    except ValueError as error:
        raise IngestError(f"{path}: run_id: {error}") from error
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
        run_uid=run_uid,
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
        program=None if run.program is None else run.program.model_dump(mode="json", exclude={"hlo_file"}),
        profile=None if run.profile is None else _stored_profile(run.profile.model_dump(mode="json"), path),
    )


def _stored_profile(profile: dict[str, Any], path: Path) -> dict[str, Any]:
    """The profile as the store keeps it, its trace located for the dashboard's run page: the result names
    the trace's folder relative to the result file's own, which means nothing once read elsewhere; a URL (an
    uploaded trace) is kept as it is."""
    trace = profile.get("trace")
    if trace and "://" not in trace:
        profile["trace"] = str((path.parent / trace).resolve())
    return profile
