"""A person's decision on a run, kept in the store like a verdict (who, when, why; results/schema.py:
RunDecision): quarantine a bad run out of every judgement while its rows stay, release it back, or delete it
for good. The measurements stay apart from the decisions: a quarantined run is skipped where histories are
read (results/history.py), so detection, every report and the dashboard leave it out alike and `release`
brings it back as it was; a deleted run is removed (results/store.py: delete_runs) and its record keeps
ingest from taking its file again.

    jaxbench runs quarantine 12 --note "the node's clock jumped"
    jaxbench runs list --quarantined
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Iterable, Sequence

from sqlalchemy import ColumnElement, Engine, select
from sqlalchemy.orm import Session

from jaxbench.results import schema, store, writes


class Decision(enum.StrEnum):
    QUARANTINE = "quarantine"
    """Left out of every judgement; its rows stay."""
    RELEASE = "release"
    """Judged again, as before its quarantine."""
    DELETE = "delete"
    """Removed for good; the record stays."""


@dataclasses.dataclass(frozen=True)
class Recorded:
    """One decision as the store keeps it."""

    run_id: int
    decision: Decision
    author: str | None
    note: str | None
    created_at: dt.datetime
    run_uid: str | None = None


def in_force(decisions: Iterable[tuple[int, str]]) -> set[int]:
    """The quarantined runs: those whose newest quarantine or release (`decisions` oldest first) is a
    quarantine."""
    quarantined: set[int] = set()
    for run_id, decision in decisions:
        if decision == Decision.QUARANTINE:
            quarantined.add(run_id)
        elif decision == Decision.RELEASE:
            quarantined.discard(run_id)
    return quarantined


def _recorded(session: Session, where: ColumnElement[bool]) -> list[Recorded]:
    rows = session.execute(
        select(schema.RunDecision).where(where).order_by(schema.RunDecision.created_at, schema.RunDecision.id)
    ).scalars()
    return [
        Recorded(row.run_id, Decision(row.decision), row.author, row.note, row.created_at, row.run_uid)
        for row in rows
    ]


def quarantined_runs(session: Session) -> dict[int, Recorded]:
    """Every quarantined run, with the quarantine in force."""
    standing = _recorded(session, schema.RunDecision.decision.in_([Decision.QUARANTINE, Decision.RELEASE]))
    ids = in_force((each.run_id, each.decision) for each in standing)
    return {each.run_id: each for each in standing if each.run_id in ids}


def _runs(session: Session, run_ids: Sequence[int]) -> list[schema.Run]:
    """The runs, in the order given; LookupError naming the first that is not in the store."""
    runs = {
        run.id: run for run in session.execute(select(schema.Run).where(schema.Run.id.in_(run_ids))).scalars()
    }
    for run_id in run_ids:
        if run_id not in runs:
            raise LookupError(f"run {run_id}: no such run in the store (jaxbench runs list shows them)")
    return [runs[run_id] for run_id in dict.fromkeys(run_ids)]


def _record(
    session: Session, run: schema.Run, decision: Decision, author: str | None, note: str | None
) -> None:
    session.add(
        schema.RunDecision(
            run_id=run.id,
            run_uid=run.run_uid,
            source_hash=run.source_hash,
            decision=decision.value,
            author=author,
            note=note,
            created_at=dt.datetime.now(dt.UTC),
        )
    )


def decide(
    engine: Engine, run_ids: Sequence[int], decision: Decision, author: str | None, note: str | None
) -> list[tuple[int, bool]]:
    """Quarantine or release runs, all or none (LookupError for one not in the store): each run with
    whether its state changed (a run already in that state is left as it is, and nothing is recorded)."""
    if decision is Decision.DELETE:
        raise ValueError("a deletion is delete(), which removes the runs' rows")
    with store.transaction(engine) as session:
        runs = _runs(session, run_ids)
        quarantined = quarantined_runs(session)
        changed = []
        for run in runs:
            changes = (run.id in quarantined) != (decision is Decision.QUARANTINE)
            if changes:
                _record(session, run, decision, author, note)
            changed.append((run.id, changes))
        return changed


def delete(engine: Engine, run_ids: Sequence[int], author: str | None, note: str | None) -> list[int]:
    """Remove runs for good, all or none (LookupError for one not in the store), each deletion recorded. In
    the writers' exclusive transaction, so that no ingest running meanwhile takes the run back."""
    with store.transaction(engine, exclusive=True) as session:
        runs = _runs(session, run_ids)
        for run in runs:
            _record(session, run, Decision.DELETE, author, note)
        writes.delete_runs(session, {run.id for run in runs})
        return [run.id for run in runs]


@dataclasses.dataclass(frozen=True)
class Listed:
    """One run as `jaxbench runs list` shows it."""

    run_id: int
    night: dt.date
    schedule: str
    status: str
    hostname: str | None
    benchmarks: tuple[str, ...]
    quarantine: Recorded | None
    """The quarantine in force; None for a run that is judged."""


def listing(engine: Engine, *, quarantined_only: bool, limit: int) -> list[Listed]:
    """The newest `limit` runs (or quarantined runs), newest night first."""
    with store.transaction(engine) as session:
        quarantined = quarantined_runs(session)
        query = select(schema.Run).order_by(schema.Run.night.desc(), schema.Run.id.desc()).limit(limit)
        if quarantined_only:
            query = query.where(schema.Run.id.in_(list(quarantined)))
        runs = session.execute(query).scalars().all()
        benchmarks: dict[int, set[str]] = {}
        for run_id, benchmark in session.execute(
            select(schema.Result.run_id, schema.Series.benchmark)
            .join(schema.Series, schema.Series.id == schema.Result.series_id)
            .where(schema.Result.run_id.in_([run.id for run in runs]))
        ):
            benchmarks.setdefault(run_id, set()).add(benchmark)
        return [
            Listed(
                run.id,
                run.night,
                run.schedule,
                run.status,
                run.hostname,
                tuple(sorted(benchmarks.get(run.id, ()))),
                quarantined.get(run.id),
            )
            for run in runs
        ]


def deletions(engine: Engine, limit: int) -> list[Recorded]:
    """The newest `limit` deletions, newest first."""
    with store.transaction(engine) as session:
        return _recorded(session, schema.RunDecision.decision == Decision.DELETE)[::-1][:limit]
