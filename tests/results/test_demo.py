"""`jaxbench demo`: the made-up history goes through the product's own ingest, detectors and dashboard, and
what is planted in it (results/demo.py) is what the detectors find, on its night, and nothing else: broken
planting, a broken ingest of the schedule or the microbenchmarks, or a detector that stops finding (or starts
inventing) a step, transient, drift, failed night or loss problem fails here.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/results/test_demo.py
"""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pytest
from rich.console import Console
from sqlalchemy import select

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.runtime.options import Schedule
from jaxbench.results import demo, schema, store
from jaxbench.results.demo_commands import MARKER, check_out, run_demo
from jaxbench.results.detection import SpanKind
from jaxbench.results.judgement.detect import Detection, detect
from jaxbench.results.judgement.verdicts import SeriesAnalysis
from jaxbench.results.judgement.vocabulary import IncidentDetail, IncidentKind, IncidentState, SeriesState

H100 = f"8 x {demo.HARDWARE['H100']} x 1 host"
H200 = f"8 x {demo.HARDWARE['H200']} x 1 host"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The demo made once by its command, and what it printed; JAXBENCH_DB's store is never touched."""
    out = tmp_path_factory.mktemp("demo") / "demo"
    users = tmp_path_factory.mktemp("user") / "results.sqlite"
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAXBENCH_DB", f"sqlite:///{users}")
        assert run_demo(out, Console(file=printed, width=300)) == ExitCode.OK
    assert not users.exists()
    return out, printed.getvalue()


@pytest.fixture(scope="module")
def detection(made: tuple[Path, str]) -> Detection:
    return detect(store.connect(f"sqlite:///{made[0] / 'store.sqlite'}"))


def _incidents(detection: Detection) -> dict[tuple[str, str, str], tuple[dt.date, IncidentDetail]]:
    return {
        (i.kind, i.state, i.hardware): (i.night, IncidentDetail.from_json(i.details))
        for i in detection.incidents
    }


def _timing(detection: Detection, benchmark: str, backend: str, hardware: str) -> SeriesAnalysis:
    [analysis] = [
        a
        for a in detection.analyses
        if (a.history.identity.benchmark, a.history.identity.backend, a.history.identity.hardware.label())
        == (benchmark, backend, hardware)
        and a.history.identity.metric in ("perf/step_time_s", "perf/time_s")
    ]
    return analysis


def test_the_store_holds_every_recipe_backend_and_hardware_class(made: tuple[Path, str]) -> None:
    with store.connect(f"sqlite:///{made[0] / 'store.sqlite'}").connect() as connection:
        series = connection.execute(
            select(
                schema.Series.benchmark, schema.Series.kind, schema.Series.backend, schema.Series.device_kind
            )
        ).all()
        schedules = connection.scalars(select(schema.Run.schedule)).all()
    assert {b for b, kind, _, _ in series if kind == "recipe"} == {"llama2-1b", "gpt3-1.3b", "vit-b16"}
    assert {backend for _, _, backend, _ in series} == {"native", "maxtext", "levanter"}
    assert {device for _, _, _, device in series} == set(demo.HARDWARE.values())
    micro = {b for b, kind, _, _ in series if kind == "microbenchmark"}
    assert micro == {
        "micro/matmul[bfloat16-8192-8192-8192]",
        "micro/attention[forward-True-4-4096-32-8-128-bfloat16-cudnn]",
        "micro/collectives[all_reduce-bfloat16-67108864]",
    }
    nightly_runs = demo.NIGHTS * (len(demo.configs()) + len(demo.HARDWARE))
    assert schedules.count(Schedule.NIGHTLY) == nightly_runs
    assert schedules.count(Schedule.AD_HOC) == len(demo.AD_HOC_NIGHTS)


def test_the_detectors_find_what_was_planted_and_nothing_else(detection: Detection) -> None:
    found = _incidents(detection)
    assert set(found) == {
        (IncidentKind.THROUGHPUT, IncidentState.OPEN, H100),  # the step
        (IncidentKind.THROUGHPUT, IncidentState.RECOVERED, H200),  # the transient
        (IncidentKind.VALIDITY, IncidentState.OPEN, H200),  # the out-of-memory night
        (IncidentKind.CORRECTNESS, IncidentState.OPEN, H200),  # the loss
    }
    night, step = found[IncidentKind.THROUGHPUT, IncidentState.OPEN, H100]
    assert night == demo.night(demo.REGRESSION_NIGHT)
    assert {s.benchmark for s in step.series} == {"llama2-1b", "gpt3-1.3b"}
    assert len(step.series) == 3 * 5  # three benchmarks' step time, throughputs, TFLOP/s and MFU
    assert {c.name for c in step.components} == {"jax", "xla"}
    night, transient = found[IncidentKind.THROUGHPUT, IncidentState.RECOVERED, H200]
    assert night == demo.night(demo.TRANSIENT_NIGHT) and transient.recovery is not None
    assert transient.recovery.recovered_night == demo.night(demo.TRANSIENT_NIGHT + demo.TRANSIENT_NIGHTS)
    night, failed = found[IncidentKind.VALIDITY, IncidentState.OPEN, H200]
    assert night == demo.night(demo.NIGHTS - 1) and failed.problems == ("run failed: oom",)
    assert {s.benchmark for s in failed.series} == {"gpt3-1.3b"}
    night, loss = found[IncidentKind.CORRECTNESS, IncidentState.OPEN, H200]
    assert night == demo.night(demo.LOSS_NIGHT)
    assert [(s.benchmark, s.metric) for s in loss.series] == [("llama2-1b", "loss/final_window")]
    assert loss.problems and all(problem.startswith("loss at ") for problem in loss.problems)


def test_a_transient_a_drift_and_an_improvement_are_found_on_their_nights(detection: Detection) -> None:
    transient = _timing(detection, "gpt3-1.3b", "levanter", H200)
    start, stop = demo.TRANSIENT_NIGHT, demo.TRANSIENT_NIGHT + demo.TRANSIENT_NIGHTS
    assert [(a, b, span.kind) for a, b, span in transient.spans] == [(start, stop, SpanKind.TRANSIENT)]
    drift = _timing(detection, "vit-b16", "native", H100)
    assert [span.kind for _, _, span in drift.spans] == [SpanKind.DRIFT]
    assert drift.change_points == [] and drift.spans[0][2].magnitude == pytest.approx(demo.DRIFT, abs=0.01)
    matmul = _timing(
        detection, "micro/matmul[bfloat16-8192-8192-8192]", "native", f"1 x {demo.HARDWARE['H200']} x 1 host"
    )
    assert matmul.state is SeriesState.IMPROVEMENT
    assert [index for index, _ in matmul.change_points] == [demo.IMPROVEMENT_NIGHT]


def test_runs_by_hand_are_shown_and_never_judged(detection: Detection) -> None:
    by_hand = [h for h in detection.histories if h.ad_hoc]
    assert by_hand and {h.identity.benchmark for h in by_hand} == {"llama2-1b"}
    assert all(dict(h.identity.settings)["remat"] == "full" for h in by_hand)
    judged = {a.history.key for a in detection.analyses}
    assert judged.isdisjoint(h.key for h in by_hand)


def test_it_prints_the_findings_and_where_the_dashboard_is(
    made: tuple[Path, str], detection: Detection
) -> None:
    out, printed = made
    index = out / "site" / "index.html"
    assert printed.splitlines()[-1] == f"dashboard: {index} ({index.resolve().as_uri()})"
    assert "drift +" in printed and "transient +" in printed and "run failed: oom" in printed
    page = index.read_text()
    for incident in detection.incidents:
        assert f'href="incidents/{incident.id}.html"' in page
        assert (out / "site" / "incidents" / f"{incident.id}.html").is_file()


def test_a_folder_that_is_no_demo_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InvalidInput, match=r"holds files but no \.jaxbench-demo; refusing to replace it"):
        check_out(tmp_path)
    assert cli.main(["demo", "--out", str(tmp_path)]) == ExitCode.INVALID_INPUT
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    with pytest.raises(InvalidInput, match="is not a folder"):
        check_out(tmp_path / "notes.txt")
    (tmp_path / MARKER).touch()  # a demo made before: replaced whole
    check_out(tmp_path)


def test_the_loss_optimums_are_the_synthetic_datas() -> None:
    from jaxbench.harness import recipes
    from jaxbench.harness.backends.native.data import optimal_loss  # jax: only here

    for family, optimum in demo.LOSS_OPTIMUM.items():
        assert optimal_loss(recipes.load(family, None, default_to_tiny=False)) == pytest.approx(optimum)
