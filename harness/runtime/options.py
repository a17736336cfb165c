"""What `jaxbench run` is asked to run, as typed options, and the same options as arguments again (for a run
started elsewhere: inside an image, or as one arm of an A/B comparison)."""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path

from jaxbench.core.errors import InvalidInput

NATIVE_BACKEND = "native"
"""jaxbench's own models and training loop (harness/backends/native/); every run recorded before backends
existed was a native one."""
DEFAULT_BACKEND = NATIVE_BACKEND

OUT_FLAG = "--out"
"""The flag that names a run's output folder (`RunOptions.out_dir`), as errors about that folder name it."""


class Schedule(enum.StrEnum):
    """Why a run happened: only nightly runs are judged (they open incidents); every run is reported."""

    NIGHTLY = "nightly"
    """A run of the nightly plan (`jaxbench run --nightly`, `make bench ARGS=--nightly`)."""
    AD_HOC = "ad-hoc"
    """A run by hand: the default."""
    BACKFILL = "backfill"
    """A past release's stack, run on that release's night (`jaxbench backfill`): the history the nightly
    never saw, judged like its nights and shown as backfilled."""


JUDGED_SCHEDULES = frozenset({Schedule.NIGHTLY, Schedule.BACKFILL})
"""The schedules whose runs the detectors judge (the stored column's strings compare equal to these)."""


LEGACY_SCHEDULE = Schedule.NIGHTLY
"""What a result file or a stored run from before schedules existed counts as: the store's history came
from the nightly, and judging it as ad hoc would silently stop every incident of an existing store."""


def check_steps(steps: int | None) -> None:
    """--steps, where given, counts at least one step."""
    if steps is not None and steps <= 0:
        raise InvalidInput(f"--steps {steps}: expected a positive number of steps")


DEFAULT_PROFILE_STEPS = 3
"""`--profile` alone: enough steps to see each op a few times, few enough that tracing stays quick."""


def profile_steps(given: int | None) -> int:
    """--profile's steps as RunOptions holds them, 0 where it was not given; InvalidInput where it was given
    and is not positive (`--profile 0` would silently profile nothing)."""
    if given is not None and given <= 0:
        raise InvalidInput(
            f"--profile {given}: expected a positive number of steps (leave --profile out to run without it)"
        )
    return given or 0


@dataclasses.dataclass(frozen=True)
class RunOptions:
    recipe: str
    """A recipe name (llama2) or the path of a recipe file."""
    size: str | None = None
    steps: int | None = None
    """Total steps, warmup included (the same as --set train.steps=N)."""
    overrides: tuple[str, ...] = ()
    """`--set key.path=value` overrides, as given."""
    out_dir: Path = Path("runs")
    drop_unknown_flags: bool = False
    backend: str = DEFAULT_BACKEND
    schedule: Schedule = Schedule.AD_HOC
    """Recorded in the result: a nightly run is judged, an ad-hoc one only reported."""
    keep_hlo: bool | None = None
    """Keep the compiled step's optimized HLO beside the result; None: for nightly runs only."""
    profile_steps: int = 0
    """Steps to run under the JAX profiler after the timed ones (0: none)."""

    def __post_init__(self) -> None:
        check_steps(self.steps)
        if self.profile_steps < 0:
            raise InvalidInput(f"--profile {self.profile_steps}: expected a positive number of steps")

    def recipe_arguments(self) -> list[str]:
        """The options that choose and shape the recipe, as `jaxbench run` arguments (no --out)."""
        arguments = [self.recipe]
        arguments += ["--size", self.size] if self.size else []
        arguments += ["--steps", str(self.steps)] if self.steps else []
        arguments += [item for override in self.overrides for item in ("--set", override)]
        arguments += ["--backend", self.backend] if self.backend != DEFAULT_BACKEND else []
        arguments += [] if self.schedule is Schedule.AD_HOC else [f"--{self.schedule.value}"]
        arguments += [] if self.keep_hlo is None else ["--keep-hlo" if self.keep_hlo else "--no-keep-hlo"]
        arguments += ["--profile", str(self.profile_steps)] if self.profile_steps else []
        return arguments + (["--drop-unknown-flags"] if self.drop_unknown_flags else [])
