"""What the registries hold, as plain data: each recipe file's sizes with their shape and cost, and each
backend with the recipe files it trains. The listings (`jaxbench recipes`, `jaxbench backends`, tables or
JSON), the smoke plan (harness/smoke.py) and the nightly plan read them from here, so a family in FAMILIES or
a backend in BACKENDS reaches all of them with no other change. Configs are jax-free: nothing here imports
jax.

    jaxbench backends --json
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from jaxbench.harness import recipes
from jaxbench.harness.backends import BACKENDS, BackendEntry


@dataclasses.dataclass(frozen=True)
class RecipeSize:
    """One size of one recipe file: a row of `jaxbench recipes`, an object of its --json."""

    recipe: str
    """The recipe file's name (recipes/<recipe>.yaml), what `jaxbench run` takes."""
    family: str
    size: str
    default: bool
    """Whether it is the recipe's default_size (the size a GPU trains when none is given)."""
    params: int
    train_flops_per_unit: float
    """Training FLOPs per unit (forward and backward; harness/measure/flops.py)."""
    unit: str
    """token or image."""
    seq_len: int | None
    """Tokens per sequence (language models); None for images."""
    image_size: int | None
    """Pixels per side (vision models); None for tokens."""
    global_batch: int


@dataclasses.dataclass(frozen=True)
class BackendView:
    """A backend and what it trains: a row of `jaxbench backends`, an object of its --json."""

    name: str
    framework: bool
    """A framework's own trainer, run in its own environment (.venv-<name> or its flavor's image)."""
    flavor: str | None
    """The manifest flavor whose image holds it; None: every flavor."""
    families: tuple[str, ...]
    recipes: tuple[str, ...]
    """The recipe files of those families, in recipes/ order."""


def recipe_families(directory: Path | None = None) -> dict[str, str]:
    """Each recipe file in recipes/ (by name) -> its family."""
    return {path.stem: recipes.load_recipe_file(path).family for path in recipes.available_recipes(directory)}


def recipe_sizes(directory: Path | None = None) -> list[RecipeSize]:
    """Every size of every recipe file, resolved (and so validated) as a run would resolve it."""
    rows = []
    for path in recipes.available_recipes(directory):
        source = recipes.load_recipe_file(path)
        for size in source.sizes:
            recipe = recipes.resolve(source, size, path=path)
            model = recipe.model
            rows.append(
                RecipeSize(
                    recipe=path.stem,
                    family=source.family,
                    size=size,
                    default=size == source.default_size,
                    params=model.param_count(),
                    train_flops_per_unit=model.training_flops_per_unit(),
                    unit=model.unit,
                    seq_len=getattr(model, "seq_len", None),
                    image_size=getattr(model, "image_size", None),
                    global_batch=recipe.train.global_batch,
                )
            )
    return rows


def backend_views(
    backends: Mapping[str, BackendEntry] = BACKENDS, families_of_recipes: Mapping[str, str] | None = None
) -> list[BackendView]:
    """Each backend with the recipe files whose family it trains (default: the files in recipes/)."""
    by_recipe = recipe_families() if families_of_recipes is None else families_of_recipes
    return [
        BackendView(
            name,
            entry.framework,
            entry.flavor,
            entry.families,
            tuple(recipe for recipe, family in by_recipe.items() if family in entry.families),
        )
        for name, entry in backends.items()
    ]
