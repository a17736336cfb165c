"""The real histories of the detection benchmark (benchmarks/data/histories): every series says where it
comes from and under which license, and every annotated change points into its own data, so that
benchmarks/detection_changes.py scores what the annotation says."""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
from pathlib import Path

import pytest

HISTORIES = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "histories"
REDISTRIBUTABLE = {"MIT", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "CC-BY-4.0", "CC0-1.0"}
NAMES = sorted(path.stem for path in HISTORIES.glob("*.json"))


def test_the_set_has_histories_with_and_without_changes() -> None:
    changed = [name for name in NAMES if json.loads((HISTORIES / f"{name}.json").read_text())["changes"]]
    assert len(NAMES) >= 8 and 0 < len(changed) < len(NAMES)
    assert sorted(path.stem for path in HISTORIES.glob("*.csv")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_history_names_its_source_and_its_changes_lie_in_its_data(name: str) -> None:
    meta = json.loads((HISTORIES / f"{name}.json").read_text())
    assert meta["license"] in REDISTRIBUTABLE
    assert meta["repository"].count("/") == 1 and len(meta["data_commit"]) == 40
    with (HISTORIES / f"{name}.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["date", "value", "commit"]
    values = [float(row["value"]) for row in rows]
    assert all(math.isfinite(v) and v > 0 for v in values)
    for row in rows:
        dt.date.fromisoformat(row["date"])  # raises on anything but an ISO date
    for change in meta["changes"]:
        assert change["kind"] in {"step", "transient"} and change["evidence"]
        assert 0 < change["index"] < len(values)
        if change["kind"] == "transient":
            assert change["index"] < change["end"] < len(values)
