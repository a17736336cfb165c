"""`jaxbench triage`'s store side and its refusals: finding the incident, the plan it asks for, resuming an
interrupted triage from its recorded runs, starting over with --restart, and the refusals that must come
before any run (a kind triage does not handle, a compiled component, no component moved).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/triage/test_triage_store.py
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console
from sqlalchemy import Engine

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness import recipes
from jaxbench.main import main
from jaxbench.results import schema, store, synthetic_incident, triage_lease, triage_records
from jaxbench.triage import bench
from jaxbench.triage.bench import Mirrors, recipe_of
from jaxbench.triage.cli import add_bounds, triage_options
from jaxbench.triage.commands import TriageOptions, plan_of, triage_incident
from jaxbench.triage.settings import Settings
from jaxbench.triage.stacks import Kind, Measurement, Move

GOOD, BAD = "a" * 40, "b" * 40
CONFIG = {"family": "llama2", "size": "tiny"}


def add_incident(
    engine: Engine, kind: str = "throughput", component: str = "optax", fingerprint: str = "f00d" * 16
) -> int:
    return synthetic_incident.add_incident(
        engine,
        component=component,
        repository="/upstream/optax",
        good=GOOD,
        bad=BAD,
        config=CONFIG,
        config_hash="h" * 64,
        kind=kind,
        fingerprint=fingerprint,
    )


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    return store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")


def test_an_incident_is_found_by_id_or_fingerprint_prefix(engine: Engine) -> None:
    incident_id = add_incident(engine)
    by_id = triage_records.find_incident(engine, str(incident_id))
    assert triage_records.find_incident(engine, "f00df00d") == by_id
    assert by_id.first_bad is not None and by_id.first_bad.components["optax"][1] == BAD
    with pytest.raises(InvalidInput, match="6 or more"):
        triage_records.find_incident(engine, "f00d")
    with pytest.raises(InvalidInput, match="no incident"):
        triage_records.find_incident(engine, "beefbeef")
    with pytest.raises(InvalidInput, match="no such incident"):
        triage_records.find_incident(engine, "999")


def test_the_plan_asks_for_half_the_slowdown_seen_and_names_the_moved_component(engine: Engine) -> None:
    incident = triage_records.find_incident(engine, str(add_incident(engine)))
    plan = plan_of(incident, Settings())
    assert plan.kind is Kind.THROUGHPUT and plan.benchmark == "llama2:tiny"
    assert [(m.name, m.good, m.bad) for m in plan.moved] == [("optax", GOOD, BAD)]
    assert plan.threshold == pytest.approx(0.15)


def test_a_moved_components_commits_may_come_from_another_repository(engine: Engine, tmp_path: Path) -> None:
    incident = triage_records.find_incident(engine, str(add_incident(engine)))
    checkout = str(tmp_path / "my-optax")
    plan = plan_of(incident, Settings(), {"optax": checkout})
    assert [(m.name, m.repository, m.good, m.bad) for m in plan.moved] == [("optax", checkout, GOOD, BAD)]
    with pytest.raises(
        InvalidInput, match=r"--repository flax: flax did not move in incident \d+ \(moved: optax\)"
    ):
        plan_of(incident, Settings(), {"flax": checkout})
    parser = argparse.ArgumentParser()
    add_bounds(parser)
    parser.add_argument("--repository", action="append")
    assert triage_options(parser.parse_args(["--repository", f"optax={checkout}"])).repositories == {
        "optax": checkout
    }
    for bad, said in (("optax", "expected COMPONENT=URL_OR_PATH"), ("optax=ext::sh -c x", "remote helper")):
        with pytest.raises(InvalidInput, match=said):
            triage_options(parser.parse_args(["--repository", bad]))


@pytest.mark.parametrize(
    ("kind", "component", "refusal"),
    [("memory", "optax", "throughput and correctness incidents only"), ("throughput", "xla", "compiled")],
)
def test_what_triage_cannot_do_here_is_refused_before_any_run(
    engine: Engine, kind: str, component: str, refusal: str
) -> None:
    incident = triage_records.find_incident(engine, str(add_incident(engine, kind, component)))
    with pytest.raises(InvalidInput, match=refusal):
        plan_of(incident, Settings())


def test_a_component_that_cannot_be_rerun_is_left_out_and_named(engine: Engine) -> None:
    incident_id = add_incident(engine)
    with store.transaction(engine) as session:
        row = session.get(schema.Incident, incident_id)
        assert row is not None
        harness = {"name": "jaxbench", "repository": None, "last_good": "1" * 40, "first_bad": "2" * 40}
        xla = {"name": "xla", "repository": "https://github.com/openxla/xla.git", "last_good": "3" * 40}
        xla |= {"first_bad": "4" * 40, "compare_url": None}
        row.details = {
            **row.details,
            "components": [*row.details["components"], harness | {"compare_url": None}, xla],
        }
    plan = plan_of(triage_records.find_incident(engine, str(incident_id)), Settings())
    assert [m.name for m in plan.moved] == ["optax"]
    assert plan.skipped == (
        "jaxbench (no repository and commits recorded)",
        "xla (compiled: its probes need an image build per commit)",
    )


def test_an_interrupted_triage_resumes_with_its_runs_and_restart_forgets_them(engine: Engine) -> None:
    fingerprint = "f00d" * 16
    first = triage_records.start_triage(engine, fingerprint, {"kind": "throughput"}, restart=False, owner="a")
    fields = {"status": "ok", "median_step_s": 0.01, "loss_curve": [4.0, 3.0], "loss_optimum": None}
    fields |= {"program": None, "reason": None, "result_path": None, "seconds": 7.0}
    triage_records.record_run(engine, first.id, "good", 0, fields, owner="a")
    cpu_timed = {"median_step_s": 0.013, "median_cpu_step_s": 0.011}
    triage_records.record_run(engine, first.id, "bad", 0, fields | cpu_timed, owner="a")
    triage_lease.release(engine, first.id, "a")  # interrupted: its process lets go of the lease
    resumed = triage_records.start_triage(
        engine, fingerprint, {"kind": "throughput", "more": 1}, restart=False, owner="b"
    )
    assert resumed.id == first.id and resumed.plan == {"kind": "throughput", "more": 1}
    assert list(resumed.runs) == [("good", 0), ("bad", 0)]
    assert resumed.runs[("bad", 0)]["median_step_s"] == 0.013
    assert resumed.runs[("bad", 0)]["median_cpu_step_s"] == 0.011  # a resumed triage times by it alike
    triage_records.finish_triage(engine, first.id, "finished", {"culprit": "c"}, owner="b")
    # A finished triage is not resumed: a new one starts (and the finished one stays on record).
    again = triage_records.start_triage(engine, fingerprint, {}, restart=False, owner="c")
    assert again.id != first.id and not again.runs
    triage_lease.release(engine, again.id, "c")
    restarted = triage_records.start_triage(engine, fingerprint, {}, restart=True, owner="d")
    assert not restarted.runs
    latest = triage_records.latest_triage(engine, fingerprint)
    assert latest is not None and latest.id == restarted.id
    with pytest.raises(ValueError, match="unknown fields"):
        triage_records.record_run(engine, first.id, "good", 1, {"colour": "red"}, owner="d")


def test_triage_of_an_incident_whose_component_has_no_repository_fails_before_running(
    engine: Engine, tmp_path: Path
) -> None:
    incident_id = add_incident(engine)
    with store.transaction(engine) as session:
        row = session.get(schema.Incident, incident_id)
        assert row is not None
        unnamed = {
            "name": "optax",
            "repository": None,
            "last_good": GOOD,
            "first_bad": BAD,
            "compare_url": None,
        }
        row.details = {**row.details, "components": [unnamed]}
    console = Console(file=io.StringIO())
    with pytest.raises(InvalidInput, match="no repository and commits recorded"):
        triage_incident(engine, str(incident_id), TriageOptions(work=tmp_path / "w"), console, None)
    assert not (tmp_path / "w").exists()
    assert triage_records.latest_triage(engine, "f00d" * 16) is None


def test_the_command_refuses_bad_bounds_and_unknown_incidents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JAXBENCH_DB", f"sqlite:///{tmp_path / 'store.sqlite'}")
    with pytest.raises(SystemExit) as usage:
        main(["triage", "12", "--max-runs", "0"])
    assert usage.value.code == ExitCode.USAGE
    assert "--max-runs: expected a positive whole number" in capsys.readouterr().err
    assert main(["triage", "12"]) == ExitCode.INVALID_INPUT
    assert "incident 12: no such incident" in capsys.readouterr().err
    # The CPUs are checked before the store is read: the incident does not exist either.
    assert main(["triage", "12", "--cpus", "99999"]) == ExitCode.INVALID_INPUT
    assert "--cpus '99999': CPU 99999 is not one this process may run on" in capsys.readouterr().err


def test_the_runs_go_to_the_cpus_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    add_bounds(parser)
    cpu = min(os.sched_getaffinity(0))
    options = triage_options(parser.parse_args(["--cpus", str(cpu)]))
    assert options.cpus == str(cpu)
    commands: list[tuple[str, ...]] = []

    def run_measured(arguments: list[str], **kwargs: Any) -> Measurement:
        commands.append(tuple(kwargs["prefix"]))
        return Measurement("ok", median_step_s=0.1)

    monkeypatch.setattr(bench, "run_measured", run_measured)
    benchmark = bench.Benchmark(
        tmp_path, config=CONFIG, config_hash=None, moves={}, base_manifest=None, prefix=["taskset", "-c", "0"]
    )
    monkeypatch.setattr(benchmark, "stack", lambda pins: {})
    benchmark("good", {}, 0)
    assert commands == [("taskset", "-c", "0")]


@pytest.mark.parametrize(
    ("platform", "one_cpu", "expected"), [("cpu", True, 0.05), ("cpu", False, None), ("gpu", True, None)]
)
def test_cpu_time_is_a_clock_only_for_runs_on_one_cpu_that_compute_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, platform: str, one_cpu: bool, expected: float | None
) -> None:
    """On a GPU the host's CPU time is its waiting, not the step; on several CPUs a change in how the step
    spreads over them shows in wall time alone."""
    result = {
        "status": "ok",
        "timing": {"step_time_s": {"median": 0.08}, "cpu_step_time_s": {"median": 0.05}, "cpu_per_wall": 0.6},
        "provenance": {"devices": {"platform": platform}},
    }
    measured = bench.measurement_of(result, tmp_path / "r.json", 3.0)
    assert measured.median_step_s == 0.08
    assert measured.median_cpu_step_s == (0.05 if platform == "cpu" else None)
    monkeypatch.setattr(bench, "run_measured", lambda arguments, **kwargs: measured)
    benchmark = bench.Benchmark(
        tmp_path, config=CONFIG, config_hash=None, moves={}, base_manifest=None, one_cpu=one_cpu
    )
    monkeypatch.setattr(benchmark, "stack", lambda pins: {})
    assert benchmark("good", {}, 0).median_cpu_step_s == expected


def test_a_rerun_recipe_resolves_to_the_incident_runs_configuration(tmp_path: Path) -> None:
    ran = recipes.load("llama2", "tiny", ["train.global_batch=32", "optimizer.learning_rate=0.02"])
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe_of(ran.resolved())))
    again = recipes.resolve(recipes.load_recipe_file(path), "tiny")
    assert recipes.recipe_hash(again) == recipes.recipe_hash(ran)
    assert recipes.recipe_hash(again) != recipes.recipe_hash(recipes.load("llama2", "tiny"))


def _git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgsign=false"]
    done = subprocess.run(
        ["git", "-C", str(repo), *identity, *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_commits_between_two_pins_are_the_first_parents_oldest_first(tmp_path: Path) -> None:
    repo = tmp_path / "upstream"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for index in range(4):
        (repo / "f").write_text(str(index))
        _git(repo, "add", "f")
        _git(repo, "commit", "-qm", f"c{index}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    # A merged side branch is one step on main.
    _git(repo, "checkout", "-q", "-b", "side")
    (repo / "g").write_text("side")
    _git(repo, "add", "g")
    _git(repo, "commit", "-qm", "side work")
    side = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = _git(repo, "rev-parse", "HEAD")
    mirrors = Mirrors(tmp_path / "mirrors")
    commits = mirrors(Move("optax", str(repo), shas[1], merge))
    assert commits == [shas[1], shas[2], shas[3], merge]
    assert side not in commits
    with pytest.raises(InvalidInput, match="not an ancestor"):
        mirrors(Move("optax", str(repo), merge, shas[1]))
    with pytest.raises(InvalidInput, match="is not a commit"):
        mirrors(Move("optax", str(repo), "0" * 40, merge))


def test_a_component_repository_that_is_a_remote_helper_is_refused_before_any_run(engine: Engine) -> None:
    incident_id = add_incident(engine)
    with store.transaction(engine) as session:
        row = session.get(schema.Incident, incident_id)
        assert row is not None
        moved = {**row.details["components"][0], "repository": "ext::sh -c touch% marker"}
        row.details = {**row.details, "components": [moved]}
    with pytest.raises(InvalidInput, match="optax's repository 'ext::sh -c touch% marker': ext:: asks git"):
        plan_of(triage_records.find_incident(engine, str(incident_id)), Settings())
