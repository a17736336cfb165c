"""A triage of the change between two stored runs (`jaxbench triage BEFORE..AFTER`), in either direction: a
speed-up is bisected to its first faster commit as a slowdown is to its first bad one, each direction
refused where the runs show the other; and a release culprit's commits of what jaxlib builds in (XLA), read
at the two release tags of a local jax repository.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/triage/test_triage_speedups.py
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from jaxbench.containers.git import GitRemote
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.main import main
from jaxbench.results import store, synthetic, triage_records
from jaxbench.triage.commands import plan_of, releases_here
from jaxbench.triage.logic import Verdict
from jaxbench.triage.report import headline, render_markdown
from jaxbench.triage.session import run_triage
from jaxbench.triage.settings import Settings
from jaxbench.triage.stacks import BAD, GOOD
from jaxbench.triage.wheels import built_in_ranges, release_range
from tests.triage.fake_stack import OPTAX, SLOWDOWN, STEP_S, Commits, Stack, plan_for

SPEEDUP = 1 / SLOWDOWN


def faster(changed: bool) -> float:
    return SPEEDUP if changed else 1.0


def test_a_speed_up_is_bisected_to_its_first_faster_commit() -> None:
    plan = dataclasses.replace(plan_for(OPTAX), faster=True)
    stack = Stack(OPTAX, {"optax": "c7"}, level=lambda label, attempt, changed: faster(changed))
    outcome = run_triage(plan, stack, Commits(OPTAX))

    assert outcome.reproduced is Verdict.BAD
    assert outcome.reproduction.startswith("real: step time last good / first faster ")
    assert (outcome.culprit, outcome.last_good_commit) == ("c7", "c6")
    assert outcome.reason == "optax c7 is the first faster commit; c6 is not faster"
    assert "a speed-up" in outcome.effect
    assert outcome.effect_ratio is not None
    ratio, low, _ = outcome.effect_ratio  # the step time before over after: above 1 for a speed-up
    assert low > 1 and ratio == pytest.approx(SLOWDOWN, rel=0.05)
    for probe in outcome.probes:
        expected = Verdict.BAD if stack.position["optax"][probe.commit] >= 7 else Verdict.GOOD
        assert probe.verdict is expected
        assert probe.median_step_s == pytest.approx(STEP_S * faster(expected is Verdict.BAD), rel=0.05)
    markdown = render_markdown(plan, outcome)
    assert "is the first faster commit." in markdown and headline(plan, outcome) == "speed-up from optax c7"


@pytest.mark.parametrize("looked_for_a_speed_up", [True, False])
def test_each_direction_is_refused_where_the_runs_move_the_other_way(looked_for_a_speed_up: bool) -> None:
    plan = dataclasses.replace(plan_for(OPTAX), faster=looked_for_a_speed_up)
    # The stack moves the other way: slower where a speed-up is looked for, faster where a slowdown is.
    level = SLOWDOWN if looked_for_a_speed_up else SPEEDUP
    stack = Stack(OPTAX, {"optax": "c7"}, level=lambda label, attempt, changed: level if changed else 1.0)
    outcome = run_triage(plan, stack, Commits(OPTAX))
    assert outcome.reproduced is Verdict.GOOD and outcome.culprit is None
    assert set(stack.labels()) == {GOOD, BAD}  # no bisection


def manifest(version: str, commit: str, jaxlib: str | None = None) -> dict[str, Any]:
    """jax at `version` and `commit`, jaxlib at `jaxlib` (default: jax's version), as wheels record them."""
    jax = {"repository": synthetic.JAX_REPO, "commit": commit, "version": version}
    return {"flavor": "cpu", "components": {"jax": jax, "jaxlib": {"version": jaxlib or version}}}


def two_runs(
    folder: Path, monkeypatch: pytest.MonkeyPatch, before_s: float, after_s: float, jaxlib: str | None = None
) -> Engine:
    """A store (JAXBENCH_DB) holding run 1 (jax 0.9.0.1, `before_s` a step) and run 2 (jax 0.9.1, its
    jaxlib at `jaxlib`, by default 0.9.1 too)."""
    url = f"sqlite:///{folder / 'store.sqlite'}"
    monkeypatch.setenv("JAXBENCH_DB", url)
    files = [
        synthetic.write(folder, synthetic.run_result(night, step, image_manifest=pins), name)
        for night, step, pins, name in (
            (dt.date(2026, 2, 5), before_s, manifest("0.9.0.1", "a" * 40), "before.json"),
            (dt.date(2026, 3, 2), after_s, manifest("0.9.1", "b" * 40, jaxlib), "after.json"),
        )
    ]
    assert main(["ingest", *map(str, files)]) == ExitCode.OK
    return store.connect(url)


def test_two_runs_are_a_change_to_triage_in_the_direction_they_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = two_runs(tmp_path, monkeypatch, 0.0109, 0.0078)
    change = triage_records.change_between(engine, "1..2")
    assert change.title == "runs 1..2" and change.kind == "throughput"
    assert change.fingerprint == triage_records.change_between(engine, "1..2").fingerprint  # resumable
    assert change.fingerprint != triage_records.change_between(engine, "2..1").fingerprint
    plan = plan_of(change, Settings(), releases=releases_here(None))
    [move] = plan.moved
    assert (move.name, move.good, move.bad, move.by) == ("jax", "0.9.0.1", "0.9.1", "release")
    assert plan.faster and plan.threshold == pytest.approx((1 - 0.0078 / 0.0109) / 2)
    # jaxlib moved too, at jax's versions: jax's wheels bring it, so it is rerun at both ends, not skipped.
    assert (plan.carried, plan.skipped) == (("jaxlib (with jax's release)",), ())
    # The same pair the other way round is a slowdown.
    backwards = triage_records.change_between(engine, "2..1")
    assert not plan_of(backwards, Settings(), releases=releases_here(None)).faster


def test_a_jaxlib_at_another_version_than_jax_is_not_carried_by_jax_s_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = two_runs(tmp_path, monkeypatch, 0.0109, 0.0078, jaxlib="0.9.0.2")
    plan = plan_of(triage_records.change_between(engine, "1..2"), Settings(), releases=releases_here(None))
    assert plan.carried == ()
    [skipped] = plan.skipped
    assert skipped.startswith("jaxlib (")


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("1..1", "runs 1..1: the same run twice"),
        ("1..7", "run 7: no such run in the store"),
        ("1..x", "runs '1..x': expected BEFORE..AFTER"),
    ],
)
def test_a_pair_of_runs_that_names_no_change_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: str, expected: str
) -> None:
    engine = two_runs(tmp_path, monkeypatch, 0.0109, 0.0078)
    with pytest.raises(InvalidInput, match=expected.replace("(", r"\(").replace(".", r"\.")):
        triage_records.change_between(engine, reference)


def test_runs_of_two_configurations_are_refused_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    files = [
        synthetic.write(tmp_path, synthetic.run_result(dt.date(2026, 2, 5), 0.01, steps=steps), name)
        for steps, name in ((20, "a.json"), (30, "b.json"))
    ]
    monkeypatch.setenv("JAXBENCH_DB", url)
    assert main(["ingest", *map(str, files)]) == ExitCode.OK
    assert main(["triage", "1..2", "--work", str(tmp_path / "work")]) == ExitCode.INVALID_INPUT
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "runs 1..2: they ran different configurations" in error[0]
    assert not (tmp_path / "work").exists()


def git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def jax_repository(folder: Path, pins: dict[str, str | None]) -> Path:
    """A local jax repository with a commit tagged per release, its third_party/xla/revision.bzl pinning
    the given XLA commit (None: no such file at that tag)."""
    git(folder, "init", "--quiet")
    for tag, xla in pins.items():
        revision = folder / "third_party" / "xla" / "revision.bzl"
        revision.parent.mkdir(parents=True, exist_ok=True)
        if xla is None:
            revision.unlink(missing_ok=True)
            (folder / "README").write_text(tag)
        else:
            revision.write_text(f'"""XLA as jax pins it."""\n\nXLA_COMMIT = "{xla}"\nXLA_SHA256 = "0"\n')
        git(folder, "add", "-A")
        author = ("-c", "user.name=t", "-c", "user.email=t@t")
        git(folder, *author, "commit", "--quiet", "--allow-empty", "-m", tag)
        git(folder, "tag", tag)
    return folder


def test_a_jax_release_culprit_names_the_xla_commits_between_the_two_releases(tmp_path: Path) -> None:
    old, new = "1" * 40, "2" * 40
    repository = str(jax_repository(tmp_path, {"jax-v0.9.0": old, "jax-v0.9.0.1": old, "jax-v0.9.1": new,
                                                "jax-v0.9.2": None}))  # fmt: skip
    components = releases_here(None).components
    remote = GitRemote()

    assert built_in_ranges(components, "jax", repository, "0.9.0.1", "0.9.1", remote) == [
        f"xla {old[:12]}..{new[:12]} (https://github.com/openxla/xla/compare/{old}...{new})"
    ]
    assert built_in_ranges(components, "jax", repository, "0.9.0", "0.9.0.1", remote) == [
        f"xla unchanged ({old[:12]})"
    ]
    [unread] = built_in_ranges(components, "jax", repository, "0.9.1", "0.9.2", remote)
    assert unread.startswith(f"xla: not read from {repository} (")
    link = "https://github.com/jax-ml/jax/compare/jax-v0.9.0.1...jax-v0.9.1"
    span = release_range(components["jax"], repository, "0.9.0.1", "0.9.1")
    assert span == f"jax-v0.9.0.1..jax-v0.9.1 ({link})"  # a local clone: the link to jax's own host
    # Only jax's wheels build XLA in; a pure-Python component's releases name no built-in commits.
    assert built_in_ranges(components, "optax", repository, "0.2.5", "0.2.6", remote) == []
