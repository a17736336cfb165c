"""A store holding one incident between two runs, as the nightly would have opened it: the last good and the
first bad run of one configuration, one moved component, and the incident with its series. For triage's
tests and trials (benchmarks/triage_trials.py), which need an incident to triage and no history behind it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine

from jaxbench.results import schema, store
from jaxbench.results.judgement.vocabulary import AffectedSeries, ComponentRange, IncidentDetail, SeriesState


def add_incident(
    engine: Engine,
    *,
    component: str,
    repository: str,
    good: str,
    bad: str,
    config: Mapping[str, Any],
    config_hash: str,
    kind: str = "throughput",
    night: dt.date = dt.date(2026, 10, 11),
    magnitude: float = 0.3,
    fingerprint: str | None = None,
    by_version: bool = False,
) -> int:
    """The incident's id: runs of `config` on the night before `night` (component at `good`) and on `night`
    (at `bad`), and an open incident of `kind` between them, its series moved by `magnitude`. `by_version`:
    `good` and `bad` are the component's versions, as a run of a published wheel records them, not commits."""
    with store.transaction(engine) as session:
        runs = []
        for day, commit in ((night - dt.timedelta(days=1), good), (night, bad)):
            run = schema.Run(
                source_hash=f"{component}-{commit}-{day}",
                source_kind="harness",
                night=day,
                hosts=1,
                status="ok",
                config=dict(config),
                config_hash=config_hash,
                environment={},
                ingested_at=dt.datetime.now(dt.UTC),
                components=[
                    schema.Component(
                        name=component,
                        repository=repository,
                        commit=None if by_version else commit,
                        version=commit if by_version else None,
                    )
                ],
            )
            session.add(run)
            session.flush()
            runs.append(run.id)
        series = AffectedSeries(
            key="k", benchmark="llama2-tiny", metric="m", magnitude=magnitude, state=SeriesState.REGRESSION
        )
        detail = IncidentDetail(
            series=(series,), components=(ComponentRange(component, repository, good, bad, None),)
        )
        row = schema.Incident(
            fingerprint=fingerprint or f"{good[:32]}{bad[:32]}",
            kind=kind,
            state="open",
            hardware="cpu",
            night=night,
            last_good_run_id=runs[0],
            first_bad_run_id=runs[1],
            details=detail.to_json(),
            computed_at=dt.datetime.now(dt.UTC),
        )
        session.add(row)
        session.flush()
        return row.id
