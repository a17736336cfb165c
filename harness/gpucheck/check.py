"""`jaxbench gpu-check`: refuse a machine without an NVIDIA GPU, run every check of the plan in a fresh
process through a replaceable runner (each writes into one folder; a failed check does not stop the
others), then write the summary there as summary.json and summary.md and print it.

    jaxbench gpu-check [--steps 30] [--out runs]        # make gpu-check

Exit codes: 0 every check succeeded; 3 one failed (it is in the summary with its status and reason); 2 no
NVIDIA GPU for JAX here (nothing was run); 1 invalid --steps or an unusable --out; 130 interrupted (the
summary of what ran is written).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rich.console import Console

from jaxbench.core.errors import ExitCode, JaxbenchError
from jaxbench.core.files import writable_folder, write_atomic
from jaxbench.core.processes import run_to_its_end
from jaxbench.harness import recipes
from jaxbench.harness.flags import environment
from jaxbench.harness.gpucheck import DEFAULT_STEPS, summary_markdown
from jaxbench.harness.gpucheck.plan import (
    PLAN,
    Check,
    MicrobenchCheck,
    RecipeCheck,
    command,
    recipe_overrides,
)
from jaxbench.harness.gpucheck.summary import Outcome, build_summary
from jaxbench.harness.runtime.options import OUT_FLAG, check_steps
from jaxbench.harness.runtime.result import read_result

CheckCommandRunner = Callable[[list[str]], int]
"""Runs one check's command line to its end and returns its exit code."""


class NeedsGpu(JaxbenchError):
    """JAX would not run on an NVIDIA GPU on this machine; nothing was run."""

    exit_code = ExitCode.USAGE


@dataclasses.dataclass(frozen=True)
class GpuCheckOptions:
    out: Path = Path("runs")
    """The folder gpu-check-<UTC time>/ is made in."""
    steps: int = DEFAULT_STEPS
    """Steps per recipe run, warmup included."""

    def __post_init__(self) -> None:
        check_steps(self.steps)


def missing_gpu(hint: environment.DeviceHint, jax_platforms: str) -> str | None:
    """Why JAX would not use an NVIDIA GPU here, in one line; None when it would."""
    if environment.gpus_excluded({"JAX_PLATFORMS": jax_platforms}):
        found = (
            f"JAX would run on {jax_platforms.lower()} here: JAX_PLATFORMS={jax_platforms} keeps it off GPUs"
        )
    elif hint.platform != "gpu":
        found = f"JAX would run on the {hint.device_kind} here: nvidia-smi lists no GPU"
    else:
        return None
    return f"gpu-check needs an NVIDIA GPU, and {found}"


def check_recipes(plan: Sequence[Check], steps: int) -> None:
    """Every recipe run resolves with these steps, before any of them is started (recipes.RecipeError)."""
    for check in plan:
        if isinstance(check, RecipeCheck):
            overrides = recipe_overrides(check)
            recipes.load(check.recipe, check.size, overrides, default_to_tiny=False, steps=steps)


def read_outcome(
    check: Check, argv: list[str], exit_code: int, wall_s: float, written: list[Path]
) -> Outcome:
    """The newest file the check wrote, parsed: a run's result, or the suite's pytest-benchmark JSON."""
    if not written:
        return Outcome(check, argv, exit_code, wall_s, None)
    path = written[-1]
    try:
        if isinstance(check, MicrobenchCheck):
            return Outcome(check, argv, exit_code, wall_s, path, report=json.loads(path.read_text()))
        return Outcome(check, argv, exit_code, wall_s, path, run=read_result(path))
    except (OSError, ValueError) as error:  # pydantic's ValidationError and JSONDecodeError are ValueErrors
        problem = f"{path.name} cannot be read: {' '.join(str(error).split())[:300]}"
        return Outcome(check, argv, exit_code, wall_s, path, problem=problem)


def run_plan(
    plan: Sequence[Check],
    *,
    steps: int,
    folder: Path,
    runner: CheckCommandRunner,
    console: Console,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[Outcome], bool]:
    """Each check in order, each allowed to fail; returns the outcomes and whether the user interrupted."""
    commands = [command(check, steps=steps, out=folder, python=sys.executable) for check in plan]
    outcomes: list[Outcome] = []
    for index, (check, argv) in enumerate(zip(plan, commands, strict=True)):
        console.print(
            f"[{index + 1}/{len(plan)}] {check.label}: {shlex.join(argv)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        before = set(folder.glob("*.json"))
        started = clock()
        try:
            exit_code = runner(argv)
        except KeyboardInterrupt:  # the check got the same Ctrl-C and has written what it could
            exit_code = int(ExitCode.INTERRUPTED)
        written = sorted(set(folder.glob("*.json")) - before)
        outcomes.append(read_outcome(check, argv, exit_code, clock() - started, written))
        if exit_code == ExitCode.INTERRUPTED:
            never_started = zip(plan[index + 1 :], commands[index + 1 :], strict=True)
            return [*outcomes, *(Outcome(c, a, None, 0.0, None) for c, a in never_started)], True
    return outcomes, False


def gpu_check(
    options: GpuCheckOptions,
    console: Console,
    *,
    hint: environment.DeviceHint | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CheckCommandRunner | None = None,
    clock: Callable[[], float] = time.monotonic,
    plan: Sequence[Check] = PLAN,
) -> int:
    """The whole check; `hint`, `environ` and `runner` default to this machine's (nvidia-smi, os.environ, a
    subprocess per check)."""
    environ = os.environ if environ is None else environ
    hint = environment.device_hint(environ) if hint is None else hint
    missing = missing_gpu(hint, environ.get("JAX_PLATFORMS", ""))
    if missing:
        raise NeedsGpu(missing)
    check_recipes(plan, options.steps)
    started_at = dt.datetime.now(dt.UTC)
    folder = writable_folder(options.out, OUT_FLAG) / f"gpu-check-{started_at.strftime('%Y%m%dT%H%M%S')}"
    folder.mkdir(exist_ok=True)
    console.print(f"gpu-check on {hint.device_kind}: {len(plan)} checks, results in {folder}", markup=False)
    began = clock()
    outcomes, interrupted = run_plan(
        plan,
        steps=options.steps,
        folder=folder,
        runner=runner or run_to_its_end,
        console=console,
        clock=clock,
    )
    summary = build_summary(
        outcomes,
        steps=options.steps,
        folder=folder,
        started_at=started_at.isoformat(timespec="seconds"),
        wall_s=clock() - began,
        device_hint=hint.device_kind,
    )
    text = summary_markdown.render(summary)
    write_atomic(folder / "summary.json", summary.model_dump_json(indent=2) + "\n")
    write_atomic(folder / "summary.md", text)
    console.print(text, markup=False, highlight=False, soft_wrap=True)
    console.print(f"summary: {folder / 'summary.md'} and summary.json", markup=False)
    if interrupted:
        return ExitCode.INTERRUPTED
    return ExitCode.OK if summary.ok else ExitCode.FAILED
