"""`jaxbench triage INCIDENT`: from a stored incident (or the change between two stored runs, `BEFORE..AFTER`)
to its plan, the triage itself over this machine's stacks with every run kept in the store, and the outcome
in a summary file and (through the caller's `post`) on the incident's issue. The tracker lives above this
layer (nightly/), so it is passed in. One process at a time runs a triage of an incident: it holds the
triage's lease (results/triage_lease.py).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from sqlalchemy import Engine

from jaxbench.containers.git import GitRemote, git_repository
from jaxbench.containers.manifest import load_manifest
from jaxbench.containers.wheel_overlay import flavor_components
from jaxbench.core.cpus import cpu_set, this_process_cpus
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.core.files import folder_to_write
from jaxbench.harness.provenance.collection import read_image_info
from jaxbench.results import triage_lease, triage_records
from jaxbench.results.detection.settings import DEFAULT_SETTINGS
from jaxbench.results.judgement.vocabulary import IncidentKind, SeriesState
from jaxbench.results.triage_records import StoredIncident, StoredRun, StoredTriage
from jaxbench.triage.bench import Benchmark, Mirrors, family_and_size, not_overlayable
from jaxbench.triage.ledger import replaying
from jaxbench.triage.logic import Verdict
from jaxbench.triage.report import headline, render_json, render_markdown
from jaxbench.triage.session import Outcome, run_triage
from jaxbench.triage.settings import Settings
from jaxbench.triage.stacks import Kind, Measurement, Move, Plan
from jaxbench.triage.wheels import Releases, built_in_ranges, release_range

TRIAGED_KINDS = (IncidentKind.THROUGHPUT.value, IncidentKind.CORRECTNESS.value)

Post = Callable[[StoredIncident, str], str | None]
"""(incident, Markdown) -> where it was posted (e.g. "issue #12"), or None where the incident has no issue."""


@dataclasses.dataclass(frozen=True)
class TriageOptions:
    settings: Settings = dataclasses.field(default_factory=Settings)
    work: Path | None = None
    """Overlays, mirrors, run results and the summary; default runs/triage-<fingerprint>."""
    restart: bool = False
    """Forget an earlier triage of the incident instead of resuming or reusing it."""
    repositories: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Component -> where to fetch its commits, over the repository the incident recorded."""
    cpus: str | None = None
    """The CPU list every run goes to (taskset -c), checked (jaxbench.core.cpus.cpu_list); None: anywhere."""
    index: str | None = None
    """Where published releases come from (a simple-API URL or a folder of wheels; None: PyPI). Given, every
    component the runs recorded two versions of moves by release, not only the compiled ones."""


def plan_of(
    incident: StoredIncident,
    settings: Settings,
    repositories: Mapping[str, str] | None = None,
    releases: Releases | None = None,
) -> Plan:
    """The triage an incident asks for, refused before any run where it cannot be done here.
    `repositories`: where to fetch a moved component's commits instead of the repository the incident
    recorded (a fork, a local checkout that holds them). `releases`: where published releases come from,
    for the components that move by release (triage/wheels.py)."""
    repositories = dict(repositories or {})
    moved_names = [moved.name for moved in incident.detail.components]
    for name in repositories:
        if name not in moved_names:
            raise InvalidInput(
                f"--repository {name}: {name} did not move in {incident.title} "
                f"(moved: {', '.join(moved_names) or 'nothing'})"
            )
    if incident.kind not in TRIAGED_KINDS:
        raise InvalidInput(
            f"{incident.title}: a {incident.kind} incident; triage reruns throughput and correctness "
            "incidents only"
        )
    if incident.last_good is None or incident.first_bad is None:
        raise InvalidInput(f"{incident.title}: the store holds no last good or first bad run for it")
    moves: list[Move] = []
    skipped: list[tuple[str, str]] = []
    ends = (incident.last_good, incident.first_bad)
    for moved in incident.detail.components:
        repository = repositories.get(moved.name, moved.repository or "")
        (good, good_version), (bad, bad_version) = (_pins(run, moved.name) for run in ends)
        move = Move(moved.name, repository, good or "", bad or "")
        by_release = (
            None if releases is None else releases.move(moved.name, repository, good_version, bad_version)
        )
        why = not_overlayable(move)
        if by_release is not None and (why is not None or (releases is not None and releases.preferred)):
            moves.append(by_release)
        elif why is None:
            # Checked before any run: the clone of its repository comes only once the bisection starts.
            git_repository(move.repository, f"{incident.title}: {moved.name}'s repository")
            moves.append(move)
        else:
            skipped.append((moved.name, why))
    # jaxlib moved with jax: a stack of jax's release installs jaxlib at that release too, which is what
    # ran where both ends recorded them at one version.
    carried = {
        name: move.name
        for name, _ in skipped
        for move in moves
        if releases is not None
        and releases.carries(move, name)
        and all(_pins(run, name)[1] == _pins(run, move.name)[1] for run in ends)
    }
    skipped = [(name, why) for name, why in skipped if name not in carried]
    if not moves:
        what = "no component moved between its runs (flags or environment did)"
        if skipped:
            named = "; ".join(f"{name} ({why})" for name, why in skipped)
            what = f"only components it cannot rerun at other commits moved: {named}"
        raise InvalidInput(f"{incident.title}: {what}; nothing to bisect here")
    series = incident.detail.series
    magnitudes = [abs(one.magnitude) for one in series if one.magnitude]
    # The reproduction must show at least half the slowdown the nightly saw, and never less than the
    # detector's own practical threshold.
    threshold = max([DEFAULT_SETTINGS.screen.min_change, *(m / 2 for m in magnitudes)])
    return Plan(
        fingerprint=incident.fingerprint,
        kind=Kind(incident.kind),
        benchmark=":".join(family_and_size(incident.first_bad.config)),
        moved=tuple(moves),
        skipped=tuple(f"{name} ({why})" for name, why in skipped),
        carried=tuple(f"{name} (with {by}'s release)" for name, by in carried.items()),
        threshold=threshold,
        settings=settings,
        faster=bool(series) and all(one.state is SeriesState.IMPROVEMENT for one in series),
    )


def _pins(run: StoredRun | None, name: str) -> tuple[str | None, str | None]:
    """(commit, version) of a component in a run, None for what it did not record."""
    _, commit, version = (None if run is None else run.components.get(name)) or (None, None, None)
    return commit, version


def releases_here(index: str | None) -> Releases:
    """The releases of this environment's flavor (the harness's own manifest says which), from `index`."""
    header = read_image_info(os.environ).manifest or {}
    flavor = str(header.get("flavor") or "cpu")
    components = flavor_components(load_manifest(), flavor)
    return Releases(components, str(header.get("accelerator") or "cpu"), index, preferred=index is not None)


def default_work(fingerprint: str, parent: Path = Path("runs")) -> Path:
    """Where a triage of this incident keeps its overlays, mirrors, runs and summary."""
    return parent / f"triage-{fingerprint[:12]}"


def triage_incident(
    engine: Engine, reference: str, options: TriageOptions, console: Console, post: Post | None
) -> int:
    if triage_records.RUN_PAIR.fullmatch(reference):
        incident = triage_records.change_between(engine, reference)
    else:
        incident = triage_records.find_incident(engine, reference)
    releases = releases_here(options.index)
    plan = plan_of(incident, options.settings, options.repositories, releases)
    assert incident.first_bad is not None
    work = options.work or default_work(incident.fingerprint)
    folder_to_write(work, "--work")  # now, not when the summary is written after every run
    owner = triage_lease.new_owner()
    stored = triage_records.start_triage(
        engine, incident.fingerprint, plan.as_json(), restart=options.restart, owner=owner
    )
    with triage_lease.lease_kept(engine, stored.id, owner):
        outcome = _runs(engine, incident, plan, stored, owner, work, options, console, releases)
    markdown = render_markdown(plan, outcome)
    work.mkdir(parents=True, exist_ok=True)
    (work / "summary.md").write_text(markdown)
    (work / "summary.json").write_text(render_json(plan, outcome))
    console.print(f"{headline(plan, outcome)}: {outcome.reason}", markup=False, soft_wrap=True)
    console.print(f"summary: {work / 'summary.md'}", markup=False)
    if post is not None:
        where = post(incident, markdown)
        console.print(
            f"posted on {where}" if where else "the incident has no issue to comment on", markup=False
        )
    return exit_code(outcome)


def _runs(
    engine: Engine,
    incident: StoredIncident,
    plan: Plan,
    stored: StoredTriage,
    owner: str,
    work: Path,
    options: TriageOptions,
    console: Console,
    releases: Releases,
) -> Outcome:
    """The triage's runs, each recorded as it ends, and its outcome, while `owner` holds its lease."""
    assert incident.first_bad is not None
    resumed = f", resuming with {len(stored.runs)} recorded runs" if stored.runs else ""
    console.print(
        f"triage of {incident.title} ({incident.kind}, {plan.benchmark}): "
        f"{', '.join(f'{m.name} {m.good[:12]}..{m.bad[:12]}' for m in plan.moved)}{resumed}",
        markup=False,
        soft_wrap=True,
    )
    benchmark = Benchmark(
        work,
        config=incident.first_bad.config,
        config_hash=incident.first_bad.config_hash,
        moves={move.name: move for move in plan.moved},
        base_manifest=read_image_info(os.environ).manifest,
        prefix=["taskset", "-c", options.cpus] if options.cpus else [],
        one_cpu=len(cpu_set(options.cpus, this_process_cpus()) if options.cpus else this_process_cpus()) == 1,
        releases=releases,
    )
    recorded = {key: _measurement(fields) for key, fields in stored.runs.items()}

    def record(label: str, attempt: int, measurement: Measurement) -> None:
        triage_records.record_run(engine, stored.id, label, attempt, _fields(measurement), owner=owner)
        step_s = measurement.median_step_s
        step = "" if step_s is None else f", median step {step_s * 1e3:.3f} ms"
        console.print(f"  {label} #{attempt}: {measurement.status}{step}", markup=False, soft_wrap=True)

    outcome = run_triage(
        plan, replaying(benchmark, recorded, record), Mirrors(work / "repositories", releases)
    )
    if outcome.unit == "release" and outcome.culprit and outcome.component and outcome.last_good_commit:
        component = releases.components.get(outcome.component)
        ends = (outcome.repository or "", outcome.last_good_commit, outcome.culprit)
        spans = [
            release_range(component, *ends),
            *built_in_ranges(releases.components, outcome.component, *ends, GitRemote()),
        ]
        outcome = dataclasses.replace(outcome, release_range="; ".join(spans))
    triage_records.finish_triage(engine, stored.id, outcome.state, outcome.as_json(), owner=owner)
    return outcome


def exit_code(outcome: Outcome) -> int:
    """OK when the triage answered (a culprit, or not reproduced); INCOMPLETE when it stopped at a bound or
    could not single out a commit; FAILED when an end of the incident would not run."""
    if outcome.state == "failed":
        return ExitCode.FAILED
    if outcome.culprit or (outcome.state == "finished" and outcome.reproduced is Verdict.GOOD):
        return ExitCode.OK
    return ExitCode.INCOMPLETE


def _fields(measurement: Measurement) -> dict[str, Any]:
    fields = dataclasses.asdict(measurement)
    fields["loss_curve"] = None if measurement.loss_curve is None else list(measurement.loss_curve)
    fields["program"] = None if measurement.program is None else dict(measurement.program)
    return fields


def _measurement(fields: Mapping[str, Any]) -> Measurement:
    curve = fields.get("loss_curve")
    return Measurement(**(dict(fields) | {"loss_curve": None if curve is None else tuple(curve)}))
