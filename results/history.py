"""Reading the store back as per-series nightly histories: one value per night, the median of that night's
valid runs (a night with only failed runs keeps its failure status and no value).

    jaxbench report
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import statistics
from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from results import schema
from results.identity import HardwareClass, SeriesIdentity, settings_tuple
from results.records import ParsedResult


@dataclasses.dataclass(frozen=True)
class Night:
    night: dt.date
    value: float | None
    status: str
    """"ok" when `value` is set; otherwise the status of that night's failed run(s), or "gap"."""
    run_id: int | None
    """The night's last run (the one incidents point at)."""
    config_hash: str | None


@dataclasses.dataclass(frozen=True)
class History:
    series_id: int
    identity: SeriesIdentity
    nights: list[Night]

    @property
    def key(self) -> str:
        return self.identity.key()


def identity_of(row: schema.Series) -> SeriesIdentity:
    return SeriesIdentity(
        benchmark=row.benchmark,
        kind=row.kind,
        settings=settings_tuple(dict(row.settings)),
        hardware=HardwareClass(row.device_kind, row.devices_per_host, row.hosts),
        flavor=row.flavor,
        metric=row.metric,
        unit=row.unit,
        higher_is_better=row.higher_is_better,
        backend=row.backend,
    )


def _aggregate(night: dt.date, rows: list[tuple[Any, ...]]) -> Night:
    """rows: (value, status, run_id, started_at, config_hash) of every result of one series on one night."""
    rows = sorted(rows, key=lambda r: (r[3] is None, r[3], r[2]))
    values = [r[0] for r in rows if r[0] is not None and r[1] == "ok"]
    last = rows[-1]
    if values:
        return Night(night, float(statistics.median(values)), "ok", last[2], last[4])
    return Night(night, None, last[1], last[2], last[4])


def load_histories(session: Session) -> list[History]:
    series_rows = session.execute(select(schema.Series).order_by(schema.Series.id)).scalars().all()
    by_night: dict[int, dict[dt.date, list[tuple[Any, ...]]]] = defaultdict(lambda: defaultdict(list))
    query = select(
        schema.Result.series_id,
        schema.Run.night,
        schema.Result.value,
        schema.Result.status,
        schema.Run.id,
        schema.Run.started_at,
        schema.Run.config_hash,
    ).join(schema.Run, schema.Run.id == schema.Result.run_id)
    for series_id, night, value, status, run_id, started_at, config_hash in session.execute(query):
        by_night[series_id][night].append((value, status, run_id, started_at, config_hash))
    gaps: dict[int, set[dt.date]] = defaultdict(set)
    for series_id, night in session.execute(select(schema.Gap.series_id, schema.Gap.night)):
        gaps[series_id].add(night)

    histories = []
    for row in series_rows:
        nights = {night: _aggregate(night, rows) for night, rows in by_night[row.id].items()}
        for gap in gaps[row.id] - set(nights):
            nights[gap] = Night(gap, None, "gap", None, None)
        ordered = [nights[night] for night in sorted(nights)]
        histories.append(History(row.id, identity_of(row), ordered))
    return histories


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What incidents compare between the last good and the first bad run."""

    run_id: int
    night: dt.date
    components: dict[str, tuple[str | None, str | None, str | None]]
    """name -> (repository, commit, version)."""
    environment: dict[str, str]
    loss_curve: list[float | None] | None
    loss_optimum: float | None


def load_run_contexts(session: Session, run_ids: set[int]) -> dict[int, RunContext]:
    if not run_ids:
        return {}
    runs = session.execute(select(schema.Run).where(schema.Run.id.in_(run_ids))).scalars().all()
    components: dict[int, dict[str, tuple[str | None, str | None, str | None]]] = defaultdict(dict)
    rows = session.execute(select(schema.Component).where(schema.Component.run_id.in_(run_ids))).scalars()
    for component in rows:
        components[component.run_id][component.name] = (
            component.repository,
            component.commit,
            component.version,
        )
    return {
        run.id: RunContext(
            run.id,
            run.night,
            components[run.id],
            {str(k): str(v) for k, v in (run.environment or {}).items()},
            run.loss_curve,
            run.loss_optimum,
        )
        for run in runs
    }


def load_run_results(session: Session, run_id: int) -> list[ParsedResult]:
    """The results of one stored run, in the form ingest produces (for comparisons)."""
    rows = session.execute(
        select(schema.Result, schema.Series)
        .join(schema.Series, schema.Series.id == schema.Result.series_id)
        .where(schema.Result.run_id == run_id)
        .order_by(schema.Result.id)
    ).all()
    if not rows:
        raise LookupError(f"no run {run_id} in the store (or it has no results)")
    return [
        ParsedResult(
            identity_of(series), result.value, result.samples, result.spread, result.status, result.reason
        )
        for result, series in rows
    ]
