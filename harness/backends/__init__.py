"""Backends: who trains a recipe. A backend turns a validated recipe into a training program on this machine's
devices (`prepare`, where everything a machine can refuse is checked before anything is compiled), and the
program yields per-step times and losses plus what it reports about itself (`run`: compile time, compiled
memory, peak memory, the loss its data allows). The runner (harness/run/runner.py) does the rest the same
way for every backend: FLOPs, throughput, MFU, statistics, the result file.

`native` is our own Flax NNX models trained by our own loop (harness/backends/native/). A new backend: one
module here that implements `Backend`, and one line in BACKENDS.

    jaxbench run llama2 --backend native
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Protocol

from core.errors import InvalidInput
from harness.run.options import DEFAULT_BACKEND

if TYPE_CHECKING:
    from harness.config import Recipe
    from harness.flags.environment import DeviceHint
    from harness.flags.profiles import FlagSet
    from harness.provenance import DeviceInfo
    from harness.run.outcome import Outcome
    from harness.run.preflight import Machine
    from harness.run.reporter import RunReporter


class TrainingProgram(Protocol):
    """A recipe made ready to train on this machine: its runtime started, the recipe checked against it."""

    machine: Machine
    mesh_shape: dict[str, int]
    """The resolved mesh axis sizes (data, fsdp, tensor)."""
    optimal_loss: float
    """The best loss the training data allows (nats), the yardstick of the loss curve."""
    reports: bool
    """Whether this process shows progress and writes the result (process 0 of a multi-process run)."""

    def device_info(self) -> DeviceInfo:
        """The devices, for the result's provenance."""
        ...

    def run(self, reporter: RunReporter) -> Outcome:
        """Compile (timed) and run every step; any failure becomes the outcome's status and reason."""
        ...

    def peak_memory_bytes(self) -> int | None:
        """The largest peak of device memory in use over this process's devices, where reported."""
        ...


class Backend(Protocol):
    name: str

    def prepare(self, recipe: Recipe, flag_set: FlagSet, hint: DeviceHint) -> TrainingProgram:
        """Start the runtime with these flags and check the recipe against the devices. Raises InvalidInput
        for anything the machine or the backend cannot run, before anything is compiled."""
        ...


BACKENDS: dict[str, tuple[str, str]] = {
    DEFAULT_BACKEND: ("harness.backends.native.backend", "NativeBackend"),
}
"""Backend name -> (module, class), imported when a run asks for it: the frameworks' backends need their
own environments, and `jaxbench --help` must not import any of them."""


def get_backend(name: str) -> Backend:
    try:
        module, class_name = BACKENDS[name]
    except KeyError:
        raise InvalidInput(f"--backend {name}: expected one of {', '.join(BACKENDS)}") from None
    backend: Backend = getattr(importlib.import_module(module), class_name)()
    return backend
