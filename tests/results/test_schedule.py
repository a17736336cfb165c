"""Nightly runs apart from ad-hoc runs: every run is kept, a night's runs of one series are
aggregated (median, with the count), only the nightly's runs are judged, every run is reported, and series
that differ in settings are named by what differs.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_schedule.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import insert, select

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode
from jaxbench.harness.runtime.options import LEGACY_SCHEDULE, RunOptions, Schedule
from jaxbench.results import schema, store, synthetic
from jaxbench.results.history import ResultRow, between_runs, every_night, nightly_nights
from jaxbench.results.ingest import parse_file

START = dt.date(2026, 10, 1)
NIGHTLY, AD_HOC = Schedule.NIGHTLY.value, Schedule.AD_HOC.value


def night(days: int) -> dt.date:
    return START + dt.timedelta(days=days)


def row(
    value: float | None, run_id: int, schedule: str = NIGHTLY, *, hour: int = 2, status: str = "ok"
) -> ResultRow:
    started = dt.datetime.combine(START, dt.time(hour), tzinfo=dt.UTC)
    return ResultRow(value, status, run_id, started, "c0nf1g", schedule)


# Histories: pure, from rows as the store gives them -------------------------------------------------------


def test_a_nights_runs_are_their_median_with_the_count() -> None:
    rows = {
        START: [
            row(0.53, 7, AD_HOC, hour=12),
            row(0.50, 5, AD_HOC, hour=10),
            row(None, 8, AD_HOC, hour=13, status="oom"),
            row(0.51, 6, AD_HOC, hour=11),
        ]
    }
    [aggregated] = every_night(rows, set())
    assert aggregated.value == pytest.approx(0.51)  # the failed run counts, but has no value to take
    assert aggregated.runs == 4 and aggregated.ad_hoc_runs == 4
    assert aggregated.run_ids == (5, 6, 7, 8) and aggregated.run_id == 8  # oldest first; the newest points
    assert aggregated.status == "ok"


def test_a_night_of_ad_hoc_runs_alone_is_a_gap_for_the_nightly_and_shown_in_every_view() -> None:
    rows = {
        night(0): [row(0.9, 1, AD_HOC)],  # before the nightly ever ran this series: not judged at all
        night(1): [row(0.50, 2)],
        night(2): [row(0.9, 3, AD_HOC), row(0.8, 4, AD_HOC)],
        night(4): [row(0.50, 5), row(0.9, 6, AD_HOC, hour=3)],
        night(5): [row(0.9, 7, AD_HOC)],  # after the nightly's newest run: tonight's ad-hoc run
    }
    gaps = {night(3)}  # no run at all: the store's gap
    judged = nightly_nights(rows, gaps)
    assert [(n.night, n.value, n.status) for n in judged] == [
        (night(1), 0.50, "ok"),
        (night(2), None, "gap"),
        (night(3), None, "gap"),
        (night(4), 0.50, "ok"),  # the ad-hoc run beside the nightly's is left out
    ]
    assert [n.runs for n in judged] == [1, 0, 0, 1] and all(n.ad_hoc_runs == 0 for n in judged)
    shown = every_night(rows, gaps)
    assert [(n.night, n.status) for n in shown] == [(night(d), "gap" if d == 3 else "ok") for d in range(6)]
    assert shown[2].value == pytest.approx(0.85) and shown[2].ad_hoc_runs == 2
    assert shown[4].value == pytest.approx(0.70) and (shown[4].runs, shown[4].ad_hoc_runs) == (2, 1)


@given(
    ran=st.sets(st.integers(0, 30), max_size=12),
    gaps=st.sets(st.integers(-3, 33), max_size=8),
    failed=st.sets(st.integers(0, 30)),
)
def test_without_ad_hoc_runs_the_nightly_view_is_every_view_between_its_first_and_last_run(
    ran: set[int], gaps: set[int], failed: set[int]
) -> None:
    """The loader's shortcut for a series the nightly alone ran (results/history.load_history_views) against
    the general rule: the same nights, gaps at either end dropped, failed nights kept."""
    rows = {
        night(d): [row(None if d in failed else 0.5, d + 1, status="oom" if d in failed else "ok")]
        for d in ran
    }
    store_gaps = {night(d) for d in gaps}
    assert between_runs(every_night(rows, store_gaps)) == nightly_nights(rows, store_gaps)


def test_a_series_run_by_hand_only_is_never_judged() -> None:
    assert nightly_nights({START: [row(0.5, 1, AD_HOC)], night(1): [row(0.5, 2, AD_HOC)]}, set()) == []


# Schedules recorded and read back -------------------------------------------------------------------------


def test_only_a_nightly_run_passes_nightly_on_to_a_run_elsewhere() -> None:
    """The image launcher re-runs `jaxbench run` inside the image with these arguments."""
    options = RunOptions("llama2", size="tiny", overrides=("train.global_batch=16",))
    assert "--nightly" not in options.recipe_arguments()
    nightly = dataclasses.replace(options, schedule=Schedule.NIGHTLY).recipe_arguments()
    assert nightly[:1] == ["llama2"] and nightly.count("--nightly") == 1


def test_files_written_before_schedules_are_nightly(tmp_path: Path) -> None:
    document = synthetic.run_result(START, 0.5)
    del document["schedule"]
    assert parse_file(synthetic.write(tmp_path, document)).schedule == LEGACY_SCHEDULE == Schedule.NIGHTLY
    ad_hoc = synthetic.run_result(START, 0.5, schedule=Schedule.AD_HOC)
    assert parse_file(synthetic.write(tmp_path, ad_hoc)).schedule == AD_HOC


def test_runs_stored_before_schedules_are_nightly(store_url: str, tmp_path: Path) -> None:
    """A store at the schema before schedules, upgraded: its runs stay judged."""
    engine = store.connect(store_url, migrate=False)
    store.upgrade(engine, "0002")
    run = parse_file(synthetic.write(tmp_path, synthetic.run_result(START, 0.5, schedule=Schedule.AD_HOC)))
    fields = {
        f.name: getattr(run, f.name)
        for f in dataclasses.fields(run)
        if f.name not in ("components", "results", "schedule", "program", "profile")  # 0002 columns
    }
    with engine.begin() as connection:
        connection.execute(insert(schema.Run.__table__).values(**fields, ingested_at=dt.datetime.now(dt.UTC)))
    store.upgrade(engine)
    with engine.connect() as connection:
        assert connection.execute(select(schema.Run.schedule)).scalars().all() == [NIGHTLY]


# The "done when", through the real command line ---------------------------------------------------

VARIANT_BATCH = 16


def by_hand_then_nightly(runs: Path, *, variant_schedule: Schedule = Schedule.AD_HOC) -> list[Path]:
    """Night 0: three runs by hand and one `--set train.global_batch=16` variant; nights 1-24: the nightly."""
    documents: list[dict[str, Any]] = [
        synthetic.run_result(START, t, schedule=Schedule.AD_HOC, started_at=dt.time(h))
        for h, t in ((10, 0.50), (11, 0.54), (12, 0.52))
    ]
    documents.append(
        synthetic.run_result(
            START, 0.2, schedule=variant_schedule, global_batch=VARIANT_BATCH, started_at=dt.time(13)
        )
    )
    documents += [
        synthetic.run_result(night(d), 0.5 * (1 + 0.003 * (-1) ** d), schedule=Schedule.NIGHTLY)
        for d in range(1, 25)
    ]
    return [synthetic.write(runs, document) for document in documents]


@pytest.fixture
def cli_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("JAXBENCH_DB", url)
    return url


def test_runs_by_hand_and_a_variant_open_no_incident_and_are_all_reported(
    cli_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    by_hand_then_nightly(tmp_path / "runs")
    assert cli.main(["ingest", str(tmp_path / "runs")]) == ExitCode.OK
    with store.connect(cli_store).connect() as connection:
        schedules = connection.execute(select(schema.Run.schedule)).scalars().all()
    assert sorted(schedules).count(AD_HOC) == 4 and len(schedules) == 28  # every run is kept
    capsys.readouterr()

    assert cli.main(["detect"]) == ExitCode.OK
    assert "0 open incidents" in capsys.readouterr().out
    with store.connect(cli_store).connect() as connection:
        assert connection.execute(select(schema.Incident)).all() == []

    assert cli.main(["report", "--format", "markdown"]) == ExitCode.OK
    markdown = capsys.readouterr().out
    assert "0 open incidents" in markdown
    assert "llama2-7b · global_batch=16 (ad hoc)" in markdown
    assert "| llama2-7b (jax) | perf/step_time_s |" in markdown  # the default: no label, judged

    assert cli.main(["report", "--format", "json"]) == ExitCode.OK
    series = json.loads(capsys.readouterr().out)["data"]["series"]
    variants = [s for s in series if s["variant"]]
    assert {s["variant"] for s in variants} == {f"global_batch={VARIANT_BATCH}"}
    assert all(s["ad_hoc"] and s["name"] == "llama2-7b · global_batch=16 (ad hoc)" for s in variants)
    [step_time] = [s for s in series if s["metric"] == "perf/step_time_s" and not s["variant"]]
    assert step_time["name"] == "llama2-7b" and not step_time["ad_hoc"]
    first = step_time["points"][0]  # the night of the runs by hand, shown though never judged
    assert (first["night"], first["runs"], first["ad_hoc_runs"]) == (START.isoformat(), 3, 3)
    assert first["value"] == pytest.approx(0.52, rel=0.02)
    assert len(step_time["points"]) == 25

    assert cli.main(["report"]) == ExitCode.OK
    table = capsys.readouterr().out
    assert "global_batch=16 (ad hoc)" in table and "0 open incidents" in table  # the name may wrap


def test_several_runs_of_the_newest_night_show_as_their_median(
    cli_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three runs by hand on the nightly's newest night: reported as a median of 4, judged on the nightly's
    own run (a slow run by hand cannot open an incident)."""
    paths = by_hand_then_nightly(tmp_path / "runs")
    newest = night(24)
    paths += [
        synthetic.write(
            tmp_path / "runs",
            synthetic.run_result(newest, 0.5 * slower, schedule=Schedule.AD_HOC, started_at=dt.time(h)),
        )
        for h, slower in ((9, 1.4), (10, 1.5), (11, 1.6))
    ]
    assert cli.main(["ingest", *map(str, paths)]) == ExitCode.OK
    assert cli.main(["detect"]) == ExitCode.OK
    capsys.readouterr()
    assert cli.main(["report", "--format", "markdown"]) == ExitCode.OK
    markdown = capsys.readouterr().out
    assert "(median of 4 runs, 3 ad hoc)" in markdown and "0 open incidents" in markdown


def test_a_variant_the_nightly_ran_once_is_missing_later(
    cli_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control: a series the nightly ran and then stopped running is still a missing metric."""
    by_hand_then_nightly(tmp_path / "runs", variant_schedule=Schedule.NIGHTLY)
    assert cli.main(["ingest", str(tmp_path / "runs")]) == ExitCode.OK
    assert cli.main(["detect"]) == ExitCode.REGRESSION
    assert "validity" in capsys.readouterr().out
    with store.connect(cli_store).connect() as connection:
        details = connection.execute(select(schema.Incident.details)).scalars().all()
    problems = {p for d in details for p in d["problems"]}
    assert problems == {f"missing metric: no value on {night(24)} while its benchmark ran"}


def test_backfilled_nights_are_judged_and_neither_make_nor_bound_gaps(
    cli_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Releases a fortnight apart, then the nightly: the backfill's nights are judged like the nightly's (a
    release 8 % slower opens an incident), and the nights between releases are no gaps."""
    releases = [night(d) for d in (0, 14, 28, 42, 56, 70)]
    documents = [
        synthetic.run_result(
            day, 0.5 * (1.08 if i >= 4 else 1) * (1 + 0.002 * (-1) ** i), schedule=Schedule.BACKFILL
        )
        for i, day in enumerate(releases)
    ]
    documents += [
        synthetic.run_result(night(d), 0.54 * (1 + 0.002 * (-1) ** d), schedule=Schedule.NIGHTLY)
        for d in range(80, 92)
    ]
    paths = [synthetic.write(tmp_path / "runs", document) for document in documents]
    assert cli.main(["ingest", *map(str, paths)]) == ExitCode.OK
    with store.connect(cli_store).connect() as connection:
        gap_nights = connection.execute(select(schema.Gap.night)).scalars().all()
        schedules = connection.execute(select(schema.Run.schedule)).scalars().all()
    assert gap_nights == [] and schedules.count(Schedule.BACKFILL.value) == 6
    rows = {day: [row(0.5, i, Schedule.BACKFILL.value)] for i, day in enumerate(releases)}
    assert [n.night for n in nightly_nights(rows, set())] == releases  # judged, and no night between
    capsys.readouterr()
    assert cli.main(["detect"]) == ExitCode.REGRESSION
    out = capsys.readouterr().out
    assert f"first bad night {releases[4]}" in out and "1 open incidents" in out


def test_a_backfill_run_passes_backfill_on_to_a_run_elsewhere() -> None:
    arguments = dataclasses.replace(RunOptions("llama2"), schedule=Schedule.BACKFILL).recipe_arguments()
    assert arguments.count("--backfill") == 1 and "--nightly" not in arguments
