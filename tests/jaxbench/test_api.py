"""The Python API (jaxbench/api.py): a store read as records and DataFrames, and a recipe run in-process.

JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/jaxbench/test_api.py
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

import pytest

from jaxbench import api
from jaxbench.harness.runtime.options import Schedule
from jaxbench.results import store, synthetic
from jaxbench.results.batch import ingest
from jaxbench.results.judgement.detect import detect

START = dt.date(2026, 10, 1)
NIGHTS = 24
STEP_NIGHT = 16


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store of 24 nightly runs of llama2-7b, 10 % slower from night 16, one ad-hoc run, judged once."""
    folder = tmp_path_factory.mktemp("api-store")
    rng = random.Random(4)
    paths = [
        synthetic.write(
            folder / "results",
            synthetic.run_result(
                START + dt.timedelta(days=n),
                0.5 * (1.1 if n >= STEP_NIGHT else 1.0) * (1 + rng.gauss(0, 0.003)),
            ),
        )
        for n in range(NIGHTS)
    ]
    ad_hoc = synthetic.run_result(START + dt.timedelta(days=3), 0.6, schedule=Schedule.AD_HOC)
    paths.append(synthetic.write(folder / "results", ad_hoc))
    database = f"sqlite:///{folder / 'store.sqlite'}"
    engine = store.connect(database)
    ingest(engine, paths)
    detect(engine)
    return database


def test_runs_are_records_with_recipe_backend_schedule_and_components(url: str) -> None:
    runs = api.open_store(url).runs()
    assert len(runs) == NIGHTS + 1 and [r.night for r in runs] == sorted(r.night for r in runs)
    assert {r.recipe for r in runs} == {"llama2-7b"} and {r.backend for r in runs} == {"native"}
    assert sum(r.schedule == "ad-hoc" for r in runs) == 1
    assert all(r.status == "ok" and "jax" in r.components for r in runs)
    assert len(api.open_store(url).runs(schedule="nightly")) == NIGHTS


def test_series_hold_one_value_a_night_and_the_step(url: str) -> None:
    series = api.open_store(url).series()
    [step_time] = [s for s in series if s.metric == "perf/step_time_s"]
    assert len(step_time.nights) == NIGHTS and step_time.nights[0] == START
    before, after = step_time.values[STEP_NIGHT - 1], step_time.values[STEP_NIGHT]
    assert before is not None and after is not None and after / before == pytest.approx(1.1, rel=0.03)
    assert step_time.unit == "s" and step_time.higher_is_better is False and step_time.backend == "native"
    assert step_time.settings["global_batch"] == 64 and "H100" in step_time.hardware


def test_incidents_are_the_stored_ones_with_their_night(url: str) -> None:
    store_ = api.open_store(url)
    [incident] = store_.incidents(state="open", kind="throughput")
    assert incident.night == START + dt.timedelta(days=STEP_NIGHT)
    assert incident.first_bad_run_id is not None and incident.details["series"]
    assert store_.incidents(kind="correctness") == []


def test_frames_are_one_row_per_series_night_run_and_incident(url: str) -> None:
    store_ = api.open_store(url)
    series = store_.frame("series")
    assert len(series) == sum(len(s.nights) for s in store_.series())
    assert {"key", "metric", "night", "value", "status"} <= set(series.columns)
    assert len(store_.frame("runs")) == NIGHTS + 1
    assert list(store_.frame("incidents")["kind"]).count("throughput") == 1
    with pytest.raises(ValueError, match="expected series, runs or incidents"):
        store_.frame("nights")  # type: ignore[arg-type]


def test_reading_a_store_does_not_write_to_it(url: str) -> None:
    path = Path(url.removeprefix("sqlite:///"))
    before = path.stat().st_mtime_ns, path.read_bytes()
    reader = api.open_store(url)
    reader.series(), reader.runs(), reader.incidents(), reader.frame("series")
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before


@pytest.mark.slow
def test_a_recipe_runs_in_process_and_returns_its_result(tmp_path: Path) -> None:
    result = api.run("llama2", size="tiny", steps=12, overrides=("train.global_batch=8",), out_dir=tmp_path)
    assert result.status.value == "ok" and result.recipe.name == "llama2-tiny"
    assert result.throughput is not None and result.throughput.per_s_per_device > 0
    assert len(list(tmp_path.glob("*.json"))) == 1  # the result file, not ingested
