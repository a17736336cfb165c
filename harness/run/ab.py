"""A/B comparison of two flag sets on one recipe: runs go in pairs A B, B A, A B, ..., each in a fresh
process (XLA reads its flags once per process), and the throughput ratio B/A gets a confidence interval and
a verdict.

    jaxbench ab llama2 --a=none --b=cpu --repeats 3
    make ab MODEL=llama2 A=none B="--xla_cpu_enable_fast_math=true"

An arm is a flag profile name, or flags ("--name=value ...") added to the recipe's own profile. Every run
writes its result and lands in the store like any `jaxbench run`.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from jaxbench.core.errors import InvalidInput, RunFailed
from jaxbench.core.processes import run_child
from jaxbench.harness.flags import profiles as flags
from jaxbench.harness.measure.stats import RatioEstimate, counterbalanced, paired_ratio
from jaxbench.harness.runtime.result import RunResult, Status, read_result

FAILURE_LOG_LINES = 20


class ABVerdict(enum.StrEnum):
    FASTER = "B is faster"
    SLOWER = "B is slower"
    SAME = "no significant difference"


@dataclasses.dataclass(frozen=True)
class Arm:
    name: str
    spec: str
    profile: str | None
    """A flag profile replacing the recipe's, or None to keep it."""
    xla_flags: str
    """Flags added on top (after the user's own XLA_FLAGS)."""
    added: dict[str, str] = dataclasses.field(default_factory=dict)
    """The same flags parsed, name -> value, for checking them against jaxlib."""


@dataclasses.dataclass(frozen=True)
class ABResult:
    a: list[RunResult]
    b: list[RunResult]
    estimate: RatioEstimate
    verdict: ABVerdict


def parse_arm(name: str, spec: str) -> Arm:
    spec = spec.strip()
    if spec.startswith("--"):
        # Malformed or conflicting flags fail here.
        added = {k: s.value for k, s in flags.parse_flag_string(spec, f"--{name.lower()}").items()}
        return Arm(name, spec, None, spec, added)
    if spec == flags.AUTO or spec in flags.available_profiles():
        return Arm(name, spec, spec, "")
    raise InvalidInput(
        f"--{name.lower()} {spec!r}: expected a flag profile ({', '.join(flags.available_profiles())}, auto) "
        "or flags such as '--xla_gpu_enable_latency_hiding_scheduler=true'"
    )


def arm_overrides(arm: Arm) -> tuple[str, ...]:
    """The `--set` an arm's runs add: its profile in place of the recipe's."""
    return () if arm.profile is None else (f"xla_flags={arm.profile}",)


def verdict_of(estimate: RatioEstimate) -> ABVerdict:
    """Throughput ratio B/A: an interval above 1 means B is faster, below 1 slower."""
    if estimate.low > 1:
        return ABVerdict.FASTER
    if estimate.high < 1:
        return ABVerdict.SLOWER
    return ABVerdict.SAME


def arm_command(
    arm: Arm, recipe: str, run_args: Sequence[str], out_dir: Path
) -> tuple[list[str], dict[str, str]]:
    """The `jaxbench run` command line and environment of one run of an arm."""
    argv = [sys.executable, "-m", "jaxbench", "run", recipe, *run_args, "--out", str(out_dir)]
    argv += [item for override in arm_overrides(arm) for item in ("--set", override)]
    environment = dict(os.environ)
    if arm.xla_flags:
        environment["XLA_FLAGS"] = f"{environment.get('XLA_FLAGS', '')} {arm.xla_flags}".strip()
    return argv, environment


def run_subprocess(argv: list[str], environment: dict[str, str]) -> int:
    """Run one arm quietly: its table and progress would bury the comparison; its log shows on failure."""
    done = run_child(argv, env=environment, capture=True)
    if done.returncode != 0:
        sys.stderr.write("\n".join(done.stderr.splitlines()[-FAILURE_LOG_LINES:]) + "\n")
    return done.returncode


def run_ab(
    recipe: str,
    a: Arm,
    b: Arm,
    *,
    repeats: int,
    run_args: Sequence[str],
    out_dir: Path,
    launch: Callable[[list[str], dict[str, str]], int] = run_subprocess,
    on_run: Callable[[str, int, RunResult], None] = lambda arm, index, result: None,
) -> ABResult:
    if repeats < 2:
        raise InvalidInput(f"--repeats {repeats}: at least 2 pairs are needed for a confidence interval")
    results: dict[str, list[RunResult]] = {a.name: [], b.name: []}
    for index in range(repeats):
        for arm in counterbalanced(index, a, b):  # drift, and a pair's favoured position, hit both alike
            folder = out_dir / arm.name / str(index)
            argv, environment = arm_command(arm, recipe, run_args, folder)
            code = launch(argv, environment)
            files = sorted(folder.glob("*.json"))
            if not files:
                raise RunFailed(
                    f"arm {arm.name} ({arm.spec}) run {index + 1} wrote no result (exit code {code})"
                )
            run = read_result(files[-1])
            if run.status is not Status.OK or run.throughput is None:
                raise RunFailed(
                    f"arm {arm.name} ({arm.spec}) run {index + 1} failed: {run.status}: {run.reason}"
                )
            results[arm.name].append(run)
            on_run(arm.name, index, run)
    per_s = {name: [r.throughput.per_s for r in runs if r.throughput] for name, runs in results.items()}
    estimate = paired_ratio(per_s[a.name], per_s[b.name])
    return ABResult(results[a.name], results[b.name], estimate, verdict_of(estimate))
