"""A framework backend: the recipe trained by a framework's own trainer in the framework's own environment.

`FrameworkBackend(framework)` implements `Backend` for any `Framework` (harness/backends/maxtext.py,
levanter.py). Everything the framework could refuse is decided in `prepare`, before its trainer starts: the
recipe maps onto its configuration (or the setting it cannot express is named), its environment is found
and asked what it runs on, the mesh is checked against those devices. `judge` (pure) turns what the trainer
wrote into the run's outcome: per-step times and losses, a crash as a status with the log's last lines, and
a parameter count other than the recipe's as an invalid run, both numbers in the reason.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import PROJECT_DIR
from jaxbench.harness.backends import TrainerEnvironment
from jaxbench.harness.backends.framework import environment as framework_env
from jaxbench.harness.backends.framework.trainer import TrainerExit, run_trainer
from jaxbench.harness.config import Recipe
from jaxbench.harness.families.gpt3 import GPTConfig
from jaxbench.harness.families.llama2 import LlamaConfig
from jaxbench.harness.flags import environment
from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.flags.profiles import FlagSet
from jaxbench.harness.provenance.collection import DISTRIBUTIONS
from jaxbench.harness.provenance.record import FrameworkInfo
from jaxbench.harness.runtime import preflight
from jaxbench.harness.runtime.outcome import REASON_CHARACTERS, Outcome, status_of
from jaxbench.harness.runtime.reporter import RunReporter
from jaxbench.harness.runtime.result import FrameworkReport, Status

LOG_NAME = "trainer.log"
REASON_LINES = 25
"""A crashed trainer's reason: the end of its log, where Python puts the exception."""


@dataclasses.dataclass(frozen=True)
class StepRecord:
    """One training step as the framework reported it."""

    step: int
    seconds: float
    loss: float
    tflops_per_device: float | None = None
    tokens_per_s_per_device: float | None = None


@dataclasses.dataclass(frozen=True)
class TrainerReport:
    """What a framework's outputs say of a run (its metrics file, tracker output or log)."""

    steps: list[StepRecord]
    parameter_count: int | None
    compile_s: float | None = None
    """Where the framework reports compilation apart from its first step."""


@dataclasses.dataclass(frozen=True)
class TrainerCommand:
    argv: list[str]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    """Added to the run's environment: where this run's files are, for a trainer that looks there."""


class Framework(Protocol):
    name: str
    """The backend's name, its virtualenv's (`.venv-<name>`) and its flavor's in the manifest."""
    title: str
    """As people write it: "MaxText"."""
    module: str
    """Importable in its environment."""
    trainer: str
    """The trainer's module, which a run starts as __main__ (launch.py). Its environment imports it once
    when made (containers/venv.py), which compiles the byte-code of what a run imports."""
    distribution: str
    component: str
    """Its component in the manifest, whose commit its environment records (paxml for Pax)."""
    extra_env: Mapping[str, str]
    """Variables its trainer needs besides the run's (and the probe of its environment)."""

    def check(self, recipe: Recipe) -> None:
        """Raises InvalidInput naming a recipe setting the framework cannot express. Pure."""
        ...

    def configure(self, recipe: Recipe, mesh_shape: Mapping[str, int], platform: str) -> Any:
        """The framework's configuration of this (checked) recipe on this mesh and platform (cpu, gpu).
        Pure."""
        ...

    def start(self, config: Any, python: Path, artifacts: Path) -> TrainerCommand:
        """Write what the trainer reads (its configuration, its data) under `artifacts`, and return its
        command line, which writes its outputs there too."""
        ...

    def progress(self, line: str) -> StepRecord | None:
        """A step, where this line of the trainer's output reports one (for the progress bar)."""
        ...

    def read(self, config: Any, artifacts: Path, log: str) -> TrainerReport:
        """What the trainer of this configuration wrote. Raises ValueError when it cannot be read."""
        ...

    def optimal_loss(self, recipe: Recipe) -> float:
        """The best loss the framework's own synthetic data allows (nats)."""
        ...


def language_model(recipe: Recipe) -> LlamaConfig | GPTConfig:
    """The recipe's model, for the frameworks, which train the decoder families (checked before)."""
    model = recipe.model
    if not isinstance(model, LlamaConfig | GPTConfig):
        raise InvalidInput(f"{recipe.name}: a framework backend trains llama2 or gpt3 recipes")
    return model


def devices_dividing_the_batch(
    recipe: Recipe, mesh_shape: Mapping[str, int], framework: str, why: str
) -> int:
    """The mesh's device count, where it divides train.global_batch; else InvalidInput naming the setting
    and `why` the framework needs it to."""
    devices = math.prod(mesh_shape.values())
    if recipe.train.global_batch % devices:
        raise InvalidInput(
            f"train.global_batch={recipe.train.global_batch}: {framework} {why}, and {devices} devices do "
            "not divide it"
        )
    return devices


def trainer_environment(environ: Mapping[str, str], flag_set: FlagSet) -> dict[str, str]:
    """The trainer's environment: ours, with the run's XLA flags and the variables their profile sets."""
    return {**environ, **environment.variables(flag_set)}


def _log_tail(log: str) -> str:
    text = "\n".join([line for line in log.splitlines() if line.strip()][-REASON_LINES:])
    return text if len(text) <= REASON_CHARACTERS else "... " + text[-REASON_CHARACTERS:]


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None and math.isfinite(v)]
    return statistics.median(known) if known else None


def judge(
    framework: Framework,
    recipe: Recipe,
    report: TrainerReport | None,
    exit: TrainerExit,
    log: str,
    *,
    read_error: str | None = None,
    command: list[str],
    artifacts: str,
) -> Outcome:
    """The outcome of a framework's run from its exit and what it wrote. Pure."""
    steps = report.steps if report is not None else []
    outcome = Outcome()
    outcome.log.times = [s.seconds for s in steps]
    outcome.log.losses = [s.loss for s in steps]
    warmup = recipe.train.warmup_steps
    expected = recipe.model.param_count()
    count = report.parameter_count if report is not None else None
    outcome.framework = FrameworkReport(
        parameter_count=count,
        expected_parameter_count=expected,
        reported_tflops_per_device=_median([s.tflops_per_device for s in steps[warmup:]]),
        reported_tokens_per_s_per_device=_median([s.tokens_per_s_per_device for s in steps[warmup:]]),
        command=command,
        artifacts=artifacts,
    )
    if report is not None and report.compile_s is not None:
        outcome.compile_s = report.compile_s
    elif len(steps) > 1:
        # The framework compiles inside its first step: that step less a typical one.
        outcome.compile_s = max(steps[0].seconds - statistics.median(s.seconds for s in steps[1:]), 0.0)
    title = framework.title
    if exit.interrupted:
        outcome.status = Status.INTERRUPTED
        outcome.reason = (
            f"interrupted by {exit.interrupted} after {len(steps)} steps; {title}'s trainer stopped"
        )
    elif exit.returncode != 0:
        tail = _log_tail(log) if exit.error is None else exit.error
        outcome.status = status_of(tail, "train" if steps else "compile")
        outcome.reason = (
            f"{title}'s trainer exited with status {exit.returncode} after {len(steps)} steps:\n{tail}"
        )
    elif read_error is not None:
        outcome.status, outcome.reason = Status.FAILED, f"{title}'s outputs could not be read: {read_error}"
    elif bad := next((s for s in steps if not math.isfinite(s.loss)), None):
        outcome.status, outcome.reason = Status.NAN, f"loss became {bad.loss} at step {bad.step}"
    elif len(steps) < recipe.train.steps:
        outcome.status = Status.FAILED
        outcome.reason = f"{title} reported {len(steps)} of the recipe's {recipe.train.steps} steps"
    elif count != expected:
        outcome.status = Status.INVALID
        outcome.reason = (
            f"{title} built {'an unreported number of' if count is None else f'{count:,}'} parameters, "
            f"the recipe has {expected:,} (jaxbench flops): the mapping does not train the recipe's model"
        )
    return outcome


@dataclasses.dataclass
class FrameworkProgram:
    framework: Framework
    recipe: Recipe
    config: Any
    interpreter: framework_env.Interpreter
    env: dict[str, str]
    probe: framework_env.Probe
    machine: preflight.Machine
    mesh_shape: dict[str, int]
    optimal_loss: float
    reports: bool = True

    def environment(self) -> TrainerEnvironment:
        image = self.probe.image_info(self.env)
        info = FrameworkInfo(
            name=self.framework.name,
            distribution=self.framework.distribution,
            version=self.probe.versions.get(self.framework.distribution),
            commit=framework_env.component_commit(image, self.framework.component),
            python=self.probe.executable,
        )
        return TrainerEnvironment(
            devices=self.probe.devices,
            versions=self.probe.provenance_versions(),
            image=image,
            framework=info,
        )

    def run(self, reporter: RunReporter, artifacts: Path, profile_steps: int = 0) -> Outcome:
        # Absolute: the trainer runs in this folder, and every path it is given must still point here.
        artifacts = artifacts.resolve()
        artifacts.mkdir(parents=True, exist_ok=True)
        trainer = self.framework.start(self.config, self.interpreter.python, artifacts)
        command = trainer.argv
        (artifacts / "command.txt").write_text(shlex.join(command) + "\n")
        reporter.compiling(
            f"{self.recipe.name} ({self.framework.title})", preflight.describe_mesh(self.mesh_shape)
        )
        reporter.steps_started(self.recipe.train.steps)

        seen: list[StepRecord] = []

        def on_line(line: str) -> None:
            step = self.framework.progress(line)
            if step is not None:
                seen.append(step)
                reporter.step_done(step.step, step.seconds, step.loss)

        exit = run_trainer(command, {**self.env, **trainer.env}, artifacts, artifacts / LOG_NAME, on_line)
        log = (artifacts / LOG_NAME).read_text(encoding="utf-8", errors="replace")
        report, read_error = None, None
        try:
            report = self.framework.read(self.config, artifacts, log)
        except (OSError, ValueError) as error:
            read_error = str(error)
        if exit.returncode != 0 and len(seen) > len(report.steps if report else []):
            # A trainer that was stopped or crashed may not have flushed its own outputs: its log has more.
            report = TrainerReport(seen, report.parameter_count if report else None)
        return judge(
            self.framework,
            self.recipe,
            report,
            exit,
            log,
            read_error=read_error,
            command=command,
            artifacts=artifacts.name,
        )

    def peak_memory_bytes(self) -> int | None:
        return None  # the trainer's process has ended; frameworks do not write it out


class FrameworkBackend:
    """`Backend` for one framework."""

    profiles = False  # its trainer runs in the framework's own interpreter, out of this profiler's reach

    def __init__(self, framework: Framework, project_dir: Path = PROJECT_DIR):
        self.framework = framework
        self.name = framework.name
        self.project_dir = project_dir

    def prepare(self, recipe: Recipe, flag_set: FlagSet, hint: DeviceHint) -> FrameworkProgram:
        framework = self.framework
        # Settings the framework cannot express fail here, before its environment is even looked for.
        framework.check(recipe)
        interpreter = framework_env.locate(framework.name, framework.module, self.project_dir, os.environ)
        env = trainer_environment({**os.environ, **framework.extra_env}, flag_set)
        probe = framework_env.probe(interpreter, [*DISTRIBUTIONS, framework.distribution], env)
        devices = probe.devices
        machine = preflight.Machine(devices.platform, devices.kind, devices.count)
        environment.check_platform(hint, machine.platform, machine.device_kind, recipe.xla_flags)
        mesh_shape = preflight.check(recipe, machine)
        config = framework.configure(recipe, mesh_shape, machine.platform)
        return FrameworkProgram(
            framework=framework,
            recipe=recipe,
            config=config,
            interpreter=interpreter,
            env=env,
            probe=probe,
            machine=machine,
            mesh_shape=mesh_shape,
            optimal_loss=framework.optimal_loss(recipe),
        )
