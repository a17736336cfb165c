"""Reading the store back as per-series nightly histories: one value per night, the median of that night's
valid runs, with how many runs there were (a night with only failed runs keeps its failure status and no
value). Every run is kept in the store; several runs of one series in one night are aggregated here.

Two views of one read (`load_history_views`): detection judges the nightly view, the nightly's runs alone, so
an ad-hoc run by hand never opens an incident and a series that never ran in the nightly is not judged at
all; reports show the view of every run. Neither holds a quarantined run (results/quarantine.py): its night
is a gap where no other run measured the series, in every judgement, report and dashboard alike.

    jaxbench report
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import statistics
from collections import defaultdict
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from jaxbench.core.collector import collector_paused
from jaxbench.harness.runtime.options import JUDGED_SCHEDULES
from jaxbench.results import schema
from jaxbench.results.identity import HardwareClass, SeriesIdentity, settings_tuple
from jaxbench.results.quarantine import quarantined_runs
from jaxbench.results.records import ParsedResult


@dataclasses.dataclass(slots=True)
class Night:
    """Not frozen: a store of 1,000 series over a year reads 365,000 of them, and a frozen dataclass's
    constructor costs five times a plain one's (a guarded setattr per field). Nothing changes one once
    built."""

    night: dt.date
    value: float | None
    status: str
    """"ok" when `value` is set; otherwise the status of that night's failed run(s), or "gap"."""
    run_id: int | None
    """The night's last run (the one incidents point at)."""
    config_hash: str | None
    run_ids: tuple[int, ...] = ()
    """Every run of the series that night, oldest first: `value` is the median of their valid values."""
    ad_hoc_runs: int = 0
    """How many of `run_ids` were ad-hoc runs (by hand) rather than the nightly's."""

    @property
    def runs(self) -> int:
        return len(self.run_ids) if self.run_ids else int(self.run_id is not None)


@dataclasses.dataclass(frozen=True)
class History:
    series_id: int
    identity: SeriesIdentity
    nights: list[Night]

    @property
    def key(self) -> str:
        return self.identity.key()

    def positions_in(self, other: History) -> dict[int, int]:
        """Night index here -> index of the same night in `other` (another view or metric of the same
        nights), for the nights both have; one past the end maps to one past `other`'s end."""
        where = {n.night: i for i, n in enumerate(other.nights)}
        mapped = {i: where[n.night] for i, n in enumerate(self.nights) if n.night in where}
        mapped[len(self.nights)] = len(other.nights)
        return mapped

    @property
    def ad_hoc(self) -> bool:
        """Only ad-hoc runs: a series the nightly never ran, reported but never judged."""
        ran = [n for n in self.nights if n.runs]
        return bool(ran) and all(n.ad_hoc_runs == n.runs for n in ran)


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


class ResultRow(NamedTuple):
    """One result of one series, with what its run says (a tuple: a backfilled store reads 100k of them).
    `nightly_nights` and `every_night` take them by night: the pure part of reading histories."""

    value: float | None
    status: str
    run_id: int
    started_at: dt.datetime | None
    config_hash: str | None
    schedule: str


def aggregate_night(night: dt.date, rows: list[ResultRow]) -> Night:
    """Every result of one series on one night: the median of the valid values, the newest run's status."""
    if len(rows) == 1:  # nearly every night: a store of 1,000 series x a year has 365,000 of them
        (row,) = rows
        value = float(row.value) if row.value is not None and row.status == "ok" else None
        ad_hoc = int(row.schedule not in JUDGED_SCHEDULES)
        status = "ok" if value is not None else row.status
        return Night(night, value, status, row.run_id, row.config_hash, (row.run_id,), ad_hoc)
    rows = sorted(rows, key=lambda r: (r.started_at is None, r.started_at, r.run_id))
    values = [r.value for r in rows if r.value is not None and r.status == "ok"]
    last = rows[-1]
    value = float(statistics.median(values)) if values else None
    return Night(
        night,
        value,
        "ok" if values else last.status,
        last.run_id,
        last.config_hash,
        tuple(r.run_id for r in rows),
        sum(r.schedule not in JUDGED_SCHEDULES for r in rows),
    )


def nightly_nights(
    nights: dict[dt.date, list[ResultRow]], gaps: set[dt.date], every: dict[dt.date, Night] | None = None
) -> list[Night]:
    """The nights of the nightly's runs only. Between the first and the last of them, a night with ad-hoc runs
    alone is a gap as far as the nightly is concerned (as in the store, a gap always has a run after it).
    `every`: the nights already aggregated over all runs (aggregate_nights), reused where all were nightly."""
    nightly = {night: [r for r in rows if r.schedule in JUDGED_SCHEDULES] for night, rows in nights.items()}
    ran = {night: rows for night, rows in nightly.items() if rows}
    if not ran:
        return []
    first, last = min(ran), max(ran)
    missing = {night for night in set(nights) | gaps if first < night < last} - set(ran)
    aggregated = {
        night: every[night] if every and len(rows) == len(nights[night]) else aggregate_night(night, rows)
        for night, rows in ran.items()
    }
    aggregated |= {night: Night(night, None, "gap", None, None) for night in missing}
    return [aggregated[night] for night in sorted(aggregated)]


def aggregate_nights(nights: dict[dt.date, list[ResultRow]]) -> dict[dt.date, Night]:
    return {night: aggregate_night(night, rows) for night, rows in nights.items()}


def every_night(
    nights: dict[dt.date, list[ResultRow]], gaps: set[dt.date], every: dict[dt.date, Night] | None = None
) -> list[Night]:
    """Every night with a run of any schedule, and the store's gaps (nights without any run). `every`: the
    nights already aggregated (aggregate_nights)."""
    aggregated = dict(every) if every is not None else aggregate_nights(nights)
    aggregated |= {gap: Night(gap, None, "gap", None, None) for gap in gaps - set(nights)}
    return [aggregated[night] for night in sorted(aggregated)]


def between_runs(nights: list[Night]) -> list[Night]:
    """`nights` from the first with a run to the last (none if none has one): the gaps at either end
    dropped."""
    ran = [i for i, n in enumerate(nights) if n.status != "gap"]
    return nights[ran[0] : ran[-1] + 1] if ran else []


def load_histories(session: Session, *, nightly_only: bool = False) -> list[History]:
    """Every series with its nights. `nightly_only`: the nightly's runs alone, and only the series it ran
    (what detection judges)."""
    views = load_history_views(session)
    return views.nightly if nightly_only else views.every


@dataclasses.dataclass(frozen=True)
class HistoryViews:
    nightly: list[History]
    """The nightly's runs of the series it ran: what detection judges."""
    every: list[History]
    """Every series with every run, ad hoc included: what reports show."""


@collector_paused()  # a year of 1,000 series is a million small objects, none of them in a cycle
def load_history_views(session: Session) -> HistoryViews:
    """Both views of the store from one read of it. Each run's night, schedule and config are read once per
    run rather than joined onto each of its results (a year of 1,000 series is 365,000 results of 365
    runs)."""
    series_rows = session.execute(select(schema.Series).order_by(schema.Series.id)).scalars().all()
    runs = {
        run_id: (night, started_at, config_hash, schedule)
        for run_id, night, started_at, config_hash, schedule in session.execute(
            select(
                schema.Run.id,
                schema.Run.night,
                schema.Run.started_at,
                schema.Run.config_hash,
                schema.Run.schedule,
            )
        )
    }
    quarantined = quarantined_runs(session)
    by_night: dict[int, dict[dt.date, list[ResultRow]]] = defaultdict(lambda: defaultdict(list))
    left_out: dict[int, set[dt.date]] = defaultdict(set)
    results = select(schema.Result.series_id, schema.Result.run_id, schema.Result.value, schema.Result.status)
    # Core rows, not the session's: plain tuples of four columns, no ORM bookkeeping per result.
    ad_hoc: set[int] = set()
    for series_id, run_id, value, status in session.connection().execute(results).fetchall():
        night, started_at, config_hash, schedule = runs[run_id]
        if run_id in quarantined:
            left_out[series_id].add(night)
            continue
        by_night[series_id][night].append(ResultRow(value, status, run_id, started_at, config_hash, schedule))
        if schedule not in JUDGED_SCHEDULES:
            ad_hoc.add(series_id)
    gaps: dict[int, set[dt.date]] = defaultdict(set)
    for series_id, night in session.execute(select(schema.Gap.series_id, schema.Gap.night)):
        gaps[series_id].add(night)
    for series_id, out in left_out.items():  # a gap between two nights measured, as ingest records them
        measured = by_night[series_id]
        gaps[series_id] |= {night for night in out if measured and min(measured) < night < max(measured)}

    nightly, every = [], []
    for series in series_rows:
        identity, nights, series_gaps = identity_of(series), by_night[series.id], gaps[series.id]
        aggregated = aggregate_nights(nights)  # once: a night of nightly runs alone is the same in both views
        shown = every_night(nights, series_gaps, aggregated)
        every.append(History(series.id, identity, shown))
        # Without ad-hoc runs the nightly's view is every night from its first run to its last.
        judged = (
            nightly_nights(nights, series_gaps, aggregated) if series.id in ad_hoc else between_runs(shown)
        )
        if judged:
            nightly.append(History(series.id, identity, judged))
    return HistoryViews(nightly, every)


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
    program: dict[str, Any] | None = None
    """The compiled step's summary and cost (runs.program)."""
    profile: dict[str, Any] | None = None
    """Where a profiled run's time went (runs.profile)."""


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
            run.program,
            run.profile,
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
