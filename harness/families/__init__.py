"""The model families by name: what a recipe's `family` selects. Each entry carries the family's throughput
unit and its data section's schema, and names its config class, imported only when a recipe of the family
is resolved, so listing the families imports no config and no command that does not train imports jax or
flax (the models are imported by `ModelConfig.build`).

A new family: its jax-free config in harness/families/<family>.py (the config must load where the model
cannot: docs/design.md, "Families and backends"), its Flax model in harness/models/<family>.py, a recipe
in recipes/<family>.yaml, and one line in FAMILIES; naming its model there makes the native backend train
it, and every listing and plan reads it.

    jaxbench recipes
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import Literal

from jaxbench.core.errors import InvalidInput
from jaxbench.core.schema import Strict
from jaxbench.harness.config import ImageDataConfig, ModelConfig, Recipe, TokenDataConfig

Unit = Literal["token", "image"]


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    unit: Unit
    """What one throughput unit is: the same as the config class's `unit` (a test checks that)."""
    data: type[Strict]
    """The schema of the recipe's `data` section: the synthetic task the family trains on."""
    config_module: str
    """The module (jax-free) that defines the config class, e.g. "harness.families.llama2"."""
    config_name: str
    model_module: str | None
    """The module of its Flax model, e.g. "harness.models.llama2", which the native backend trains; None:
    a family only framework backends train."""

    def config(self) -> type[ModelConfig]:
        """The family's config class (imported here, on first use)."""
        config: type[ModelConfig] = getattr(importlib.import_module(self.config_module), self.config_name)
        return config

    def recipe_type(self) -> type[Recipe]:
        return _recipe_type(self.config(), self.data)


@functools.cache
def _recipe_type(model: type[ModelConfig], data: type[Strict]) -> type[Recipe]:
    # Parametrising a generic pydantic model builds a new class; build each once.
    return Recipe[model, data]  # type: ignore[valid-type]


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(
            "llama2",
            "token",
            TokenDataConfig,
            "jaxbench.harness.families.llama2",
            "LlamaConfig",
            "jaxbench.harness.models.llama2",
        ),
        Family(
            "gpt3",
            "token",
            TokenDataConfig,
            "jaxbench.harness.families.gpt3",
            "GPTConfig",
            "jaxbench.harness.models.gpt3",
        ),
        Family(
            "vit",
            "image",
            ImageDataConfig,
            "jaxbench.harness.families.vit",
            "ViTConfig",
            "jaxbench.harness.models.vit",
        ),
    )
}


def family(name: str) -> Family:
    """The family named `name`; invalid input naming the known ones otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise InvalidInput(f"family {name!r} is unknown; expected one of {sorted(FAMILIES)}") from None
