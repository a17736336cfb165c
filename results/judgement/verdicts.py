"""From nightly histories to judgements: per-series state and incidents. Pure: histories in, plain data out.

Order of judgement for a series' newest night: validity first (a failed, missing or reconfigured run is
flagged whatever its numbers), then correctness of the loss, then performance — the detectors the settings
list (results.detection): the nightly screen for the newest nights and the retrospective change points for
shifts the screen cannot see (small persistent steps, changes already absorbed into the baseline,
short-lived regressions).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_judgement.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from typing import TYPE_CHECKING

# The detectors themselves (numpy, scipy) through the package, on first use: a store with nothing to judge
# (`jaxbench report` on an empty one) never loads them.
from jaxbench.results import detection
from jaxbench.results.detection import NOT_SCREENED, ChangePoint, ScreenResult, ScreenStatus, Span, SpanKind
from jaxbench.results.detection.settings import DEFAULT_SETTINGS, DetectionSettings
from jaxbench.results.history import History
from jaxbench.results.judgement.correctness import Finding, Severity
from jaxbench.results.judgement.vocabulary import AffectedSeries, IncidentKind, IncidentState, SeriesState

if TYPE_CHECKING:
    from jaxbench.results.detection import Scale


@dataclasses.dataclass(frozen=True)
class SeriesAnalysis:
    history: History
    change_points: list[tuple[int, ChangePoint]]
    """(night index, change point)."""
    segments: list[tuple[int, int, float]]
    """(start, stop, mean) in night-index space."""
    screen: ScreenResult
    state: SeriesState
    first_bad: int | None
    """Night index where the current regression (or invalidity) starts."""
    magnitude: float | None
    problems: list[str]
    """Why the series is invalid, or the correctness findings."""
    spans: list[tuple[int, int, Span]] = dataclasses.field(default_factory=list)
    """(first night index, one past the last, span): the drifts and transients, in night-index space."""


def worse(change: float, higher_is_better: bool) -> bool:
    """Whether a relative change goes the bad way for a metric of this direction."""
    return change < 0 if higher_is_better else change > 0


def _validity_problems(history: History, tonight: dt.date | None) -> list[str]:
    nights = history.nights
    if not nights:
        return []
    newest = nights[-1]
    problems = []
    if tonight is not None and newest.night < tonight:
        problems.append(f"missing metric: no value on {tonight} while its benchmark ran")
    elif newest.status not in ("ok", "gap"):
        problems.append(f"run failed: {newest.status}")
    configured = [n for n in nights if n.config_hash is not None and n.status == "ok"]
    reconfigured = len(configured) >= 2 and configured[-2].config_hash != newest.config_hash
    if newest.status == "ok" and configured and configured[-1] is newest and reconfigured:
        problems.append("configuration changed since the previous run (steps, seed, optimizer, ...)")
    return problems


def scale_of(metric: str, values: list[float]) -> Scale:
    """Losses are judged on the linear scale (nats are already a logarithm, and their excess over the
    optimum approaches zero); every other positive quantity on the log scale, where a timing and its
    reciprocal move equally far and bands are ratios of the baseline."""
    return detection.Scale.LINEAR if metric.startswith("loss/") else detection.Scale.for_values(values)


def analyse(
    history: History,
    *,
    tonight: dt.date | None = None,
    loss_check: tuple[list[Finding], int | None] = ([], None),
    settings: DetectionSettings = DEFAULT_SETTINGS,
) -> SeriesAnalysis:
    """Judge one series. `tonight`: the newest night its benchmark ran; `loss_check`: the newest run's
    correctness findings and the night index where the streak of failing runs began (None: the newest)."""
    findings, failing_since = loss_check
    nights = history.nights
    valid = [i for i, n in enumerate(nights) if n.value is not None]
    clean = [float(value) for n in nights if (value := n.value) is not None]
    higher = history.identity.higher_is_better
    found = detection.run_detectors(
        clean, higher_is_better=higher, settings=settings, scale=scale_of(history.identity.metric, clean)
    )
    cps = list(found.change_points)
    located = [(valid[cp.index], cp) for cp in cps]
    screen = found.screen if found.screen is not None else NOT_SCREENED

    # Segments in night-index space: a segment ends where the next one's first valued night is.
    def night_of(index: int) -> int:
        return valid[index] if index < len(valid) else len(nights)

    in_nights = [(night_of(a), night_of(b), mean) for a, b, mean in detection.segments(clean, cps)]
    spans = [(night_of(span.start), night_of(span.stop), span) for span in found.spans]

    invalid = _validity_problems(history, tonight)
    problems = invalid + [f"{f.check}: {f.detail}" for f in findings]
    hard = any(f.severity is Severity.HARD for f in findings) or bool(invalid)
    state, first_bad, magnitude = performance_state(screen, located, valid, higher, settings)
    streak_start = len(nights) - 1 if failing_since is None else failing_since
    if hard:
        state, first_bad, magnitude = SeriesState.INVALID, streak_start if findings else len(nights) - 1, None
    elif findings:
        state, first_bad, magnitude = SeriesState.REGRESSION, streak_start, None
    return SeriesAnalysis(history, located, in_nights, screen, state, first_bad, magnitude, problems, spans)


def performance_state(
    screen: ScreenResult,
    cps: list[tuple[int, ChangePoint]],
    valid: list[int],
    higher: bool,
    settings: DetectionSettings = DEFAULT_SETTINGS,
) -> tuple[SeriesState, int | None, float | None]:
    """The verdict on a series' newest night from its numbers alone.

    A change point in the worse direction that is still in effect (the last one) is a regression if it also
    clears the screen's practical threshold; the change-point pass locates the start of a shift exactly,
    the screen only knows its newest nights."""
    if (
        cps
        and worse(cps[-1][1].magnitude, higher)
        and detection.practical(cps[-1][1].magnitude, settings.screen.min_change)
        and not _back_from_a_short_improvement(cps, higher, settings)
    ):
        index, cp = cps[-1]
        return SeriesState.REGRESSION, index, cp.magnitude
    if screen.status is ScreenStatus.REGRESSION:
        first = valid[len(valid) - screen.nights]
        return SeriesState.REGRESSION, first, screen.change
    if screen.status is ScreenStatus.SUSPECTED:
        return SeriesState.SUSPECTED, valid[-1], screen.change
    if screen.status is ScreenStatus.IMPROVEMENT or (cps and not worse(cps[-1][1].magnitude, higher)):
        return (
            SeriesState.IMPROVEMENT,
            None,
            screen.change if screen.change is not None else cps[-1][1].magnitude,
        )
    if screen.status is ScreenStatus.INSUFFICIENT_HISTORY:
        return SeriesState.INSUFFICIENT_HISTORY, None, None
    if screen.status is ScreenStatus.TOO_NOISY:
        return SeriesState.TOO_NOISY, None, screen.change
    return SeriesState.OK, None, screen.change


def _back_from_a_short_improvement(
    cps: list[tuple[int, ChangePoint]], higher: bool, settings: DetectionSettings
) -> bool:
    """Whether the newest change point only takes back an improvement of at most transient_max_nights
    (valued nights) before it: a level that dropped for two nights and came back is no regression, where the
    level after it is not practically worse than the one before the improvement."""
    if len(cps) < 2:
        return False
    improvement, back = cps[-2][1], cps[-1][1]
    if (
        worse(improvement.magnitude, higher)
        or back.index - improvement.index > settings.episodes.transient_max_nights
    ):
        return False
    if improvement.mean_before == 0:
        return False
    net = back.mean_after / improvement.mean_before - 1
    return not (worse(net, higher) and detection.practical(net, settings.screen.min_change))


def kind_of(metric: str) -> IncidentKind:
    if metric.startswith("loss/"):
        return IncidentKind.CORRECTNESS
    if metric.startswith("memory/"):
        return IncidentKind.MEMORY
    if metric == "perf/compile_time_s":
        return IncidentKind.COMPILE_TIME
    if metric.startswith("size/"):  # an image's (results/build_record.py)
        return IncidentKind.IMAGE_SIZE
    if metric.startswith("build/"):
        return IncidentKind.BUILD_TIME
    return IncidentKind.THROUGHPUT


@dataclasses.dataclass(frozen=True)
class Recovery:
    last_bad_run: int | None
    recovered_run: int | None
    recovered_night: dt.date


@dataclasses.dataclass
class IncidentDraft:
    kind: IncidentKind
    hardware: str
    night: dt.date
    state: IncidentState
    last_good_run: int | None
    first_bad_run: int | None
    last_good_night: dt.date | None
    series: list[AffectedSeries] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    recovery: Recovery | None = None
    """A transient's other end: the last bad run and the first one back."""

    @property
    def fingerprint(self) -> str:
        text = f"{self.kind.value}|{self.hardware}|{self.night.isoformat()}"
        return hashlib.sha256(text.encode()).hexdigest()


def _last_good(analysis: SeriesAnalysis, first_bad: int) -> tuple[int | None, dt.date | None]:
    for index in range(first_bad - 1, -1, -1):
        night = analysis.history.nights[index]
        if night.value is not None:
            return night.run_id, night.night
    return None, None


@dataclasses.dataclass(frozen=True)
class _Episode:
    first_bad: int
    state: IncidentState
    magnitude: float | None
    recovered: int | None = None
    """A transient's first night back (night index): the other end of its one finding."""


def _recovery(analysis: SeriesAnalysis, recovered: int) -> Recovery | None:
    nights = analysis.history.nights
    if recovered >= len(nights):
        return None
    last_bad, _ = _last_good(analysis, recovered)  # the last valued night before the recovery: still bad
    return Recovery(last_bad, nights[recovered].run_id, nights[recovered].night)


def _episodes(analysis: SeriesAnalysis) -> list[_Episode]:
    """Every regression in this series' history: steps that a later change undid, transients (one finding
    with both ends), and the regression or invalidity in effect now. Drifts are none: no night began them."""
    higher = analysis.history.identity.higher_is_better
    episodes: list[_Episode] = []
    for position, (index, cp) in enumerate(analysis.change_points):
        later = analysis.change_points[position + 1 :]
        if worse(cp.magnitude, higher) and later:
            episodes.append(_Episode(index, IncidentState.RECOVERED, cp.magnitude))
    for start, stop, span in analysis.spans:
        if span.kind is SpanKind.TRANSIENT and worse(span.magnitude, higher):
            episodes.append(_Episode(start, IncidentState.RECOVERED, span.magnitude, stop))
    if analysis.state in (SeriesState.REGRESSION, SeriesState.INVALID) and analysis.first_bad is not None:
        episodes.append(_Episode(analysis.first_bad, IncidentState.OPEN, analysis.magnitude))
    return episodes


def incidents(analyses: list[SeriesAnalysis]) -> list[IncidentDraft]:
    """Group what moved on one night on one hardware class into one incident per kind."""
    drafts: dict[tuple[IncidentKind, str, dt.date], IncidentDraft] = {}
    for analysis in analyses:
        identity = analysis.history.identity
        for episode in _episodes(analysis):
            first_bad, state, magnitude = episode.first_bad, episode.state, episode.magnitude
            kind = (
                IncidentKind.VALIDITY
                if analysis.state is SeriesState.INVALID and state is IncidentState.OPEN
                else kind_of(identity.metric)
            )
            night = analysis.history.nights[first_bad]
            key = (kind, identity.hardware.label(), night.night)
            if key not in drafts:
                good_run, good_night = _last_good(analysis, first_bad)
                drafts[key] = IncidentDraft(
                    kind, key[1], night.night, state, good_run, night.run_id, good_night
                )
            draft = drafts[key]
            if episode.recovered is not None and draft.recovery is None:
                draft.recovery = _recovery(analysis, episode.recovered)
            if state is IncidentState.OPEN:
                draft.state = IncidentState.OPEN
                draft.problems += [p for p in analysis.problems if p not in draft.problems]
            series_state = analysis.state if state is IncidentState.OPEN else SeriesState.REGRESSION
            draft.series.append(
                AffectedSeries(
                    key=analysis.history.key,
                    benchmark=identity.benchmark,
                    metric=identity.metric,
                    magnitude=magnitude or 0.0,
                    state=series_state,
                )
            )
    return sorted(drafts.values(), key=lambda d: (d.night, d.hardware, d.kind.value))
