"""The plain records a parsed result file becomes, and the checks and provenance reading every parser shares.

Parsers build these (results/ingest.py for harness results, results/pytest_benchmark.py for
pytest-benchmark JSON); the store writes them. Before it does, `check_storable` checks each record against
what the database itself would refuse (results/schema.py: lengths, NOT NULL, integer ranges, uniqueness,
finite numbers), by PostgreSQL's rules on every dialect, and against what no measurement can be
(results/physical.py: bounds per unit, counts, time order) or no series may be named
(results/identity.py: text_problems), so that a batch is refused whole and by name rather than half-written
with an SQL traceback or stored to mislead every later judgement.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_ingest_atomic.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Float, Integer, String, Table

from jaxbench.core.errors import InvalidInput
from jaxbench.core.urls import scrub_url
from jaxbench.harness.provenance.record import Provenance
from jaxbench.results import physical, schema
from jaxbench.results.identity import SeriesIdentity, image_date, text_problems


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
    entry: str = dataclasses.field(default="", compare=False)
    """Where in its file the result comes from ("metrics[2]", "benchmarks[0]"), for messages; "" for a
    result the file implies (a failed run's mark on a metric it could not report)."""


@dataclasses.dataclass(frozen=True)
class ParsedRun:
    source_hash: str
    source_kind: str
    run_uid: str | None
    schedule: str
    """"nightly" (judged) or "ad-hoc" (only reported): jaxbench.harness.runtime.options.Schedule."""
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
    program: dict[str, Any] | None = None
    """The compiled step's summary and XLA cost analysis (a harness result's `program`, without its HLO
    file's name, which means nothing in the store); None where the run recorded none."""
    profile: dict[str, Any] | None = None
    """A profiled run's time by kind of op (a harness result's `profile`, without its trace's folder)."""


def require(mapping: Any, key: str, kind: type | tuple[type, ...], where: str, path: Path) -> Any:
    if not isinstance(mapping, dict) or key not in mapping:
        raise IngestError(f"{path}: {where}{key}: missing")
    value = mapping[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise IngestError(f"{path}: {where}{key}: expected {names}, got {type(value).__name__}")
    return value


def provenance_components(origin: Provenance) -> list[ParsedComponent]:
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
    from_manifest = manifest_components(origin.image.manifest or {})
    names = {c.name for c in from_manifest}
    # The image's manifest knows repositories and commits; it wins over a bare version of the same name.
    return from_manifest + [c for c in components if c.name not in names and (c.version or c.commit)]


def manifest_components(manifest: Mapping[str, Any]) -> list[ParsedComponent]:
    """Components from an image manifest: `components: {name: {repository|url, commit, version}}`, each
    repository without credentials (core/urls.py) whatever the manifest held: the store, diffs and pull
    requests take them from here."""
    entries = manifest.get("components", {})
    if not isinstance(entries, Mapping):
        return []
    parsed = []
    for name, entry in entries.items():
        if isinstance(entry, Mapping):
            repository = entry.get("repository") or entry.get("url")
            parsed.append(
                ParsedComponent(
                    str(name),
                    repository=scrub_url(repository) if isinstance(repository, str) else repository,
                    commit=entry.get("commit"),
                    version=None if entry.get("version") is None else str(entry.get("version")),
                )
            )
    return parsed


def night_of(started_at: dt.datetime | None, image_ref: str | None, override: dt.date | None) -> dt.date:
    if override is not None:
        return override
    built = image_date(image_ref)
    if built:
        return dt.date.fromisoformat(built)
    if started_at is None:
        raise ValueError("no date")
    return started_at.astimezone(dt.UTC).date()


# --- what the database would refuse, found before anything is written -------------------------------------

INTEGER_RANGE = range(-(2**31), 2**31)
"""PostgreSQL's `integer` (4 bytes); SQLite's holds 8, so only PostgreSQL would refuse a larger one."""

FieldNames = Mapping[str, str]
"""Where a stored value comes from in one kind of file: "table.column" -> the file's field, in which
"{entry}" stands for the result's entry (pytest-benchmark: "series.benchmark" -> "{entry}.fullname")."""


@dataclasses.dataclass(frozen=True)
class ResultFile:
    """One file of a batch, parsed."""

    path: Path
    run: ParsedRun
    field_names: FieldNames
    file_hash: str
    """sha256 of the file's bytes: what identified a file in stores ingested before a run was identified by
    its content (ParsedRun.source_hash, the hash of its canonical JSON)."""


@dataclasses.dataclass(frozen=True)
class Refusal:
    expected: str
    got: str


def _child(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _first_non_finite(value: Any, where: str) -> tuple[str, float] | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else (where, value)
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _first_non_finite(item, _child(where, key))
        if found is not None:
            return found
    return None


def non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    """The first (field, number) under the JSON value `value` that is NaN or infinite, or None. JSON has
    neither, but Python's json module reads and writes NaN, Infinity and -Infinity, and SQLite would store a
    NaN as NULL."""
    if isinstance(value, float):  # a Float column's value: no encoder needed
        return None if math.isfinite(value) else (where, value)
    if not isinstance(value, dict | list):
        return None
    try:  # the C encoder refuses them fast; the walk that names the field runs only when it did
        json.dumps(value, allow_nan=False)
    except ValueError:
        return _first_non_finite(value, where)
    return None


def as_json(number: float) -> str:
    """NaN, Infinity or -Infinity, as the file spells it."""
    return "NaN" if math.isnan(number) else "Infinity" if number > 0 else "-Infinity"


def _excerpt(text: str, shown: int = 60) -> str:
    return repr(text) if len(text) <= shown else f"{text[:shown]!r}..."


def refusal(column: Column[Any], value: Any) -> Refusal | None:
    """Why the database would refuse `value` in `column`, or None. PostgreSQL's rules on every dialect: SQLite
    alone keeps text of any length and with NUL characters, integers of 8 bytes, and a NaN as NULL."""
    if value is None:
        return None if column.nullable else Refusal("a value", "none")
    kind = column.type
    if isinstance(kind, String):  # Text too: no length limit, but no NUL either
        if not isinstance(value, str):
            return Refusal("text", type(value).__name__)
        if "\x00" in value:
            return Refusal("text without NUL characters", _excerpt(value))
        if kind.length is not None and len(value) > kind.length:
            return Refusal(f"at most {kind.length} characters", f"{len(value)}: {_excerpt(value)}")
    elif isinstance(kind, Integer) and not isinstance(kind, BigInteger) and value not in INTEGER_RANGE:
        return Refusal(f"an integer from {INTEGER_RANGE.start} to {INTEGER_RANGE[-1]}", str(value))
    elif isinstance(kind, Float | JSON) and (found := non_finite(value)) is not None:
        field, number = found
        return Refusal("finite numbers", as_json(number) + (f" at {field}" if field else ""))
    return None


def _refusals(model: type[schema.Base], row: Mapping[str, Any]) -> Iterator[tuple[str, Refusal]]:
    table: Table = model.__table__  # type: ignore[assignment]
    for name, value in row.items():
        found = refusal(table.c[name], value)
        if found is not None:
            yield f"{table.name}.{name}", found


# The rows the store writes (results/store.py: write_run), column by column.


def run_row(run: ParsedRun) -> dict[str, Any]:
    """Every field of the run but its components and results, which have tables of their own."""
    return {
        f.name: getattr(run, f.name)
        for f in dataclasses.fields(run)
        if f.name not in ("components", "results")
    }


def series_row(identity: SeriesIdentity) -> dict[str, Any]:
    row = identity.canonical()
    row["backend"] = identity.backend  # every row names it: the canonical form leaves out the native one
    return {"identity_hash": identity.hash(), **row.pop("hardware"), **row}


def result_row(result: ParsedResult) -> dict[str, Any]:
    return {
        "value": result.value,
        "samples": result.samples,
        "spread": result.spread,
        "status": result.status,
        "reason": result.reason,
    }


def _refused(problems: Iterator[physical.Problem]) -> Iterator[tuple[str, Refusal]]:
    for column, expected, got in problems:
        yield column, Refusal(expected, got)


@functools.lru_cache(maxsize=4096)
def _series_refusals(identity: SeriesIdentity) -> tuple[tuple[str, Refusal], ...]:
    """Checked once per series and batch: the runs of a backfill share a few hundred series."""
    hardware = identity.hardware
    counts = [
        physical.count_problem("series.devices_per_host", hardware.devices_per_host, "device"),
        physical.count_problem("series.hosts", hardware.hosts, "host"),
    ]
    return (
        *_refusals(schema.Series, series_row(identity)),
        *_refused(text_problems(identity)),
        *_refused(problem for problem in counts if problem is not None),
    )


def _result_refusals(result: ParsedResult) -> Iterator[tuple[str, Refusal]]:
    yield from _refusals(schema.Result, result_row(result))
    series = result.series
    yield from _refused(
        physical.result_problems(series.metric, series.unit, result.value, result.samples, result.spread)
    )


def _run_refusals(run: ParsedRun) -> Iterator[tuple[str, Refusal]]:
    yield from _refusals(schema.Run, run_row(run))
    problems = [
        physical.count_problem("runs.hosts", run.hosts, "host"),
        physical.time_order_problem(run.started_at, run.finished_at),
    ]
    yield from _refused(problem for problem in problems if problem is not None)


def _message(file: ResultFile, column: str, entry: str, found: Refusal) -> str:
    origin = file.field_names.get(column)
    if origin is not None and (entry or "{entry}" not in origin):
        where = origin.format(entry=entry)
        return f"{file.path}: {where}: expected {found.expected} for the store's {column}, got {found.got}"
    where = f"{entry} ({column})" if entry else column
    return f"{file.path}: {where}: expected {found.expected}, got {found.got}"


EARLIEST_NIGHT = dt.date(2018, 12, 1)
"""No JAX run is older than JAX (its first release was in December 2018)."""
LATEST_AHEAD = dt.timedelta(days=366)
"""How far past today (UTC) a night may be. Not a day: synthetic and replayed histories (the benchmarks, the
tests, a store built ahead for a demonstration) are dated ahead on purpose; a year bounds the gap rows that
such a night can cost."""


def night_problem(night: dt.date, today: dt.date) -> str | None:
    """Why `night` cannot be a run's night, or None. The store marks every night between a series' last run
    and its next as a gap, so a night centuries away (a typo: 9999-12-31, 2206) would write millions of
    rows."""
    if night < EARLIEST_NIGHT:
        return f"{night} is before JAX existed; expected a night on or after {EARLIEST_NIGHT}"
    if night > today + LATEST_AHEAD:
        return f"{night} is more than a year after today ({today} UTC); expected the night the run ran"
    return None


def _problems(file: ResultFile, today: dt.date) -> Iterator[str]:
    run = file.run
    night = night_problem(run.night, today)
    if night is not None:
        yield f"{file.path}: night {night} (from started_at, the image's date or --night)"
    for column, found in _run_refusals(run):
        yield _message(file, column, "", found)
    names: set[str] = set()
    for component in run.components:
        if component.name in names:
            yield f"{file.path}: component {component.name!r}: listed twice; the store keeps one per run"
        names.add(component.name)
        for column, found in _refusals(schema.Component, dataclasses.asdict(component)):
            yield _message(file, column, f"component {component.name!r}", found)
    first: dict[SeriesIdentity, ParsedResult] = {}  # equal identities are equal canonical forms: one series
    for result in run.results:
        series = result.series
        earlier = first.setdefault(series, result)
        if earlier is not result:
            yield (
                f"{file.path}: {result.entry or series.metric}: the same series as "
                f"{earlier.entry or 'another result'} ({series.metric} of {series.benchmark}); the store "
                "keeps one result per series and run"
            )
        for column, found in [*_series_refusals(series), *_result_refusals(result)]:
            yield _message(file, column, result.entry, found)


def check_storable(file: ResultFile, today: dt.date | None = None) -> None:
    """Raise IngestError, naming the file, the field and what was expected, at the first value of `file` that
    the database would refuse, or a night no run can have (night_problem; `today` defaults to UTC's)."""
    problem = next(_problems(file, today or dt.datetime.now(dt.UTC).date()), None)
    if problem is not None:
        raise IngestError(problem)
