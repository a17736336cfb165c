"""Model families: each maps a recipe `family` to its model config (which builds the model) and data config.

Adding a family: write harness/models/<family>.py (config, layers, model), add it here and add a recipe.
"""

from __future__ import annotations

import dataclasses

from core.schema import Strict
from harness.config import ModelConfig, Recipe
from harness.data import ImageDataConfig, TokenDataConfig
from harness.models.gpt3 import GPTConfig
from harness.models.llama2 import LlamaConfig
from harness.models.vit import ViTConfig


@dataclasses.dataclass(frozen=True)
class Family:
    model: type[ModelConfig]
    data: type[Strict]

    @property
    def recipe_type(self) -> type[Recipe]:
        return Recipe[self.model, self.data]  # type: ignore[name-defined]


FAMILIES: dict[str, Family] = {
    "llama2": Family(LlamaConfig, TokenDataConfig),
    "gpt3": Family(GPTConfig, TokenDataConfig),
    "vit": Family(ViTConfig, ImageDataConfig),
}
