"""A `Report` from a detection: the adapter between the store's judgements and the renderers."""

from __future__ import annotations

import datetime as dt

from results import schema
from results.judgement.detect import Detection
from results.judgement.verdicts import SeriesAnalysis, worse
from results.judgement.vocabulary import HumanVerdict, IncidentDetail, IncidentKind, IncidentState
from results.report.backends import backends_tables
from results.report.model import (
    Baseline,
    ChangePointView,
    IncidentSeries,
    IncidentView,
    Report,
    Segment,
    SeriesPoint,
    SeriesView,
)


def series_view(analysis: SeriesAnalysis) -> SeriesView:
    history, identity = analysis.history, analysis.history.identity
    screen = analysis.screen
    baseline = None
    if screen.baseline_median is not None and screen.band_low is not None and screen.band_high is not None:
        baseline = Baseline(screen.baseline_median, screen.band_low, screen.band_high)
    return SeriesView(
        key=history.key,
        benchmark=identity.benchmark,
        metric=identity.metric,
        unit=identity.unit,
        higher_is_better=identity.higher_is_better,
        hardware=identity.hardware.label(),
        flavor=identity.flavor,
        settings={name: "" if value is None else str(value) for name, value in identity.settings},
        points=[SeriesPoint(n.night, n.value, n.status, n.run_id) for n in history.nights],
        segments=[Segment(start, stop, mean) for start, stop, mean in analysis.segments],
        change_points=[
            ChangePointView(
                index,
                history.nights[index].night,
                cp.magnitude,
                cp.pvalue,
                worse(cp.magnitude, identity.higher_is_better),
            )
            for index, cp in analysis.change_points
        ],
        baseline=baseline,
        state=analysis.state,
        change_vs_baseline=screen.change,
        backend=identity.backend,
    )


def incident_view(row: schema.Incident, verdicts: dict[str, HumanVerdict]) -> IncidentView:
    detail = IncidentDetail.from_json(row.details)
    series = [IncidentSeries(s.key, s.benchmark, s.metric, s.magnitude, s.state) for s in detail.series]
    worst = max(series, key=lambda s: abs(s.magnitude), default=None)
    summary = f"{len(series)} series on {row.hardware}"
    if worst is not None and worst.magnitude:
        summary += f"; largest change {worst.magnitude:+.1%} in {worst.benchmark} {worst.metric}"
    if detail.problems:
        summary += "; " + "; ".join(detail.problems[:3])
    return IncidentView(
        id=row.id,
        fingerprint=row.fingerprint,
        kind=IncidentKind(row.kind),
        state=IncidentState(row.state),
        hardware=row.hardware,
        night=row.night,
        last_good_night=detail.last_good_night,
        series=series,
        components=list(detail.components),
        flag_changes=list(detail.flag_changes),
        env_changes=list(detail.env_changes),
        verdict=verdicts.get(row.fingerprint),
        summary=summary,
    )


def build_report(detection: Detection, store: str) -> Report:
    series = sorted(
        (series_view(a) for a in detection.analyses),
        key=lambda s: (s.benchmark, s.hardware, s.metric, s.key),
    )
    return Report(
        generated_at=dt.datetime.now(dt.UTC),
        store=store,
        series=series,
        incidents=[incident_view(row, detection.verdicts) for row in detection.incidents],
        backends=backends_tables(series),
    )
