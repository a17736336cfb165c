"""The self-bench (benchmarks/self/) judged by jaxbench's own detector: nights of the real ingest benchmark
at its small size, each night's pytest-benchmark JSON ingested as that night, then a few nights with the
ingest deliberately slowed (CPU burnt per file): the ingest's rate and time are flagged as a regression
from the first slowed night on, and the same history without the slowed nights is not. It fails if the
detector, the suite or the ingest of its extra_info (results/pytest_benchmark.py) breaks, or if the rate's
direction is inverted. Timed in CPU time: beside another test process on 2 cores a wall clock doubles.
And one of the self-bench's counts as a budget: the judgement reads each series' nights once.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_self_bench.py
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from benchmarks import store_speed
from benchmarks.self.counts import rows_read
from jaxbench.results import commands, store
from jaxbench.results.judgement.detect import Detection, detect
from jaxbench.results.judgement.verdicts import SeriesAnalysis
from jaxbench.results.judgement.vocabulary import IncidentDetail, SeriesState
from tests.conftest import REPO

pytest_plugins = ["pytester"]

SUITE = REPO / "benchmarks" / "self" / "test_store.py"
BENCHMARK = "benchmarks/self/test_store.py::test_ingest"
FIRST_NIGHT = dt.date(2026, 1, 1)
NORMAL_NIGHTS = 12
"""The history before the slowdown: at least the screen's min_history (10) of baseline nights."""
SLOWED_NIGHTS = 3
"""A window of three nights is the screen's longest; fewer would leave the regression merely suspected."""
BURN_PER_FILE = 0.003
"""CPU seconds the slowed ingest spends per file before it starts: the small ingest takes about 1.3 ms of
CPU a file, so a slowed one takes three to four times as long."""


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest inside this test, where pytest-benchmark times: in a pytest-xdist worker (the test lanes) it
    would see PYTEST_XDIST_WORKER and disable itself."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    return pytester


def measure(suite: pytest.Pytester, out: Path) -> Path:
    """One night: the real ingest benchmark of the suite at its small size, in this process (so a fixture
    here can slow it) and in CPU time, its pytest-benchmark JSON written to `out`."""
    result = suite.runpytest_inprocess(
        str(SUITE), "-k", "test_ingest", "--self-size", "small", "--benchmark-timer=time.process_time",
        f"--benchmark-json={out}", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    return out


@pytest.fixture
def slowed_ingest(monkeypatch: pytest.MonkeyPatch) -> Callable[[], AbstractContextManager[None]]:
    """Inside the context, the store's ingest spins BURN_PER_FILE of CPU time for every file first."""
    real = commands.ingest

    def slow(engine: Engine, paths: list[Path], **options: Any) -> Any:
        until = time.process_time() + BURN_PER_FILE * len(paths)
        while time.process_time() < until:
            pass
        return real(engine, paths, **options)

    @contextmanager
    def slowed() -> Iterator[None]:
        with monkeypatch.context() as patch:
            patch.setattr(commands, "ingest", slow)
            yield

    return slowed


def judged(path: Path, nights: list[Path]) -> Detection:
    """A fresh store with one JSON a night, as `jaxbench ingest --night` stores them; then the nightly
    judgement."""
    engine = store.connect(f"sqlite:///{path}")
    for index, night in enumerate(nights):
        commands.ingest(engine, [night], night=FIRST_NIGHT + dt.timedelta(days=index))
    return detect(engine)


def ingest_series(detection: Detection) -> dict[str, SeriesAnalysis]:
    return {
        a.history.identity.metric: a for a in detection.analyses if a.history.identity.benchmark == BENCHMARK
    }


@pytest.mark.slow
def test_a_slowed_ingest_is_flagged_from_its_first_night_and_the_same_history_unslowed_is_not(
    suite: pytest.Pytester, slowed_ingest: Callable[[], AbstractContextManager[None]], tmp_path: Path
) -> None:
    normal = [measure(suite, tmp_path / f"normal-{n}.json") for n in range(NORMAL_NIGHTS + SLOWED_NIGHTS)]
    with slowed_ingest():
        slowed = [measure(suite, tmp_path / f"slowed-{n}.json") for n in range(SLOWED_NIGHTS)]
    # Nights in a seeded order rather than the order measured: a burst of load on the test machine lands on
    # scattered nights, never as a step at the end of the unslowed history.
    random.Random(0).shuffle(normal)

    regressed = judged(tmp_path / "regressed.sqlite", normal[:NORMAL_NIGHTS] + slowed)
    series = ingest_series(regressed)
    assert set(series) == {"perf/time_s", "perf/results_per_s", "store/statements_per_result"}
    first_slowed = FIRST_NIGHT + dt.timedelta(days=NORMAL_NIGHTS)
    for metric in ("perf/time_s", "perf/results_per_s"):
        analysis = series[metric]
        assert analysis.state is SeriesState.REGRESSION, (metric, analysis.state, analysis.history.nights)
        assert analysis.first_bad is not None
        assert analysis.history.nights[analysis.first_bad].night == first_slowed
    (incident,) = regressed.open_incidents
    assert incident.night == first_slowed
    moved = {s.metric for s in IncidentDetail.from_json(incident.details).series}
    assert {"perf/time_s", "perf/results_per_s"} <= moved
    assert series["store/statements_per_result"].state is SeriesState.OK  # a count: the sleep is no query

    control = judged(tmp_path / "control.sqlite", normal)
    states = {metric: a.state for metric, a in ingest_series(control).items()}
    assert len(states) == 3 and SeriesState.REGRESSION not in states.values(), states
    assert control.open_incidents == []


@pytest.mark.parametrize("series", [20, 40])
def test_the_judgement_reads_each_series_nights_once(tmp_path: Path, series: int) -> None:
    """A deterministic budget, like the statements of an ingest (tests/results/test_batch_writes.py): the
    rows a fresh store hands to the nightly judgement are one result per series and night, the nights' runs
    and a few rows per series, never a series' history read again for each of its nights or metrics."""
    nights = 60
    engine = store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")
    store_speed.fill_nightly_store(engine, series, nights)
    with rows_read(engine) as rows:
        detection = detect(engine)
    assert len(detection.analyses) == series
    assert series * nights <= rows[0] <= series * nights + nights + 2 * series + 20
