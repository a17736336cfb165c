"""`jaxbench backfill COMPONENT FROM..TO`: a history before the first nightly, from published releases. Each
night of the plan (backfill/nights.py) is a wheel overlay of that release and its companions as of that
night (containers/wheel_overlay.py, cached under the work folder by its pins), a run of each recipe in a
fresh process inside it (`jaxbench run --backfill`), and the result ingested on the release's night. A
release whose stack does not install or whose runs fail is a gap with its reason, never a stop; the ledger
in the work folder records each night as it ends, so a stopped backfill (--max-versions, --max-minutes,
Ctrl-C) resumes where it stopped. The nights are judged like the nightly's (`jaxbench detect`).

    jaxbench backfill jax 0.6.0..0.12.0.1 --recipes llama2:tiny
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.version import Version
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine

from jaxbench.backfill.nights import PlannedNight, plan_nights
from jaxbench.containers.install_stage import requirement_name
from jaxbench.containers.manifest import Component, load_manifest
from jaxbench.containers.package_index import Release, between, fetch_releases, is_wheelhouse
from jaxbench.containers.releases import companions_of, released_component, requirements_of
from jaxbench.containers.wheel_overlay import WheelPins, create_wheel_overlay, flavor_components
from jaxbench.core.errors import ExitCode, InvalidInput, RunFailed
from jaxbench.core.files import write_atomic
from jaxbench.harness.provenance.collection import ImageInfo, read_image_info
from jaxbench.results.batch import ingest
from jaxbench.triage.bench import run_measured
from jaxbench.triage.stacks import Measurement

LEDGER = "ledger.json"

Measure = Callable[[Sequence[str], Mapping[str, str], Path], Measurement]
"""(`jaxbench run` arguments, environment, output folder) -> what the run measured (run_measured)."""


@dataclasses.dataclass(frozen=True)
class BackfillOptions:
    component: str
    first: Version
    last: Version
    recipes: tuple[tuple[str, str], ...]
    """(recipe, size) pairs, each run on every night."""
    work: Path
    index: str | None = None
    """A simple-API URL or a wheelhouse folder; None: PyPI."""
    max_versions: int | None = None
    """Nights run by this call at most (a bound: the rest wait for the next call)."""
    max_minutes: float | None = None
    cpus: str | None = None
    """taskset -c CPUS for every run."""
    retry_gaps: bool = False
    """Run again the nights the ledger holds as gaps (after the harness or the index changed)."""
    repeats: int = 1
    """Runs of each recipe a night, all ingested: the night's value is their median (a single run of a
    shared CPU moves by several per cent; a history of one run a release can be too noisy to judge)."""


@dataclasses.dataclass(frozen=True)
class NightOutcome:
    version: str
    night: str
    state: str
    """ran (at least one recipe's result is in the store), or gap."""
    reason: str = ""
    stack: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    """Component -> the version that ran (the overlay's manifest)."""
    step_ms: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """recipe:size -> median step time of its run (the median of its runs' medians, with --repeats)."""
    run_ids: tuple[int, ...] = ()


def load_ledger(work: Path) -> dict[str, NightOutcome]:
    path = work / LEDGER
    if not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text())
        return {version: NightOutcome(**entry) for version, entry in document["nights"].items()}
    except (ValueError, KeyError, TypeError) as error:
        raise InvalidInput(f"{path}: not a backfill ledger ({error}); move it away to start over") from None


def save_ledger(work: Path, options: BackfillOptions, outcomes: Mapping[str, NightOutcome]) -> None:
    document: dict[str, Any] = {
        "component": options.component,
        "range": f"{options.first}..{options.last}",
        "nights": {
            version: dataclasses.asdict(o) | {"run_ids": list(o.run_ids)} for version, o in outcomes.items()
        },
    }
    write_atomic(work / LEDGER, json.dumps(document, indent=2) + "\n")


def default_measure(cpus: str | None) -> Measure:
    def measure(arguments: Sequence[str], environ: Mapping[str, str], out: Path) -> Measurement:
        return run_measured(
            arguments, environ=environ, out=out, prefix=["taskset", "-c", cpus] if cpus else []
        )

    return measure


@dataclasses.dataclass(frozen=True)
class Backfill:
    """What one backfill works with: the component and its companions, the harness's own stack, the store,
    and how releases are listed and runs made (tests pass their own)."""

    options: BackfillOptions
    components: Mapping[str, Component]
    accelerator: str
    base: ImageInfo
    engine: Engine
    measure: Measure

    def pins(self, planned: PlannedNight) -> WheelPins:
        index = self.options.index
        wheelhouse = index is not None and is_wheelhouse(index)
        component = self.components[self.options.component]
        # A wheelhouse holds the component's wheels alone, without dates: the rest is the harness's.
        return WheelPins(
            requirements_of(component, planned.version, self.accelerator),
            () if wheelhouse else companions_of(self.components, self.options.component),
            as_of=None if wheelhouse else planned.as_of,
            index=index,
            with_dependencies=not wheelhouse,
        )

    def night(self, planned: PlannedNight) -> NightOutcome:
        """One release's night: its stack, a run per recipe, the good results ingested on its night."""
        version, night = str(planned.version), planned.night.isoformat()
        pins = self.pins(planned)
        work = self.options.work
        try:
            overlay = create_wheel_overlay(
                pins,
                work / "stacks" / pins.key(),
                components=self.components,
                base_manifest=self.base.manifest,
                base_packages=self.base.packages or (),
            )
        except RunFailed as error:
            return NightOutcome(version, night, "gap", f"the stack does not install: {error}")
        stack = _stack_of(overlay.manifest)
        step_ms: dict[str, float] = {}
        failures: list[str] = []
        results: list[Path] = []
        for recipe, size in self.options.recipes:
            name, medians = f"{recipe}:{size}", []
            for attempt in range(self.options.repeats):
                measured = self.measure(
                    ["run", recipe, "--size", size, "--backfill"],
                    _with_overlay(os.environ, overlay.environ()),
                    work / "runs" / version / (f"{recipe}-{size}" + (f"-{attempt}" if attempt else "")),
                )
                if measured.ok and measured.result_path:
                    results.append(Path(measured.result_path))
                    medians.append(measured.median_step_s or 0.0)
                    continue
                failures.append(f"{name} {measured.status}: {_exception_line(measured.reason)}")
                break  # an API the stack lacks fails every repeat alike: one failed run says it
            if medians:
                step_ms[name] = round(1e3 * statistics.median(medians), 4)
        run_ids: tuple[int, ...] = ()
        if results:
            summary = ingest(self.engine, results, night=planned.night)
            run_ids = tuple(run_id for _, run_id in summary.added)
        state = "ran" if results else "gap"
        return NightOutcome(version, night, state, "; ".join(failures), stack, step_ms, run_ids)


_EXCEPTION = re.compile(r"^[\w.]*(Error|Exception|Interrupt)\b.*")


def _exception_line(reason: str | None) -> str:
    """The exception of a run's reason: a run that died before writing its result gives its last lines of
    output, traceback art included (`^^^^`); the line naming the exception is the reason."""
    parts = [part.strip() for part in (reason or "no reason given").split(" | ")]
    found = [part for part in parts if _EXCEPTION.match(part)]
    return found[-1] if found else " | ".join(parts)


def _with_overlay(environ: Mapping[str, str], overlay: Mapping[str, str]) -> dict[str, str]:
    """The environment with the overlay in front of any PYTHONPATH already set."""
    path = os.pathsep.join(filter(None, [overlay["PYTHONPATH"], environ.get("PYTHONPATH", "")]))
    return {**environ, **overlay, "PYTHONPATH": path}


def _stack_of(manifest: Path) -> dict[str, str | None]:
    import yaml

    components = (yaml.safe_load(manifest.read_text()) or {}).get("components") or {}
    return {
        name: entry.get("version") for name, entry in components.items() if entry.get("stage") == "wheels"
    }


def run_backfill(
    engine: Engine,
    options: BackfillOptions,
    console: Console,
    *,
    measure: Measure | None = None,
    releases: Callable[[str, str | None], list[Release]] = fetch_releases,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    base = read_image_info(os.environ)
    header = base.manifest or {}
    flavor, accelerator = str(header.get("flavor") or "cpu"), str(header.get("accelerator") or "cpu")
    components = flavor_components(load_manifest(), flavor)
    component = released_component(components, options.component, flavor)
    distribution = requirement_name(component.pip[0])
    chosen = between(releases(distribution, options.index), options.first, options.last)
    if not chosen:
        where = options.index or "PyPI"
        raise InvalidInput(f"{distribution}: no release from {options.first} to {options.last} on {where}")
    plan = plan_nights(chosen)
    options.work.mkdir(parents=True, exist_ok=True)
    outcomes = load_ledger(options.work)
    backfill = Backfill(
        options, components, accelerator, base, engine, measure or default_measure(options.cpus)
    )
    console.print(
        f"backfill of {options.component} {options.first}..{options.last}: {len(plan.nights)} nights"
        + (f", {len(plan.left_out)} releases left out" if plan.left_out else "")
        + (
            f", {sum(v in outcomes for v in map(str, (n.version for n in plan.nights)))} done before"
            if outcomes
            else ""
        ),
        markup=False,
    )
    for version, why in plan.left_out:
        console.print(f"  {version}: left out: {why}", markup=False)
    started, ran, stopped = clock(), 0, ""
    for planned in plan.nights:
        done = outcomes.get(str(planned.version))
        if done is not None and not (options.retry_gaps and done.state == "gap"):
            continue
        if options.max_versions is not None and ran >= options.max_versions:
            stopped = f"--max-versions {options.max_versions} reached"
            break
        if options.max_minutes is not None and clock() - started > 60 * options.max_minutes:
            stopped = f"--max-minutes {options.max_minutes:g} reached"
            break
        outcome = backfill.night(planned)
        outcomes[outcome.version] = outcome
        save_ledger(options.work, options, outcomes)
        ran += 1
        shown = ", ".join(f"{k} {v:.3f} ms" for k, v in outcome.step_ms.items()) or outcome.reason
        console.print(f"  {outcome.version} ({outcome.night}): {outcome.state}: {shown}", markup=False)
    console.print(summary_table(plan.nights, outcomes))
    if stopped:
        console.print(f"stopped: {stopped}; run the same command again to go on", markup=False)
        return int(ExitCode.INCOMPLETE)
    return int(ExitCode.OK)


def summary_table(nights: Sequence[PlannedNight], outcomes: Mapping[str, NightOutcome]) -> Table:
    table = Table(title="backfill")
    for column in ("version", "night", "stack", "result"):
        table.add_column(column)
    for planned in nights:
        outcome = outcomes.get(str(planned.version))
        if outcome is None:
            table.add_row(str(planned.version), planned.night.isoformat(), "", "not yet")
            continue
        stack = ", ".join(f"{k} {v}" for k, v in outcome.stack.items() if v)
        result = ", ".join(f"{k} {v:.3f} ms/step" for k, v in outcome.step_ms.items())
        if outcome.reason:
            result = f"{result}; {outcome.reason}" if result else f"gap: {outcome.reason}"
        table.add_row(outcome.version, outcome.night, stack, result)
    return table
