"""`jaxbench smoke`: does the stack train at all? Each backend's tiny size of each recipe it trains, on the
CPU, natively or inside an image (make smoke: CI, and the nightly on each image it built). What each backend
trains comes from the registries (harness/catalog.py), so a new family or backend is smoked with no other
change. Each run is a fresh `jaxbench run` process (XLA reads its flags once per process), its result not
ingested; the first that fails stops the smoke with its exit code.

    jaxbench smoke --out runs/smoke [--image REF] [--backends native maxtext] [--recipes llama2]
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.core.files import folder_to_write
from jaxbench.core.processes import run_to_its_end
from jaxbench.harness.catalog import BackendView, backend_views

SMOKE_SIZE = "tiny"

SmokeProcessRunner = Callable[[Sequence[str], Mapping[str, str]], int]
"""(argv, environment) -> the exit code of that process."""


@dataclasses.dataclass(frozen=True)
class SmokeOptions:
    out: Path = Path("runs/smoke")
    image: str | None = None
    """Run inside this image (`jaxbench run --image`); None: in this environment."""
    backends: tuple[str, ...] = ()
    """The backends to smoke; none given: every one, but inside an image only those every image holds (a
    framework's image is smoked by naming its framework)."""
    recipes: tuple[str, ...] = ()
    """The recipes to smoke, of those each chosen backend trains; none given: all of them."""


@dataclasses.dataclass(frozen=True)
class SmokeRun:
    backend: str
    recipe: str

    def argv(self, options: SmokeOptions, python: str = sys.executable) -> list[str]:
        where = ["--image", options.image] if options.image else []
        return [
            *(python, "-m", "jaxbench", "run", self.recipe, "--size", SMOKE_SIZE, "--backend", self.backend),
            *("--no-ingest", "--out", str(options.out), *where),
        ]


def smoke_plan(views: Sequence[BackendView], options: SmokeOptions) -> list[SmokeRun]:
    """The runs, backend by backend as chosen, each backend's recipes in recipes/ order."""
    known = {view.name: view for view in views}
    unknown = [name for name in options.backends if name not in known]
    if unknown:
        raise InvalidInput(f"--backends {' '.join(unknown)}: expected some of {', '.join(known)}")
    chosen = options.backends or tuple(view.name for view in views if not (options.image and view.framework))
    trained = {recipe for name in chosen for recipe in known[name].recipes}
    untrained = [recipe for recipe in options.recipes if recipe not in trained]
    if untrained:
        raise InvalidInput(
            f"--recipes {' '.join(untrained)}: expected some of {', '.join(sorted(trained))} "
            "(the recipes the chosen backends train)"
        )
    return [
        SmokeRun(name, recipe)
        for name in chosen
        for recipe in known[name].recipes
        if not options.recipes or recipe in options.recipes
    ]


def smoke(
    options: SmokeOptions,
    console: Console,
    *,
    views: Sequence[BackendView] | None = None,
    runner: SmokeProcessRunner = run_to_its_end,
    environ: Mapping[str, str] = os.environ,
) -> int:
    """Every run of the plan on the CPU (JAX_PLATFORMS=cpu), in order, until one fails."""
    plan = smoke_plan(backend_views() if views is None else views, options)
    folder_to_write(options.out, "--out")
    env = {**environ, "JAX_PLATFORMS": "cpu"}
    for index, run in enumerate(plan, 1):
        argv = run.argv(options)
        console.print(f"[{index}/{len(plan)}] smoke: {shlex.join(argv[2:])}", markup=False, soft_wrap=True)
        code = runner(argv, env)
        if code != ExitCode.OK:
            console.print(f"smoke: {run.backend} {run.recipe} failed (exit {code})", markup=False)
            return code
    console.print(f"smoke: {len(plan)} runs trained", markup=False)
    return ExitCode.OK
