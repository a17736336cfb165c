"""The store's speed: ingest of synthetic result files (results/s, and SQL statements per result), the
nightly detection over a year of nights (rows it reads per judged series) and the dashboard of that
judgement. The files and the filled store come from benchmarks/store_speed.py, which measures the same at
the scale of 100,000 results and 1,000 series.

    .venv/bin/python -m pytest benchmarks/self/test_store.py [--self-size small]
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture
from sqlalchemy import Engine, func, select

from benchmarks import store_speed
from benchmarks.self.counts import rows_read, statements
from benchmarks.self.sizes import Size
from jaxbench.results import commands, schema, store
from jaxbench.results.judgement.detect import Detection, detect
from jaxbench.results.report.build import build_report
from jaxbench.results.report.html import write_dashboard

WARMUP_ROUNDS = 1


@dataclasses.dataclass(frozen=True)
class IngestWork:
    files: list[Path]
    empty_store: Path
    """A migrated store with nothing in it: each round ingests into a fresh copy."""


@pytest.fixture(scope="module")
def ingest_work(size: Size, tmp_path_factory: pytest.TempPathFactory) -> IngestWork:
    folder = tmp_path_factory.mktemp("ingest")
    empty = folder / "empty.sqlite"
    store.connect(f"sqlite:///{empty}").dispose()
    return IngestWork(store_speed.result_files(folder / "files", size.ingest_files), empty)


def _ingest(engine: Engine, files: list[Path]) -> None:
    commands.ingest(engine, files)  # looked up on each call: a test may slow it (tests/results/)


def test_ingest(benchmark: BenchmarkFixture, ingest_work: IngestWork, size: Size, tmp_path: Path) -> None:
    copies = (tmp_path / f"store-{n}.sqlite" for n in itertools.count())

    def fresh_store() -> tuple[tuple[Engine, list[Path]], dict[str, object]]:
        copy = shutil.copy(ingest_work.empty_store, next(copies))
        return (store.connect(f"sqlite:///{copy}"), ingest_work.files), {}

    (engine, files), _ = fresh_store()
    with statements(engine) as executed:
        commands.ingest(engine, files)
    with engine.connect() as connection:
        results = connection.execute(select(func.count()).select_from(schema.Result)).scalar_one()
    engine.dispose()
    benchmark.pedantic(
        _ingest,
        setup=fresh_store,
        teardown=lambda engine, files: engine.dispose(),
        rounds=size.rounds,
        warmup_rounds=WARMUP_ROUNDS,
    )
    assert benchmark.stats is not None, "pytest-benchmark timed nothing: disabled (under pytest-xdist?)"
    benchmark.extra_info["results_per_s"] = results / benchmark.stats.stats.median
    benchmark.extra_info["statements_per_result"] = len(executed) / results


@dataclasses.dataclass(frozen=True)
class Judged:
    engine: Engine
    detection: Detection
    rows_per_series: float
    """Rows the store handed back to the first detection, per series it judged."""


@pytest.fixture(scope="module")
def judged(size: Size, tmp_path_factory: pytest.TempPathFactory) -> Judged:
    """series x nights (store_speed: a step in one series of 20), judged once with its rows counted."""
    engine = store.connect(f"sqlite:///{tmp_path_factory.mktemp('detect') / 'store.sqlite'}")
    store_speed.fill_nightly_store(engine, size.series, size.nights)
    with rows_read(engine) as rows:
        detection = detect(engine)
    return Judged(engine, detection, rows[0] / len(detection.analyses))


def test_detect(benchmark: BenchmarkFixture, judged: Judged, size: Size) -> None:
    benchmark.pedantic(detect, args=(judged.engine,), rounds=size.rounds, warmup_rounds=WARMUP_ROUNDS)
    benchmark.extra_info["rows_per_series"] = judged.rows_per_series


def test_dashboard(benchmark: BenchmarkFixture, judged: Judged, size: Size, tmp_path: Path) -> None:
    def build() -> None:
        write_dashboard(build_report(judged.detection, "self-bench"), tmp_path / "site")

    benchmark.pedantic(build, rounds=size.rounds, warmup_rounds=WARMUP_ROUNDS)
