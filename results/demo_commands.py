"""`jaxbench demo`: the made-up history of results/demo.py through the product's own path, into a folder of
its own: its result files written, ingested into its own SQLite store (results/batch.py, as `jaxbench
ingest`), judged and rendered as `jaxbench report --format html` does; then what the detectors found and
where the dashboard is. Never the store JAXBENCH_DB names.

    jaxbench demo --out build/demo     # make demo
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from rich.console import Console
from sqlalchemy import Engine, select

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.core.files import folder_to_write
from jaxbench.harness.runtime.options import Schedule
from jaxbench.results import demo, schema, store
from jaxbench.results.batch import ingest
from jaxbench.results.commands import report
from jaxbench.results.judgement.detect import Detection
from jaxbench.results.judgement.vocabulary import IncidentDetail, IncidentState
from jaxbench.results.quarantine import Decision, decide
from jaxbench.results.report.build import markers_of

MARKER = ".jaxbench-demo"
"""Written first into every demo folder: a folder holding it is a demo, which the next demo replaces whole."""
TIMINGS = ("perf/step_time_s", "perf/time_s")
"""The measurements themselves (a recipe's step time, a microbenchmark's call); their throughputs, TFLOP/s
and MFU follow them."""


@dataclasses.dataclass(frozen=True)
class Demo:
    store_url: str
    files: int
    detection: Detection
    index: Path
    """The dashboard's index.html."""


def check_out(out: Path) -> None:
    """InvalidInput where `out` must not become a demo folder: only a new or empty folder, or a demo made
    before, is (replaced whole)."""
    expected = "expected a new or empty folder, or a demo made before"
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise InvalidInput(f"--out {out} is not a folder; {expected}")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise InvalidInput(f"--out {out} holds files but no {MARKER}; refusing to replace it; {expected}")
    folder_to_write(out, "--out")


def build_demo(out: Path) -> Demo:
    """Replace `out` with the demo: its result files (results/), its store (store.sqlite), its dashboard
    (site/). InvalidInput, before anything is removed, where `out` is neither new, empty nor a demo."""
    check_out(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by `jaxbench demo`, which replaces this folder whole\n")
    paths = []
    for name, document in demo.documents():
        path = out / "results" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document))
        paths.append(path)
    url = f"sqlite:///{(out / 'store.sqlite').resolve()}"
    engine = store.connect(url)
    try:
        ingest(engine, paths)
        _quarantine_the_first_run_by_hand(engine)
        detection = report(engine, "html", Console(quiet=True), out=out / "site")
    finally:
        engine.dispose()
    return Demo(url, len(paths), detection, out / "site" / "index.html")


def _quarantine_the_first_run_by_hand(engine: Engine) -> None:
    """A person's decision too: the first run by hand quarantined, so the runs list shows one marked."""
    with store.transaction(engine) as session:
        runs = select(schema.Run.id).where(schema.Run.schedule == Schedule.AD_HOC.value)
        first = session.scalars(runs.order_by(schema.Run.night, schema.Run.id).limit(1)).one()
    decide(engine, [first], Decision.QUARANTINE, "demo", "its node's clock jumped during the run")


def findings_text(detection: Detection) -> list[str]:
    """One line per incident (open first), per finding on a measurement, and for the series run by hand."""
    lines = []
    for incident in sorted(detection.incidents, key=lambda i: (i.state != IncidentState.OPEN, i.night)):
        detail = IncidentDetail.from_json(incident.details)
        benchmarks = ", ".join(sorted({s.benchmark for s in detail.series}))
        why = f": {detail.problems[0]}" if detail.problems else ""
        lines.append(
            f"{incident.state} {incident.kind} incident {incident.id} on {incident.hardware} from "
            f"{incident.night}: {benchmarks} ({len(detail.series)} series){why}"
        )
    found = []
    for analysis in detection.analyses:
        identity = analysis.history.identity
        if identity.metric in TIMINGS:
            where = f"{identity.benchmark} ({identity.backend}) on {identity.hardware.label()}"
            found += [
                f"{where}: {marker.label}" + (f" from {marker.start}" if marker.kind == "step" else "")
                for marker in markers_of(analysis)
            ]
    lines += sorted(found)
    by_hand = [h for h in detection.histories if h.ad_hoc and h.identity.metric in TIMINGS]
    for history in by_hand:
        runs = sum(night.runs for night in history.nights)
        lines.append(
            f"ad hoc, shown and not judged: {history.identity.benchmark} ({history.identity.backend}) on "
            f"{history.identity.hardware.label()}: {runs} runs"
        )
    return lines


def run_demo(out: Path, console: Console) -> int:
    check_out(out)
    console.print(
        f"demo: {demo.NIGHTS} nights from {demo.night(0)}, {len(demo.configs())} benchmarks and their "
        f"microbenchmarks on {len(demo.HARDWARE)} hardware classes, into {out}",
        markup=False,
        soft_wrap=True,
    )
    made = build_demo(out)
    where = store.display_url(made.store_url)
    console.print(
        f"{made.files:,} result files, {len(made.detection.histories)} series in {where}",
        markup=False,
        soft_wrap=True,
    )
    for line in findings_text(made.detection):
        console.print(f"  {line}", markup=False, soft_wrap=True)
    console.print(f"explore it: JAXBENCH_DB={made.store_url} jaxbench report", markup=False, soft_wrap=True)
    console.print(f"dashboard: {made.index} ({made.index.resolve().as_uri()})", markup=False, soft_wrap=True)
    return ExitCode.OK
