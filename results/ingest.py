"""Result files -> plain records for the store: harness results and pytest-benchmark JSON.

Parsing is pure and complete before anything is written: a malformed file is rejected whole, with a message
naming the file, the field and what was expected, and the store sees nothing of it.

    jaxbench ingest runs/*.json .benchmarks/*.json
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from harness.config import InvalidInput
from harness.metrics import METRICS, throughput_metric
from harness.result import RunResult, Status
from results.identity import (
    HardwareClass,
    SeriesIdentity,
    flavor_of,
    image_date,
    recipe_settings,
    settings_tuple,
)


class IngestError(InvalidInput):
    """A file cannot be ingested; nothing of it was written."""


@dataclasses.dataclass(frozen=True)
class ParsedComponent:
    name: str
    repository: str | None = None
    commit: str | None = None
    version: str | None = None


@dataclasses.dataclass(frozen=True)
class ParsedResult:
    series: SeriesIdentity
    value: float | None
    samples: list[float] | None
    spread: float | None
    status: str
    reason: str | None = None


@dataclasses.dataclass(frozen=True)
class ParsedRun:
    source_hash: str
    source_kind: str
    run_uid: str | None
    night: dt.date
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    image_ref: str | None
    image_digest: str | None
    ci_job_url: str | None
    hostname: str | None
    hosts: int
    status: str
    reason: str | None
    config_hash: str | None
    config: dict[str, Any]
    environment: dict[str, Any]
    loss_curve: list[float | None] | None
    loss_optimum: float | None
    components: list[ParsedComponent]
    results: list[ParsedResult]


# Extra metrics a pytest-benchmark entry may report in extra_info, with their unit and direction. Only these
# are ingested: a key whose direction is unknown could be judged backwards.
MICROBENCH_EXTRA_METRICS: dict[str, tuple[str, str, bool]] = {
    "tflops": ("perf/tflops", "TFLOP/s", True),
    "gb_per_s": ("perf/gb_per_s", "GB/s", True),
    "bus_bandwidth_gb_per_s": ("perf/bus_bandwidth_gb_per_s", "GB/s", True),
    "fraction_of_peak": ("perf/fraction_of_peak", "fraction", True),
}


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
    raise IngestError(
        f"{path}: not a jaxbench result (schema_version, provenance) nor a pytest-benchmark file "
        "(benchmarks, machine_info)"
    )


def _relative_iqr(samples: list[float]) -> float | None:
    if len(samples) < 2:
        return None
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    return float((q3 - q1) / median) if median else None


def _harness_components(run: RunResult) -> list[ParsedComponent]:
    origin = run.provenance
    components = [
        ParsedComponent(name.replace("_", "-"), version=version)
        for name, version in origin.versions.model_dump().items()
        if version is not None
    ]
    components += [
        ParsedComponent("nvidia-driver", version=origin.driver.driver_version),
        ParsedComponent("cuda", version=origin.driver.cuda_version),
    ]
    components.append(ParsedComponent("jaxbench", commit=origin.git.commit))
    manifest_components = _manifest_components(origin.image.manifest or {})
    names = {c.name for c in manifest_components}
    # The image's manifest knows repositories and commits; it wins over a bare version of the same name.
    return manifest_components + [c for c in components if c.name not in names and (c.version or c.commit)]


def _manifest_components(manifest: Mapping[str, Any]) -> list[ParsedComponent]:
    """Components from an image manifest: `components: {name: {repository|url, commit, version}}`."""
    entries = manifest.get("components", {})
    if not isinstance(entries, Mapping):
        return []
    parsed = []
    for name, entry in entries.items():
        if isinstance(entry, Mapping):
            parsed.append(
                ParsedComponent(
                    str(name),
                    repository=entry.get("repository") or entry.get("url"),
                    commit=entry.get("commit"),
                    version=None if entry.get("version") is None else str(entry.get("version")),
                )
            )
    return parsed


def _night(started_at: dt.datetime | None, image_ref: str | None, override: dt.date | None) -> dt.date:
    if override is not None:
        return override
    built = image_date(image_ref)
    if built:
        return dt.date.fromisoformat(built)
    if started_at is None:
        raise ValueError("no date")
    return started_at.astimezone(dt.UTC).date()


def _expected_metrics(run: RunResult) -> list[str]:
    """The metrics a successful run of this recipe reports, so that a failed run leaves a mark on each."""
    unit = run.throughput.unit if run.throughput else ("image" if run.recipe.family == "vit" else "token")
    names = [
        "perf/step_time_s",
        throughput_metric(unit),
        throughput_metric(unit, per_device=True),
        "perf/model_tflops_per_device",
        "perf/compile_time_s",
        "loss/final_window",
    ]
    return names


def parse_harness_result(
    document: dict[str, Any], source_hash: str, path: Path, *, ci_job_url: str | None, night: dt.date | None
) -> ParsedRun:
    try:
        run = RunResult.model_validate(document)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "<top level>"
        more = f" (and {error.error_count() - 1} more problems)" if error.error_count() > 1 else ""
        raise IngestError(f"{path}: {where}: {first['msg']}{more}") from error
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
            run.recipe.name, "recipe", settings, hardware, flavor, name, unit, higher_is_better
        )

    results = []
    reported = {m.name: m for m in run.metrics}
    for metric in run.metrics:
        samples = timed if metric.name == "perf/step_time_s" else None
        spread = (stats.iqr / stats.median) if metric.name == "perf/step_time_s" and stats else None
        results.append(
            ParsedResult(
                identity(metric.name, metric.unit, metric.direction.value == "higher_is_better"),
                metric.value,
                samples,
                spread if spread is not None else (_relative_iqr(samples) if samples else None),
                Status.OK.value,
            )
        )
    if run.status is not Status.OK:
        for name in _expected_metrics(run):
            if name not in reported:
                declared = METRICS[name]
                higher = declared.direction.value == "higher_is_better"
                results.append(
                    ParsedResult(
                        identity(name, declared.unit, higher), None, None, None, run.status.value, run.reason
                    )
                )
    started = dt.datetime.fromisoformat(run.started_at)
    try:
        run_night = _night(started, origin.image.reference, night)
    except ValueError as error:
        raise IngestError(f"{path}: started_at: cannot tell the night of this run") from error
    loss = run.loss
    return ParsedRun(
        source_hash=source_hash,
        source_kind="harness",
        run_uid=run.run_id,
        night=run_night,
        started_at=started,
        finished_at=dt.datetime.fromisoformat(run.finished_at),
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
        components=_harness_components(run),
        results=results,
    )


def _require(mapping: Any, key: str, kind: type | tuple[type, ...], where: str, path: Path) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise IngestError(f"{path}: {where}{key}: missing")
    value = mapping[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise IngestError(f"{path}: {where}{key}: expected {names}, got {type(value).__name__}")
    return value


def _benchmark_results(
    entry: dict[str, Any], where: str, path: Path, hardware: HardwareClass
) -> list[ParsedResult]:
    name = _require(entry, "fullname", str, where, path)
    stats = _require(entry, "stats", dict, where, path)
    median = _require(stats, "median", (int, float), f"{where}stats.", path)
    if not math.isfinite(median) or median <= 0:
        raise IngestError(f"{path}: {where}stats.median: expected a positive time in seconds, got {median}")
    params = entry.get("params") or {}
    if not isinstance(params, dict):
        raise IngestError(f"{path}: {where}params: expected an object, got {type(params).__name__}")
    extra = entry.get("extra_info") or {}
    settings = settings_tuple(
        {str(k): (v if isinstance(v, (str, int, float, bool)) else str(v)) for k, v in params.items()}
    )
    flavor = str(extra.get("flavor", "native"))
    samples = stats.get("data") if isinstance(stats.get("data"), list) else None
    iqr = stats.get("iqr")
    spread = float(iqr) / median if isinstance(iqr, (int, float)) else None

    def identity(metric: str, unit: str, higher: bool) -> SeriesIdentity:
        return SeriesIdentity(name, "microbenchmark", settings, hardware, flavor, metric, unit, higher)

    results = [
        ParsedResult(identity("perf/time_s", "s", False), float(median), samples, spread, Status.OK.value)
    ]
    for key, (metric, unit, higher) in MICROBENCH_EXTRA_METRICS.items():
        value = extra.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            results.append(
                ParsedResult(identity(metric, unit, higher), float(value), None, None, Status.OK.value)
            )
    return results


def parse_pytest_benchmark(
    document: dict[str, Any], source_hash: str, path: Path, *, ci_job_url: str | None, night: dt.date | None
) -> ParsedRun:
    machine = _require(document, "machine_info", dict, "", path)
    benchmarks = _require(document, "benchmarks", list, "", path)
    when = _require(document, "datetime", str, "", path)
    try:
        started = dt.datetime.fromisoformat(when)
    except ValueError as error:
        raise IngestError(f"{path}: datetime: expected an ISO 8601 time, got {when!r}") from error
    if started.tzinfo is None:
        started = started.replace(tzinfo=dt.UTC)  # pytest-benchmark writes UTC without an offset
    results: list[ParsedResult] = []
    for index, entry in enumerate(benchmarks):
        where = f"benchmarks[{index}]."
        extra = entry.get("extra_info") or {} if isinstance(entry, dict) else {}
        device = extra.get("device_kind") or f"cpu: {machine.get('cpu', {}).get('brand_raw', 'unknown')}"
        count = extra.get("device_count", 1)
        hardware = HardwareClass(str(device), int(count) if isinstance(count, int) else 1, 1)
        results += _benchmark_results(entry, where, path, hardware)
    commit = (
        document.get("commit_info", {}).get("id") if isinstance(document.get("commit_info"), dict) else None
    )
    components = [ParsedComponent("python", version=str(machine.get("python_version")))]
    if commit:
        components.append(ParsedComponent("jaxbench", commit=str(commit)))
    return ParsedRun(
        source_hash=source_hash,
        source_kind="pytest-benchmark",
        run_uid=None,
        night=night or started.astimezone(dt.UTC).date(),
        started_at=started,
        finished_at=None,
        image_ref=None,
        image_digest=None,
        ci_job_url=ci_job_url,
        hostname=str(machine.get("node")) if machine.get("node") else None,
        hosts=1,
        status=Status.OK.value,
        reason=None,
        config_hash=None,
        config={"machine_info": machine},
        environment={},
        loss_curve=None,
        loss_optimum=None,
        components=components,
        results=results,
    )
