"""`jaxbench pr-check` end to end on the CPU: a stand-in optax repository (scripts/standin-optax)
gains an ordinary commit and then one that slows the tiny training step; pr-check of the slow commit against
the ordinary one reports a regression whose interval excludes 1 and exits 4, and of the ordinary commit
against the first one reports ok or inconclusive and exits 0. Then the harness itself: this repository's
HEAD against itself, each side exported and run from its own tree.

The slow commit here is many times slower than the threshold (about ×6 on a 2-core machine), so that the
test's verdict does not hang on how busy the machine is; benchmarks/pr_check_trials.py measures the 10 %
case and the equal commits over repeated trials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from jaxbench.core.errors import ExitCode
from jaxbench.main import main
from tests.conftest import REPO

ROOT = REPO
STANDIN = [sys.executable, str(ROOT / "scripts" / "standin-optax")]
SLOW_ROUNDS = "96"
"""sin/cos rounds per second-moment element: the tiny step at batch 32 several times slower (22 give about
+10 % in benchmarks/pr_check_trials.py's settings)."""
SETTINGS = ["--set", "train.global_batch=32", "--set", "train.steps=16", "--set", "train.warmup_steps=4"]
ONE_ROUND = ["--repeats", "3", "--max-rounds", "1"]
"""Three pairs decide a +60 % step (and keep equal commits from a false regression) in a fraction of the
default's runs: the test suite's time is CI's."""
CPU = str(max(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else None


def standin(*args: str) -> str:
    done = subprocess.run([*STANDIN, *args], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("upstream") / "optax"
    first = standin("init", str(folder))
    ordinary = standin("commit", str(folder), "ordinary")
    slow = standin("commit", str(folder), "slow", "--rounds", SLOW_ROUNDS)
    return {"folder": folder, "first": first, "ordinary": ordinary, "slow": slow}


def pr_check(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / "out"
    code = main(
        [
            "pr-check", *args, *SETTINGS, "--out", str(out), "--work", str(tmp_path / "work"),
            *(["--cpus", CPU] if CPU else []),
        ]
    )  # fmt: skip
    return code, json.loads((out / "pr-check.json").read_text()), (out / "pr-check.md").read_text()


@pytest.mark.quiet_cpu
def test_a_commit_that_slows_the_step_is_a_regression(upstream: dict[str, Any], tmp_path: Path) -> None:
    source = f"optax={upstream['folder']}#{upstream['slow']}"
    code, verdict, table = pr_check(tmp_path, "--base", upstream["ordinary"], "--source", source, *ONE_ROUND)
    [benchmark] = verdict["benchmarks"]
    assert benchmark["verdict"] == "regression", benchmark
    assert 1 < benchmark["low"] <= benchmark["ratio"] <= benchmark["high"]
    assert code == ExitCode.REGRESSION
    assert verdict["blocking"] == ["llama2:tiny"]
    assert verdict["head"]["commit"] == upstream["slow"] and verdict["base"]["commit"] == upstream["ordinary"]
    assert f"`optax@{upstream['slow'][:12]}` against `optax@{upstream['ordinary'][:12]}`" in table
    assert "| `llama2:tiny` |" in table and "❌ regression" in table


@pytest.mark.quiet_cpu
def test_an_ordinary_commit_is_not_a_regression(upstream: dict[str, Any], tmp_path: Path) -> None:
    source = f"optax={upstream['folder']}#{upstream['ordinary']}"
    code, verdict, _ = pr_check(tmp_path, "--base", upstream["first"], "--source", source, *ONE_ROUND)
    [benchmark] = verdict["benchmarks"]
    assert benchmark["verdict"] in ("ok", "inconclusive"), benchmark
    assert code == ExitCode.OK and verdict["blocking"] == []


@pytest.mark.slow
def test_the_harness_against_itself_runs_each_side_from_its_own_tree(tmp_path: Path) -> None:
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    code, verdict, _ = pr_check(
        tmp_path,
        "--base",
        "HEAD",
        "--head",
        head,
        "--repeats",
        "2",
        "--max-rounds",
        "1",
        "--threshold",
        "0.5",
    )
    assert code == ExitCode.OK
    assert verdict["base"] == verdict["head"] == {"label": f"jaxbench@{head[:12]}", "commit": head}
    [benchmark] = verdict["benchmarks"]
    assert benchmark["verdict"] in ("ok", "inconclusive") and benchmark["pairs"] == 2
    results = sorted((tmp_path / "work" / "runs").rglob("*.json"))
    # Every run made: 2 pairs, and another pair for each one other work starved of CPU (a shared machine).
    assert len(results) == benchmark["runs"] >= 4
    for path in results:
        # Provenance names the exported commit: the tree is no checkout, and the enclosing one is ignored.
        assert json.loads(path.read_text())["provenance"]["git"]["commit"] == head
    assert (tmp_path / "work" / "trees" / head[:12] / "harness" / "run" / "runner.py").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base", "HEAD"], "--head: expected the head revision"),
        (["--base", "HEAD", "--head", "HEAD", "--source", "optax=/x#y"], "--head: not with --source"),
        (
            ["--base", "HEAD", "--head", "HEAD", "--recipes", "llama2"],
            "--recipes 'llama2': expected recipe:size",
        ),
        (["--base", "HEAD", "--head", "HEAD", "--recipes", "llama2:huge"], "no size 'huge'"),
        (["--base", "HEAD", "--head", "HEAD", "--repeats", "1"], "--repeats 1: a paired interval needs"),
        (["--base", "HEAD", "--head", "HEAD", "--threshold", "2"], "--threshold 2.0: expected a fraction"),
        (["--base", "", "--head", "HEAD"], "--base: expected the base revision"),
        (["--base", "v1", "--source", "optax"], "--source 'optax': expected COMPONENT=URL#REF"),
        (["--base", "v1", "--source", "jaxlib=/x#y"], "--source 'jaxlib=/x#y': no component 'jaxlib'"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["pr-check", *args, "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    assert code == ExitCode.INVALID_INPUT
    assert message in capsys.readouterr().err
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()
