"""Backends: who trains a recipe. A backend turns a validated recipe into a training program on this machine's
devices (`prepare`, where everything a machine can refuse is checked before anything compiles), and the
program yields per-step times and losses plus what it reports about itself (`run`). The runner
(harness/run/runner.py) does the rest alike for every backend: FLOPs, throughput, MFU, the result file.

`native` is our Flax NNX models and loop (native/), training every family that names its model;
`maxtext`, `levanter` and `pax` run those frameworks' own trainers in their own environments (framework/
is what they share). A new backend: one module here that implements `Backend`, and one line in BACKENDS.

    jaxbench run llama2 --backend native
    jaxbench run llama2 --backend maxtext
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

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
class BackendEntry:
    module: str
    class_name: str
    flavor: str | None
    """The image flavor that holds it (containers/manifest.yaml); None: every flavor (native)."""
    trains: tuple[str, ...] | None = None
    """The recipe families a framework trains (at every size), as it maps them onto its own models; None:
    every registered family with a model of ours (harness.families.FAMILIES: `Family.model_module`)."""

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


BACKENDS: dict[str, BackendEntry] = {
    DEFAULT_BACKEND: BackendEntry("jaxbench.harness.backends.native.backend", "NativeBackend", flavor=None),
    "maxtext": BackendEntry(
        "jaxbench.harness.backends.maxtext", "MaxTextBackend", "maxtext", ("llama2", "gpt3")
    ),
    "levanter": BackendEntry(
        "jaxbench.harness.backends.levanter", "LevanterBackend", "levanter", ("llama2", "gpt3")
    ),
    "pax": BackendEntry("jaxbench.harness.backends.pax", "PaxBackend", "pax", ("llama2", "gpt3")),
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
