"""Backends: who trains a recipe. A backend turns a validated recipe into a training program on this machine's
devices (`prepare`, where everything a machine can refuse is checked before anything compiles), and the
program yields per-step times and losses plus what it reports about itself (`run`). The runner
(harness/run/runner.py) does the rest alike for every backend: FLOPs, throughput, MFU, the result file.

`native` is our Flax NNX models and loop (native/), training every family that names its model;
`maxtext`, `levanter` and `pax` run those frameworks' own trainers in their own environments (framework/
is what they share). A new backend: one module here that implements `Backend`, and one line in BACKENDS
(its entry: where it lives, what it trains, the settings it refuses).

    jaxbench run llama2 --backend maxtext      # or native, levanter, pax
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from jaxbench.core.errors import InvalidInput, RunFailed
from jaxbench.core.files import PROJECT_DIR
from jaxbench.harness.backends.stack_import import stack_import_failure
from jaxbench.harness.runtime.options import DEFAULT_BACKEND

if TYPE_CHECKING:
    from jaxbench.harness.config import Recipe
    from jaxbench.harness.flags.environment import DeviceHint
    from jaxbench.harness.flags.profiles import FlagSet
    from jaxbench.harness.provenance.record import DeviceInfo, FrameworkInfo, ImageInfo, Versions
    from jaxbench.harness.runtime.outcome import Outcome
    from jaxbench.harness.runtime.preflight import Machine
    from jaxbench.harness.runtime.reporter import RunReporter


@dataclasses.dataclass(frozen=True)
class TrainerEnvironment:
    """Where the training ran, for the result's provenance."""

    devices: DeviceInfo
    versions: Versions | None = None
    """None: this process's own (native); a framework's environment answers for itself."""
    image: ImageInfo | None = None
    framework: FrameworkInfo | None = None


class TrainingProgram(Protocol):
    """A recipe made ready to train on this machine: its runtime started, the recipe checked against it."""

    machine: Machine
    mesh_shape: dict[str, int]
    """The resolved mesh axis sizes (data, fsdp, tensor)."""
    optimal_loss: float
    """The best loss the training data allows (nats), the yardstick of the loss curve."""
    reports: bool
    """Whether this process shows progress and writes the result (process 0 of a multi-process run)."""

    def environment(self) -> TrainerEnvironment:
        """The devices and software that train, for the result's provenance."""
        ...

    def run(self, reporter: RunReporter, artifacts: Path, profile_steps: int = 0) -> Outcome:
        """Compile (timed) and run every step; any failure becomes the outcome's status and reason.
        `artifacts`: a folder beside the result (not yet made) for what the trainer writes of its own.
        `profile_steps`: steps to run under the JAX profiler after the timed ones (only a backend that
        `profiles` is given any)."""
        ...

    def peak_memory_bytes(self) -> int | None:
        """The largest peak of device memory in use over this process's devices, where reported."""
        ...


class Backend(Protocol):
    name: str
    profiles: bool
    """Whether its runs can be profiled (`jaxbench run --profile`): the trainer runs in this process."""

    def prepare(self, recipe: Recipe, flag_set: FlagSet, hint: DeviceHint) -> TrainingProgram:
        """Start the runtime with these flags and check the recipe against the devices. Raises InvalidInput
        for anything the machine or the backend cannot run, before anything is compiled."""
        ...


@dataclasses.dataclass(frozen=True)
class UnsupportedSetting:
    """Values of a recipe setting that a framework cannot express. Declared with the backend, jax-free, so
    that a run stops before anything starts and the nightly plan leaves the benchmark out, with one reason."""

    setting: str
    """Its dotted path in the recipe: "train.attention"."""
    values: tuple[str, ...]
    why: str
    """What the framework lacks and what to use instead, after "<setting>=<value>: "."""


@dataclasses.dataclass(frozen=True)
class BackendEntry:
    module: str
    class_name: str
    flavor: str | None
    """The image flavor that holds it (containers/manifest.yaml); None: every flavor (native)."""
    trains: tuple[str, ...] | None = None
    """The recipe families a framework trains (at every size), as it maps them onto its own models; None:
    every registered family with a model of ours (harness.families.FAMILIES: `Family.model_module`)."""
    refuses: tuple[UnsupportedSetting, ...] = ()

    @property
    def framework(self) -> bool:
        """Whether it is a framework's own trainer, which runs in that framework's environment."""
        return self.flavor is not None

    @property
    def families(self) -> tuple[str, ...]:
        """The recipe families it trains, in FAMILIES' order for our own models."""
        if self.trains is not None:
            return self.trains
        from jaxbench.harness.families import FAMILIES  # here: `jaxbench --help` builds no recipe schema

        return tuple(name for name, family in FAMILIES.items() if family.model_module is not None)


NO_FP8 = "use bf16 or fp32"
BACKENDS: dict[str, BackendEntry] = {
    DEFAULT_BACKEND: BackendEntry("jaxbench.harness.backends.native.backend", "NativeBackend", flavor=None),
    "maxtext": BackendEntry(
        "jaxbench.harness.backends.maxtext",
        "MaxTextBackend",
        "maxtext",
        ("llama2", "gpt3"),
        refuses=(
            UnsupportedSetting(
                "train.remat",
                ("dots",),
                "MaxText has no policy that saves every matmul output ('minimal' recomputes attention's "
                "batched contractions); use dots_no_batch (its 'minimal'), full or none",
            ),
        ),
    ),
    "levanter": BackendEntry(
        "jaxbench.harness.backends.levanter",
        "LevanterBackend",
        "levanter",
        ("llama2", "gpt3"),
        refuses=(
            UnsupportedSetting(
                "train.remat",
                ("dots", "dots_no_batch"),
                "Levanter checkpoints a layer whole or not at all; use full or none",
            ),
            UnsupportedSetting(
                "train.precision",
                ("fp8",),
                "Levanter's fp8 (Haliax's delayed scaling) counts its scaling state as parameters, so the "
                f"mapping cannot be checked against the recipe; {NO_FP8}",
            ),
        ),
    ),
    "pax": BackendEntry(
        "jaxbench.harness.backends.pax",
        "PaxBackend",
        "pax",
        ("llama2", "gpt3"),
        refuses=(
            UnsupportedSetting(
                "train.attention",
                ("cudnn",),
                "Praxis 1.4.0 has no cuDNN attention (its fused attention is Triton's); use xla",
            ),
            UnsupportedSetting(
                "train.precision", ("fp8",), f"Pax 1.4.0 has no current-scaling fp8 like ours; {NO_FP8}"
            ),
        ),
    ),
}
"""Backend name -> where it lives and what it trains. Modules are imported when a run asks for one: the
frameworks' backends need their own environments, and `jaxbench --help` must not import any of them."""


def backend_entry(name: str) -> BackendEntry:
    try:
        return BACKENDS[name]
    except KeyError:
        raise InvalidInput(f"--backend {name}: expected one of {', '.join(BACKENDS)}") from None


def check_pair(backend: str, family: str) -> None:
    """Refuses a recipe family the backend does not train, listing what it does train."""
    entry = backend_entry(backend)
    if family not in entry.families:
        supported = "; ".join(f"{name}: {', '.join(e.families)}" for name, e in BACKENDS.items())
        raise InvalidInput(
            f"--backend {backend} does not train {family} recipes (what each backend trains: {supported})"
        )


def refusal(backend: str, recipe: Mapping[str, Any]) -> str | None:
    """Why the backend cannot train this recipe (its resolved settings), naming the setting; None if it
    can as far as its declared refusals go. Pure: what the nightly plan asks of each benchmark."""
    for refused in backend_entry(backend).refuses:
        value: Any = recipe
        for part in refused.setting.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value in refused.values:
            return f"{refused.setting}={value}: {refused.why} with --backend {backend}"
    return None


def check_settings(backend: str, recipe: Recipe) -> None:
    """Refuses a recipe setting the backend declares it cannot express, before anything starts."""
    reason = refusal(backend, recipe.resolved())
    if reason is not None:
        raise InvalidInput(reason)


def get_backend(name: str) -> Backend:
    """The backend's instance. A component of the stack that fails to import (a commit that does not parse,
    a package the stack lacks) is a failed run naming it; a failure in jaxbench's own code stays a bug."""
    entry = backend_entry(name)
    try:
        module = importlib.import_module(entry.module)
    except Exception as error:
        failure = stack_import_failure(error, PROJECT_DIR)
        if failure is None:
            raise
        raise RunFailed(failure) from error
    backend: Backend = getattr(module, entry.class_name)()
    return backend
