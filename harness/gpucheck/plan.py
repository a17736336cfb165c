"""What `jaxbench gpu-check` runs, as plain data, and the command line of each check: a fresh `python -m
jaxbench` process per check, because XLA reads its flags once per process.

    jaxbench gpu-check --steps 30
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from jaxbench.harness.flags.profiles import AUTO


@dataclasses.dataclass(frozen=True)
class RecipeCheck:
    """One `jaxbench run` of a recipe at a GPU size."""

    label: str
    recipe: str
    size: str
    overrides: tuple[str, ...] = ()
    """`--set` overrides on top of the recipe's own settings."""


@dataclasses.dataclass(frozen=True)
class MicrobenchCheck:
    """One `jaxbench microbench` over every suite."""

    label: str
    sizes: str


Check = RecipeCheck | MicrobenchCheck

PLAN: tuple[Check, ...] = (
    RecipeCheck("llama2 1b bf16 cudnn", "llama2", "1b", ("train.precision=bf16", "train.attention=cudnn")),
    RecipeCheck("llama2 1b fp8", "llama2", "1b", ("train.precision=fp8",)),
    RecipeCheck("gpt3 1.3b", "gpt3", "1.3b"),
    RecipeCheck("vit b16", "vit", "b16"),
    MicrobenchCheck("microbench full", "full"),
)
"""In this order: the headline recipe first, so that a broken stack shows within the first minutes."""

FLAG_PROFILE_OVERRIDE = f"xla_flags={AUTO}"
"""Every shipped recipe already uses `auto`; pinning it keeps the check's claim true if a recipe changes."""


def recipe_overrides(check: RecipeCheck) -> tuple[str, ...]:
    """Every `--set` the check's run gets, the flag profile included."""
    return (*check.overrides, FLAG_PROFILE_OVERRIDE)


def command(check: Check, *, steps: int, out: Path, python: str) -> list[str]:
    """The command line of one check; every check writes into the same folder `out` and not into the store."""
    jaxbench = [python, "-m", "jaxbench"]
    where = ["--no-ingest", "--out", str(out)]
    match check:
        case RecipeCheck():
            sets = [item for override in recipe_overrides(check) for item in ("--set", override)]
            return [
                *jaxbench,
                "run",
                check.recipe,
                "--size",
                check.size,
                "--steps",
                str(steps),
                *sets,
                *where,
            ]
        case MicrobenchCheck():
            return [*jaxbench, "microbench", "--sizes", check.sizes, *where]
