"""The backends view as pure functions: which series make a table, which night and value each backend shows,
the ratio to native, and the cells' text. The renderers' side: tests/results/test_report_backends.py.

JAX_PLATFORMS=cpu python -m pytest -q tests/results/test_backends_view.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from jaxbench.results.history import History, Night
from jaxbench.results.identity import HardwareClass, SeriesIdentity
from jaxbench.results.judgement.detect import Detection
from jaxbench.results.judgement.verdicts import analyse
from jaxbench.results.judgement.vocabulary import SeriesState
from jaxbench.results.report.backends import backends_tables, format_cell, shown_metrics
from jaxbench.results.report.build import build_report
from jaxbench.results.report.formatting import format_percent, format_ratio, format_seconds
from jaxbench.results.report.model import BackendCell, SeriesPoint, SeriesView
from tests.support.sample_report import A100, H100, START, make_series

TINY = "llama2-tiny"
TOKENS, STEP, MFU = "perf/tokens_per_s", "perf/step_time_s", "perf/mfu"


def series(
    backend: str,
    metric: str,
    value: float,
    *,
    benchmark: str = TINY,
    hardware: str = H100,
    nights: int = 5,
    key: str = "",
) -> SeriesView:
    """A series of `nights` ok nights at `value`, the newest on START + 59 days."""
    made = make_series(
        key or f"{backend}-{metric}-{benchmark}-{hardware}", benchmark, metric, hardware, SeriesState.OK
    )
    points = [dataclasses.replace(p, value=value) for p in made.points[-nights:]]
    return dataclasses.replace(made, backend=backend, points=points)


def ending(view: SeriesView, days_earlier: int) -> SeriesView:
    """`view` with its nights moved `days_earlier`."""
    shift = dt.timedelta(days=days_earlier)
    return dataclasses.replace(
        view, points=[dataclasses.replace(p, night=p.night - shift) for p in view.points]
    )


NEWEST = START + dt.timedelta(days=59)


def test_each_backend_against_native() -> None:
    views = [
        series("native", TOKENS, 100.0),
        series("maxtext", TOKENS, 87.0),
        series("levanter", TOKENS, 104.0),
        series("native", STEP, 0.2),
        series("maxtext", STEP, 0.23),
        series("native", "perf/tokens_per_s_per_device", 50.0),  # not a column of the view
    ]
    [table] = backends_tables(views)
    assert (table.benchmark, table.hardware) == (TINY, H100)
    assert [row.backend for row in table.rows] == ["native", "levanter", "maxtext"]  # native first
    native, levanter, maxtext = table.rows
    assert native.cells[TOKENS] == BackendCell(
        100.0, 1.0, NEWEST, series_key=f"native-{TOKENS}-{TINY}-{H100}"
    )
    assert maxtext.cells[TOKENS].vs_native == pytest.approx(0.87)
    assert levanter.cells[TOKENS].vs_native == pytest.approx(1.04)
    assert maxtext.cells[STEP].vs_native == pytest.approx(1.15)
    assert levanter.cells[STEP] == BackendCell(None, None, None)  # never measured
    assert "perf/tokens_per_s_per_device" not in native.cells
    assert shown_metrics(table) == [TOKENS, STEP]


def test_only_recipes_a_framework_trained_and_no_ratio_without_native() -> None:
    views = [
        series("native", TOKENS, 100.0, benchmark="vit-tiny"),
        series("levanter", TOKENS, 90.0, benchmark="gpt3-tiny"),
    ]
    [table] = backends_tables(views)
    assert table.benchmark == "gpt3-tiny" and [r.backend for r in table.rows] == ["levanter"]
    cell = table.rows[0].cells[TOKENS]
    assert (cell.value, cell.vs_native, cell.night) == (90.0, None, NEWEST)
    assert backends_tables([series("native", TOKENS, 1.0)]) == []
    assert backends_tables([]) == []


def test_native_on_another_hardware_class_is_not_the_reference() -> None:
    views = [
        series("native", TOKENS, 100.0, hardware=A100),
        series("native", TOKENS, 200.0),
        series("maxtext", TOKENS, 180.0),
    ]
    [table] = backends_tables(views)  # A100 has only native: no table
    assert table.hardware == H100 and table.rows[1].cells[TOKENS].vs_native == pytest.approx(0.9)


def test_a_native_value_of_zero_gives_no_ratio() -> None:
    [table] = backends_tables([series("native", MFU, 0.0), series("maxtext", MFU, 0.4)])
    cell = table.rows[1].cells[MFU]
    assert (cell.value, cell.vs_native, cell.night) == (0.4, None, NEWEST)


def test_vision_recipes_count_images() -> None:
    views = [series("native", "perf/images_per_s", 900.0, benchmark="vit-tiny")]
    views.append(series("maxtext", "perf/images_per_s", 450.0, benchmark="vit-tiny"))
    [table] = backends_tables(views)
    assert shown_metrics(table) == ["perf/images_per_s"]  # no empty tokens/s column
    assert table.rows[1].cells["perf/images_per_s"].vs_native == pytest.approx(0.5)


def test_the_newest_valid_night_not_a_newer_failed_one() -> None:
    maxtext = series("maxtext", TOKENS, 80.0)
    failed = SeriesPoint(maxtext.points[-1].night + dt.timedelta(days=1), None, "oom", None)
    maxtext = dataclasses.replace(maxtext, points=[*maxtext.points, failed])
    [table] = backends_tables([series("native", TOKENS, 100.0), maxtext])
    row = table.rows[1]
    assert row.night == maxtext.points[-2].night and row.cells[TOKENS].value == 80.0


def test_a_series_without_a_valid_night_still_names_its_backend() -> None:
    levanter = series("levanter", TOKENS, 1.0)
    levanter = dataclasses.replace(levanter, points=[dataclasses.replace(levanter.points[-1], value=None)])
    [table] = backends_tables([series("native", TOKENS, 100.0), levanter])
    assert table.rows[1].backend == "levanter" and table.rows[1].night is None
    assert table.rows[1].cells[TOKENS] == BackendCell(None, None, None)


def test_of_several_series_of_one_backend_the_newest_counts() -> None:
    # New XLA flags start a new series; the old one, ended a week ago, stays in the store and the report.
    old = ending(series("maxtext", TOKENS, 50.0, key="maxtext-old-flags"), 7)
    new = series("maxtext", TOKENS, 90.0, key="maxtext-new-flags")
    native = series("native", TOKENS, 100.0)
    for order in ([old, new], [new, old]):
        [table] = backends_tables([native, *order])
        assert table.rows[1].cells[TOKENS] == BackendCell(90.0, 0.9, NEWEST, "maxtext-new-flags")


def test_of_two_series_on_the_same_night_every_metric_comes_from_the_newer_run() -> None:
    """Two runs of one backend on one night in two series (another environment, other settings): each
    metric was taken from whichever series' key sorted last, so a row mixed the runs' numbers."""

    def run_on_the_newest_night(view: SeriesView, run_id: int) -> SeriesView:
        points = [*view.points[:-1], dataclasses.replace(view.points[-1], run_id=run_id)]
        return dataclasses.replace(view, points=points)

    # The keys sort one newer series first for tokens/s and last for step time.
    earlier = [
        run_on_the_newest_night(series("pax", TOKENS, 27_604.0, key="b-tokens"), 8),
        run_on_the_newest_night(series("pax", STEP, 0.0186, key="b-step"), 8),
    ]
    later = [
        run_on_the_newest_night(series("pax", TOKENS, 51_293.0, key="a-tokens"), 13),
        run_on_the_newest_night(series("pax", STEP, 0.0100, key="c-step"), 13),
    ]
    for views in ([*earlier, *later], [*later, *earlier]):
        [table] = backends_tables([series("native", TOKENS, 60_000.0), *views])
        pax = table.rows[1]
        assert (pax.cells[TOKENS].value, pax.cells[STEP].value) == (51_293.0, 0.0100)


def test_each_cell_keeps_its_own_night_and_says_when_it_is_older() -> None:
    # The newest maxtext run compiled, then ran out of memory: its compile time is a night newer.
    views = [
        series("native", TOKENS, 100.0),
        ending(series("maxtext", TOKENS, 87.0), 1),
        series("maxtext", "perf/compile_time_s", 41.27),
    ]
    [table] = backends_tables(views)
    maxtext = table.rows[1]
    assert maxtext.night == NEWEST and maxtext.cells[TOKENS].night == NEWEST - dt.timedelta(days=1)
    text = format_cell(TOKENS, maxtext.cells[TOKENS], maxtext.night)
    assert text == f"87 (0.87x) on {(NEWEST - dt.timedelta(days=1)).isoformat()}"
    assert (
        format_cell("perf/compile_time_s", maxtext.cells["perf/compile_time_s"], maxtext.night) == "41.27 s"
    )


def test_cells_in_everyday_units() -> None:
    assert format_cell(STEP, BackendCell(0.1635, 0.994)) == "163.5 ms (0.99x)"
    assert format_cell(STEP, BackendCell(2.1, None)) == "2.1 s"
    assert format_cell(MFU, BackendCell(0.412, None)) == "41.2%"
    assert format_cell(TOKENS, BackendCell(6264.0, 1.0064)) == "6,264 (1.01x)"
    assert format_cell("loss/final_window", BackendCell(2.34567, 1.0)) == "2.3457 (1.00x)"
    assert format_cell("loss/final_window", BackendCell(None, None)) == "-"
    assert (format_seconds(None), format_percent(float("nan")), format_ratio(None)) == ("-", "-", "-")
    assert (format_seconds(0.0), format_seconds(41.27), format_ratio(0.8712)) == ("0 ms", "41.27 s", "0.87x")


def history(backend: str, value: float, series_id: int) -> History:
    hardware = HardwareClass("NVIDIA H100 80GB HBM3", 8, 1)
    identity = SeriesIdentity(TINY, "recipe", (), hardware, "jax", TOKENS, "tokens/s", True, backend)
    nights = [Night(START + dt.timedelta(days=i), value, "ok", 100 * series_id + i, None) for i in range(3)]
    return History(series_id, identity, nights)


def test_the_report_takes_each_series_backend_from_its_identity() -> None:
    detection = Detection(
        [analyse(history("native", 100.0, 1)), analyse(history("maxtext", 87.0, 2))], [], {}
    )
    report = build_report(detection, "sqlite://")
    assert sorted(s.backend for s in report.series) == ["maxtext", "native"]
    [table] = report.backends
    assert (table.benchmark, table.hardware) == (TINY, H100)
    assert [r.backend for r in table.rows] == ["native", "maxtext"]
    assert table.rows[1].cells[TOKENS].vs_native == pytest.approx(0.87)
    assert table.rows[1].night == START + dt.timedelta(days=2)
