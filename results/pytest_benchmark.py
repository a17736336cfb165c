"""pytest-benchmark JSON -> records for the store: our microbenchmarks (harness/microbench/suite/) and
anyone's.

Each benchmark is a series named by its test id, with its parameters (and, for our suites, the XLA flag
identity) as settings; the median time is always kept, and the rates and counts our suites put into
extra_info (EXTRA_INFO_METRICS: the microbenchmarks', the self-bench's) are metrics of their own. The
microbenchmarks also record their provenance and their failed benchmarks in machine_info.jaxbench, so a
microbenchmark run names its components like a recipe run and a wrong or crashed kernel is a failed result
rather than a gap.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from jaxbench.core.schema import first_problem
from jaxbench.harness.provenance.record import Provenance
from jaxbench.harness.runtime.options import LEGACY_SCHEDULE, NATIVE_BACKEND, Schedule
from jaxbench.harness.runtime.result import Status
from jaxbench.results.identity import HardwareClass, SeriesIdentity, flavor_of, settings_tuple
from jaxbench.results.records import (
    FieldNames,
    IngestError,
    ParsedComponent,
    ParsedResult,
    ParsedRun,
    night_of,
    provenance_components,
    require,
)

# Extra metrics a pytest-benchmark entry may report in extra_info, with their unit and direction (higher is
# better): the microbenchmarks' rates, then the self-bench's (benchmarks/self/) rate, its time against
# Otava's and its deterministic counts. Only these are ingested: a key whose direction is unknown could be
# judged backwards.
TIME_METRIC = ("perf/time_s", "s", False)
EXTRA_INFO_METRICS: dict[str, tuple[str, str, bool]] = {
    "tflops": ("perf/tflops", "TFLOP/s", True),
    "gb_per_s": ("perf/gb_per_s", "GB/s", True),
    "bus_bandwidth_gb_per_s": ("perf/bus_bandwidth_gb_per_s", "GB/s", True),
    "fraction_of_peak": ("perf/fraction_of_peak", "fraction", True),
    "results_per_s": ("perf/results_per_s", "results/s", True),
    "time_vs_otava": ("perf/time_vs_otava", "fraction", False),
    "modules_imported": ("startup/modules_imported", "modules", False),
    "statements_per_result": ("store/statements_per_result", "statements/result", False),
    "rows_per_series": ("store/rows_per_series", "rows/series", False),
}


IdentityOf = Callable[[str, str, bool], SeriesIdentity]

PYTEST_BENCHMARK_FIELDS: FieldNames = {
    "runs.hostname": "machine_info.node",
    "runs.hosts": "machine_info.jaxbench.provenance.devices.process_count",
    "runs.image_ref": "machine_info.jaxbench.provenance.image.reference",
    "runs.image_digest": "machine_info.jaxbench.provenance.image.manifest.digest",
    "series.benchmark": "{entry}.fullname",
    "series.settings": "{entry}.params",
    "series.device_kind": "{entry}.extra_info.device_kind",
    "series.devices_per_host": "{entry}.extra_info.device_count",
    "series.flavor": "{entry}.extra_info.flavor",
    "results.samples": "{entry}.stats.data",
    "results.status": "{entry}.status",
}
"""Where a pytest-benchmark file's stored values come from, for messages (results/records.py: FieldNames)."""


def _identity_of(
    entry: dict[str, Any], where: str, path: Path, machine: dict[str, Any], hosts: int, image_flavor: str
) -> IdentityOf:
    """The series of each metric of one benchmark: test id, parameters, flags, device and flavor."""
    name = require(entry, "fullname", str, where, path)
    if "jaxbench" in machine:  # our suites: "micro/matmul[bfloat16-256-256-256]", not the test file's path
        name = "micro/" + require(entry, "name", str, where, path).removeprefix("test_")
    params = entry.get("params") or {}
    if not isinstance(params, dict):
        raise IngestError(f"{path}: {where}params: expected an object, got {type(params).__name__}")
    extra = entry.get("extra_info") or {}
    if not isinstance(extra, dict):
        raise IngestError(f"{path}: {where}extra_info: expected an object, got {type(extra).__name__}")
    named: dict[str, str | int | float | bool | None] = {
        str(k): (v if isinstance(v, (str, int, float, bool)) else str(v)) for k, v in params.items()
    }
    if isinstance(extra.get("flags"), str):  # our suites' XLA flag identity, as for the recipes
        named["flags"] = extra["flags"]
    settings = settings_tuple(named)
    device = extra.get("device_kind") or f"cpu: {machine.get('cpu', {}).get('brand_raw', 'unknown')}"
    count = extra.get("device_count", 1)
    hardware = HardwareClass(str(device), count if isinstance(count, int) else 1, hosts)
    flavor = str(extra.get("flavor", image_flavor))

    def identity(metric: str, unit: str, higher: bool) -> SeriesIdentity:
        # Microbenchmarks time jaxbench's own code paths: no other backend trains anything here.
        return SeriesIdentity(
            name, "microbenchmark", settings, hardware, flavor, metric, unit, higher, backend=NATIVE_BACKEND
        )

    return identity


def _benchmark_results(
    entry: dict[str, Any], where: str, path: Path, identity: IdentityOf
) -> list[ParsedResult]:
    stats = require(entry, "stats", dict, where, path)
    median = require(stats, "median", (int, float), f"{where}stats.", path)
    if median <= 0:  # NaN and infinities were refused with the whole file (results/ingest.py)
        raise IngestError(f"{path}: {where}stats.median: expected a positive time in seconds, got {median}")
    extra = entry.get("extra_info") or {}
    samples = stats.get("data") if isinstance(stats.get("data"), list) else None
    iqr = stats.get("iqr")
    spread = float(iqr) / median if isinstance(iqr, (int, float)) else None
    source = where.removesuffix(".")
    results = [
        ParsedResult(identity(*TIME_METRIC), float(median), samples, spread, Status.OK.value, None, source)
    ]
    for key, (metric, unit, higher) in EXTRA_INFO_METRICS.items():
        value = extra.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            results.append(
                ParsedResult(
                    identity(metric, unit, higher), float(value), None, None, Status.OK.value, None, source
                )
            )
    return results


def _failed_result(entry: dict[str, Any], where: str, path: Path, identity: IdentityOf) -> ParsedResult:
    status = require(entry, "status", str, where, path)
    if status not in {s.value for s in Status} or status == Status.OK.value:
        raise IngestError(
            f"{path}: {where}status: expected a failure status such as 'failed', got {status!r}"
        )
    reason = require(entry, "reason", str, where, path)
    return ParsedResult(identity(*TIME_METRIC), None, None, None, status, reason, where.removesuffix("."))


def _jaxbench_provenance(machine: dict[str, Any], path: Path) -> Provenance | None:
    """What our own suites (harness/microbench/suite/) record in machine_info.jaxbench; absent in others'."""
    info = machine.get("jaxbench")
    if info is None:
        return None
    if not isinstance(info, dict) or "provenance" not in info:
        raise IngestError(f"{path}: machine_info.jaxbench.provenance: missing")
    try:
        return Provenance.model_validate(info["provenance"])
    except ValidationError as error:
        raise IngestError(f"{path}: {first_problem(error, 'machine_info.jaxbench.provenance.')}") from error


def _schedule(machine: dict[str, Any], path: Path) -> str:
    """machine_info.jaxbench.schedule of our own suites; files without one (older ones, others' suites)
    count as nightly (LEGACY_SCHEDULE)."""
    info = machine.get("jaxbench")
    value = info.get("schedule", LEGACY_SCHEDULE.value) if isinstance(info, dict) else LEGACY_SCHEDULE.value
    try:
        return Schedule(value).value
    except ValueError:
        choices = ", ".join(s.value for s in Schedule)
        raise IngestError(f"{path}: machine_info.jaxbench.schedule: {value!r}; expected {choices}") from None


def parse_pytest_benchmark(
    document: dict[str, Any], source_hash: str, path: Path, *, ci_job_url: str | None, night: dt.date | None
) -> ParsedRun:
    machine = require(document, "machine_info", dict, "", path)
    benchmarks = require(document, "benchmarks", list, "", path)
    when = require(document, "datetime", str, "", path)
    try:
        started = dt.datetime.fromisoformat(when)
    except ValueError as error:
        raise IngestError(f"{path}: datetime: expected an ISO 8601 time, got {when!r}") from error
    if started.tzinfo is None:
        started = started.replace(tzinfo=dt.UTC)  # pytest-benchmark writes UTC without an offset
    origin = _jaxbench_provenance(machine, path)
    flavor = flavor_of(origin.image.reference, origin.image.manifest) if origin else "native"
    hosts = origin.devices.process_count if origin else 1
    results: list[ParsedResult] = []
    for index, entry in enumerate(benchmarks):
        where = f"benchmarks[{index}]."
        if not isinstance(entry, dict):
            raise IngestError(f"{path}: {where[:-1]}: expected an object, got {type(entry).__name__}")
        identity = _identity_of(entry, where, path, machine, hosts, flavor)
        results += _benchmark_results(entry, where, path, identity)
    failed = machine["jaxbench"].get("failed", []) if origin else []
    if not isinstance(failed, list):
        raise IngestError(
            f"{path}: machine_info.jaxbench.failed: expected a list, got {type(failed).__name__}"
        )
    for index, entry in enumerate(failed):
        where = f"machine_info.jaxbench.failed[{index}]."
        if not isinstance(entry, dict):
            raise IngestError(f"{path}: {where[:-1]}: expected an object, got {type(entry).__name__}")
        results.append(
            _failed_result(entry, where, path, _identity_of(entry, where, path, machine, hosts, flavor))
        )
    if not results:  # the store would hold a run without a single result
        raise IngestError(f"{path}: benchmarks: expected at least one benchmark (passed or failed), got none")
    commit = (
        document.get("commit_info", {}).get("id") if isinstance(document.get("commit_info"), dict) else None
    )
    if origin:
        components = provenance_components(origin)
    else:
        components = [ParsedComponent("python", version=str(machine.get("python_version")))]
        if commit:
            components.append(ParsedComponent("jaxbench", commit=str(commit)))
    image_ref = origin.image.reference if origin else None
    try:
        run_night = night_of(started, image_ref, night)
    except ValueError as error:
        raise IngestError(f"{path}: datetime: cannot tell the night of this run") from error
    return ParsedRun(
        source_hash=source_hash,
        source_kind="pytest-benchmark",
        run_uid=None,
        schedule=_schedule(machine, path),
        night=run_night,
        started_at=started,
        finished_at=None,
        image_ref=image_ref,
        image_digest=(origin.image.manifest or {}).get("digest") if origin else None,
        ci_job_url=ci_job_url,
        hostname=str(machine.get("node")) if machine.get("node") else None,
        hosts=hosts,
        status=Status.OK.value,
        reason=None,
        config_hash=None,
        config={"machine_info": machine},
        environment=dict(origin.env) if origin else {},
        loss_curve=None,
        loss_optimum=None,
        components=components,
        results=results,
    )
