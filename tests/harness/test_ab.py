"""A/B of two flag sets: the paired-ratio interval and verdict, the alternating runner, and a real A/B on
the CPU through the CLI."""

from __future__ import annotations

import datetime as dt
import doctest
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from jaxbench.core.errors import InvalidInput, RunFailed
from jaxbench.harness.measure import stats
from jaxbench.harness.measure.stats import paired_ratio
from jaxbench.harness.run import ab
from jaxbench.results import synthetic
from tests.conftest import REPO


def test_the_examples_of_the_statistics_run() -> None:
    outcome = doctest.testmod(stats)
    assert outcome.failed == 0 and outcome.attempted > 0


def test_paired_ratio_known_values() -> None:
    estimate = paired_ratio([100.0, 100.0, 100.0, 100.0], [110.0, 110.0, 110.0, 110.0])
    assert estimate.ratio == pytest.approx(1.1) and estimate.low == pytest.approx(1.1) and estimate.pairs == 4
    # logs of 1.1 and 0.9: mean -0.00527, sd 0.1419, t(0.975, 1) = 12.706 -> half width 1.275
    wide = paired_ratio([100.0, 100.0], [110.0, 90.0])
    assert wide.ratio == pytest.approx(math.sqrt(0.99))
    assert wide.low == pytest.approx(
        math.exp(math.log(0.99) / 2 - 12.7062 * 0.14190 / math.sqrt(2)), rel=1e-3
    )
    assert paired_ratio([1.0], [2.0]).high == math.inf
    with pytest.raises(ValueError, match="same positive number"):
        paired_ratio([1.0, 2.0], [1.0])


@pytest.mark.parametrize(
    ("b", "verdict"),
    [
        ([105.0, 106.0, 104.5, 105.5], ab.ABVerdict.FASTER),
        ([95.0, 94.0, 95.5, 94.5], ab.ABVerdict.SLOWER),
        ([101.0, 99.0, 102.0, 98.0], ab.ABVerdict.SAME),
    ],
)
def test_verdicts_on_synthetic_throughputs(b: list[float], verdict: ab.ABVerdict) -> None:
    assert ab.verdict_of(paired_ratio([100.0, 100.5, 99.5, 100.0], b)) is verdict


def test_arms_are_profiles_or_flags() -> None:
    assert ab.parse_arm("A", "hopper") == ab.Arm("A", "hopper", "hopper", "")
    assert ab.parse_arm("B", "--xla_a=1 --xla_b=2").xla_flags == "--xla_a=1 --xla_b=2"
    with pytest.raises(InvalidInput, match="--a 'hoper': expected a flag profile"):
        ab.parse_arm("A", "hoper")
    with pytest.raises(InvalidInput, match="given twice"):
        ab.parse_arm("B", "--xla_a=1 --xla_a=2")


def test_runs_go_in_pairs_of_alternating_order_in_fresh_processes(tmp_path: Path) -> None:
    launched: list[tuple[str, str]] = []

    def launch(argv: list[str], env: dict[str, str]) -> int:
        out = Path(argv[argv.index("--out") + 1])
        arm = out.parent.name
        launched.append((arm, env.get("XLA_FLAGS", "")))
        step_time = 0.5 if arm == "A" else 0.45  # B is 11 % faster
        synthetic.write(out, synthetic.run_result(dt.date(2026, 11, 1), step_time))
        return 0

    a, b = ab.parse_arm("A", "none"), ab.parse_arm("B", "--xla_b=1")
    outcome = ab.run_ab("llama2", a, b, repeats=3, run_args=["--steps", "6"], out_dir=tmp_path, launch=launch)
    assert [arm for arm, _ in launched] == ["A", "B", "B", "A", "A", "B"]
    assert all(flags.endswith("--xla_b=1") for arm, flags in launched if arm == "B")
    assert outcome.verdict is ab.ABVerdict.FASTER and outcome.estimate.ratio == pytest.approx(
        0.5 / 0.45, rel=0.01
    )


def test_a_pairs_second_run_being_faster_is_not_taken_for_either_arm(tmp_path: Path) -> None:
    """Equal arms; each pair's second run 6 % faster. In the order A B, A B, ... B would be called faster."""
    launches: list[str] = []

    def launch(argv: list[str], env: dict[str, str]) -> int:
        out = Path(argv[argv.index("--out") + 1])
        launches.append(out.parent.name)
        step_time = 0.5 * (0.94 if len(launches) % 2 == 0 else 1.0) * (1 + 0.002 * len(launches))
        synthetic.write(out, synthetic.run_result(dt.date(2026, 11, 1), step_time))
        return 0

    a, b = ab.parse_arm("A", "none"), ab.parse_arm("B", "--xla_b=1")
    outcome = ab.run_ab("llama2", a, b, repeats=4, run_args=[], out_dir=tmp_path, launch=launch)
    assert outcome.verdict is ab.ABVerdict.SAME
    assert outcome.estimate.ratio == pytest.approx(1.0, abs=0.01)


def test_a_failed_arm_stops_the_comparison(tmp_path: Path) -> None:
    def launch(argv: list[str], env: dict[str, str]) -> int:
        out = Path(argv[argv.index("--out") + 1])
        synthetic.write(out, synthetic.run_result(dt.date(2026, 11, 1), 0.5, status=synthetic.Status.OOM))
        return 3

    with pytest.raises(RunFailed, match=r"arm A \(none\) run 1 failed: oom"):
        ab.run_ab(
            "llama2",
            ab.parse_arm("A", "none"),
            ab.parse_arm("B", "cpu"),
            repeats=2,
            run_args=[],
            out_dir=tmp_path,
            launch=launch,
        )


@pytest.mark.slow
def test_real_ab_on_the_cpu(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jaxbench",
            "ab",
            "gpt3",
            "--a=none",
            "--b=--xla_cpu_enable_fast_math=false",
            "--repeats",
            "2",
            "--steps",
            "6",
            "--out",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr
    assert "throughput B/A =" in done.stdout and "over 2 pairs:" in done.stdout
    results = [json.loads(p.read_text()) for p in tmp_path.rglob("*.json")]
    assert len(results) == 4
    assert sorted(r["flags"]["profile"] for r in results) == ["cpu", "cpu", "none", "none"]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (("xla_flags=hopper",), "--set xla_flags=hopper and --set xla_flags=none both set xla_flags"),
        (("train.steps=abc",), "--set train.steps=abc: train.steps: Input should be a valid integer"),
    ],
)
def test_each_arm_is_checked_as_a_run_before_the_first_run(
    overrides: tuple[str, ...], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `--set` the arms' runs would refuse (or one an arm's profile would silently replace) stops the A/B
    before any run starts, in one line."""
    from rich.console import Console

    from jaxbench.harness import commands
    from jaxbench.harness.runtime.options import RunOptions

    monkeypatch.setattr(ab, "run_ab", lambda *args, **kwargs: pytest.fail("an arm ran"))
    options = commands.ABOptions(
        RunOptions("llama2", overrides=overrides, out_dir=tmp_path / "ab"), "none", "cpu"
    )
    with pytest.raises(InvalidInput) as refused:
        commands.ab_compare(options, Console(quiet=True))
    assert expected in str(refused.value) and not (tmp_path / "ab").exists()
