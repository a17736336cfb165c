"""Vision Transformer: patch embedding, class token, pre-LayerNorm encoder, linear head on the class token.

Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words" (arXiv:2010.11929), table 1; the sizes live in
recipes/vit.yaml. Learned position embeddings, exact GELU, LayerNorm eps 1e-6 as in big_vision.

The Flax NNX model; the configuration is harness/families/vit.py.

    jaxbench run vit --size tiny
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from jaxbench.harness.families.vit import ViTConfig
from jaxbench.harness.models.layers import (
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
