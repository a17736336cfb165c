"""The nightly judgement over the whole store: load histories, judge every series, and replace the derived
tables (change points, incidents) with the result. Human verdicts are kept by incident fingerprint.

    jaxbench detect        # exits non-zero while a regression incident is open
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable

from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session

from jaxbench.results import schema
from jaxbench.results.detection.settings import DEFAULT_SETTINGS, DetectionSettings
from jaxbench.results.history import History, RunContext, load_history_views, load_run_contexts
from jaxbench.results.judgement import correctness
from jaxbench.results.judgement.components import (
    component_ranges,
    flag_and_env_changes,
    program_change,
    time_change,
)
from jaxbench.results.judgement.reciprocal import judge_measurements
from jaxbench.results.judgement.verdicts import IncidentDraft, SeriesAnalysis, analyse, incidents
from jaxbench.results.judgement.vocabulary import (
    ComponentRange,
    HumanVerdict,
    IncidentDetail,
    IncidentState,
    RecoveryDetail,
    SettingChange,
)
from jaxbench.results.store import transaction

FINAL_LOSS_METRIC = "loss/final_window"
RESOLVING_VERDICTS = {HumanVerdict.INFRASTRUCTURE, HumanVerdict.NOISE, HumanVerdict.EXPECTED}


@dataclasses.dataclass(frozen=True)
class Detection:
    analyses: list[SeriesAnalysis]
    """The judged series: the nightly's runs of every series the nightly ran."""
    incidents: list[schema.Incident]
    verdicts: dict[str, HumanVerdict]
    histories: list[History] = dataclasses.field(default_factory=list)
    """Every series with every run, ad hoc included: what reports show (empty: the analyses' histories)."""

    @property
    def open_incidents(self) -> list[schema.Incident]:
        return [i for i in self.incidents if i.state == IncidentState.OPEN.value]


def _tonight(histories: list[History]) -> dict[tuple[str, str], dt.date]:
    """The newest night each benchmark ran on each hardware class (any metric, failed runs included)."""
    newest: dict[tuple[str, str], dt.date] = {}
    for history in histories:
        ran = [n.night for n in history.nights if n.status != "gap"]
        if ran:
            key = (history.identity.benchmark, history.identity.hardware.label())
            newest[key] = max(newest.get(key, ran[-1]), ran[-1])
    return newest


def _loss_findings(session: Session, history: History) -> tuple[list[correctness.Finding], int | None]:
    """The newest run's correctness findings, and the night index where its streak of failing runs began
    (each run checked against its own predecessors), so that a persisting regression keeps its first night."""
    runs = [n for n in history.nights if n.run_id is not None and n.status in ("ok", "nan")]
    if history.identity.metric != FINAL_LOSS_METRIC or not runs or runs[-1] is not history.nights[-1]:
        return [], None
    newest = runs[-1]
    same_config = [n for n in runs if n.config_hash == newest.config_hash]
    newest_runs = same_config[-1 - correctness.HISTORY_RUNS :]
    contexts = load_run_contexts(session, {n.run_id for n in newest_runs if n.run_id is not None})
    latest = contexts[newest.run_id]  # type: ignore[index]
    past = [contexts[n.run_id].loss_curve or [] for n in same_config[:-1] if n.run_id in contexts]
    findings = correctness.check_run(latest.loss_curve, latest.loss_optimum, past)
    if not findings:
        return [], None
    # Failing tonight: each earlier run against the runs before it, back to the first that passed.
    window = same_config[-1 - 2 * correctness.HISTORY_RUNS :]
    earlier = {n.run_id for n in window if n.run_id is not None and n.run_id not in contexts}
    contexts |= load_run_contexts(session, earlier)
    checked = [None if n.run_id is None else contexts.get(n.run_id) for n in window]
    first = correctness.flagged_since(
        [None if c is None else c.loss_curve for c in checked],
        [None if c is None else c.loss_optimum for c in checked],
    )
    index = len(history.nights) - 1
    if first is not None:
        index = next(i for i, night in enumerate(history.nights) if night is window[first])
    return findings, index


Moved = tuple[tuple[ComponentRange, ...], tuple[SettingChange, ...], tuple[SettingChange, ...]]


def _edges(
    contexts: dict[int, RunContext], before: int | None, after: int | None
) -> tuple[RunContext, RunContext] | None:
    """The two runs' contexts, or None where either is unknown."""
    first = contexts.get(before) if before is not None else None
    second = contexts.get(after) if after is not None else None
    return None if first is None or second is None else (first, second)


def _moved(contexts: dict[int, RunContext], before: int | None, after: int | None) -> Moved:
    """The components, XLA flags and environment variables that differ between two runs (none where
    either is unknown)."""
    edges = _edges(contexts, before, after)
    if edges is None:
        return (), (), ()
    first, second = edges
    flags, env = flag_and_env_changes(first.environment, second.environment)
    return tuple(component_ranges(first.components, second.components)), tuple(flags), tuple(env)


def _detail(draft: IncidentDraft, contexts: dict[int, RunContext]) -> IncidentDetail:
    components, flags, env = _moved(contexts, draft.last_good_run, draft.first_bad_run)
    edges = _edges(contexts, draft.last_good_run, draft.first_bad_run)
    recovery = None
    # A transient: what moved between its last bad run and the first run that recovered.
    if draft.recovery is not None:
        recovery_moves = _moved(contexts, draft.recovery.last_bad_run, draft.recovery.recovered_run)
        recovery = RecoveryDetail(
            recovered_night=draft.recovery.recovered_night,
            components=recovery_moves[0],
            flag_changes=recovery_moves[1],
            env_changes=recovery_moves[2],
        )
    return IncidentDetail(
        last_good_night=draft.last_good_night,
        series=tuple(draft.series),
        components=components,
        flag_changes=flags,
        env_changes=env,
        problems=tuple(draft.problems),
        recovery=recovery,
        program=program_change(edges[0].program, edges[1].program) if edges else None,
        time=time_change(edges[0].profile, edges[1].profile) if edges else None,
    )


def _latest_verdicts(session: Session) -> dict[str, HumanVerdict]:
    rows = session.execute(select(schema.Verdict).order_by(schema.Verdict.created_at, schema.Verdict.id))
    return {row.incident_fingerprint: HumanVerdict(row.verdict) for row in rows.scalars()}


def _store_change_points(session: Session, analyses: list[SeriesAnalysis], now: dt.datetime) -> None:
    session.execute(delete(schema.ChangePointRow))
    session.add_all(
        schema.ChangePointRow(
            series_id=a.history.series_id,
            night=a.history.nights[index].night,
            magnitude=cp.magnitude,
            pvalue=cp.pvalue,
            mean_before=cp.mean_before,
            mean_after=cp.mean_after,
            detector=cp.detector,
            computed_at=now,
        )
        for a in analyses
        for index, cp in a.change_points
    )


REDATED_NIGHTS = 2
"""An open regression whose start the detectors place up to this many nights from where they first did, on a
series it already holds, is that incident still: as nights accumulate, a change point may move a night or two
(a slightly slow night before the step), and a new date must not close the incident and open another, with a
second issue and a triage of a range that holds nothing."""


def _ongoing_incident(rows: Iterable[schema.Incident], draft: IncidentDraft) -> schema.Incident | None:
    keys = {series.key for series in draft.series}
    for row in rows:
        if (
            row.state == IncidentState.OPEN.value
            and row.kind == draft.kind.value
            and row.hardware == draft.hardware
            and abs((row.night - draft.night).days) <= REDATED_NIGHTS
            and keys & {series.key for series in IncidentDetail.from_json(row.details).series}
        ):
            return row
    return None


def _store_incidents(
    session: Session, drafts: list[IncidentDraft], verdicts: dict[str, HumanVerdict], now: dt.datetime
) -> list[schema.Incident]:
    contexts = load_run_contexts(
        session,
        {
            run
            for d in drafts
            for run in (
                d.last_good_run,
                d.first_bad_run,
                *((d.recovery.last_bad_run, d.recovery.recovered_run) if d.recovery else ()),
            )
            if run is not None
        },
    )
    existing = {row.fingerprint: row for row in session.execute(select(schema.Incident)).scalars()}
    seen = set()
    for draft in drafts:
        if draft.fingerprint not in existing and draft.state is IncidentState.OPEN:
            ongoing = _ongoing_incident(existing.values(), draft)
            if ongoing is not None:  # the regression goes on: its first dating, issue and triage stand
                seen.add(ongoing.fingerprint)
                continue
        state = draft.state
        if verdicts.get(draft.fingerprint) in RESOLVING_VERDICTS:
            state = IncidentState.RESOLVED
        row = existing.get(draft.fingerprint) or schema.Incident(fingerprint=draft.fingerprint)
        row.kind, row.state, row.hardware, row.night = (
            draft.kind.value,
            state.value,
            draft.hardware,
            draft.night,
        )
        row.last_good_run_id, row.first_bad_run_id = draft.last_good_run, draft.first_bad_run
        row.details, row.computed_at = _detail(draft, contexts).to_json(), now
        session.add(row)
        seen.add(draft.fingerprint)
    for fingerprint, row in existing.items():
        if fingerprint not in seen and row.state == IncidentState.OPEN.value:
            row.state, row.computed_at = IncidentState.RECOVERED.value, now  # its evidence is gone
    session.flush()
    return sorted(session.execute(select(schema.Incident)).scalars(), key=lambda i: (i.night, i.id))


def detect(engine: Engine, settings: DetectionSettings = DEFAULT_SETTINGS) -> Detection:
    now = dt.datetime.now(dt.UTC)
    with transaction(engine) as session:
        # Only the nightly's runs are judged: an ad-hoc run never opens an incident, and a series or
        # benchmark only ever run by hand never counts as missing tonight.
        views = load_history_views(session)
        histories = views.nightly
        tonight = _tonight(histories)
        validity_only = dataclasses.replace(settings, detectors=())

        def judge(history: History, detecting: bool) -> SeriesAnalysis:
            return analyse(
                history,
                tonight=tonight.get((history.identity.benchmark, history.identity.hardware.label())),
                loss_check=_loss_findings(session, history),
                settings=settings if detecting else validity_only,
            )

        # A benchmark's throughput, TFLOP/s and MFU take their verdict from its timing: one measurement,
        # run through the detectors once.
        analyses = judge_measurements([h for h in histories if h.nights], judge)
        verdicts = _latest_verdicts(session)
        _store_change_points(session, analyses, now)
        rows = _store_incidents(session, incidents(analyses), verdicts, now)
        session.expunge_all()
    return Detection(analyses, rows, verdicts, views.every)


def record_verdict(
    engine: Engine, incident_id: int, verdict: HumanVerdict, author: str | None, note: str | None
) -> str:
    with transaction(engine) as session:
        incident = session.get(schema.Incident, incident_id)
        if incident is None:
            raise LookupError(f"no incident {incident_id}")
        session.add(
            schema.Verdict(
                incident_fingerprint=incident.fingerprint,
                verdict=verdict.value,
                author=author,
                note=note,
                created_at=dt.datetime.now(dt.UTC),
            )
        )
        if verdict in RESOLVING_VERDICTS:
            incident.state = IncidentState.RESOLVED.value
        return incident.fingerprint
