"""A store that holds absurd values, and taking a run out of the judgement. `detect`, `report` and the
dashboard judge whatever finite value a store holds; `jaxbench runs quarantine|release|delete|list` records
a person's decision on a run (who, when, why), and every judgement leaves a quarantined run out while its
rows stay.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/test_quarantine.py
"""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from core.errors import ExitCode
from jaxbench import main as cli
from results import commands, schema, store, synthetic

START = dt.date(2026, 9, 1)
STEP_TIME = "perf/step_time_s"


def nightly_store(url: str, tmp_path: Path, nights: int = 16, step_time: float = 0.5) -> Engine:
    paths = [
        synthetic.write(tmp_path / "runs", synthetic.run_result(START + dt.timedelta(days=i), step_time))
        for i in range(nights)
    ]
    engine = store.connect(url)
    commands.ingest(engine, paths)
    return engine


def poison(engine: Engine, values: list[float]) -> None:
    """Night i's step time becomes values[i], as a store written before ingest checked measurements holds."""
    with engine.begin() as connection:
        rows = connection.execute(
            select(schema.Result.id)
            .join(schema.Series, schema.Series.id == schema.Result.series_id)
            .join(schema.Run, schema.Run.id == schema.Result.run_id)
            .where(schema.Series.metric == STEP_TIME)
            .order_by(schema.Run.night)
        ).scalars()
        for result_id, value in zip(rows, values, strict=True):
            connection.execute(update(schema.Result).where(schema.Result.id == result_id).values(value=value))


@pytest.mark.parametrize(
    "values",
    [[1e-300, 1e300] * 8, [-1e300, 1e300] * 8, [0.5] * 15 + [1.7976931348623157e308], [0.0, 5e-324] * 8],
    ids=["1e-300-1e300", "linear-extremes", "largest-float-tonight", "zero-and-subnormal"],
)
def test_no_stored_finite_value_breaks_detect_report_or_the_dashboard(
    values: list[float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("JAXBENCH_DB", url)
    poison(nightly_store(url, tmp_path), values)
    assert cli.main(["detect"]) in (ExitCode.OK, ExitCode.REGRESSION)
    for fmt in ("table", "markdown", "json"):
        assert cli.main(["report", "--format", fmt]) == ExitCode.OK, fmt
    capsys.readouterr()
    assert cli.main(["report", "--format", "json"]) == ExitCode.OK
    json.loads(capsys.readouterr().out, parse_constant=_no_constant)  # no NaN or Infinity either
    site, badges = tmp_path / "site", tmp_path / "badges"
    html = ["report", "--format", "html", "--out", str(site), "--badges", str(badges)]
    assert cli.main(html) == ExitCode.OK
    assert (site / "index.html").is_file()


def _no_constant(name: str) -> float:
    raise AssertionError(f"the JSON report holds {name}")


def test_the_largest_float_stays_finite_in_the_stored_judgement(tmp_path: Path) -> None:
    engine = nightly_store(f"sqlite:///{tmp_path / 'store.sqlite'}", tmp_path)
    poison(engine, [1e-300, 1e300] * 8)
    from results.judgement.detect import detect

    detection = detect(engine)
    with store.transaction(engine) as session:
        magnitudes = session.execute(select(schema.ChangePointRow.magnitude)).scalars().all()
    assert all(math.isfinite(m) for m in magnitudes)
    for incident in detection.incidents:
        json.dumps(incident.details, allow_nan=False)  # PostgreSQL's JSON holds no infinity
