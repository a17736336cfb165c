"""The Vision Transformer's configuration: the shape of one size, its parameter count and training FLOPs per
image. No JAX here; the model (Flax NNX) is harness/models/vit.py, imported when a run builds it.

Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words" (arXiv:2010.11929), table 1; the sizes live in
recipes/vit.yaml.

    jaxbench flops vit --size b16
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar, Self

from pydantic import Field, model_validator

from jaxbench.harness.config import TransformerConfig
from jaxbench.harness.measure import flops

if TYPE_CHECKING:
    from flax import nnx

    from jaxbench.harness.models.layers import Numerics
    from jaxbench.harness.models.vit import ViT


class ViTConfig(TransformerConfig):
    unit: ClassVar[str] = "image"

    mlp_dim: Annotated[int, Field(gt=0)]
    patch_size: Annotated[int, Field(gt=0)]
    image_size: Annotated[int, Field(gt=0)] = 224
    channels: Annotated[int, Field(gt=0)] = 3
    num_classes: Annotated[int, Field(gt=1)] = 1000
    norm_eps: Annotated[float, Field(gt=0)] = 1e-6

    @model_validator(mode="after")
    def _patches_tile_the_image(self) -> Self:
        if self.image_size % self.patch_size:
            raise ValueError(
                f"image_size ({self.image_size}) must be a multiple of patch_size ({self.patch_size})"
            )
        return self

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    def units_per_example(self) -> int:
        return 1

    def with_sequence_length(self, length: int) -> Self:
        raise ValueError("a ViT's sequence length follows from image_size and patch_size; set those instead")

    def shape(self) -> flops.TransformerShape:
        return flops.TransformerShape(
            self.num_layers, self.d_model, self.num_heads, self.num_heads, self.head_dim, self.mlp_dim, 2
        )

    def training_flops_per_unit(self) -> float:
        return flops.vit_training_flops_per_image(
            self.shape(),
            patch_size=self.patch_size,
            image_size=self.image_size,
            channels=self.channels,
            num_classes=self.num_classes,
        )

    def param_count(self) -> int:
        d = self.d_model
        patch_embedding = self.patch_size**2 * self.channels * d + d
        biases = 4 * d + self.mlp_dim + d
        norms = 2 * 2 * d
        tokens = (self.num_patches + 1) * d + d  # position table and class token
        head = d * self.num_classes + self.num_classes
        blocks = self.num_layers * (self.shape().block_matmul_params() + biases + norms)
        return patch_embedding + tokens + blocks + 2 * d + head

    def build(self, numerics: Numerics, *, rngs: nnx.Rngs) -> ViT:
        from jaxbench.harness.models.vit import ViT

        return ViT(self, numerics, rngs=rngs)
