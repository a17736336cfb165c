"""How a training run ended, whichever backend ran it: the per-step log, the status and reason of a failure,
and the SIGTERM handling that turns a scheduler's stop into a result.

Every outcome is a result: a compile error, out-of-memory, a non-finite loss or an interruption (SIGINT,
SIGTERM) is written with its status and reason. Only invalid input stops before a result, and it stops
before anything is compiled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from jaxbench.core.processes import sigterm_handled_by
from jaxbench.harness.runtime.result import FrameworkReport, Profile, Status

REASON_CHARACTERS = 2000
"""XLA's messages can run to pages of HLO; the start says what failed."""


class NonFiniteLoss(RuntimeError):
    def __init__(self, step: int, value: float):
        super().__init__(f"loss became {value} at step {step}")


class Terminated(BaseException):
    """Raised from the SIGTERM handler; a BaseException so that library code does not swallow it."""


@dataclasses.dataclass
class StepLog:
    """Wall time and loss of every step run, warmup steps first."""

    times: list[float] = dataclasses.field(default_factory=list)
    losses: list[float] = dataclasses.field(default_factory=list)
    cpu_times: list[float] = dataclasses.field(default_factory=list)
    """CPU seconds the process used during each step (all its threads), where the backend measures them."""


@dataclasses.dataclass
class Outcome:
    """What training produced, however it ended."""

    status: Status = Status.OK
    reason: str | None = None
    compile_s: float | None = None
    compiled_memory: dict[str, int | None] = dataclasses.field(default_factory=dict)
    """What the compiler planned per device: "temp_bytes" and "argument_bytes" (None where unknown)."""
    program_text: str | None = None
    """The compiled step's optimized HLO, where the backend can see it."""
    program_cost: dict[str, float] = dataclasses.field(default_factory=dict)
    """XLA's cost analysis of the compiled step (harness/runtime/result.py: Program.cost)."""
    program_input_text: str | None = None
    """The step as JAX handed it to XLA (lowered StableHLO), where the backend can see it."""
    log: StepLog = dataclasses.field(default_factory=StepLog)
    profile: Profile | None = None
    """Where the time of a few profiled steps went (`jaxbench run --profile`)."""
    framework: FrameworkReport | None = None
    """A framework backend's own account of the run."""
    process_times: list[tuple[str, list[float]]] = dataclasses.field(default_factory=list)
    """(host, every step's wall time) of each process by index, in a multi-process run that ended ok."""


def classify(error: BaseException, phase: str) -> tuple[Status, str]:
    """Status and one-paragraph reason of a run that raised `error` while in `phase` ("compile"/"train")."""
    if isinstance(error, KeyboardInterrupt):
        return Status.INTERRUPTED, f"interrupted by SIGINT during {phase}"
    if isinstance(error, Terminated):
        return Status.INTERRUPTED, f"interrupted by SIGTERM during {phase}"
    if isinstance(error, NonFiniteLoss):
        return Status.NAN, str(error)
    text = f"{type(error).__name__}: {error}".strip()
    reason = text if len(text) <= REASON_CHARACTERS else text[:REASON_CHARACTERS] + " ..."
    return status_of(text, phase), reason


def status_of(message: str, phase: str) -> Status:
    """The status of a failure from its message (an exception's, or a crashed trainer's last lines)."""
    if "RESOURCE_EXHAUSTED" in message or "out of memory" in message.lower():
        return Status.OOM
    return Status.COMPILE_ERROR if phase == "compile" else Status.FAILED


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Turn SIGTERM (a scheduler's stop) into an exception so the run still writes its result."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated()

    with sigterm_handled_by(handler):
        yield


@contextmanager
def sigterm_deferred() -> Iterator[None]:
    """SIGTERM does nothing inside (a Python handler that ignores it: a process started inside gets the
    default again). Around a run, whose backend turns the first SIGTERM into an interrupted outcome
    (`sigterm_raises`), and the writing of its result, which a scheduler's next SIGTERM must not stop."""
    with sigterm_handled_by(lambda signum, frame: None):
        yield
