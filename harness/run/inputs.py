"""A run's inputs, checked before anything starts or compiles: the recipe, its overrides, the backend, the
XLA flags and --out, the same for every launcher and in a dry run, for the devices and environment of the
launcher's processes (harness/commands.py: run_recipe). The checks against the machine, once its devices
are known, are the backends' (harness/runtime/preflight.py).

Each failure is InvalidInput (`RecipeError` for the recipe) naming the file, flag or key and what was
expected, so that a night is never spent compiling a configuration that cannot run.

    jaxbench run vit --backend maxtext    # refused here: maxtext does not train vit, and nothing starts
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import folder_to_write
from jaxbench.harness import flags as harness_flags
from jaxbench.harness import recipes
from jaxbench.harness.backends import check_pair, check_settings, get_backend
from jaxbench.harness.config import Recipe
from jaxbench.harness.runtime.options import OUT_FLAG, RunOptions

if TYPE_CHECKING:
    from jaxbench.harness.backends import Backend
    from jaxbench.harness.flags import DeviceHint, FlagSet


@dataclasses.dataclass(frozen=True)
class Inputs:
    """A run's inputs once checked: what its processes will resolve them to."""

    recipe: Recipe
    flags: FlagSet
    """The XLA flags as the profiles, the recipe and the environment make them; whether the jaxlib that
    runs knows them is asked where it runs (jaxbench.harness.flags.for_run)."""
    optimal_loss: float


def check_inputs(
    run: RunOptions, hint: DeviceHint, environ: Mapping[str, str], backend: Backend | None = None
) -> Inputs:
    """The recipe at its size with every override (the default size for the devices in `hint`), the
    backend (`backend`, or the one `run` names) for its family and for --profile, the XLA flags for those
    devices and the environment `environ` the processes start with, and the synthetic data for the model."""
    recipe = recipes.load(
        run.recipe,
        run.size,
        run.overrides,
        default_to_tiny=hint.platform != "gpu",
        steps=run.steps,
    )
    name = backend.name if backend else run.backend
    check_pair(name, recipe.family)
    check_settings(name, recipe)
    # Only asked with --profile: the backend's module is imported (jax, for the native one).
    if run.profile_steps and not (backend or get_backend(name)).profiles:
        raise InvalidInput(
            f"--profile: the {name} backend trains in its framework's own process, which this "
            "profiler cannot reach; expected --backend native"
        )
    flags = harness_flags.chosen_for_run(
        recipe.xla_flags,
        recipe.flag_overrides,
        hint,
        environ,
        precision=recipe.train.precision.value,
    )
    # Imported here: the synthetic data is built with jax, which commands that only read recipes never load.
    from jaxbench.harness.backends.native.data import optimal_loss

    return Inputs(recipe, flags, optimal_loss(recipe))


def check_run(run: RunOptions, hint: DeviceHint, environ: Mapping[str, str]) -> Inputs:
    """What every launcher's run is checked for before anything starts, in a dry run too: its inputs
    (check_inputs) and --out, a folder that can be made and written in; nothing is made."""
    inputs = check_inputs(run, hint, environ)
    folder_to_write(run.out_dir, OUT_FLAG)
    return inputs
