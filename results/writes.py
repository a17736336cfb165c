"""Writing runs into the store and taking them out: a batch of parsed runs in a handful of statements
(ingest's hot path), with the gaps their nights make and fill, and the removal of runs with what hangs on
them. Inside a transaction of results/store.py.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from jaxbench.harness.runtime.options import Schedule
from jaxbench.results import schema
from jaxbench.results.gaps import batch_gaps
from jaxbench.results.identity import SeriesIdentity
from jaxbench.results.records import ParsedRun, result_row, run_row, series_row


def _insert(connection: Connection) -> Any:
    return postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert


def _series_ids(session: Session, identities: dict[str, SeriesIdentity]) -> dict[str, int]:
    """Series id per identity hash, creating the series that are new."""
    connection = session.connection()
    # One global order: concurrent writers cannot deadlock. The rows are those check_storable checked.
    rows = [series_row(identities[identity_hash]) for identity_hash in sorted(identities)]
    # executemany with bound parameters: the statement is compiled once per process, not once per file.
    statement = _insert(connection)(schema.Series).on_conflict_do_nothing(index_elements=["identity_hash"])
    connection.execute(statement, rows)
    found = session.execute(
        select(schema.Series.identity_hash, schema.Series.id).where(
            schema.Series.identity_hash.in_(identities)
        )
    )
    return {identity_hash: series_id for identity_hash, series_id in found}


def _insert_gaps(connection: Connection, gaps: list[dict[str, Any]]) -> None:
    if gaps:
        statement = _insert(connection)(schema.Gap).on_conflict_do_nothing(
            index_elements=["series_id", "night"]
        )
        connection.execute(statement, gaps)


Neighbours = tuple[dict[tuple[int, dt.date], dt.date], dict[tuple[int, dt.date], dt.date]]
"""(series, night) -> the series' nearest stored night before that night; and after it."""


_makes_gaps = schema.Run.schedule != Schedule.BACKFILL.value
"""A backfill measures releases, not nights: the nights between two of them, or between the last of them
and the nightly's first, are no gaps; its runs neither make gaps nor bound them."""

BULK_NIGHTS = 8
"""A batch of more distinct nights than this (a backfill) reads its series' stored nights in one query and
finds the neighbours in them, rather than two aggregate queries per night (730 for a year)."""


def _stored_neighbours(session: Session, series_by_night: Mapping[dt.date, set[int]]) -> Neighbours:
    """(series, night) -> the series' nearest stored night before, and after, that night: two queries per
    distinct night of the batch (a nightly batch has one), not per file; one for a backfill."""
    if len(series_by_night) > BULK_NIGHTS:
        return _neighbours_in(
            _stored_nights(session, set().union(*series_by_night.values())), series_by_night
        )
    before: dict[tuple[int, dt.date], dt.date] = {}
    after: dict[tuple[int, dt.date], dt.date] = {}
    for night, series_ids in sorted(series_by_night.items()):
        for found, nearest, side in (
            (before, func.max, schema.Run.night < night),
            (after, func.min, schema.Run.night > night),
        ):
            rows = session.execute(
                select(schema.Result.series_id, nearest(schema.Run.night))
                .join(schema.Run, schema.Run.id == schema.Result.run_id)
                .where(schema.Result.series_id.in_(series_ids), side, _makes_gaps)
                .group_by(schema.Result.series_id)
            )
            found.update({(series_id, night): stored for series_id, stored in rows})
    return before, after


def _stored_nights(session: Session, series_ids: set[int]) -> dict[int, list[dt.date]]:
    """Each series' stored nights, in order."""
    rows = session.execute(
        select(schema.Result.series_id, schema.Run.night)
        .join(schema.Run, schema.Run.id == schema.Result.run_id)
        .where(schema.Result.series_id.in_(series_ids), _makes_gaps)
        .distinct()
    )
    nights: dict[int, list[dt.date]] = {}
    for series_id, night in rows:
        nights.setdefault(series_id, []).append(night)
    return {series_id: sorted(found) for series_id, found in nights.items()}


def _neighbours_in(
    stored: Mapping[int, list[dt.date]], series_by_night: Mapping[dt.date, set[int]]
) -> Neighbours:
    """The neighbours of `_stored_neighbours`, found in each series' sorted stored nights."""
    before: dict[tuple[int, dt.date], dt.date] = {}
    after: dict[tuple[int, dt.date], dt.date] = {}
    for night, series_ids in series_by_night.items():
        for series_id in series_ids:
            nights = stored.get(series_id, [])
            if (below := bisect.bisect_left(nights, night)) > 0:
                before[(series_id, night)] = nights[below - 1]
            if (above := bisect.bisect_right(nights, night)) < len(nights):
                after[(series_id, night)] = nights[above]
    return before, after


def _nights_of(measured: list[tuple[int, dt.date]]) -> dict[dt.date, set[int]]:
    series_by_night: dict[dt.date, set[int]] = {}
    for series_id, night in measured:
        series_by_night.setdefault(night, set()).add(series_id)
    return series_by_night


def _record_gaps(
    session: Session,
    measured: list[tuple[int, dt.date]],
    series_by_night: Mapping[dt.date, set[int]],
    neighbours: Neighbours,
) -> None:
    """The gaps the batch's `measured` nights make (results/gaps.py), from the series' nights stored before
    it; the gaps of every night it ran (`series_by_night`) go."""
    gaps = batch_gaps(measured, *neighbours)
    _insert_gaps(session.connection(), [{"series_id": s, "night": n} for s, n in sorted(gaps)])
    for night, series_ids in sorted(series_by_night.items()):
        session.execute(
            delete(schema.Gap).where(schema.Gap.series_id.in_(series_ids), schema.Gap.night == night)
        )


def write_runs(session: Session, runs: Sequence[ParsedRun]) -> list[int | None]:
    """Store parsed runs, in their order; each one's id, or None for a run the store held already (by its
    content hash). A handful of statements for the whole batch: ingest is the store's hot path (a backfill
    is 100k results), so rows go in as executemany of Core inserts, not ORM objects."""
    if not runs:
        return []
    connection = session.connection()
    now = dt.datetime.now(dt.UTC)
    statement = (
        _insert(connection)(schema.Run)
        .on_conflict_do_nothing(index_elements=["source_hash"])
        .returning(schema.Run.source_hash, schema.Run.id)
    )
    rows = [run_row(run) | {"ingested_at": now} for run in runs]
    inserted: dict[str, int] = {
        source_hash: run_id for source_hash, run_id in connection.execute(statement, rows)
    }
    new = [(run, inserted[run.source_hash]) for run in runs if run.source_hash in inserted]
    # Each result's series hashed once (a canonical JSON and a SHA-256): it is a third of the batch's work.
    hashed = [(run, run_id, [(r, r.series.hash()) for r in run.results]) for run, run_id in new]
    identities = {identity_hash: r.series for _, _, results in hashed for r, identity_hash in results}
    series_ids = _series_ids(session, identities) if identities else {}
    components = [dataclasses.asdict(c) | {"run_id": run_id} for run, run_id in new for c in run.components]
    if components:
        connection.execute(insert(schema.Component), components)
    measured = list(
        dict.fromkeys((series_ids[h], run.night) for run, _, results in hashed for _, h in results)
    )
    nightly = list(
        dict.fromkeys(
            (series_ids[h], run.night)
            for run, _, results in hashed
            if run.schedule != Schedule.BACKFILL
            for _, h in results
        )
    )
    # Before the batch's results go in: its nights' neighbours in the history stored so far.
    series_by_night = _nights_of(measured)
    neighbours = _stored_neighbours(session, _nights_of(nightly))
    results = [
        {"run_id": run_id, "series_id": series_ids[h], **result_row(r)}
        for _, run_id, hashed_results in hashed
        for r, h in hashed_results
    ]
    if results:
        connection.execute(insert(schema.Result), results)
    _record_gaps(session, nightly, series_by_night, neighbours)
    return [inserted.get(run.source_hash) for run in runs]


def delete_runs(session: Session, run_ids: set[int]) -> None:
    """Remove runs with their results and components. A night of a series that no other run measured
    becomes a gap where the series ran before and after it (as ingest records them); incidents, rewritten
    by the next `jaxbench detect`, stop pointing at them."""
    connection = session.connection()
    measured: set[tuple[int, dt.date]] = {
        (series_id, night)
        for series_id, night in session.execute(
            select(schema.Result.series_id, schema.Run.night)
            .join(schema.Run, schema.Run.id == schema.Result.run_id)
            .where(schema.Result.run_id.in_(run_ids))
        )
    }
    for column in (schema.Incident.last_good_run_id, schema.Incident.first_bad_run_id):
        session.execute(update(schema.Incident).where(column.in_(run_ids)).values({column: None}))
    for table in (schema.Result, schema.Component):
        session.execute(delete(table).where(table.run_id.in_(run_ids)))
    session.execute(delete(schema.Run).where(schema.Run.id.in_(run_ids)))
    left: dict[int, set[dt.date]] = {}
    for series_id, night in session.execute(
        select(schema.Result.series_id, schema.Run.night)
        .join(schema.Run, schema.Run.id == schema.Result.run_id)
        .where(schema.Result.series_id.in_({series_id for series_id, _ in measured}))
    ):
        left.setdefault(series_id, set()).add(night)
    gaps = [
        {"series_id": series_id, "night": night}
        for series_id, night in sorted(measured)
        if (nights := left.get(series_id)) and night not in nights and min(nights) < night < max(nights)
    ]
    _insert_gaps(connection, gaps)
