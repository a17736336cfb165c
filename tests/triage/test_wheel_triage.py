"""Triage by published wheels, for real on the CPU, offline: a wheelhouse of optax releases (the installed
optax, built as six versions here) in which 0.2.83 is planted slow (scripts/standin-optax's `slow`
change, kept by every later release), and an incident between 0.2.80 and 0.2.85 on llama2's tiny size. The
triage must bisect the releases, name 0.2.83 and the commits between it and 0.2.82 by their release tags.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/triage/test_wheel_triage.py
"""

from __future__ import annotations

import json
import os
import shutil
from importlib.machinery import SourceFileLoader
from pathlib import Path

import optax
import pytest
from sqlalchemy import Engine

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness import recipes
from jaxbench.main import main
from jaxbench.results import store, synthetic_incident, triage_records
from jaxbench.triage.commands import plan_of, releases_here
from jaxbench.triage.report import headline, render_markdown
from jaxbench.triage.session import Outcome
from jaxbench.triage.settings import Settings
from jaxbench.triage.stacks import Kind, Move, Plan
from jaxbench.triage.wheels import release_range
from tests.conftest import REPO
from tests.support.wheels import package_wheel

VERSIONS = ("0.2.80", "0.2.81", "0.2.82", "0.2.83", "0.2.84", "0.2.85")
SLOW_FROM = "0.2.83"
OPTAX = "https://github.com/google-deepmind/optax.git"
JAX = "https://github.com/jax-ml/jax.git"
OVERRIDES = ("train.steps=8", "train.warmup_steps=2", "train.global_batch=8")
"""Short runs: a probe is mostly the process's start and its compile, and the planted change is large."""


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    standin = SourceFileLoader("standin_optax", str(REPO / "scripts" / "standin-optax")).load_module()
    out = tmp_path_factory.mktemp("wheelhouse")
    for version in VERSIONS:
        source = tmp_path_factory.mktemp(f"src-{version}") / "optax"
        source.parent.mkdir(exist_ok=True)
        shutil.copytree(Path(optax.__file__).parent, source, ignore=shutil.ignore_patterns("__pycache__"))
        if version >= SLOW_FROM:
            transform = source / "_src" / "transform.py"
            transform.write_text(standin.make_slow(transform.read_text()))
        package_wheel(source, "optax", version, tmp_path_factory.mktemp(f"project-{version}"), out)
    return out


def incident(engine: Engine) -> int:
    recipe = recipes.load("llama2", "tiny", OVERRIDES)
    return synthetic_incident.add_incident(
        engine,
        component="optax",
        repository=OPTAX,
        good=VERSIONS[0],
        bad=VERSIONS[-1],
        config={"family": "llama2", "size": "tiny"} | recipe.resolved(),
        config_hash=recipes.recipe_hash(recipe),
        magnitude=0.4,
        by_version=True,
    )


@pytest.mark.slow
def test_an_index_makes_a_component_move_by_release(tmp_path: Path, wheelhouse: Path) -> None:
    engine = store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")
    found = triage_records.find_incident(engine, str(incident(engine)))
    [move] = plan_of(found, Settings(), releases=releases_here(str(wheelhouse))).moved
    assert (move.name, move.good, move.bad, move.by) == ("optax", "0.2.80", "0.2.85", "release")
    assert releases_here(str(wheelhouse)).between(move) == list(VERSIONS)
    # Without an index, optax's recorded versions name no commits to build: it is refused, not guessed.
    with pytest.raises(InvalidInput, match="only components it cannot rerun"):
        plan_of(found, Settings(), releases=None)


def test_a_compiled_component_moves_by_release_where_its_runs_recorded_two_versions(tmp_path: Path) -> None:
    engine = store.connect(f"sqlite:///{tmp_path / 'store.sqlite'}")
    config = {"family": "llama2", "size": "tiny"}
    versions = synthetic_incident.add_incident(
        engine, component="jax", repository=JAX, good="0.9.0", bad="0.9.1", config=config,
        config_hash="h" * 64, by_version=True, fingerprint="aa" * 32,
    )  # fmt: skip
    commits = synthetic_incident.add_incident(
        engine, component="jax", repository=JAX, good="a" * 40, bad="b" * 40, config=config,
        config_hash="h" * 64, fingerprint="bb" * 32,
    )  # fmt: skip
    [move] = plan_of(
        triage_records.find_incident(engine, str(versions)), Settings(), releases=releases_here(None)
    ).moved
    assert (move.good, move.bad, move.by) == ("0.9.0", "0.9.1", "release")
    with pytest.raises(InvalidInput, match="jax .compiled"):
        plan_of(triage_records.find_incident(engine, str(commits)), Settings(), releases=releases_here(None))
    component = releases_here(None).components["jax"]
    assert release_range(component, JAX, "0.9.0", "0.9.1") == (
        "jax-v0.9.0..jax-v0.9.1 (https://github.com/jax-ml/jax/compare/jax-v0.9.0...jax-v0.9.1)"
    )


@pytest.mark.quiet_cpu
def test_the_triage_names_the_planted_release_and_the_commits_to_bisect_next(
    tmp_path: Path, wheelhouse: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("JAXBENCH_DB", url)
    incident_id = incident(store.connect(url))
    work = tmp_path / "triage"
    last_cpu = str(max(os.sched_getaffinity(0)))  # one CPU: timed by CPU time, which other work moves least
    command = [
        "triage",
        str(incident_id),
        "--index",
        str(wheelhouse),
        "--work",
        str(work),
        "--cpus",
        last_cpu,
    ]
    assert main([*command, "--repeats", "2", "--probe-repeats", "2", "--max-runs", "30"]) == ExitCode.OK
    summary = json.loads((work / "summary.json").read_text())["outcome"]
    assert (summary["component"], summary["unit"], summary["culprit"]) == ("optax", "release", SLOW_FROM)
    assert summary["last_good_commit"] == "0.2.82"
    compare = f"{OPTAX.removesuffix('.git')}/compare/v0.2.82...v0.2.83".replace("https://github.com/", "")
    assert summary["release_range"].startswith("v0.2.82..v0.2.83") and compare in summary["release_range"]
    markdown = (work / "summary.md").read_text()
    assert "**optax `0.2.83`** is the first bad release (`0.2.82` is good)." in markdown
    assert "culprit: optax 0.2.83" in capsys.readouterr().out


def test_a_release_culprit_is_reported_with_the_commits_a_source_bisection_takes_next() -> None:
    plan = Plan(
        "f" * 64, Kind.THROUGHPUT, "llama2:tiny", (Move("jax", JAX, "0.9.0", "0.9.2", by="release"),), 0.1
    )
    outcome = Outcome(
        "finished",
        "jax 0.9.1 is the first bad release; 0.9.0 is good",
        component="jax",
        unit="release",
        culprit="0.9.1",
        last_good_commit="0.9.0",
        release_range="jax-v0.9.0..jax-v0.9.1 (https://github.com/jax-ml/jax/compare/jax-v0.9.0...jax-v0.9.1)",
    )
    markdown = render_markdown(plan, outcome)
    assert "**jax `0.9.1`** is the first bad release (`0.9.0` is good)." in markdown
    assert "jax-v0.9.0..jax-v0.9.1" in markdown and "/commit/" not in markdown  # no commit page for a version
    assert headline(plan, outcome) == "culprit: jax 0.9.1"
