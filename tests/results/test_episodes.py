"""Transients and drifts (results/detection/episodes.py): a block of nights that came and went is one
transient, a slow trend is one drift and never a chain of change points, and a real step stays a step on top
of a drift; on a real store a transient is one recovered incident with both commit ranges, and a drift opens
none."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import numpy as np
import pytest

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode
from jaxbench.results import commands, store, synthetic
from jaxbench.results.detection import Findings, SpanKind, run_detectors
from jaxbench.results.judgement.detect import detect
from jaxbench.results.judgement.vocabulary import IncidentDetail, IncidentKind, IncidentState
from jaxbench.results.report import github_markdown
from jaxbench.results.report.build import build_report
from jaxbench.results.report.html import write_dashboard

START = dt.date(2026, 6, 1)


def noisy(nights: int, noise: float = 0.01, seed: int = 1) -> np.ndarray:
    return 0.2 * np.exp(np.random.default_rng(seed).normal(0, noise, nights))


def found(values: np.ndarray) -> Findings:
    return run_detectors(list(values), higher_is_better=False)


def spans(values: np.ndarray) -> list[tuple[SpanKind, int, int]]:
    return [(s.kind, s.start, s.stop) for s in found(values).spans]


@pytest.mark.parametrize(("length", "size"), [(2, 1.08), (3, 1.05), (5, 1.2), (7, 0.9)])
def test_a_block_that_came_and_went_is_one_transient(length: int, size: float) -> None:
    for seed in range(5):
        values = noisy(160, seed=seed)
        values[80 : 80 + length] *= size
        result = found(values)
        [span] = result.spans
        # An end is exact but where a neighbouring night's noise puts it nearer the block's level (seed 4:
        # +2.4 sigma after a 3-night 5 % transient): then one night off.
        assert span.kind is SpanKind.TRANSIENT and abs(span.start - 80) + abs(span.stop - 80 - length) <= 1
        assert result.change_points == ()  # neither of its ends is a step of its own
        assert result.spans[0].magnitude == pytest.approx(size - 1, abs=0.03)  # 1 % noise, 2-7 nights


def test_two_unrelated_slow_nights_side_by_side_are_no_transient() -> None:
    values = noisy(160)
    values[80], values[81] = values[80] * 1.06, values[81] * 1.30
    assert spans(values) == []


def test_a_transient_and_a_step_a_week_later_stay_two_findings() -> None:
    values = noisy(200)
    values[100:105] *= 1.05
    values[112:] *= 1.05
    result = found(values)
    assert [(s.kind, s.start, s.stop) for s in result.spans] == [(SpanKind.TRANSIENT, 100, 105)]
    assert [cp.index for cp in result.change_points] == [112]


@pytest.mark.parametrize("total", [0.03, -0.05, 0.08])
def test_a_linear_drift_is_one_drift_and_no_change_point(total: float) -> None:
    for seed in range(5):
        nights = 120 + 60 * seed
        values = noisy(nights, 0.01, seed) * (1 + total * np.arange(nights) / nights)
        result = found(values)
        assert result.change_points == (), (seed, result.change_points)
        [drift] = result.spans
        assert drift.kind is SpanKind.DRIFT and drift.magnitude == pytest.approx(total, abs=0.012)
        assert drift.slope == pytest.approx(drift.magnitude / (drift.stop - drift.start - 1))


def test_a_cyclic_drift_is_a_drift_over_its_swing() -> None:
    nights = 300
    values = noisy(nights, 0.01, 3) * (1 + 0.03 * np.sin(2 * np.pi * np.arange(nights) / nights))
    result = found(values)
    assert result.change_points == ()
    [drift] = result.spans
    assert drift.kind is SpanKind.DRIFT and abs(drift.magnitude) == pytest.approx(0.06, abs=0.015)
    assert 40 <= drift.start <= 110 and 190 <= drift.stop <= 260  # from the crest to the trough


def test_a_step_on_a_drift_stays_a_step() -> None:
    nights = 240
    values = noisy(nights, 0.01, 4) * (1 + 0.06 * np.arange(nights) / nights)
    values[150:] *= 1.04
    result = found(values)
    assert [cp.index for cp in result.change_points] == [150]
    assert [s.kind for s in result.spans] == [SpanKind.DRIFT]


@pytest.mark.parametrize("seed", range(8))
def test_noise_and_plain_steps_have_no_span(seed: int) -> None:
    values = noisy(250, 0.02, seed)
    assert spans(values) == []
    values[170:] *= 1.06
    assert spans(values) == []


def _ingest(url: str, tmp_path: Path, step_time: list[float], jax_commit: list[str]) -> None:
    paths = [
        synthetic.write(
            tmp_path / "runs",
            synthetic.run_result(
                START + dt.timedelta(i), t, image_manifest=synthetic.manifest(jax_commit=jax_commit[i] * 40)
            ),
        )
        for i, t in enumerate(step_time)
    ]
    commands.ingest(store.connect(url), paths)


def test_a_transient_is_one_recovered_incident_with_both_commit_ranges(
    store_url: str, tmp_path: Path
) -> None:
    rng = random.Random(4)
    times = [0.5 * (1 + rng.gauss(0, 0.005)) * (1.12 if 50 <= i < 53 else 1.0) for i in range(80)]
    commits = ["1" if i < 50 else "2" if i < 53 else "3" for i in range(80)]
    _ingest(store_url, tmp_path, times, commits)
    detection = detect(store.connect(store_url))
    assert detection.open_incidents == []
    [incident] = [i for i in detection.incidents if i.kind == IncidentKind.THROUGHPUT.value]
    assert (incident.night, incident.state) == (START + dt.timedelta(50), IncidentState.RECOVERED.value)
    detail = IncidentDetail.from_json(incident.details)
    [began] = [c for c in detail.components if c.name == "jax"]
    assert (began.last_good, began.first_bad) == ("1" * 40, "2" * 40)
    assert detail.recovery is not None and detail.recovery.recovered_night == START + dt.timedelta(53)
    [ended] = [c for c in detail.recovery.components if c.name == "jax"]
    assert (ended.last_good, ended.first_bad) == ("2" * 40, "3" * 40)
    timing = next(a for a in detection.analyses if a.history.identity.metric == "perf/step_time_s")
    assert [(start, stop, span.kind) for start, stop, span in timing.spans] == [(50, 53, SpanKind.TRANSIENT)]
    assert timing.change_points == []
    # Both ends are shown: in an incident's Markdown section (the summary lists open ones only) and on the
    # dashboard's incident page.
    report = build_report(detection, store_url)
    [view] = [i for i in report.incidents if i.id == incident.id]
    text = "\n".join(github_markdown._incident_section(view, None))
    assert f"A transient: recovered on {START + dt.timedelta(53)}." in text
    assert "| jax | `" + "2" * 40 + "` | `" + "3" * 40 + "` |" in text
    site = write_dashboard(report, tmp_path / "site").parent
    page = (site / "incidents" / f"{incident.id}.html").read_text()
    assert "What changed when it recovered" in page and "3" * 40 in page


def test_a_drift_opens_no_incident(store_url: str, tmp_path: Path) -> None:
    rng = random.Random(5)
    times = [0.5 * (1 + rng.gauss(0, 0.005)) * (1 + 0.08 * i / 200) for i in range(200)]
    _ingest(store_url, tmp_path, times, ["1" if i < 100 else "2" for i in range(200)])
    detection = detect(store.connect(store_url))
    assert [i for i in detection.incidents if i.kind == IncidentKind.THROUGHPUT.value] == []
    timing = next(a for a in detection.analyses if a.history.identity.metric == "perf/step_time_s")
    assert [span.kind for _, _, span in timing.spans] == [SpanKind.DRIFT]
    assert timing.change_points == []


def test_detect_series_gives_a_transient_as_one_change_point_and_a_drift_as_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nights = 200
    transient = noisy(nights, 0.01, 6)
    transient[120:124] *= 1.1
    drift = noisy(nights, 0.01, 7) * (1 + 0.06 * np.arange(nights) / nights)
    documents = []
    for name, values in (("transient", transient), ("drift", drift)):
        path = tmp_path / f"{name}.csv"
        path.write_text("date,value\n" + "".join(f"d{i},{v}\n" for i, v in enumerate(values)))
        assert cli.main(["detect-series", str(path), "--json"]) == ExitCode.OK
        documents.append(json.loads(capsys.readouterr().out)["data"])
    [point] = documents[0]["change_points"]
    assert (point["kind"], point["index"], point["end"], point["date"]) == ("transient", 120, 124, "d120")
    assert point["magnitude"] == pytest.approx(0.1, abs=0.02) and point["pvalue"] < 1e-6
    assert documents[1]["change_points"] == []
    [trend] = documents[1]["drifts"]
    assert (
        trend["magnitude"] == pytest.approx(0.06, abs=0.012) and trend["last_date"] == f"d{trend['stop'] - 1}"
    )
