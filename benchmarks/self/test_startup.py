"""Start-up of whole `jaxbench` processes that do not train: `--help`, `recipes`, and `report` on an empty
SQLite store (which imports the detection), each with the modules a fresh process imports for it. The wall
time is benchmarks/startup_time.py's, which also prints them next to a bare interpreter.

    .venv/bin/python -m pytest benchmarks/self/test_startup.py
"""

from __future__ import annotations

import sys

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from benchmarks import startup_time
from benchmarks.self.counts import modules_imported
from benchmarks.self.sizes import Size
from jaxbench.results import store

WARMUP_ROUNDS = 1


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('startup') / 'empty.sqlite'}"
    store.connect(url).dispose()
    return url


@pytest.mark.parametrize("command", ["--help", "recipes", "report"])
def test_startup(
    benchmark: BenchmarkFixture, command: str, empty_store: str, size: Size, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAXBENCH_DB", empty_store)  # the processes inherit it (startup_time.wall_time)
    argv = [sys.executable, "-m", "jaxbench", command]
    benchmark.pedantic(startup_time.wall_time, args=(argv,), rounds=size.rounds, warmup_rounds=WARMUP_ROUNDS)
    benchmark.extra_info["modules_imported"] = modules_imported([command])
