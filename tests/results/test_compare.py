"""`jaxbench compare` (two runs, metric by metric) and `jaxbench detect-series` (anyone's CSV)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.runtime.options import Schedule
from jaxbench.results import comparison_commands, synthetic
from jaxbench.results.compare import Difference

NIGHT = dt.date(2026, 11, 1)


def result_with_times(
    tmp_path: Path,
    name: str,
    times: list[float],
    *,
    backend: str = "native",
    recipe: str = "llama2-7b",
    schedule: Schedule | None = None,
) -> Path:
    document = synthetic.run_result(NIGHT, 0.5, backend=backend, recipe=recipe, schedule=schedule)
    document["timing"]["raw_step_times_s"] = times
    document["timing"]["warmup_steps"] = 0
    median = float(np.median(times))
    for metric in document["metrics"]:
        if metric["name"] == "perf/step_time_s":
            metric["value"] = median
        elif metric["name"] == "perf/tokens_per_s":
            metric["value"] = 64 * 4096 / median
    return synthetic.write(tmp_path, document, name)


def test_a_slower_run_is_significantly_worse(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    a = result_with_times(tmp_path, "a.json", list(0.50 * (1 + 0.01 * rng.standard_normal(30))))
    b = result_with_times(tmp_path, "b.json", list(0.55 * (1 + 0.01 * rng.standard_normal(30))))
    rows = {r.metric: r for r in comparison_commands.compare(None, str(a), str(b))[0]}
    step, throughput = rows["perf/step_time_s"], rows["perf/tokens_per_s"]
    assert step.ratio == pytest.approx(1.1, rel=0.02) and step.pvalue is not None and step.pvalue < 1e-6
    assert step.difference is Difference.WORSE and throughput.difference is Difference.WORSE
    assert rows["perf/compile_time_s"].difference is Difference.UNKNOWN  # one value per run: no test


def test_same_distribution_is_no_difference(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    a = result_with_times(tmp_path, "a.json", list(0.5 * (1 + 0.01 * rng.standard_normal(30))))
    b = result_with_times(tmp_path, "b.json", list(0.5 * (1 + 0.01 * rng.standard_normal(30))))
    rows = {r.metric: r for r in comparison_commands.compare(None, str(a), str(b))[0]}
    assert rows["perf/step_time_s"].difference is Difference.NONE


def test_two_backends_of_one_recipe_compare_and_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(3)
    native = result_with_times(
        tmp_path, "native.json", list(0.50 * (1 + 0.01 * rng.standard_normal(30))), schedule=Schedule.AD_HOC
    )
    maxtext = result_with_times(
        tmp_path, "maxtext.json", list(0.60 * (1 + 0.01 * rng.standard_normal(30))), backend="maxtext"
    )
    rows, sides = comparison_commands.compare(None, str(native), str(maxtext))
    # A run by hand and a nightly one compare alike; the title says which is which.
    assert sides == ("llama2-7b (native, ad-hoc)", "llama2-7b (maxtext, nightly)")
    step = next(r for r in rows if r.metric == "perf/step_time_s")
    assert step.ratio == pytest.approx(1.2, rel=0.02) and step.difference is Difference.WORSE
    assert cli.main(["compare", str(native), str(maxtext)]) == ExitCode.OK
    assert "B relative to A (A: llama2-7b (native, ad-hoc), B: llama2-7b (maxtext, nightly))" in (
        capsys.readouterr().out
    )


def test_two_recipes_do_not_compare(tmp_path: Path) -> None:
    a = result_with_times(tmp_path, "a.json", [0.5] * 10)
    b = result_with_times(tmp_path, "b.json", [0.5] * 10, recipe="gpt3-1.3b", backend="levanter")
    with pytest.raises(
        InvalidInput, match=r"A ran llama2-7b \(native, nightly\) and B gpt3-1.3b \(levanter, nightly\)"
    ):
        comparison_commands.compare(None, str(a), str(b))


def test_compare_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = result_with_times(tmp_path, "a.json", [0.5] * 10)
    assert cli.main(["compare", str(a), str(a)]) == ExitCode.OK
    assert "perf/step_time_s" in capsys.readouterr().out
    assert cli.main(["compare", str(a), str(tmp_path / "missing.json")]) == ExitCode.INVALID_INPUT


def test_detect_series_from_a_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(2)
    values = np.concatenate([100 + rng.standard_normal(40), 110 + rng.standard_normal(30)])
    path = tmp_path / "series.csv"
    path.write_text(
        "date,value\n"
        + "".join(f"2026-01-{i + 1:02d},{v}\n" if i < 31 else f"d{i},{v}\n" for i, v in enumerate(values))
    )
    assert cli.main(["detect-series", str(path), "--json"]) == ExitCode.OK
    document = json.loads(capsys.readouterr().out)["data"]
    [change] = document["change_points"]
    assert change["index"] == 40 and change["date"] == "d40"
    assert change["magnitude"] == pytest.approx(0.1, abs=0.01) and change["pvalue"] < 1e-6
    assert cli.main(["detect-series", str(path)]) == ExitCode.OK  # the same, as a table
    shown = capsys.readouterr().out
    assert "70 points; change points: 1, drifts: 0" in shown
    [row] = [line.replace("│", " ").split() for line in shown.splitlines() if "d40" in line]
    assert row == ["40", "d40", "step", f"{change['magnitude']:+.2%}", f"{change['pvalue']:.2g}"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x,y\n1,2\n", "expected a header row with a 'value' column"),
        ("value\n1\nfast\n", "line 3: value 'fast'"),
        ("value\n1\nnan\n", "is not finite"),
    ],
)
def test_detect_series_rejects_bad_csv(
    tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    assert cli.main(["detect-series", str(path)]) == ExitCode.INVALID_INPUT
    assert message in capsys.readouterr().err
