"""The machinery every framework backend shares (harness/backends/framework/): the trainer process adapter,
the pure judgement of what a trainer wrote, and where a framework's interpreter is found. A stand-in
trainer (a Python script) plays the framework here; tests/harness/test_maxtext.py and test_levanter.py run the
real ones.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from jaxbench.core.errors import InvalidInput
from jaxbench.harness import recipes
from jaxbench.harness.backends.framework import environment as framework_env
from jaxbench.harness.backends.framework.program import (
    FrameworkProgram,
    StepRecord,
    TrainerCommand,
    TrainerReport,
    judge,
    trainer_environment,
)
from jaxbench.harness.backends.framework.trainer import TrainerExit, run_trainer
from jaxbench.harness.backends.maxtext import MaxText
from jaxbench.harness.backends.pax import Pax
from jaxbench.harness.config import Recipe
from jaxbench.harness.flags.profiles import FlagSet, Setting
from jaxbench.harness.provenance.record import DeviceInfo
from jaxbench.harness.runtime import preflight
from jaxbench.harness.runtime.reporter import SilentReporter
from jaxbench.harness.runtime.result import Status

RECIPE = recipes.load("llama2", "tiny", steps=6)
PARAMS = RECIPE.model.param_count()

STAND_IN = """
import json, sys, time
steps, params, fail_at, pause = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
with open(sys.argv[5], "w") as metrics:  # where it is told, as a framework's metrics file
    for step in range(steps):
        if step == fail_at:
            print("Traceback (most recent call last):")
            print("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 2.0GiB")
            sys.exit(1)
        loss = 4.0 / (step + 1)
        metrics.write(json.dumps({"step": step, "seconds": 0.5 if step == 0 else 0.01, "loss": loss}) + "\\n")
        print(f"step {step} loss {loss} seconds 0.01", flush=True)
        time.sleep(pause)
print(f"parameters {params}")
"""


@dataclasses.dataclass
class StandIn:
    """A Framework whose trainer is the script above."""

    script: Path
    params: int = PARAMS
    fail_at: int = -1
    sleep: float = 0.0
    name: str = "standin"
    title: str = "StandIn"
    module: str = "standin"
    distribution: str = "standin"
    component: str = "standin"

    def check(self, recipe: Recipe) -> None:
        if recipe.train.remat.value != "none":
            raise InvalidInput("train.remat: standin cannot express it")

    extra_env: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def configure(self, recipe: Recipe, mesh_shape: Mapping[str, int], platform: str) -> dict[str, Any]:
        return {"steps": recipe.train.steps}

    def start(self, config: dict[str, Any], python: Path, artifacts: Path) -> TrainerCommand:
        settings = [config["steps"], self.params, self.fail_at, self.sleep, artifacts / "metrics.jsonl"]
        return TrainerCommand([str(python), str(self.script), *map(str, settings)])

    def progress(self, line: str) -> StepRecord | None:
        words = line.split()
        if len(words) == 6 and words[0] == "step":
            return StepRecord(int(words[1]), float(words[5]), float(words[3]))
        return None

    def read(self, config: dict[str, Any], artifacts: Path, log: str) -> TrainerReport:
        rows = [json.loads(line) for line in (artifacts / "metrics.jsonl").read_text().splitlines()]
        params = next(
            (int(line.split()[1]) for line in log.splitlines() if line.startswith("parameters")), None
        )
        return TrainerReport([StepRecord(r["step"], r["seconds"], r["loss"]) for r in rows], params)

    def optimal_loss(self, recipe: Recipe) -> float:
        return 0.0


class Steps(SilentReporter):
    def __init__(self) -> None:
        self.seen: list[tuple[int, float]] = []

    def step_done(self, step: int, seconds: float, loss: float) -> None:
        self.seen.append((step, loss))


def program(tmp_path: Path, **stand_in: Any) -> FrameworkProgram:
    script = tmp_path / "trainer.py"
    script.write_text(STAND_IN)
    devices = DeviceInfo(platform="cpu", kind="cpu", count=1, local_count=1, process_count=1, hostname="h")
    probe = framework_env.Probe("3.12.1", sys.executable, sys.prefix, {"standin": "1.0"}, devices)
    framework = StandIn(script, **stand_in)
    return FrameworkProgram(
        framework=framework,
        recipe=RECIPE,
        config=framework.configure(RECIPE, {"data": 1}, "cpu"),
        interpreter=framework_env.Interpreter(Path(sys.executable), "test"),
        env=trainer_environment({"PATH": "/usr/bin:/bin"}, FlagSet(profile="none", xla={}, env={})),
        probe=probe,
        machine=preflight.Machine("cpu", "cpu", 1),
        mesh_shape={"data": 1, "fsdp": 1, "tensor": 1},
        optimal_loss=0.0,
    )


def test_a_trainer_run_keeps_its_log_shows_progress_and_reads_every_step(tmp_path: Path) -> None:
    reporter = Steps()
    outcome = program(tmp_path).run(reporter, tmp_path / "run.standin")
    assert outcome.status is Status.OK, outcome.reason
    assert outcome.log.losses == [4.0 / (s + 1) for s in range(6)]
    assert outcome.log.times == [0.5] + [0.01] * 5
    assert outcome.compile_s == pytest.approx(0.49)  # the first step less a typical one
    assert reporter.seen == [(s, 4.0 / (s + 1)) for s in range(6)]
    log = (tmp_path / "run.standin" / "trainer.log").read_text()
    assert "step 5 loss" in log and f"parameters {PARAMS}" in log
    assert outcome.framework is not None and outcome.framework.artifacts == "run.standin"
    assert outcome.framework.parameter_count == PARAMS == outcome.framework.expected_parameter_count
    assert shlex.split((tmp_path / "run.standin" / "command.txt").read_text())[1].endswith("trainer.py")


def test_a_relative_results_folder_still_finds_the_trainers_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make bench` writes to runs/; the trainer runs inside the artifacts folder, so every path it is given
    must be absolute, or its metrics file would land in runs/x/runs/x/."""
    monkeypatch.chdir(tmp_path)
    outcome = program(tmp_path).run(SilentReporter(), Path("runs") / "a.standin")
    assert outcome.status is Status.OK, outcome.reason
    assert (tmp_path / "runs" / "a.standin" / "metrics.jsonl").exists()


def test_another_parameter_count_makes_the_run_invalid_with_both_numbers(tmp_path: Path) -> None:
    outcome = program(tmp_path, params=PARAMS + 64).run(SilentReporter(), tmp_path / "a")
    assert outcome.status is Status.INVALID
    assert f"built {PARAMS + 64:,} parameters, the recipe has {PARAMS:,}" in (outcome.reason or "")


def test_a_crashed_trainer_is_a_result_with_the_end_of_its_log(tmp_path: Path) -> None:
    outcome = program(tmp_path, fail_at=3).run(SilentReporter(), tmp_path / "a")
    assert outcome.status is Status.OOM
    assert "exited with status 1 after 3 steps" in (outcome.reason or "")
    assert "RESOURCE_EXHAUSTED" in (outcome.reason or "")
    assert len(outcome.log.times) == 3


def test_sigint_stops_the_trainer_and_is_a_result(tmp_path: Path) -> None:
    slow = program(tmp_path, sleep=0.5)
    timer = threading.Timer(
        1.0, lambda: signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
    )
    timer.start()
    outcome = slow.run(SilentReporter(), tmp_path / "a")
    timer.join()
    assert outcome.status is Status.INTERRUPTED and "SIGINT" in (outcome.reason or "")
    assert 0 < len(outcome.log.times) < 6  # from the log: the trainer never flushed its metrics file
    assert "stopped the trainer on SIGINT" in (tmp_path / "a" / "trainer.log").read_text()


def test_a_trainer_that_cannot_start_is_a_result(tmp_path: Path) -> None:
    done = run_trainer([str(tmp_path / "missing")], {}, tmp_path, tmp_path / "log", lambda line: None)
    assert done.returncode is None and done.error is not None and "could not start" in done.error


def report(*losses: float, params: int = PARAMS) -> TrainerReport:
    return TrainerReport([StepRecord(i, 0.1, loss, 2.0, 100.0) for i, loss in enumerate(losses)], params)


@pytest.mark.parametrize(
    ("trainer_report", "exit", "status", "reason"),
    [
        (report(*[1.0] * 6), TrainerExit(0, None), Status.OK, None),
        (
            report(1.0, float("nan"), *[1.0] * 4),
            TrainerExit(0, None),
            Status.NAN,
            "loss became nan at step 1",
        ),
        (report(*[1.0] * 4), TrainerExit(0, None), Status.FAILED, "reported 4 of the recipe's 6 steps"),
        (report(*[1.0] * 6, params=None), TrainerExit(0, None), Status.INVALID, "an unreported number of"),  # type: ignore[arg-type]
        (report(), TrainerExit(2, None), Status.COMPILE_ERROR, "exited with status 2 after 0 steps"),
        (
            report(1.0),
            TrainerExit(-15, "SIGTERM"),
            Status.INTERRUPTED,
            "interrupted by SIGTERM after 1 steps",
        ),
    ],
)
def test_judge(trainer_report: TrainerReport, exit: TrainerExit, status: Status, reason: str | None) -> None:
    outcome = judge(StandIn(Path("x")), RECIPE, trainer_report, exit, "a log\n", command=["t"], artifacts="a")
    assert outcome.status is status
    assert (outcome.reason is None) if reason is None else (reason in (outcome.reason or ""))
    assert outcome.framework is not None
    if status is Status.OK:  # the framework's own figures over the timed steps, beside ours
        assert outcome.framework.reported_tflops_per_device == 2.0
        assert outcome.framework.reported_tokens_per_s_per_device == 100.0


def test_unreadable_outputs_are_a_failed_result() -> None:
    outcome = judge(
        StandIn(Path("x")),
        RECIPE,
        None,
        TrainerExit(0, None),
        "",
        read_error="no metrics file",
        command=[],
        artifacts="a",
    )
    assert outcome.status is Status.FAILED and "no metrics file" in (outcome.reason or "")


def test_the_trainer_gets_the_runs_flags() -> None:
    flags = FlagSet(
        profile="p", xla={"xla_foo": Setting("1", "recipe")}, env={"NCCL_X": Setting("2", "recipe")}
    )
    env = trainer_environment({"PATH": "/bin", "XLA_FLAGS": "--old"}, flags)
    assert env["XLA_FLAGS"] == flags.xla_flags() and env["NCCL_X"] == "2" and env["PATH"] == "/bin"


def test_the_interpreter_is_the_variable_then_the_checkout_venv_then_this_one(tmp_path: Path) -> None:
    python = tmp_path / ".venv-standin" / "bin" / "python"
    with pytest.raises(InvalidInput, match=r"make venv FLAVOR=standin"):
        framework_env.locate("standin", "standin", tmp_path, {}, importable=lambda name: False)
    here = framework_env.locate("standin", "standin", tmp_path, {}, importable=lambda name: True)
    assert here.python == Path(sys.executable) and here.where == "this environment"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert framework_env.locate("standin", "standin", tmp_path, {}).python == python
    chosen = framework_env.locate("standin", "standin", tmp_path, {"JAXBENCH_STANDIN_PYTHON": sys.executable})
    assert chosen.where == "JAXBENCH_STANDIN_PYTHON"
    with pytest.raises(InvalidInput, match=r"JAXBENCH_STANDIN_PYTHON=/nope: no such interpreter"):
        framework_env.locate("standin", "standin", tmp_path, {"JAXBENCH_STANDIN_PYTHON": "/nope"})


def test_the_probe_reports_this_environment(tmp_path: Path) -> None:
    interpreter = framework_env.Interpreter(Path(sys.executable), "test")
    probe = framework_env.probe(
        interpreter, ["jax", "not-a-distribution"], {"JAX_PLATFORMS": "cpu", "PATH": "/bin"}
    )
    assert probe.devices.platform == "cpu" and probe.devices.count >= 1
    assert probe.versions["jax"] is not None and probe.versions["not-a-distribution"] is None
    assert probe.provenance_versions().jax == probe.versions["jax"]


@pytest.mark.parametrize(("framework", "title"), [(MaxText, "MaxText"), (Pax, "Pax")])
def test_a_batch_the_devices_do_not_divide_is_refused_naming_the_setting(framework: type, title: str) -> None:
    recipe = recipes.load("llama2", "tiny")  # global_batch 8
    with pytest.raises(InvalidInput, match=rf"train.global_batch=8: {title} .* 3 devices do not divide it"):
        framework().configure(recipe, {"data": 3, "fsdp": 1, "tensor": 1}, "cpu")
    assert framework().configure(recipe, {"data": 2, "fsdp": 2, "tensor": 1}, "cpu") is not None
