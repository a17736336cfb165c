"""A store that holds absurd values, and taking a run out of the judgement. `detect`, `report` and the
dashboard judge whatever finite value a store holds; `jaxbench runs quarantine|release|delete|list` records
a person's decision on a run (who, when, why), and every judgement leaves a quarantined run out while its
rows stay.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_quarantine.py
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode
from jaxbench.results import commands, schema, store, synthetic

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
    from jaxbench.results.judgement.detect import detect

    detection = detect(engine)
    with store.transaction(engine) as session:
        magnitudes = session.execute(select(schema.ChangePointRow.magnitude)).scalars().all()
    assert all(math.isfinite(m) for m in magnitudes)
    for incident in detection.incidents:
        json.dumps(incident.details, allow_nan=False)  # PostgreSQL's JSON holds no infinity


# --- jaxbench runs: quarantine, release, delete, list -----------------------------------------------------


def night_runs(engine: Engine) -> list[int]:
    """Run ids, oldest night first."""
    with engine.connect() as connection:
        return list(connection.execute(select(schema.Run.id).order_by(schema.Run.night)).scalars())


def regressed_store(url: str, tmp_path: Path, nights: int = 40, bad: int = 2) -> Engine:
    """A steady step time, then `bad` nights 30 % slower: an open regression incident."""
    paths = [
        synthetic.write(
            tmp_path / "runs",
            synthetic.run_result(START + dt.timedelta(days=i), 0.5 * (1.3 if i >= nights - bad else 1.0)),
        )
        for i in range(nights)
    ]
    engine = store.connect(url)
    commands.ingest(engine, paths)
    return engine


def step_nights(capsys: pytest.CaptureFixture[str]) -> list[tuple[str, float | None]]:
    """(night, value) of the step time series in `jaxbench report --format json`."""
    capsys.readouterr()
    assert cli.main(["report", "--format", "json"]) == ExitCode.OK
    [series] = [s for s in json.loads(capsys.readouterr().out)["data"]["series"] if s["metric"] == STEP_TIME]
    return [(point["night"], point["value"]) for point in series["points"]]


def test_a_quarantined_run_leaves_every_judgement_and_keeps_its_rows(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JAXBENCH_DB", store_url)
    engine = regressed_store(store_url, tmp_path)
    runs = night_runs(engine)
    assert cli.main(["detect"]) == ExitCode.REGRESSION
    bad = [str(run) for run in runs[-2:]]
    quarantine = ["runs", "quarantine", *bad, "--note", "node-3's clock jumped", "--author", "ana"]
    assert cli.main(quarantine) == ExitCode.OK
    assert f"run {bad[0]}: quarantined" in capsys.readouterr().out
    assert cli.main(["detect"]) == ExitCode.OK  # the incident's evidence is out of the judgement
    shown = step_nights(capsys)
    assert len(shown) == 38 and all(value == pytest.approx(0.5, rel=0.01) for _, value in shown)
    with engine.connect() as connection:  # measurements stay apart from decisions: every row is kept
        assert len(connection.execute(select(schema.Run.id)).all()) == 40
    assert cli.main(["runs", "list", "--quarantined"]) == ExitCode.OK
    listed = capsys.readouterr().out
    assert (
        f"run {bad[1]}: " in listed and "quarantined " in listed and "by ana: node-3's clock jumped" in listed
    )
    assert "2 quarantined runs shown" in listed
    assert cli.main(["runs", "quarantine", bad[0], "--note", "again"]) == ExitCode.OK
    assert "already quarantined: nothing recorded" in capsys.readouterr().out
    assert cli.main(["runs", "release", *bad]) == ExitCode.OK
    assert cli.main(["detect"]) == ExitCode.REGRESSION  # back as it was
    assert len(step_nights(capsys)) == 40


def test_a_quarantined_night_between_others_is_a_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = nightly_store(f"sqlite:///{tmp_path / 'store.sqlite'}", tmp_path)
    monkeypatch.setenv("JAXBENCH_DB", str(engine.url))
    poison(engine, [0.5] * 7 + [1e300] + [0.5] * 8)
    middle = night_runs(engine)[7]
    assert cli.main(["runs", "quarantine", str(middle), "--note", "absurd"]) == ExitCode.OK
    shown = step_nights(capsys)
    assert shown[7] == ((START + dt.timedelta(days=7)).isoformat(), None) and len(shown) == 16
    assert all(value == pytest.approx(0.5) for _, value in shown[:7] + shown[8:])


def test_a_deleted_run_is_gone_for_good_recorded_and_not_ingested_again(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On PostgreSQL too, where incidents point at runs with foreign keys."""
    monkeypatch.setenv("JAXBENCH_DB", store_url)
    engine = regressed_store(store_url, tmp_path)
    assert cli.main(["detect"]) == ExitCode.REGRESSION  # an incident points at the first bad run
    first_bad = night_runs(engine)[-2]
    delete = ["runs", "delete", str(first_bad), "--note", "a test file", "--author", "ana"]
    assert cli.main(delete) == ExitCode.INVALID_INPUT  # not confirmed: nothing happens
    assert "add --yes to confirm" in capsys.readouterr().err
    assert first_bad in night_runs(engine)
    assert cli.main([*delete, "--yes"]) == ExitCode.OK
    assert f"run {first_bad}: deleted" in capsys.readouterr().out
    assert first_bad not in night_runs(engine) and len(night_runs(engine)) == 39
    with engine.connect() as connection:
        assert (
            connection.execute(select(schema.Result.id).where(schema.Result.run_id == first_bad)).all() == []
        )
    assert cli.main(["detect"]) in (ExitCode.OK, ExitCode.REGRESSION)
    again = commands.ingest(engine, sorted((tmp_path / "runs").glob("*.json")))
    assert again.added == [] and len(again.deleted) == 1 and len(again.skipped) == 39
    assert cli.main(["runs", "list", "--deleted"]) == ExitCode.OK
    assert f"run {first_bad} (" in (listed := capsys.readouterr().out) and "by ana: a test file" in listed


def test_a_run_deleted_between_two_nights_leaves_a_gap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = nightly_store(f"sqlite:///{tmp_path / 'store.sqlite'}", tmp_path)
    from jaxbench.results import quarantine

    quarantine.delete(engine, [night_runs(engine)[5]], "ana", "absurd")
    with engine.connect() as connection:
        gaps = connection.execute(select(schema.Gap.night)).scalars().all()
    assert sorted(set(gaps)) == [START + dt.timedelta(days=5)]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ["quarantine", "\u00b2", "--note", "x"],
            r"run '²': expected a number from 1 to 9223372036854775807",
        ),
        (["quarantine", "\u0661", "--note", "x"], r"run '١': expected a number"),
        (
            ["quarantine", "99999999999999999999999", "--note", "x"],
            r"run '99999999999999999999999': expected",
        ),
        (["quarantine", "1", "99", "--note", "x"], r"run 99: no such run in the store"),
        (["quarantine", "1"], r"runs quarantine: --note WHY is required"),
        (["delete", "1", "--note", " ", "--yes"], r"runs delete: --note WHY is required"),
    ],
    ids=["superscript", "arabic-indic", "beyond-an-integer", "unknown", "no-note", "blank-note"],
)
def test_a_bad_run_id_or_a_missing_reason_is_refused_and_nothing_recorded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    arguments: list[str],
    message: str,
) -> None:
    engine = nightly_store(f"sqlite:///{tmp_path / 'store.sqlite'}", tmp_path, nights=2)
    monkeypatch.setenv("JAXBENCH_DB", str(engine.url))
    capsys.readouterr()
    assert cli.main(["runs", *arguments]) == ExitCode.INVALID_INPUT
    err = capsys.readouterr().err.strip()
    assert re.search(message, err) and len(err.splitlines()) == 1, err
    with engine.connect() as connection:
        assert connection.execute(select(schema.RunDecision.id)).all() == []


def test_the_cli_knows_every_decision() -> None:
    from jaxbench.results.cli import RUN_DECISIONS
    from jaxbench.results.quarantine import Decision

    assert tuple(d.value for d in Decision) == RUN_DECISIONS


def test_the_newest_quarantine_or_release_is_in_force() -> None:
    from jaxbench.results.quarantine import in_force

    decisions = [(1, "quarantine"), (2, "quarantine"), (1, "release"), (3, "delete"), (2, "quarantine")]
    assert in_force(decisions) == {2}
    assert in_force([*decisions, (1, "quarantine"), (2, "release")]) == {1}
