"""The result format: the committed JSON Schema matches the code, and files are written atomically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jaxbench.core.files import write_atomic_bytes
from jaxbench.harness.measure.metrics import METRICS, Direction, throughput_metric
from jaxbench.harness.runtime import result


def test_committed_schema_matches_the_models() -> None:
    committed = json.loads(result.SCHEMA_PATH.read_text())
    assert committed == result.json_schema(), (
        "harness/runtime/schema is stale: run `python -m jaxbench.harness.runtime.result` (and bump "
        "SCHEMA_VERSION if readers of version-1 files would misread the new ones)"
    )
    assert committed["properties"]["schema_version"]["const"] == result.SCHEMA_VERSION


def test_schema_requires_status_and_provenance() -> None:
    required = set(json.loads(result.SCHEMA_PATH.read_text())["required"])
    assert {"status", "recipe", "timing", "provenance", "run_id"} <= required


def test_atomic_write_leaves_no_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "out" / "r.json"
    result.write_atomic(target, "first")

    with pytest.raises(TypeError):
        write_atomic_bytes(target, 42)  # type: ignore[arg-type]  # fails half-way through the write
    assert target.read_text() == "first"
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]  # no temporary file left behind


def test_metric_values_keep_declared_units_and_directions() -> None:
    values = result.metric_values(
        {"perf/step_time_s": 0.5, "perf/mfu": None, "loss/final_window": float("nan")}
    )
    assert [(m.name, m.unit, m.direction) for m in values] == [("perf/step_time_s", "s", Direction.LOWER)]
    with pytest.raises(KeyError, match="undeclared metrics"):
        result.metric_values({"perf/made_up": 1.0})


def test_throughput_metrics_are_declared_for_every_unit() -> None:
    for unit in ("token", "image"):
        for per_device in (False, True):
            assert METRICS[throughput_metric(unit, per_device)].direction is Direction.HIGHER
    assert METRICS["perf/step_time_s"].direction is Direction.LOWER
