"""A `Report` from a detection: the adapter between the store's judgements and the renderers, and the small
loader of the runs behind the series (the dashboard's run pages)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from jaxbench.core.urls import scrub_url

# The detectors (numpy, scipy) through the package, on first use: an empty store never loads them.
from jaxbench.results import detection, schema
from jaxbench.results.detection.findings import NOT_SCREENED, SpanKind
from jaxbench.results.detection.settings import DEFAULT_SETTINGS, ScreenSettings
from jaxbench.results.history import History, identity_of
from jaxbench.results.identity import (
    HardwareClass,
    SettingsUse,
    default_settings,
    variant_family,
    variant_text,
)
from jaxbench.results.judgement.detect import Detection
from jaxbench.results.judgement.verdicts import SeriesAnalysis, worse
from jaxbench.results.judgement.vocabulary import (
    HumanVerdict,
    IncidentDetail,
    IncidentKind,
    IncidentState,
    SeriesState,
)
from jaxbench.results.quarantine import quarantined_runs
from jaxbench.results.report.backends import backends_tables
from jaxbench.results.report.charts import STEP_TIME_METRIC
from jaxbench.results.report.formatting import format_change
from jaxbench.results.report.model import (
    Baseline,
    ChangePointView,
    ComponentView,
    IncidentSeries,
    IncidentView,
    Marker,
    Report,
    RunEntry,
    RunResultView,
    RunView,
    Segment,
    SeriesPoint,
    SeriesView,
)
from jaxbench.results.report.run_list import run_entry


def markers_of(analysis: SeriesAnalysis) -> list[Marker]:
    """The findings of an analysis as plot markers, oldest first: the one place that turns each kind of
    finding into words. Steps mark their first night; transients and drifts the span of their nights."""
    nights, higher_is_better = analysis.history.nights, analysis.history.identity.higher_is_better

    def direction(change: float) -> str:
        return "worse" if worse(change, higher_is_better) else "better"

    markers = [
        Marker(
            "step",
            nights[index].night,
            nights[index].night,
            f"step {format_change(cp.magnitude)} ({direction(cp.magnitude)}, p = {cp.pvalue:.2g})",
        )
        for index, cp in analysis.change_points
    ]
    for start, stop, span in analysis.spans:
        first, last = nights[start].night, nights[max(stop - 1, start)].night
        if span.kind is SpanKind.TRANSIENT:
            label = (
                f"transient {format_change(span.magnitude)} ({direction(span.magnitude)}) for "
                f"{stop - start} night{'s' if stop - start != 1 else ''}, {first} to {last}"
            )
        else:
            pace = f", {span.slope * 100:+.3f}% a night" if span.slope is not None else ""
            change = f"{format_change(span.magnitude)} ({direction(span.magnitude)})"
            label = f"drift {change} from {first} to {last}{pace}"
        markers.append(Marker(span.kind.value, first, last, label))
    return sorted(markers, key=lambda m: m.start)


def unjudged(history: History) -> SeriesAnalysis:
    """A series with ad-hoc runs only: shown as it is, never judged."""
    return SeriesAnalysis(
        history=history,
        change_points=[],
        segments=[],
        screen=NOT_SCREENED,
        state=SeriesState.INSUFFICIENT_HISTORY,
        first_bad=None,
        magnitude=None,
        problems=[],
    )


def baseline_window(
    analysis: SeriesAnalysis, settings: ScreenSettings = DEFAULT_SETTINGS.screen
) -> tuple[dt.date, dt.date, int, bool] | None:
    """The nights the screen's baseline was taken over: its first and last night, how many with a value,
    and whether it is a drift's trend rather than their median; None where the screen judged nothing.

    The screen (results/detection/screen.py, screen_latest) keeps no window in its result: this is its
    choice made again from the same inputs. Its baseline is the newest `baseline_nights` valued nights of
    the current segment before the nights it judges (under a drift, the newest `drift_baseline_nights`);
    tests/results/test_dashboard_pages.py checks that their median is the screen's."""
    valid = [i for i, n in enumerate(analysis.history.nights) if n.value is not None]
    start = detection.segment_start([cp.index for _, cp in analysis.change_points], len(valid), settings)
    judged = min(len(settings.window_z), len(valid) - start - settings.min_history)
    if judged < 1:
        return None
    stop = len(valid) - judged
    first = max(start, stop - settings.baseline_nights, 0)
    trend_first = max(start, stop - settings.drift_baseline_nights, 0)
    drifting = any(span.kind is SpanKind.DRIFT for _, _, span in analysis.spans)
    trend = drifting and stop - trend_first >= 3  # the fewest nights a trend is fitted to (screen.py)
    if trend:
        first = trend_first
    nights = analysis.history.nights
    return nights[valid[first]].night, nights[valid[stop - 1]].night, stop - first, trend


def series_view(analysis: SeriesAnalysis, shown: History | None = None, variant: str = "") -> SeriesView:
    """`analysis` judged the nightly's runs; the view plots `shown` (default: the judged history), every run
    of the series, ad hoc included, with the judgement's change points and segments on their own nights.
    `variant`: the settings that differ from the benchmark's default (results.identity.variant_text)."""
    history, identity = analysis.history, analysis.history.identity
    shown = shown or history
    # The shown history has every night of the judged one (and maybe nights of ad-hoc runs only).
    positions = history.positions_in(shown)

    def at(index: int) -> int:
        return positions.get(index, index)

    screen = analysis.screen
    baseline = None
    if screen.baseline_median is not None and screen.band_low is not None and screen.band_high is not None:
        window = baseline_window(analysis)
        first, last, count, trend = (None, None, 0, False) if window is None else window
        median, low, high = screen.baseline_median, screen.band_low, screen.band_high
        baseline = Baseline(median, low, high, first, last, count, trend)
    return SeriesView(
        **identity.described(),
        settings={name: "" if value is None else str(value) for name, value in identity.settings},
        points=[
            SeriesPoint(n.night, n.value, n.status, n.run_id, n.runs, n.ad_hoc_runs, n.run_ids)
            for n in shown.nights
        ],
        segments=[Segment(at(start), at(stop), mean) for start, stop, mean in analysis.segments],
        change_points=[
            ChangePointView(
                at(index),
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
        markers=markers_of(analysis),
        variant=variant,
        ad_hoc=shown.ad_hoc,
        noise=screen.noise,
        resolvable=screen.resolvable,
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
        recovery=detail.recovery,
        program=detail.program,
        time=detail.time,
    )


RUN_PAGE_NIGHTS = 90
"""Nights of each series whose runs get a page on the dashboard (the newest): a year of a nightly with
hundreds of runs a night would otherwise be half a gigabyte of pages; older points show their run id."""


def referenced_runs(detection: Detection, nights: int = RUN_PAGE_NIGHTS) -> set[int]:
    """The runs behind the newest `nights` points of every series (every run of the night, ad hoc
    included), and the runs every incident names."""
    histories = detection.histories or [a.history for a in detection.analyses]
    recent = [n for h in histories for n in h.nights[-nights:]]
    ids = {run for n in recent for run in n.run_ids} | {n.run_id for n in recent if n.run_id is not None}
    named = {r for i in detection.incidents for r in (i.last_good_run_id, i.first_bad_run_id)}
    return ids | {r for r in named if r is not None}


def load_runs(session: Session, run_ids: Iterable[int]) -> dict[int, RunView]:
    """The runs `run_ids` with their components and results, in three queries."""
    ids = set(run_ids)
    if not ids:
        return {}
    components: dict[int, list[ComponentView]] = defaultdict(list)
    rows = session.execute(
        select(schema.Component).where(schema.Component.run_id.in_(ids)).order_by(schema.Component.name)
    ).scalars()
    for c in rows:
        components[c.run_id].append(ComponentView(c.name, c.repository, c.commit, c.version))
    results: dict[int, list[RunResultView]] = defaultdict(list)
    step_times: dict[int, list[float]] = {}
    query = (
        select(schema.Result, schema.Series)
        .join(schema.Series, schema.Series.id == schema.Result.series_id)
        .where(schema.Result.run_id.in_(ids))
        .order_by(schema.Result.id)
    )
    for result, series in session.execute(query):
        if series.metric == STEP_TIME_METRIC and result.samples:
            step_times[result.run_id] = [float(s) for s in result.samples]
        results[result.run_id].append(
            RunResultView(
                identity_of(series).key(),
                series.benchmark,
                series.metric,
                series.unit,
                result.value,
                result.status,
                result.reason,
            )
        )
    runs = session.execute(select(schema.Run).where(schema.Run.id.in_(ids))).scalars()
    return {
        run.id: RunView(
            id=run.id,
            night=run.night,
            status=run.status,
            reason=run.reason,
            source_kind=run.source_kind,
            run_uid=run.run_uid,
            started_at=run.started_at,
            finished_at=run.finished_at,
            image_ref=run.image_ref,
            image_digest=run.image_digest,
            ci_job_url=run.ci_job_url,
            hostname=run.hostname,
            hosts=run.hosts,
            config=dict(run.config or {}),
            environment={str(k): str(v) for k, v in (run.environment or {}).items()},
            components=components[run.id],
            results=results[run.id],
            schedule=run.schedule,
            source_hash=run.source_hash,
            program=run.program,
            profile=run.profile,
            loss_curve=run.loss_curve,
            loss_optimum=run.loss_optimum,
            step_times=step_times.get(run.id),
        )
        for run in runs
    }


def load_run_list(session: Session) -> list[RunEntry]:
    """Every run in the store as the runs page lists it, in two queries: the runs' own columns (the recipe's
    family and size read out of the stored config in the database), and what their results measured."""
    family, size = schema.Run.config["family"].as_string(), schema.Run.config["size"].as_string()
    runs = session.execute(
        select(schema.Run.id, schema.Run.night, schema.Run.schedule, schema.Run.status, family, size)
    ).all()
    measured: dict[int, list[tuple[str, str, str, str]]] = defaultdict(list)
    series = schema.Series
    columns = (series.benchmark, series.kind, series.backend, series.device_kind, series.devices_per_host)
    query = (
        select(schema.Result.run_id, *columns, series.hosts)
        .join(series, series.id == schema.Result.series_id)
        .distinct()
    )
    labels: dict[tuple[str, int, int], str] = {}
    for run_id, benchmark, kind, backend, device, devices, hosts in session.execute(query):
        label = labels.get((device, devices, hosts))
        if label is None:
            label = labels[(device, devices, hosts)] = HardwareClass(device, devices, hosts).label()
        measured[run_id].append((benchmark, kind, backend, label))
    quarantined = quarantined_runs(session)
    return [
        run_entry(run_id, night, schedule, status, family, size, measured[run_id], run_id in quarantined)
        for run_id, night, schedule, status, family, size in runs
    ]


def settings_use(shown: History, judged: SeriesAnalysis | None) -> SettingsUse:
    """How a series was run, from its every-run history and its judged (nightly) one, if any."""
    nightly = [n for n in judged.history.nights if n.runs] if judged else []
    return SettingsUse(
        shown.identity,
        nightly[-1].night if nightly else None,
        sum(n.runs for n in nightly),
        sum(n.runs for n in shown.nights),
    )


def build_report(
    detection: Detection,
    store: str,
    runs: dict[int, RunView] | None = None,
    run_list: list[RunEntry] | None = None,
) -> Report:
    judged = {a.history.series_id: a for a in detection.analyses}
    shown = detection.histories or [a.history for a in detection.analyses]
    defaults = default_settings(settings_use(h, judged.get(h.series_id)) for h in shown)
    series = sorted(
        (
            series_view(
                judged.get(h.series_id) or unjudged(h),
                h,
                variant_text(h.identity.settings, defaults.get(variant_family(h.identity))),
            )
            for h in shown
        ),
        key=lambda s: (s.benchmark, s.hardware, s.metric, s.variant, s.key),
    )
    return Report(
        generated_at=dt.datetime.now(dt.UTC),
        store=scrub_url(store),  # published: no user, no password= parameter (core/urls.py)
        series=series,
        incidents=[incident_view(row, detection.verdicts) for row in detection.incidents],
        # Each backend at its own default settings: a variant run by hand after the nightly is no backend's
        # headline number.
        backends=backends_tables(s for s in series if not s.variant),
        runs=runs or {},
        run_list=run_list or [],
    )
