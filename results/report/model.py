"""What a report shows, as plain frozen data: built from the store by results.report.build, rendered by the
terminal, Markdown, JSON and HTML renderers. Renderers never touch the database. The states, kinds and
verdicts shown are the judgement's own words (results.judgement.vocabulary).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_report_render.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from jaxbench.harness.runtime.options import NATIVE_BACKEND
from jaxbench.results.judgement.vocabulary import (
    ComponentRange,
    HumanVerdict,
    IncidentKind,
    IncidentState,
    ProgramChange,
    RecoveryDetail,
    SeriesState,
    SettingChange,
    TimeChange,
)


@dataclasses.dataclass(frozen=True)
class SeriesPoint:
    night: dt.date
    value: float | None
    """None for a failed run or a night without a valid value."""
    status: str
    """"ok", or the run's failure status ("oom", "nan", ...)."""
    run_id: int | None
    """The night's newest run."""
    runs: int = 1
    """Runs that night (`value` is the median of their valid values); 0 for a gap."""
    ad_hoc_runs: int = 0
    """How many of them were ad hoc (by hand), not the nightly's: reported, never judged."""
    run_ids: tuple[int, ...] = ()
    """Every run of that night, oldest first."""


@dataclasses.dataclass(frozen=True)
class Segment:
    """Points [start, stop) between change points, with their mean."""

    start: int
    stop: int
    mean: float


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The nightly screen's robust baseline: median and the band inside which a night is unremarkable."""

    median: float
    low: float
    high: float
    first: dt.date | None = None
    """The first of the nights the median was taken over (results.report.build.baseline_window); None
    where unknown."""
    last: dt.date | None = None
    nights: int = 0
    """How many nights with a value it was taken over."""
    trend: bool = False
    """Under a drift: the trend of those nights carried to the newest night, not their median."""


@dataclasses.dataclass(frozen=True)
class ChangePointView:
    index: int
    """Index in `points` of the first point after the change."""
    night: dt.date
    magnitude: float
    """Relative change of the mean, after / before - 1."""
    pvalue: float
    regression: bool
    """True when the change goes in the metric's worse direction."""


@dataclasses.dataclass(frozen=True)
class Marker:
    """A finding drawn on a series' plot: "step" (a change point; start == end, the first night after it),
    "drift" or "transient" (the nights start..end). Built from an analysis by results.report.build.markers_of,
    the one place that knows the detector's kinds of finding."""

    kind: str
    start: dt.date
    end: dt.date
    label: str


@dataclasses.dataclass(frozen=True)
class SeriesView:
    key: str
    """Stable, URL-safe identifier of the series (used for file names and anchors)."""
    benchmark: str
    """Recipe (e.g. llama2-7b) or microbenchmark name."""
    metric: str
    unit: str
    higher_is_better: bool
    hardware: str
    """Hardware class, e.g. "8 x NVIDIA H100 80GB HBM3 x 1 host"."""
    flavor: str
    settings: dict[str, str]
    points: list[SeriesPoint]
    segments: list[Segment]
    change_points: list[ChangePointView]
    baseline: Baseline | None
    state: SeriesState
    change_vs_baseline: float | None
    """Newest value relative to the baseline median, newest / median - 1."""
    backend: str = NATIVE_BACKEND
    """Who trained the recipe: "native" or a framework ("maxtext", "levanter")."""
    markers: list[Marker] = dataclasses.field(default_factory=list)
    variant: str = ""
    """The settings that differ from the benchmark's default (the settings the nightly runs), e.g.
    "global_batch=16"; "" for the default itself. formatting.series_name shows it: "llama2-tiny ·
    global_batch=16"."""
    ad_hoc: bool = False
    """Only ad-hoc runs (by hand): shown, never judged (its state stays "no baseline yet")."""
    noise: float | None = None
    """One night's standard deviation relative to the baseline (the screen's noise scale)."""
    resolvable: float | None = None
    """The smallest change the screen can confirm in that noise: above 10 % the series is too noisy."""


@dataclasses.dataclass(frozen=True)
class IncidentSeries:
    series_key: str
    benchmark: str
    metric: str
    magnitude: float
    state: SeriesState


@dataclasses.dataclass(frozen=True)
class IncidentView:
    id: int
    fingerprint: str
    kind: IncidentKind
    state: IncidentState
    hardware: str
    night: dt.date
    """First bad night."""
    last_good_night: dt.date | None
    series: list[IncidentSeries]
    components: list[ComponentRange]
    """Per component, the last-good -> first-bad range; components that did not move are left out."""
    flag_changes: list[SettingChange]
    """XLA flags that differ between the last good and the first bad run."""
    env_changes: list[SettingChange]
    verdict: HumanVerdict | None
    summary: str
    recovery: RecoveryDetail | None = None
    """A transient's other end: when it recovered and what moved between its last bad run and the first
    run back."""
    program: ProgramChange | None = None
    """Whether the first bad run compiled the last good run's program; None where either recorded none."""
    time: TimeChange | None = None
    """Both runs' time per step by kind of op, where both were profiled."""


@dataclasses.dataclass(frozen=True)
class BackendCell:
    value: float | None
    """The series' newest valid value (None: no series, or no valid night yet)."""
    vs_native: float | None
    """value / native's value for the same recipe and hardware (None where either is missing)."""
    night: dt.date | None = None
    """The night of `value`: its series' newest night with a valid value."""
    series_key: str | None = None
    """The series the value comes from (its page)."""


@dataclasses.dataclass(frozen=True)
class BackendRow:
    backend: str
    night: dt.date | None
    """The newest of its cells' nights (a cell from an older night says so)."""
    cells: dict[str, BackendCell]
    """Per metric of BACKEND_METRICS."""


@dataclasses.dataclass(frozen=True)
class BackendsTable:
    """One recipe and size on one hardware class, across every backend that trained it: native first."""

    benchmark: str
    hardware: str
    rows: list[BackendRow]


@dataclasses.dataclass(frozen=True)
class ComponentView:
    name: str
    repository: str | None
    commit: str | None
    version: str | None


@dataclasses.dataclass(frozen=True)
class RunResultView:
    """One stored result of a run, named by the series it belongs to."""

    series_key: str
    benchmark: str
    metric: str
    unit: str
    value: float | None
    status: str
    reason: str | None


@dataclasses.dataclass(frozen=True)
class RunView:
    """One stored run as its page shows it: settings, provenance and results."""

    id: int
    night: dt.date
    status: str
    reason: str | None
    source_kind: str
    run_uid: str | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    image_ref: str | None
    image_digest: str | None
    ci_job_url: str | None
    hostname: str | None
    hosts: int
    config: dict[str, Any]
    """The resolved recipe (the run's settings), as stored."""
    environment: dict[str, str]
    components: list[ComponentView]
    results: list[RunResultView]
    schedule: str = "nightly"
    """"nightly" (judged) or "ad-hoc" (a run by hand: reported, never judged)."""
    source_hash: str | None = None
    """sha256 of the result file the run was ingested from (the same file always gives the same run)."""
    program: dict[str, Any] | None = None
    """The compiled step as stored (runs.program: summary and XLA cost), where the run recorded it."""
    profile: dict[str, Any] | None = None
    """Where a profiled run's time went (runs.profile), and its trace's location where one was kept."""
    loss_curve: list[float | None] | None = None
    """The training loss at every step (None where it was not finite), as stored (runs.loss_curve)."""
    loss_optimum: float | None = None
    """The synthetic data's optimal loss, which a healthy loss curve approaches."""
    step_times: list[float] | None = None
    """Seconds of each timed step (the step time's raw samples), after the warm-up steps."""


@dataclasses.dataclass(frozen=True)
class RunEntry:
    """One run as the runs list shows it and filters it (results/report/run_list.py)."""

    id: int
    night: dt.date
    recipe: str
    """The recipe's family ("llama2"), or "micro" for a run of microbenchmarks."""
    size: str
    """The recipe's size ("1b"); "" for microbenchmarks."""
    benchmarks: tuple[str, ...]
    """What its results measured ("llama2-1b"; a microbenchmark run has several)."""
    backend: str
    hardware: str
    schedule: str
    status: str
    quarantined: bool = False
    """Left out of every judgement by a person's decision (results/quarantine.py): listed, marked, no page."""


@dataclasses.dataclass(frozen=True)
class Report:
    generated_at: dt.datetime
    store: str
    """Where the data came from (database URL without credentials)."""
    series: list[SeriesView]
    incidents: list[IncidentView]
    backends: list[BackendsTable] = dataclasses.field(default_factory=list)
    """The backends view: only recipes that a framework backend trained too."""
    runs: dict[int, RunView] = dataclasses.field(default_factory=dict)
    """The runs behind the series' points (the dashboard's run pages); empty where not loaded."""
    run_list: list[RunEntry] = dataclasses.field(default_factory=list)
    """Every run in the store (the dashboard's runs page); empty where not loaded: the runs in `runs`."""
