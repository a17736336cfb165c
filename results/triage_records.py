"""What `jaxbench triage` reads from and keeps in the store: the incident and its two runs (or any two runs
of one benchmark, as a change to bisect), and each triage with every benchmark run it made, written as each
run ends so that an interrupted triage resumes.

Plain values in and out (dicts of the columns); triage/ gives them meaning.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Engine, delete, select

from jaxbench.core.errors import InvalidInput
from jaxbench.core.ids import parse_id
from jaxbench.harness.measure.metrics import STEP_TIME
from jaxbench.results import schema, store, triage_lease
from jaxbench.results.judgement.components import component_ranges
from jaxbench.results.judgement.vocabulary import (
    AffectedSeries,
    IncidentDetail,
    IncidentKind,
    IncidentState,
    SeriesState,
)

FINGERPRINT_PREFIX = re.compile(r"[0-9a-fA-F]{6,64}")
RUN_PAIR = re.compile(r"(?P<before>[0-9]+)\.\.(?P<after>[0-9]+)")
"""Two run ids, BEFORE..AFTER: the change between them, triaged as an incident is."""
"""An incident's fingerprint is a SHA-256 in hex; 6 characters of it name one incident in practice."""

RESUMABLE = ("running", "stopped")
"""States a triage is taken up again from: interrupted while running, or stopped by a bound."""

_RUN_FIELDS = (
    "status",
    "median_step_s",
    "loss_curve",
    "loss_optimum",
    "program",
    "reason",
    "result_path",
    "seconds",
    "cpu_per_wall",
    "median_cpu_step_s",
)


@dataclasses.dataclass(frozen=True)
class StoredRun:
    id: int
    night: dt.date
    config: Mapping[str, Any]
    config_hash: str | None
    environment: Mapping[str, Any]
    components: Mapping[str, tuple[str | None, str | None, str | None]]
    """name -> (repository, commit, version)."""
    image_ref: str | None


@dataclasses.dataclass(frozen=True)
class StoredIncident:
    id: int
    fingerprint: str
    kind: str
    state: str
    night: dt.date
    hardware: str
    detail: IncidentDetail
    last_good: StoredRun | None
    first_bad: StoredRun | None
    runs: tuple[int, int] | None = None
    """Where the "incident" is the change between two runs someone named (change_between), their ids."""

    @property
    def title(self) -> str:
        """How messages name it: "incident 12", or "runs 40..52"."""
        return f"runs {self.runs[0]}..{self.runs[1]}" if self.runs else f"incident {self.id}"


@dataclasses.dataclass(frozen=True)
class StoredTriage:
    id: int
    fingerprint: str
    state: str
    plan: Mapping[str, Any]
    outcome: Mapping[str, Any] | None
    runs: Mapping[tuple[str, int], Mapping[str, Any]]
    """(label, attempt) -> the run's fields, in the order they ran."""


def find_incident(engine: Engine, reference: str) -> StoredIncident:
    """An incident by its id (`jaxbench report` shows them) or a prefix of its fingerprint (6 characters at
    least, and only one incident may match)."""
    # Any digit (isdigit: "²", "١" too) is read as an id, which parse_id refuses unless it is ASCII.
    incident_id = parse_id(reference, "incident") if reference.isdigit() else None
    if incident_id is None and not FINGERPRINT_PREFIX.fullmatch(reference):
        raise InvalidInput(
            f"incident {reference[:80]!r}: give its id or 6 or more hex characters of its fingerprint"
        )
    with store.transaction(engine) as session:
        if incident_id is not None:
            row = session.get(schema.Incident, incident_id)
            if row is None:
                raise InvalidInput(f"incident {reference}: no such incident in the store")
        else:
            # autoescape: a LIKE wildcard (% or _) in the prefix is a character to match, never a pattern.
            prefix = schema.Incident.fingerprint.startswith(reference.lower(), autoescape=True)
            rows = list(session.execute(select(schema.Incident).where(prefix)).scalars())
            if len(rows) != 1:
                found = "no incident" if not rows else f"{len(rows)} incidents"
                raise InvalidInput(f"incident {reference!r}: {found} with a fingerprint starting so")
            row = rows[0]
        return StoredIncident(
            id=row.id,
            fingerprint=row.fingerprint,
            kind=row.kind,
            state=row.state,
            night=row.night,
            hardware=row.hardware,
            detail=IncidentDetail.from_json(row.details),
            last_good=_run(session.get(schema.Run, row.last_good_run_id) if row.last_good_run_id else None),
            first_bad=_run(session.get(schema.Run, row.first_bad_run_id) if row.first_bad_run_id else None),
        )


def change_between(engine: Engine, reference: str) -> StoredIncident:
    """The change between two stored runs of one benchmark configuration (`BEFORE..AFTER`, their ids) in an
    incident's shape: a throughput change of their step time, either way (a slowdown, or a speed-up whose
    cause is as worth naming), and the components whose pins differ. Its fingerprint names the pair, so a
    triage of it resumes like an incident's."""
    match = RUN_PAIR.fullmatch(reference)
    if match is None:
        raise InvalidInput(f"runs {reference[:80]!r}: expected BEFORE..AFTER, two run ids such as 40..52")
    ids = [parse_id(match[side], "run") for side in ("before", "after")]
    if ids[0] == ids[1]:
        raise InvalidInput(f"runs {reference}: the same run twice; name two runs to compare")
    with store.transaction(engine) as session:
        rows = [session.get(schema.Run, run_id) for run_id in ids]
        for run_id, row in zip(ids, rows, strict=True):
            if row is None:
                raise InvalidInput(f"run {run_id}: no such run in the store (jaxbench runs lists them)")
        before, after = (_run(row) for row in rows)
        assert before is not None and after is not None
        if before.config_hash != after.config_hash:
            raise InvalidInput(
                f"runs {reference}: they ran different configurations ({before.config_hash} vs "
                f"{after.config_hash}); a triage reruns one benchmark at two stacks"
            )
        times = [_step_time(row) for row in rows]
    for run_id, value in zip(ids, times, strict=True):
        if value is None:
            raise InvalidInput(f"run {run_id}: it recorded no step time ({STEP_TIME}) to compare")
    assert times[0] is not None and times[1] is not None
    magnitude = times[1] / times[0] - 1
    benchmark = "-".join(str(after.config.get(key, "?")) for key in ("family", "size"))
    state = SeriesState.IMPROVEMENT if magnitude < 0 else SeriesState.REGRESSION
    return StoredIncident(
        id=0,
        fingerprint=hashlib.sha256(f"runs {ids[0]}..{ids[1]}".encode()).hexdigest(),
        kind=IncidentKind.THROUGHPUT.value,
        state=IncidentState.OPEN.value,
        night=after.night,
        hardware="",
        detail=IncidentDetail(
            last_good_night=before.night,
            series=(
                AffectedSeries(
                    key=STEP_TIME, benchmark=benchmark, metric=STEP_TIME, magnitude=magnitude, state=state
                ),
            ),
            components=tuple(component_ranges(before.components, after.components)),
        ),
        last_good=before,
        first_bad=after,
        runs=(ids[0], ids[1]),
    )


def _step_time(row: schema.Run | None) -> float | None:
    """The run's recorded step time (the median over its timed steps), where it has one."""
    if row is None:
        return None
    for result in row.results:
        if result.series.metric == STEP_TIME and result.value is not None and result.value > 0:
            return float(result.value)
    return None


def _run(row: schema.Run | None) -> StoredRun | None:
    if row is None:
        return None
    return StoredRun(
        id=row.id,
        night=row.night,
        config=row.config,
        config_hash=row.config_hash,
        environment=row.environment or {},
        components={c.name: (c.repository, c.commit, c.version) for c in row.components},
        image_ref=row.image_ref,
    )


def open_incidents(engine: Engine, kinds: Sequence[str]) -> list[tuple[int, str]]:
    """(id, fingerprint) of the open incidents of these kinds, oldest night first."""
    with store.transaction(engine) as session:
        rows = session.execute(
            select(schema.Incident.id, schema.Incident.fingerprint)
            .where(schema.Incident.state == IncidentState.OPEN.value, schema.Incident.kind.in_(kinds))
            .order_by(schema.Incident.night, schema.Incident.id)
        )
        return [(incident_id, fingerprint) for incident_id, fingerprint in rows]


def latest_triage(engine: Engine, fingerprint: str) -> StoredTriage | None:
    with store.transaction(engine) as session:
        row = session.execute(
            select(schema.Triage)
            .where(schema.Triage.incident_fingerprint == fingerprint)
            .order_by(schema.Triage.id.desc())
            .limit(1)
        ).scalar()
        return None if row is None else _triage(row)


def _triage(row: schema.Triage) -> StoredTriage:
    return StoredTriage(
        id=row.id,
        fingerprint=row.incident_fingerprint,
        state=row.state,
        plan=row.plan,
        outcome=row.outcome,
        runs={(run.label, run.attempt): {f: getattr(run, f) for f in _RUN_FIELDS} for run in row.runs},
    )


def start_triage(
    engine: Engine,
    fingerprint: str,
    plan: Mapping[str, Any],
    *,
    restart: bool,
    owner: str,
    now: dt.datetime | None = None,
) -> StoredTriage:
    """The triage to carry on: the incident's unfinished one (its plan updated: the settings may have
    changed), or a new one, its lease taken by `owner` (results/triage_lease.py). `restart` forgets every
    earlier triage of the incident first. Refused while another process's triage of the incident runs."""
    now = triage_lease.utc_now() if now is None else now
    with store.transaction(engine, exclusive=True) as session:
        triage_lease.refuse_if_held(session, fingerprint, owner, now)
        if restart:
            session.execute(delete(schema.Triage).where(schema.Triage.incident_fingerprint == fingerprint))
        row = session.execute(
            select(schema.Triage)
            .where(schema.Triage.incident_fingerprint == fingerprint, schema.Triage.state.in_(RESUMABLE))
            .order_by(schema.Triage.id.desc())
            .limit(1)
        ).scalar()
        if row is None:
            row = schema.Triage(
                incident_fingerprint=fingerprint, state="running", plan=dict(plan), started_at=now
            )
            session.add(row)
        else:
            row.state, row.plan, row.outcome, row.finished_at = "running", dict(plan), None, None
        triage_lease.take(row, owner, now)
        session.flush()
        return _triage(row)


def record_run(
    engine: Engine, triage_id: int, label: str, attempt: int, fields: Mapping[str, Any], *, owner: str
) -> None:
    """One run of the triage, where `owner` still holds it (triage_lease.LeaseLost otherwise)."""
    unknown = set(fields) - set(_RUN_FIELDS)
    if unknown:
        raise ValueError(f"record_run: unknown fields {sorted(unknown)}")
    with store.transaction(engine) as session:
        triage_lease.renew(session, triage_id, owner, triage_lease.utc_now())
        session.add(
            schema.TriageRun(
                triage_id=triage_id,
                label=label,
                attempt=attempt,
                created_at=dt.datetime.now(dt.UTC),
                **fields,
            )
        )


def finish_triage(
    engine: Engine, triage_id: int, state: str, outcome: Mapping[str, Any], *, owner: str
) -> None:
    """The outcome, where `owner` still holds the triage (triage_lease.LeaseLost otherwise), and the end of
    its lease."""
    now = triage_lease.utc_now()
    with store.transaction(engine) as session:
        triage_lease.renew(session, triage_id, owner, now)
        row = session.get(schema.Triage, triage_id)
        assert row is not None  # renew found it
        row.state, row.outcome, row.finished_at = state, dict(outcome), now
        row.lease_owner, row.lease_expires_at = None, None
