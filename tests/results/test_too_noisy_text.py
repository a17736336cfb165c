"""What a too-noisy series says about its newest night: how far it moved against how far a single night may
move, and what would confirm a change; never "resolves only changes over 130 %" beside a +160 % night with
nothing to reconcile the two."""

from __future__ import annotations

import datetime as dt

import pytest

from jaxbench.results.judgement.vocabulary import SeriesState
from jaxbench.results.report.formatting import state_text
from jaxbench.results.report.model import Baseline, SeriesPoint, SeriesView


def noisy(newest_change: float, *, higher_is_better: bool) -> SeriesView:
    return SeriesView(
        key="k",
        benchmark="llama2-tiny",
        metric="perf/step_time_s",
        unit="s",
        higher_is_better=higher_is_better,
        hardware="cpu",
        flavor="",
        settings={},
        points=[SeriesPoint(dt.date(2026, 10, 1), 1.0 + newest_change, "ok", 1)],
        segments=[],
        change_points=[],
        baseline=Baseline(median=1.0, low=0.2, high=3.1),
        state=SeriesState.TOO_NOISY,
        change_vs_baseline=newest_change,
        noise=0.269,
        resolvable=1.30,
    )


@pytest.mark.parametrize(
    ("change", "higher", "expected"),
    [
        (1.598, False, "the newest night, +159.8%, is within the +210.0% a single night may move"),
        (2.5, False, "the newest night, +250.0%, is beyond the +210.0% a single night may move"),
        (-0.85, True, "the newest night, -85.0%, is beyond the -80.0% a single night may move"),
    ],
)
def test_the_newest_night_is_set_against_what_a_single_night_may_move(
    change: float, higher: bool, expected: str
) -> None:
    text = state_text(noisy(change, higher_is_better=higher))
    assert text.startswith("too noisy to judge (night-to-night noise 26.9%; ")
    assert expected in text
    worse = "-130.0%" if higher else "+130.0%"
    assert text.endswith(f"a change is confirmed only by 3 nights in a row beyond {worse})")
