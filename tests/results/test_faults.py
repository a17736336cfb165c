"""Faults: `jaxbench ingest FOLDER`, `jaxbench detect` and the dashboard build, each run in its own process
and killed with SIGKILL on SQLite and PostgreSQL, at points counted in their work
(tests/support/kill_points.py) and at one random time. After every kill the store passes its integrity checks
and shows nothing half-written (all or none of a batch, the old or the new judgement, the previous site or the
new one); a re-run then does the work exactly once. Where and how often it kills: docs/design.md, "Killing the
commands"; how long it takes: docs/measurements.md.

    JAX_PLATFORMS=cpu python -m pytest -q -p no:cacheprovider tests/results/test_faults.py -s  # the kills
    JAXBENCH_FAULT_SEED=7 JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_faults.py  # other points
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode
from jaxbench.results import commands, store
from jaxbench.results.ingest import parse_file
from jaxbench.results.judgement.detect import detect
from jaxbench.results.report import html
from tests.conftest import REPO
from tests.results.test_judgement import nightly
from tests.support.faults import (
    Kill,
    check_integrity,
    check_whole_site,
    command_environment,
    debris,
    jaxbench_killed,
    site_files,
    site_shape,
    store_copy,
    stored_judgement,
    stored_run_ids,
)
from tests.support.kill_points import Event, KillPoint, SqlCounts, counting_sql

SEED = os.environ.get("JAXBENCH_FAULT_SEED", "18")
HISTORY_NIGHTS = 36
BATCH_NIGHTS = 36
"""The batch that `ingest` is killed in: several dozen result files, one nightly run each."""
REGRESSION_AT = 60
"""A step regression in the batch's nights, which `detect` finds as a new incident; the history has a
short-lived one (nights 20 to 25) that recovered."""
WRITING_TRANSACTION = 2
"""Which committed transaction of each command writes: the first brings the schema up to date."""
Point = KillPoint | float


def step_time(night: int) -> float:
    slower = 20 <= night < 26 or night >= REGRESSION_AT
    return 0.5 * (1.12 if slower else 1.0)


@dataclasses.dataclass(frozen=True)
class Nights:
    history: list[Path]
    """Result files of the nights before the batch, already in the store."""
    batch: Path
    """The folder of the batch's result files."""

    def run_ids(self, paths: Sequence[Path]) -> Counter[str]:
        return Counter(json.loads(p.read_text())["run_id"] for p in paths)

    def batch_files(self) -> list[Path]:
        return sorted(self.batch.glob("*.json"))

    def results_per_run(self) -> int:
        """One a metric: every night's run reports the same."""
        return len(parse_file(self.history[0]).results)


@pytest.fixture
def nights(tmp_path: Path) -> Nights:
    paths = nightly(tmp_path, HISTORY_NIGHTS + BATCH_NIGHTS, step_time)
    batch = tmp_path / "batch"
    batch.mkdir()
    for path in paths[HISTORY_NIGHTS:]:
        path.rename(batch / path.name)
    return Nights(paths[:HISTORY_NIGHTS], batch)


@pytest.fixture(scope="session")
def startup_s() -> float:
    """How long `python -m jaxbench` takes to import what the store's commands need, before any work."""
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", "import jaxbench.main, jaxbench.results.commands"],
        cwd=REPO,
        env=command_environment("sqlite://"),
        check=True,
        timeout=120,
    )
    return time.monotonic() - started


def ingest_here(url: str, paths: list[Path]) -> None:
    engine = store.connect(url)
    commands.ingest(engine, paths)
    engine.dispose()  # a PostgreSQL store is copied as a template: nothing may stay connected to it


@dataclasses.dataclass(frozen=True)
class Uninterrupted:
    code: int
    counts: SqlCounts
    work_s: float


def run_here(monkeypatch: pytest.MonkeyPatch, url: str, args: Sequence[str]) -> Uninterrupted:
    """The command's own entry point in this process, whose imports are done: its work alone, counted."""
    monkeypatch.setenv("JAXBENCH_DB", url)
    started = time.monotonic()
    with counting_sql() as counts:
        code = cli.main(list(args))
    assert code in (ExitCode.OK, ExitCode.REGRESSION), f"jaxbench {' '.join(args)}: exit {code}"
    return Uninterrupted(code, counts, time.monotonic() - started)


class KillPlan:
    """The kill points of one command on one database, drawn from their own seeded generator."""

    def __init__(self, command: str, url: str, reference: Uninterrupted, startup_s: float) -> None:
        self.random = random.Random(f"{SEED}-{command}-{make_url(url).get_backend_name()}")
        self.reference, self.startup_s = reference, startup_s

    def in_the_writing_transaction(self) -> list[Point]:
        """After a random statement of the transaction that writes (what it wrote is not committed), just
        before it commits, and at a random time."""
        statement = self.random.choice(self.reference.counts.transaction(WRITING_TRANSACTION))
        return [
            KillPoint(Event.STATEMENT, statement),
            KillPoint(Event.COMMIT, WRITING_TRANSACTION),
            self.timed(),
        ]

    def timed(self) -> Point:
        return self.random.uniform(0, self.startup_s + self.reference.work_s)


@dataclasses.dataclass(frozen=True)
class Trial:
    kill: Kill
    left: str
    """What the kill left, as the test's check names it."""

    def __str__(self) -> str:
        point = self.kill.point
        where = str(point) if isinstance(point, KillPoint) else f"{point:.2f} s"
        return f"{where}{'' if self.kill.killed else ' (after the end)'} -> {self.left}"


def kill_each(
    args: Sequence[str], url: str, points: Sequence[Point], check: Callable[[], str]
) -> list[Trial]:
    """Kill the command at each point in turn, each time on what the kills before left, and check what each
    left."""
    return [Trial(jaxbench_killed(args, url, point), check()) for point in points]


def report_trials(command: str, url: str, trials: list[Trial], started: float) -> None:
    """The kill points tried and the time they took, for the issue's note (pytest -s shows them)."""
    print(
        f"\n{command} on {make_url(url).get_backend_name()}: {len(trials)} kills in "
        f"{time.monotonic() - started:.1f} s: {', '.join(map(str, trials))}"
    )


@pytest.mark.slow
def test_a_killed_ingest_stores_all_or_none_of_its_batch(
    store_url: str, nights: Nights, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, startup_s: float
) -> None:
    started = time.monotonic()
    ingest_here(store_url, nights.history)
    args = ["ingest", str(nights.batch)]
    with store_copy(store_url, tmp_path) as copy:
        reference = run_here(monkeypatch, copy, args)
    plan = KillPlan("ingest", store_url, reference, startup_s)
    batch = nights.run_ids(nights.batch_files())

    def all_or_none() -> str:
        rows = check_integrity(store_url)
        stored = stored_run_ids(store_url)
        assert set(stored.values()) == {1} and rows["results"] == nights.results_per_run() * rows["runs"]
        if batch.keys().isdisjoint(stored):
            return "none"
        assert batch.keys() <= stored.keys(), "part of the batch is stored"
        return "all"

    trials = kill_each(args, store_url, plan.in_the_writing_transaction(), all_or_none)
    assert len(trials) == 3

    run_here(monkeypatch, store_url, args)
    assert stored_run_ids(store_url) == nights.run_ids(nights.history) + batch  # every run once
    assert check_integrity(store_url)["results"] == nights.results_per_run() * (HISTORY_NIGHTS + BATCH_NIGHTS)
    report_trials("ingest", store_url, trials, started)


@pytest.mark.slow
def test_a_killed_detect_keeps_the_old_judgement_or_stores_the_new_whole(
    store_url: str, nights: Nights, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, startup_s: float
) -> None:
    started = time.monotonic()
    ingest_here(store_url, nights.history)
    detect(engine := store.connect(store_url))
    engine.dispose()
    ingest_here(store_url, nights.batch_files())  # not judged yet
    old = stored_judgement(store_url)
    with store_copy(store_url, tmp_path) as copy:
        reference = run_here(monkeypatch, copy, ["detect"])
        new = stored_judgement(copy)
    assert new != old and reference.code == ExitCode.REGRESSION  # the batch's regression is new work
    plan = KillPlan("detect", store_url, reference, startup_s)

    def old_or_new() -> str:
        check_integrity(store_url)
        judgement = stored_judgement(store_url)
        assert judgement in (old, new), "a judgement neither the old nor the new one"
        return "new" if judgement == new else "old"

    trials = kill_each(["detect"], store_url, plan.in_the_writing_transaction(), old_or_new)
    assert len(trials) == 3

    assert run_here(monkeypatch, store_url, ["detect"]).code == ExitCode.REGRESSION
    assert stored_judgement(store_url) == new
    report_trials("detect", store_url, trials, started)


DASHBOARD = ["report", "--format", "html", "--out"]


@pytest.mark.slow
def test_a_killed_dashboard_build_leaves_the_old_site_the_new_whole_or_none(
    store_url: str, nights: Nights, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, startup_s: float
) -> None:
    """Building the site judges the store first: that part is the detect test's."""
    started = time.monotonic()
    site = tmp_path / "sites" / "site"
    ingest_here(store_url, nights.history)
    run_here(monkeypatch, store_url, [*DASHBOARD, str(site)])  # the previous night's dashboard
    ingest_here(store_url, nights.batch_files())
    old_site, old = site_files(site), stored_judgement(store_url)
    with store_copy(store_url, tmp_path) as copy:
        reference_site = tmp_path / "reference" / "site"
        shutil.copytree(site, reference_site)  # replaced as `site` will be
        reference = run_here(monkeypatch, copy, [*DASHBOARD, str(reference_site)])
        new = stored_judgement(copy)
    check_whole_site(reference_site)
    new_shape = site_shape(reference_site)
    assert new_shape != site_shape(site)  # the batch's runs have pages of their own
    plan = KillPlan("report", store_url, reference, startup_s)
    # In this order each point comes: the write leaves the previous site, and the removal the new one in
    # place for the kill between the renames, which leaves none for the timed kill (one rename).
    points = [
        KillPoint(Event.WRITE, plan.random.randint(1, sum(new_shape.values())), under=str(site.parent)),
        KillPoint(Event.RMTREE, 1),  # the new site in place, the previous one set aside, not yet removed
        KillPoint(Event.RENAME, 2),  # the previous site set aside, the new one not yet in place
        plan.timed(),
    ]

    def old_new_or_none() -> str:
        check_integrity(store_url)
        assert stored_judgement(store_url) in (old, new), "a judgement neither the old nor the new one"
        if not site.exists():
            return "none"
        if site_files(site) == old_site:
            return "old"
        check_whole_site(site)
        assert site_shape(site) == new_shape, "a site of neither the old nor the new store"
        return "new"

    trials = kill_each([*DASHBOARD, str(site)], store_url, points, old_new_or_none)
    assert len(trials) == 4

    run_here(monkeypatch, store_url, [*DASHBOARD, str(site)])
    check_whole_site(site)
    assert site_shape(site) == new_shape and stored_judgement(store_url) == new
    report_trials("report", store_url, trials, started)


@pytest.mark.slow
def test_a_dashboard_build_clears_what_a_killed_one_left_beside_the_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between its two renames, a build leaves no site at all, the previous one set aside and the new
    one in its staging folder; the next build must not leave both there for good (each holds a copy of
    plotly.js, 4.8 MB). Where the site's folders go does not depend on the database: SQLite alone."""
    url, site = f"sqlite:///{tmp_path / 'store.sqlite'}", tmp_path / "sites" / "site"
    run_here(monkeypatch, url, [*DASHBOARD, str(site)])
    jaxbench_killed([*DASHBOARD, str(site)], url, KillPoint(Event.RENAME, 2))
    assert not site.exists() and len(debris(site)) == 2
    [set_aside] = [name for name in debris(site) if ".old-" in name]
    previous = site_shape(site.parent / set_aside)
    html._recover_from_a_killed_build(site)  # what the next build does first: the previous site is back
    check_whole_site(site)
    assert debris(site) == [] and site_shape(site) == previous
    run_here(monkeypatch, url, [*DASHBOARD, str(site)])
    check_whole_site(site)
    assert debris(site) == []
