"""An open regression keeps its identity while it goes on: when more nights move the detectors' estimate of
where it began by a night or two, on a series it already holds, the incident (its fingerprint, issue and
triage) stays as it was, instead of closing and reopening under a new date with a triage of a range that
holds nothing. A real local nightly did that: its step incident first dated 2026-10-21 was re-dated to
2026-10-20 two nights later."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy import select

from jaxbench.results import schema, store
from jaxbench.results.judgement.detect import REDATED_NIGHTS, _store_incidents
from jaxbench.results.judgement.verdicts import IncidentDraft
from jaxbench.results.judgement.vocabulary import AffectedSeries, IncidentKind, IncidentState, SeriesState

NOW = dt.datetime(2026, 10, 24, tzinfo=dt.UTC)
FIRST = dt.date(2026, 10, 21)


def draft(night: dt.date, key: str = "step", kind: IncidentKind = IncidentKind.THROUGHPUT) -> IncidentDraft:
    series = [
        AffectedSeries(
            key=key, benchmark="llama2-tiny", metric="m", magnitude=0.5, state=SeriesState.REGRESSION
        )
    ]
    return IncidentDraft(kind, "1 x cpu x 1 host", night, IncidentState.OPEN, None, None, None, series)


def stored(url: str, drafts: list[IncidentDraft]) -> list[tuple[str, dt.date, str]]:
    engine = store.connect(url)
    with store.transaction(engine) as session:
        _store_incidents(session, drafts, {}, NOW)
    with store.transaction(engine) as session:
        rows = session.execute(select(schema.Incident).order_by(schema.Incident.id)).scalars()
        return [(row.fingerprint, row.night, row.state) for row in rows]


def test_the_same_series_a_night_earlier_is_the_open_incident(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    (first,) = stored(url, [draft(FIRST)])
    assert stored(url, [draft(FIRST - dt.timedelta(days=1))]) == [first]
    assert stored(url, [draft(FIRST + dt.timedelta(days=REDATED_NIGHTS))]) == [first]


@pytest.mark.parametrize(
    "other",
    [
        draft(FIRST - dt.timedelta(days=REDATED_NIGHTS + 1)),  # too far: another regression
        draft(FIRST - dt.timedelta(days=1), key="compile"),  # another series
        draft(FIRST - dt.timedelta(days=1), kind=IncidentKind.COMPILE_TIME),  # another kind
    ],
)
def test_anything_further_or_elsewhere_is_a_new_incident(tmp_path: Path, other: IncidentDraft) -> None:
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    (first,) = stored(url, [draft(FIRST)])
    rows = stored(url, [other])
    assert len(rows) == 2 and rows[1][1] == other.night and rows[1][2] == IncidentState.OPEN.value
    assert rows[0] == (first[0], first[1], IncidentState.RECOVERED.value)  # its evidence is gone
