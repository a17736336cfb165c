"""Judgements end to end on a real store: incidents with their component ranges and flag changes, recovery,
human verdicts, validity and correctness, and the `detect` exit code CI gates on; the incident detail in the
store's shape, and a judgement that never imports a report."""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode
from jaxbench.harness.measure.hlo import ProgramSummary
from jaxbench.harness.runtime.result import Profile, Program, Status
from jaxbench.results import alert_plan, commands, schema, store, synthetic
from jaxbench.results.judgement.detect import detect
from jaxbench.results.judgement.vocabulary import (
    ComponentRange,
    IncidentDetail,
    IncidentKind,
    IncidentState,
    SeriesState,
    SettingChange,
)
from jaxbench.results.report.build import incident_view

START = dt.date(2026, 9, 1)


def nightly(
    tmp_path: Path,
    nights: int,
    step_time: Any,
    **overrides: Any,
) -> list[Path]:
    """One result per night; step_time(i) gives night i's step time, overrides(i) any other factory field."""
    rng = random.Random(7)
    paths = []
    for i in range(nights):
        fields = {k: (v(i) if callable(v) else v) for k, v in overrides.items()}
        noisy = step_time(i) * (1 + rng.gauss(0, 0.005))
        document = synthetic.run_result(START + dt.timedelta(days=i), noisy, **fields)
        paths.append(synthetic.write(tmp_path / "runs", document))
    return paths


def ingest_all(url: str, paths: list[Path]) -> Engine:
    engine = store.connect(url)
    commands.ingest(engine, paths)
    return engine


def test_step_regression_names_the_moved_components_and_flags(store_url: str, tmp_path: Path) -> None:
    bad_from = 30
    paths = nightly(
        tmp_path,
        40,
        lambda i: 0.5 * (1.08 if i >= bad_from else 1.0),
        image_manifest=lambda i: synthetic.manifest(jax_commit=("2" if i >= bad_from else "1") * 40),
        xla_flags=lambda i: "--xla_foo=" + ("0" if i >= bad_from else "1"),
    )
    engine = ingest_all(store_url, paths)
    detection = detect(engine)
    [incident] = detection.open_incidents
    assert incident.kind == IncidentKind.THROUGHPUT and incident.night == START + dt.timedelta(days=bad_from)
    details = incident.details
    assert details["last_good_night"] == (START + dt.timedelta(days=bad_from - 1)).isoformat()
    assert {s["metric"] for s in details["series"]} >= {"perf/step_time_s", "perf/tokens_per_s"}
    [jax] = [c for c in details["components"] if c["name"] == "jax"]
    assert (jax["last_good"], jax["first_bad"]) == ("1" * 40, "2" * 40)
    assert jax["compare_url"] == f"{synthetic.JAX_REPO}/compare/{'1' * 40}...{'2' * 40}"
    assert [c["name"] for c in details["components"]] == ["jax"]  # xla did not move
    assert details["flag_changes"] == [{"name": "--xla_foo", "before": "1", "after": "0"}]
    states = {a.history.identity.metric: a.state for a in detection.analyses}
    assert states["perf/step_time_s"] is SeriesState.REGRESSION
    assert states["perf/compile_time_s"] is SeriesState.OK


def program(fingerprint: str, fusions: int, flops: float) -> Program:
    summary = ProgramSummary(
        fingerprint=fingerprint * 64,
        instructions=100 + fusions,
        fusions={"kLoop": fusions},
        ops={"fusion": fusions, "other": 100},
        collectives={"all-reduce": 2},
        custom_calls={},
    )
    return Program(summary=summary, cost={"flops": flops}, hlo_file=None)


@pytest.mark.parametrize(
    ("bad_program", "expected"),
    [
        (program("a", 12, 1e12), "same program (fingerprint aaaaaaaaaaaa): the change lies outside it"),
        (
            program("b", 14, 1.1e12),
            "program changed (aaaaaaaaaaaa → bbbbbbbbbbbb): fusions kLoop 12 → 14; ops ",
        ),
    ],
    ids=["same", "changed"],
)
def test_an_incident_says_whether_the_program_changed(
    bad_program: Program, expected: str, store_url: str, tmp_path: Path
) -> None:
    bad_from = 30
    paths = nightly(
        tmp_path,
        40,
        lambda i: 0.5 * (1.08 if i >= bad_from else 1.0),
        program=lambda i: bad_program if i >= bad_from else program("a", 12, 1e12),
    )
    [incident] = detect(ingest_all(store_url, paths)).open_incidents
    described = IncidentDetail.from_json(incident.details).program
    assert described is not None and described.describe().startswith(expected)
    if not described.same_program:
        assert described.changes == ("fusions kLoop 12 → 14", "ops fusion 12 → 14")
        assert described.flops_ratio == pytest.approx(1.1)
    markdown = alert_plan.issue_body(incident_view(incident, {}))
    assert f"Compiled program: {expected}" in markdown.replace("\\", "")


def profiled(matmul_ms: float) -> Profile:
    seconds = {"matmul": matmul_ms / 1e3, "collectives": 0.002, "host": 0.001}
    return Profile(steps=3, wall_s=0.1, seconds_per_step=seconds, trace="x.native/profile")


def test_an_incident_of_profiled_runs_compares_their_time_by_kind(store_url: str, tmp_path: Path) -> None:
    paths = nightly(
        tmp_path,
        40,
        lambda i: 0.5 * (1.08 if i >= 30 else 1.0),
        profile=lambda i: profiled(13 if i >= 30 else 9),
    )
    [incident] = detect(ingest_all(store_url, paths)).open_incidents
    time = IncidentDetail.from_json(incident.details).time
    assert time is not None
    assert time.seconds_per_step == (
        ("matmul", 0.009, 0.013),
        ("collectives", 0.002, 0.002),
        ("host", 0.001, 0.001),
    )
    described = "time per step, last good → first bad: matmul 9 → 13 ms; collectives 2 → 2 ms; host 1 → 1 ms"
    assert time.describe() == described
    assert f"Profiled: {described}." in alert_plan.issue_body(incident_view(incident, {}))


def test_an_incident_of_runs_without_programs_keeps_the_old_detail_shape(
    store_url: str, tmp_path: Path
) -> None:
    paths = nightly(tmp_path, 40, lambda i: 0.5 * (1.08 if i >= 30 else 1.0))
    [incident] = detect(ingest_all(store_url, paths)).open_incidents
    assert "program" not in incident.details and "time" not in incident.details


def test_detect_exit_code_and_human_verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("JAXBENCH_DB", url)
    ingest_all(url, nightly(tmp_path, 36, lambda i: 0.5 * (1.1 if i >= 28 else 1.0)))
    assert cli.main(["detect"]) == ExitCode.REGRESSION
    [incident] = detect(store.connect(url)).open_incidents
    assert cli.main(["verdict", str(incident.id), "infrastructure", "--note", "bad node"]) == ExitCode.OK
    assert cli.main(["detect"]) == ExitCode.OK  # the verdict survives recomputation
    again = detect(store.connect(url))
    assert [i.state for i in again.incidents] == [IncidentState.RESOLVED.value]
    assert cli.main(["verdict", "999", "noise"]) == ExitCode.INVALID_INPUT


def test_short_lived_regression_is_found_and_recovered(tmp_path: Path) -> None:
    paths = nightly(tmp_path, 60, lambda i: 0.5 * (1.15 if 30 <= i < 36 else 1.0))
    detection = detect(ingest_all(f"sqlite:///{tmp_path / 's.sqlite'}", paths))
    assert detection.open_incidents == []
    throughput = [i for i in detection.incidents if i.kind == IncidentKind.THROUGHPUT.value]
    assert [(i.night, i.state) for i in throughput] == [
        (START + dt.timedelta(days=30), IncidentState.RECOVERED.value)
    ]


def test_stable_history_raises_nothing(tmp_path: Path) -> None:
    detection = detect(ingest_all(f"sqlite:///{tmp_path / 's.sqlite'}", nightly(tmp_path, 40, lambda i: 0.5)))
    assert detection.incidents == []
    assert {a.state for a in detection.analyses} == {SeriesState.OK}


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"status": lambda i: Status.OOM if i == 29 else Status.OK}, "run failed: oom"),
        ({"steps": lambda i: 30 if i == 29 else 20}, "configuration changed"),
    ],
)
def test_invalid_newest_run_is_a_validity_incident(
    tmp_path: Path, overrides: dict[str, Any], problem: str
) -> None:
    detection = detect(
        ingest_all(f"sqlite:///{tmp_path / 's.sqlite'}", nightly(tmp_path, 30, lambda i: 0.5, **overrides))
    )
    [incident] = detection.open_incidents
    assert incident.kind == IncidentKind.VALIDITY.value
    assert incident.night == START + dt.timedelta(days=29)
    assert any(problem in p for p in incident.details["problems"])


def test_missing_metric_is_invalid(tmp_path: Path) -> None:
    paths = nightly(tmp_path, 25, lambda i: 0.5)
    newest = synthetic.run_result(START + dt.timedelta(days=25), 0.5)
    newest["metrics"] = [m for m in newest["metrics"] if m["name"] != "perf/compile_time_s"]
    paths.append(synthetic.write(tmp_path / "runs", newest))
    detection = detect(ingest_all(f"sqlite:///{tmp_path / 's.sqlite'}", paths))
    states = {a.history.identity.metric: (a.state, a.problems) for a in detection.analyses}
    state, problems = states["perf/compile_time_s"]
    assert state is SeriesState.INVALID and problems[0].startswith("missing metric")


def test_diverging_loss_is_a_correctness_failure(tmp_path: Path) -> None:
    good = [4.0 - 2.0 * s / 20 for s in range(20)]
    diverged = [4.0 + 0.1 * s for s in range(20)]
    paths = nightly(tmp_path, 25, lambda i: 0.5, loss_curve=lambda i: diverged if i == 24 else good)
    detection = detect(ingest_all(f"sqlite:///{tmp_path / 's.sqlite'}", paths))
    states = {a.history.identity.metric: a for a in detection.analyses}
    loss = states["loss/final_window"]
    assert loss.state is SeriesState.INVALID and any("divergence" in p for p in loss.problems)


def test_loss_outside_the_band_of_history(tmp_path: Path) -> None:
    good = [4.0 - 2.0 * s / 20 for s in range(20)]
    lower = [x - 0.3 for x in good]  # better than ever: as suspicious as worse
    paths = nightly(tmp_path, 25, lambda i: 0.5, loss_curve=lambda i: lower if i == 24 else good)
    detection = detect(ingest_all(f"sqlite:///{tmp_path / 's.sqlite'}", paths))
    loss = {a.history.identity.metric: a for a in detection.analyses}["loss/final_window"]
    assert loss.state is SeriesState.REGRESSION
    assert any("below the band" in p for p in loss.problems)
    [incident] = [i for i in detection.open_incidents if i.kind == IncidentKind.CORRECTNESS.value]
    assert incident.night == START + dt.timedelta(days=24)


def test_a_loss_regression_that_persists_stays_one_incident_from_its_first_night(tmp_path: Path) -> None:
    good = [4.0 - 2.0 * s / 20 for s in range(20)]
    higher = [
        x * 1.074 for x in good
    ]  # a schedule default changed: the final loss 7.4 % higher from night 22
    paths = nightly(tmp_path, 25, lambda i: 0.5, loss_curve=lambda i: higher if i >= 22 else good)
    url = f"sqlite:///{tmp_path / 's.sqlite'}"
    first = detect(ingest_all(url, paths[:24]))
    [incident] = [i for i in first.open_incidents if i.kind == IncidentKind.CORRECTNESS.value]
    assert incident.night == START + dt.timedelta(days=22)
    # The next night is as bad: the same incident, still open, still from night 22 with its last good 21.
    again = detect(ingest_all(url, paths[24:]))
    [same] = [i for i in again.open_incidents if i.kind == IncidentKind.CORRECTNESS.value]
    assert same.fingerprint == incident.fingerprint and same.night == START + dt.timedelta(days=22)
    correctness = [i for i in again.incidents if i.kind == IncidentKind.CORRECTNESS.value]
    assert len(correctness) == 1
    view = incident_view(same, {})
    assert view.last_good_night == START + dt.timedelta(days=21)


def test_report_formats_from_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("JAXBENCH_DB", url)
    ingest_all(url, nightly(tmp_path, 30, lambda i: 0.5 * (1.1 if i >= 24 else 1.0)))
    assert cli.main(["report", "--format", "markdown"]) == ExitCode.OK
    markdown = capsys.readouterr().out
    assert "0 regressions" not in markdown and "## Incident #" in markdown
    assert cli.main(["report", "--format", "json"]) == ExitCode.OK
    assert '"schema_version": 1' in capsys.readouterr().out
    site, badges = tmp_path / "site", tmp_path / "badges"
    assert (
        cli.main(["report", "--format", "html", "--out", str(site), "--badges", str(badges)]) == ExitCode.OK
    )
    assert (site / "index.html").is_file() and list(badges.glob("*.json"))
    assert cli.main(["report", "--format", "html"]) == ExitCode.INVALID_INPUT


JAX_LINK = f"{synthetic.JAX_REPO}/compare/{'1' * 40}...{'2' * 40}"
STORED_DETAIL = {
    "last_good_night": "2026-09-30",
    "series": [
        {
            "key": "llama2-7b-perf-step-time-s-0123456789",
            "benchmark": "llama2-7b",
            "metric": "perf/step_time_s",
            "magnitude": 0.08,
            "state": "regression",
        },
    ],
    "components": [
        {
            "name": "jax",
            "repository": synthetic.JAX_REPO,
            "last_good": "1" * 40,
            "first_bad": "2" * 40,
            "compare_url": JAX_LINK,
        },
    ],
    "flag_changes": [{"name": "--xla_foo", "before": "1", "after": "0"}],
    "env_changes": [{"name": "NCCL_DEBUG", "before": None, "after": "INFO"}],
    "problems": [],
}
"""An incident's details as the store has kept them since its first schema (written as plain JSON)."""


def test_an_incident_detail_reads_and_writes_the_stored_shape() -> None:
    detail = IncidentDetail.from_json(STORED_DETAIL)
    assert detail.last_good_night == dt.date(2026, 9, 30)
    assert detail.series[0].state is SeriesState.REGRESSION and detail.series[0].magnitude == 0.08
    assert detail.components == (ComponentRange("jax", synthetic.JAX_REPO, "1" * 40, "2" * 40, JAX_LINK),)
    assert detail.env_changes == (SettingChange("NCCL_DEBUG", None, "INFO"),)
    assert detail.to_json() == STORED_DETAIL
    assert IncidentDetail.from_json({}) == IncidentDetail.from_json(None) == IncidentDetail()


def test_detect_stores_typed_details_and_the_detector_of_each_change_point(tmp_path: Path) -> None:
    paths = nightly(tmp_path, 40, lambda i: 0.5 * (1.08 if i >= 30 else 1.0))
    engine = ingest_all(f"sqlite:///{tmp_path / 's.sqlite'}", paths)
    detection = detect(engine)
    [incident] = detection.open_incidents
    detail = IncidentDetail.from_json(incident.details)
    assert detail.to_json() == incident.details
    assert {s.metric for s in detail.series} >= {"perf/step_time_s", "perf/tokens_per_s"}
    with engine.connect() as connection:
        detectors = set(connection.execute(select(schema.ChangePointRow.detector)).scalars())
    assert detectors == {"e-divisive"}
