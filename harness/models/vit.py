"""Vision Transformer: patch embedding, class token, pre-LayerNorm encoder, linear head on the class token.

Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words" (arXiv:2010.11929), table 1; the sizes live in
recipes/vit.yaml. Learned position embeddings, exact GELU, LayerNorm eps 1e-6 as in big_vision.

    jaxbench run vit --size tiny
"""

from __future__ import annotations

import functools
from typing import Annotated, ClassVar, Self

import jax
import jax.numpy as jnp
from flax import nnx
from pydantic import Field, model_validator

from harness import flops
from harness.config import TransformerConfig
from harness.data import ImageDataConfig, ImageStream
from harness.models.layers import (
    Dense,
    Numerics,
    PreLayerNormBlock,
    constrain,
    norm,
    param,
    residual_init_std,
    scan_layers,
    stack_layers,
)


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

    def data_stream(self, data: ImageDataConfig, global_batch: int, seed: int) -> ImageStream:
        return ImageStream(
            self.image_size, self.patch_size, self.channels, self.num_classes, global_batch, data, seed
        )

    def build(self, numerics: Numerics, *, rngs: nnx.Rngs) -> ViT:
        return ViT(self, numerics, rngs=rngs)


class ViT(nnx.Module):
    def __init__(self, cfg: ViTConfig, numerics: Numerics, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.numerics = numerics
        d, p = cfg.d_model, cfg.patch_size
        # A stride-p convolution over non-overlapping patches is this matmul on flattened patches.
        self.patch_embedding = Dense(
            "bsp,pd->bsd",
            (p * p * cfg.channels, d),
            ("patch", "embed"),
            use_bias=True,
            numerics=numerics,
            rngs=rngs,
        )
        self.class_token = param(rngs, (1, 1, d), (None, None, "embed"))
        self.position_embedding = param(rngs, (cfg.num_patches + 1, d), ("position", "embed"))
        block = functools.partial(
            PreLayerNormBlock,
            d,
            cfg.num_heads,
            cfg.mlp_dim,
            causal=False,
            approximate_gelu=False,
            norm_eps=cfg.norm_eps,
            out_init_std=residual_init_std(cfg.num_layers),
            numerics=numerics,
        )
        self.blocks = stack_layers(lambda r: block(rngs=r), cfg.num_layers, rngs)
        self.final_norm = norm("layer", d, eps=cfg.norm_eps, numerics=numerics, rngs=rngs)
        self.head = Dense(
            "bd,dc->bc",
            (d, cfg.num_classes),
            ("embed", "classes"),
            use_bias=True,
            numerics=numerics,
            rngs=rngs,
        )

    def __call__(self, images: jax.Array) -> jax.Array:
        """images [B, H, W, C] -> logits [B, classes] float32."""
        b, h, w, c = images.shape
        p = self.cfg.patch_size
        patches = images.reshape(b, h // p, p, w // p, p, c)  # [B, H/p, p, W/p, p, C]
        patches = patches.transpose(0, 1, 3, 2, 4, 5).reshape(
            b, (h // p) * (w // p), p * p * c
        )  # [B, N, ppC]
        x = self.patch_embedding(patches)  # [B, N, D]
        cls = jnp.broadcast_to(self.class_token[...].astype(x.dtype), (b, 1, x.shape[-1]))  # [B, 1, D]
        x = jnp.concatenate([cls, x], axis=1) + self.position_embedding[...].astype(x.dtype)  # [B, N+1, D]
        x = constrain(x, ("batch", "seq", "act_embed"))
        x = scan_layers(self.blocks, x, self.numerics)  # [B, N+1, D]
        logits = self.head(self.final_norm(x)[:, 0])  # [B, classes]
        return logits.astype(jnp.float32)
