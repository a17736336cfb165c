"""A run end to end in-process: the result file, its schema, its numbers, and failures written as results."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jax
import jsonschema
import pytest

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.backends.native import backend as native
from jaxbench.harness.backends.native import train
from jaxbench.harness.run import runner
from jaxbench.harness.runtime import outcome
from jaxbench.harness.runtime.options import RunOptions
from jaxbench.harness.runtime.reporter import SilentReporter
from jaxbench.harness.runtime.result import SCHEMA_PATH, RunResult, Status, read_result

SCHEMA = json.loads(SCHEMA_PATH.read_text())


def run(tmp_path: Path, recipe: str = "llama2", steps: int = 6, *overrides: str) -> tuple[RunResult, Path]:
    result, path = runner.execute(
        RunOptions(recipe, steps=steps, overrides=tuple(overrides), out_dir=tmp_path), SilentReporter()
    )
    assert path is not None and path.is_file()
    jsonschema.validate(json.loads(path.read_text()), SCHEMA)
    assert read_result(path) == result
    return result, path


@pytest.mark.slow
def test_successful_run_writes_a_complete_result(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "llama2", 8, "train.warmup_steps=3")
    assert result.status is Status.OK and result.reason is None
    assert result.recipe.name == "llama2-tiny" and result.recipe.overrides == ["train.warmup_steps=3"]
    assert result.parallelism is not None and result.parallelism.device_count == 8
    assert result.parallelism.mesh == {"data": 8, "fsdp": 1, "tensor": 1}

    timing = result.timing
    assert len(timing.raw_step_times_s) == 8 and timing.warmup_steps == 3
    assert timing.step_time_s is not None and timing.step_time_s.count == 5  # warmup excluded
    assert timing.step_time_s.median == sorted(timing.raw_step_times_s[3:])[2]
    assert timing.compile_s is not None and timing.compile_s > 0

    tp = result.throughput
    assert tp is not None and tp.unit == "token"
    assert tp.units_per_step == 8 * 64
    assert tp.per_s == pytest.approx(tp.units_per_step / timing.step_time_s.median)
    assert tp.model_tflops_per_device == pytest.approx(tp.flops_per_unit * tp.per_s / 8 / 1e12)
    assert tp.mfu is None and tp.peak_tflops_per_device is None  # no peak is known for a CPU

    assert result.loss is not None and len(result.loss.per_step) == 8
    assert result.loss.final_window == pytest.approx(sum(result.loss.per_step) / 8)  # type: ignore[arg-type]
    assert result.loss.optimal == pytest.approx(1.8158479, rel=1e-6)

    metrics = {m.name: m for m in result.metrics}
    assert metrics["perf/step_time_s"].value == timing.step_time_s.median
    assert metrics["perf/step_time_s"].direction == "lower_is_better"
    assert metrics["perf/tokens_per_s"].direction == "higher_is_better"
    assert "perf/mfu" not in metrics  # unknown peak: no MFU, never a guess

    origin = result.provenance
    assert origin.versions.jax == jax.__version__
    assert origin.devices.kind == "cpu" and origin.devices.count == 8
    assert origin.env["JAX_PLATFORMS"] == "cpu"
    assert result.recipe.resolved["train"]["steps"] == 8


@pytest.mark.slow
def test_vit_reports_images(tmp_path: Path) -> None:
    result, _ = run(tmp_path, "vit", 6)
    assert result.throughput is not None and result.throughput.unit == "image"
    assert result.throughput.units_per_step == 32
    assert {m.name for m in result.metrics} >= {"perf/images_per_s", "perf/images_per_s_per_device"}


@pytest.mark.slow
def test_the_step_is_traced_and_compiled_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    traces = []
    original = train.make_step_fn

    def counting(*args: Any, **kwargs: Any) -> train.StepFn:
        step = original(*args, **kwargs)

        def traced(state: train.TrainState) -> Any:
            traces.append(1)
            return step(state)

        return traced

    monkeypatch.setattr(train, "make_step_fn", counting)
    result, _ = run(tmp_path, "gpt3", 7)
    assert result.status is Status.OK and len(traces) == 1


@pytest.mark.slow
def test_non_finite_loss_is_a_result(tmp_path: Path) -> None:
    # A learning rate of 1e30 overflows the weights within a few steps.
    result, _ = run(tmp_path, "gpt3", 30, "optimizer.learning_rate=1e30", "optimizer.lr_warmup_steps=0")
    assert result.status is Status.NAN
    assert result.reason is not None and result.reason.startswith("loss became nan at step")
    assert result.loss is not None and result.loss.per_step[-1] is None
    assert len(result.loss.per_step) < 30  # stopped at the first non-finite loss
    assert result.loss.final_window is None and result.timing.step_time_s is None


class FakeXlaError(RuntimeError):
    """Stands in for jax.errors.JaxRuntimeError, which carries XLA's status text the same way."""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("phase", "error", "status"),
    [
        (
            "compile",
            FakeXlaError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 80.00GiB"),
            Status.OOM,
        ),
        ("compile", FakeXlaError("INTERNAL: ptxas exited with non-zero error code"), Status.COMPILE_ERROR),
        ("train", FakeXlaError("INTERNAL: an illegal memory access was encountered"), Status.FAILED),
        ("train", KeyboardInterrupt(), Status.INTERRUPTED),
    ],
)
def test_failures_are_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, phase: str, error: BaseException, status: Status
) -> None:
    if phase == "compile":

        def fail_prepare(*args: Any, **kwargs: Any) -> train.TrainProgram:
            raise error

        monkeypatch.setattr(train, "prepare", fail_prepare)
    else:

        def fail_steps(*args: Any, **kwargs: Any) -> train.TrainState:
            log = args[3]
            log.times.append(0.01)
            log.losses.append(4.0)
            raise error

        monkeypatch.setattr(native, "run_steps", fail_steps)
    result, _ = run(tmp_path, "llama2", 6)
    assert result.status is status
    assert result.reason is not None
    if phase == "train":
        assert result.loss is not None and result.loss.per_step == [4.0]
        assert result.timing.compile_s is not None
    else:
        assert result.loss is not None and result.loss.per_step == [] and result.timing.compile_s is None


@pytest.mark.parametrize(
    ("error", "phase", "status", "reason"),
    [
        (outcome.NonFiniteLoss(3, math.inf), "train", Status.NAN, "loss became inf at step 3"),
        (outcome.Terminated(), "train", Status.INTERRUPTED, "interrupted by SIGTERM during train"),
        (KeyboardInterrupt(), "compile", Status.INTERRUPTED, "interrupted by SIGINT during compile"),
        (MemoryError("CUDA out of memory"), "train", Status.OOM, "MemoryError: CUDA out of memory"),
        (ValueError("x" * 3000), "compile", Status.COMPILE_ERROR, "ValueError: " + "x" * 1988 + " ..."),
    ],
)
def test_classify(error: BaseException, phase: str, status: Status, reason: str) -> None:
    assert outcome.classify(error, phase) == (status, reason)


def test_data_that_does_not_fit_the_model_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(
        InvalidInput, match=r"data.successors \(64\) must be smaller than model.vocab_size \(64\)"
    ):
        runner.execute(
            RunOptions("llama2", overrides=("data.successors=64",), out_dir=tmp_path), SilentReporter()
        )
    assert list(tmp_path.iterdir()) == []
