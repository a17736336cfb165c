"""One verdict per measurement: a step time and the throughput, TFLOP/s and MFU computed from it agree, on a
real store through `detect`, and directly on the pure derivation; and no band is ever below zero for a
positive metric (log scale), in the judgement or in any report."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxbench.results import commands, store, synthetic
from jaxbench.results.detection import DEFAULT_SETTINGS, screen_latest
from jaxbench.results.history import History, Night
from jaxbench.results.identity import HardwareClass, SeriesIdentity
from jaxbench.results.judgement.detect import detect
from jaxbench.results.judgement.reciprocal import judge_measurements, reciprocal_change
from jaxbench.results.judgement.verdicts import SeriesAnalysis, analyse, incidents
from jaxbench.results.judgement.vocabulary import IncidentState, SeriesState
from jaxbench.results.report.build import build_report
from jaxbench.results.report.github_markdown import render_markdown
from jaxbench.results.report.html import write_dashboard
from jaxbench.results.report.json_report import report_data

START = dt.date(2026, 9, 1)
RATES = (
    "perf/tokens_per_s",
    "perf/tokens_per_s_per_device",
    "perf/model_tflops_per_device",
    "perf/mfu",
)


def _store_with_a_slowdown(url: str, tmp_path: Path, slow_nights: int) -> None:
    """40 nights of 0.1 s a step (1 % noise), then `slow_nights` nights at +355 %."""
    rng = random.Random(3)
    paths = []
    for i in range(40 + slow_nights):
        step = 0.1 * (1 + rng.gauss(0, 0.01)) * (4.558 if i >= 40 else 1.0)
        paths.append(synthetic.write(tmp_path / "runs", synthetic.run_result(START + dt.timedelta(i), step)))
    commands.ingest(store.connect(url), paths)


@pytest.mark.parametrize("slow_nights", [1, 3])
def test_a_slowdown_is_one_verdict_on_the_step_time_and_every_rate(
    store_url: str, tmp_path: Path, slow_nights: int
) -> None:
    _store_with_a_slowdown(store_url, tmp_path, slow_nights)
    detection = detect(store.connect(store_url))
    by_metric = {a.history.identity.metric: a for a in detection.analyses}
    timing = by_metric["perf/step_time_s"]
    expected = SeriesState.REGRESSION if slow_nights >= 2 else SeriesState.SUSPECTED
    assert timing.state is expected and timing.magnitude == pytest.approx(3.558, rel=0.03)
    for metric in RATES:
        rate = by_metric[metric]
        assert rate.state is timing.state, metric
        assert rate.first_bad == timing.first_bad, metric
        assert rate.magnitude == pytest.approx(-0.781, abs=0.005), metric
        assert [cp.magnitude for _, cp in rate.change_points] == pytest.approx(
            [reciprocal_change(cp.magnitude) for _, cp in timing.change_points]
        )
        low, high = rate.screen.band_low, rate.screen.band_high
        assert low is not None and high is not None and 0 < low < rate.screen.baseline_median < high
    if slow_nights >= 2:  # one incident holds the timing and all its rates
        assert len(detection.open_incidents) == 1
        (draft,) = [d for d in incidents(detection.analyses) if d.state is IncidentState.OPEN]
        assert {m.metric for m in draft.series} >= {"perf/step_time_s", *RATES}


def _history(metric: str, values: list[float | None], higher: bool) -> History:
    identity = SeriesIdentity(
        "llama2-tiny", "recipe", (), HardwareClass("cpu", 8, 1), "native", metric, "x", higher
    )
    nights = [
        Night(START + dt.timedelta(i), v, "ok" if v is not None else "gap", i, "c")
        for i, v in enumerate(values)
    ]
    return History(1, identity, nights)


def _judge(history: History, detecting: bool) -> SeriesAnalysis:
    """As `jaxbench detect` judges: a derived rate is analysed for its validity alone."""
    return analyse(history, settings=DEFAULT_SETTINGS if detecting else NO_DETECTORS)


NO_DETECTORS = dataclasses.replace(DEFAULT_SETTINGS, detectors=())


def test_a_rate_is_derived_only_where_it_is_the_timings_reciprocal_on_every_night() -> None:
    rng = random.Random(5)
    times: list[float | None] = [0.2 * (1 + rng.gauss(0, 0.01)) for _ in range(30)] + [0.3, 0.3, 0.3]
    times[12] = None
    tokens = [None if t is None else 1000 / t for t in times]
    timing = analyse(_history("perf/step_time_s", times, False))
    rate = analyse(_history("perf/tokens_per_s", tokens, True))
    derived = judge_measurements([timing.history, rate.history], _judge)[1]
    assert derived.state is timing.state is SeriesState.REGRESSION
    assert derived.screen.baseline_median == pytest.approx(1000 / timing.screen.baseline_median)
    assert derived.screen.zscore == pytest.approx(-(timing.screen.zscore or 0))
    assert [(s, e) for s, e, _ in derived.segments] == [(s, e) for s, e, _ in timing.segments]
    # A rate whose constant moved (another batch on one night) keeps its own judgement.
    moved = [None if t is None else (2000 if i == 5 else 1000) / t for i, t in enumerate(times)]
    own = analyse(_history("perf/tokens_per_s", moved, True))
    assert judge_measurements([timing.history, own.history], _judge)[1] == own
    # So does a rate of another measurement (other settings).
    other = dataclasses.replace(
        rate.history, identity=dataclasses.replace(rate.history.identity, flavor="jax")
    )
    elsewhere = dataclasses.replace(rate, history=other)
    assert judge_measurements([timing.history, other], _judge)[1] == elsewhere


def test_judged_on_its_own_a_rate_already_agrees_with_its_timing_on_the_log_scale() -> None:
    """The derivation guarantees agreement; the log scale alone already gives it (symmetric detectors)."""
    rng = random.Random(11)
    for shift in (1.02, 1.05, 1.3, 4.558, 1 / 1.05):
        times = [0.05 * (1 + rng.gauss(0, 0.01)) * (shift if i >= 45 else 1) for i in range(50)]
        timing = analyse(_history("perf/step_time_s", list(times), False))
        rate = analyse(_history("perf/tokens_per_s", [512 / t for t in times], True))
        assert rate.state is timing.state, shift
        assert [i for i, _ in rate.change_points] == [i for i, _ in timing.change_points], shift


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False), min_size=12, max_size=60),
    st.booleans(),
)
def test_the_band_of_a_positive_series_is_never_below_zero(values: list[float], higher: bool) -> None:
    result = screen_latest(values, higher_is_better=higher)
    if result.band_low is not None and result.band_high is not None:
        assert 0 < result.band_low <= result.band_high


def test_no_report_prints_a_band_below_zero_for_a_very_noisy_positive_series(
    store_url: str, tmp_path: Path
) -> None:
    """The issue's case: on the linear scale a noisy step time had "band -0.06935 to 0.09712 s"."""
    rng = random.Random(2)
    paths = [
        synthetic.write(
            tmp_path / "runs",
            synthetic.run_result(START + dt.timedelta(i), 0.014 * math.exp(rng.gauss(0, 0.6))),
        )
        for i in range(40)
    ]
    engine = store.connect(store_url)
    commands.ingest(engine, paths)
    detection = detect(engine)
    for analysis in detection.analyses:
        low = analysis.screen.band_low
        assert low is None or low > 0 or analysis.history.identity.metric.startswith("loss/"), analysis
    timing = next(a for a in detection.analyses if a.history.identity.metric == "perf/step_time_s")
    assert timing.state is SeriesState.TOO_NOISY and (timing.screen.noise or 0) > 0.3
    report = build_report(detection, store_url)
    lows = [
        s["baseline"]["low"]
        for s in json.loads(json.dumps(report_data(report)))["series"]
        if s["baseline"] and not s["metric"].startswith("loss/")
    ]
    assert lows and all(low > 0 for low in lows)
    site = write_dashboard(report, tmp_path / "site").parent
    pages = [p.read_text() for p in (site / "series").glob("*.html")]
    bands = [band for page in pages for band in re.findall(r"a night from (\S+)", page)]
    assert len(bands) >= len(report.series) and not any(band.startswith("-") for band in bands)
    text = render_markdown(report)
    assert re.search(r"too noisy to judge \(night-to-night noise \d+\.\d%; the newest night, ", text)
    assert re.search(r"a change is confirmed only by 3 nights in a row beyond \+\d+\.\d%\)", text)
