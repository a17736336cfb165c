"""One `jaxbench ingest` call: every file of the batch parsed and checked against what the store would
refuse (results/records.py: check_storable), then written in one exclusive transaction, all or nothing. A run
is identified by its run id and its canonical JSON's hash: a run the store, or an earlier file of the batch,
already holds adds nothing; another outcome under a known run id is refused, naming what differs; a run
deleted from the store (`jaxbench runs delete`, results/quarantine.py) is not taken again.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_ingest_atomic.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from jaxbench.core.ci import github_job_url
from jaxbench.core.collector import collector_paused
from jaxbench.core.urls import scrub_url
from jaxbench.results import schema, store, writes
from jaxbench.results.ingest import read_result_file
from jaxbench.results.quarantine import Decision
from jaxbench.results.records import IngestError, ResultFile, check_storable
from jaxbench.results.run_identity import RUN_FIELDS, Measurement, RunOutcome


@dataclasses.dataclass(frozen=True)
class IngestSummary:
    added: list[tuple[Path, int]]
    skipped: list[Path]
    """Files whose run the store already held, or an earlier file of the batch: nothing added."""
    deleted: list[Path] = dataclasses.field(default_factory=list)
    """Files whose run was deleted from the store: not taken again."""


LOOKUP_CHUNK = 500
"""Values per `IN (...)` lookup: SQLite allows 32,766 bound parameters a statement, and a backfill is
thousands of files."""


def _chunks(values: Sequence[str]) -> list[Sequence[str]]:
    return [values[start : start + LOOKUP_CHUNK] for start in range(0, len(values), LOOKUP_CHUNK)]


def _stored_hashes(session: Session, hashes: set[str]) -> set[str]:
    found: set[str] = set()
    for chunk in _chunks(sorted(hashes)):
        found.update(session.scalars(select(schema.Run.source_hash).where(schema.Run.source_hash.in_(chunk))))
    return found


def _deleted(session: Session, hashes: set[str], run_uids: set[str]) -> set[str]:
    """The content hashes and run ids, among these, of runs deleted from the store."""
    found: set[str] = set()
    for column, values in ((schema.RunDecision.source_hash, hashes), (schema.RunDecision.run_uid, run_uids)):
        for chunk in _chunks(sorted(values)):
            found.update(
                session.scalars(
                    select(column).where(schema.RunDecision.decision == Decision.DELETE, column.in_(chunk))
                )
            )
    return found


def _stored_outcomes(session: Session, run_uids: set[str]) -> dict[str, list[tuple[int, RunOutcome]]]:
    """What the store holds under each run id: its runs (more than one only in stores that took the same run
    twice before runs were identified by run id) with what each recorded."""
    recorded: dict[int, tuple[str, dict[str, object]]] = {}
    measured: dict[int, dict[str, Measurement]] = {}
    query = (
        select(
            schema.Run.id,
            schema.Run.run_uid,
            schema.Series.identity_hash,
            schema.Series.benchmark,
            schema.Series.metric,
            schema.Result.value,
            schema.Result.status,
            *(getattr(schema.Run, name) for name in RUN_FIELDS),
        )
        .join(schema.Result, schema.Result.run_id == schema.Run.id)
        .join(schema.Series, schema.Series.id == schema.Result.series_id)
    )
    for chunk in _chunks(sorted(run_uids)):
        for row in session.execute(query.where(schema.Run.run_uid.in_(chunk))):
            run_id, uid, series, benchmark, metric, value, result_status, *run_fields = row
            recorded[run_id] = (str(uid), dict(zip(RUN_FIELDS, run_fields, strict=True)))  # uid: it matched
            measured.setdefault(run_id, {})[series] = Measurement(benchmark, metric, value, result_status)
    outcomes: dict[str, list[tuple[int, RunOutcome]]] = {}
    for run_id, (uid, fields) in sorted(recorded.items()):
        outcomes.setdefault(uid, []).append((run_id, RunOutcome(fields, measured[run_id])))
    return outcomes


def _another_result(file: ResultFile, there: str, difference: str) -> IngestError:
    field = file.field_names.get("runs.run_uid", "run_uid")
    return IngestError(
        f"{file.path}: {field}: {file.run.run_uid} {there}, with another outcome ({difference}); a run id "
        "names one run, so a rerun needs its own"
    )


def _repeats_in_batch(files: Sequence[ResultFile]) -> set[int]:
    """Indexes of the files that hold the run of an earlier file: the same content, or the same run id with
    the same outcome. Another outcome under an earlier file's run id is refused."""
    first_by_hash: dict[str, ResultFile] = {}
    first_by_uid: dict[str, ResultFile] = {}
    repeats = set()
    for index, file in enumerate(files):
        run = file.run
        if first_by_hash.setdefault(run.source_hash, file) is not file:
            repeats.add(index)
            continue
        if run.run_uid is None:
            continue
        earlier = first_by_uid.setdefault(run.run_uid, file)
        if earlier is file:
            continue
        difference = RunOutcome.from_run(run).difference(RunOutcome.from_run(earlier.run))
        if difference is not None:
            raise _another_result(file, f"is also the run id of {earlier.path}", difference)
        repeats.add(index)
    return repeats


def _deleted_files(session: Session, files: Sequence[ResultFile], candidates: list[int]) -> set[int]:
    """Indexes (among `candidates`) of the files whose run was deleted from the store, by content hash,
    file hash or run id."""
    gone = _deleted(
        session,
        {h for i in candidates for h in (files[i].run.source_hash, files[i].file_hash)},
        {uid for i in candidates if (uid := files[i].run.run_uid)},
    )
    return {
        i for i in candidates if gone & {files[i].run.source_hash, files[i].file_hash, files[i].run.run_uid}
    }


def _stored_already(session: Session, files: Sequence[ResultFile], candidates: list[int]) -> set[int]:
    """Indexes (among `candidates`) of the files whose run the store holds: by content hash, by the hash of
    the file's bytes (stores ingested before content hashes), or by run id with the same results. Another
    result under a stored run id is refused."""
    stored = _stored_hashes(
        session, {h for i in candidates for h in (files[i].run.source_hash, files[i].file_hash)}
    )
    outcomes = _stored_outcomes(session, {uid for i in candidates if (uid := files[i].run.run_uid)})
    known = set()
    for index in candidates:
        file = files[index]
        if file.run.source_hash in stored or file.file_hash in stored:
            known.add(index)
            continue
        under_run_id = outcomes.get(file.run.run_uid or "", [])
        if not under_run_id:
            continue
        outcome = RunOutcome.from_run(file.run)
        differences = [outcome.difference(theirs) for _, theirs in under_run_id]
        if None not in differences:
            run_id = under_run_id[0][0]
            raise _another_result(file, f"is already in the store (run {run_id})", str(differences[0]))
        known.add(index)
    return known


@collector_paused()  # a backfill builds objects of thousands of files, none of them in a cycle
def ingest(
    engine: Engine,
    paths: Sequence[Path],
    *,
    night: dt.date | None = None,
    ci_job_url: str | None = None,
    checked: Callable[[], None] | None = None,
) -> IngestSummary:
    """Parse every file and check it against what the store would refuse (one bad file stops everything,
    nothing written), then write them all in one transaction: all or nothing. A run the store already holds,
    or that an earlier file of the batch holds, adds nothing, nor does one deleted from the store; another
    outcome under a known run id is refused. Without a job link, the current GitHub Actions job's is
    used. `checked` is called after each file is read and checked (a progress bar: that is where the time
    goes)."""
    job_url = ci_job_url or github_job_url(os.environ)
    ci_job_url = scrub_url(job_url) if job_url else None
    files = []
    for path in paths:
        file = read_result_file(path, night=night, ci_job_url=ci_job_url)
        check_storable(file)
        files.append(file)
        if checked is not None:
            checked()
    repeats = _repeats_in_batch(files)
    with store.transaction(engine, exclusive=True) as session:
        candidates = [i for i in range(len(files)) if i not in repeats]
        gone = _deleted_files(session, files, candidates)
        candidates = [i for i in candidates if i not in gone]
        known = _stored_already(session, files, candidates)
        writing = [i for i in candidates if i not in known]
        written = dict(zip(writing, writes.write_runs(session, [files[i].run for i in writing]), strict=True))
    added = [(files[i].path, run_id) for i, run_id in written.items() if run_id is not None]
    skipped = [file.path for i, file in enumerate(files) if written.get(i) is None and i not in gone]
    return IngestSummary(added, skipped, [files[i].path for i in sorted(gone)])
