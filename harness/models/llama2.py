"""LLaMA 2: a pre-RMSNorm decoder with rotary positions, SwiGLU and grouped-query attention.

Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat Models" (arXiv:2307.09288); the sizes
live in recipes/llama2.yaml. Untied input embedding and output projection, no biases.

The Flax NNX model; the configuration (sizes, parameter count, FLOPs) is harness/families/llama2.py.

    jaxbench run llama2 --size tiny
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from jaxbench.harness.families.llama2 import LlamaConfig
from jaxbench.harness.models.layers import (
    Dense,
    Numerics,
    SelfAttention,
    constrain,
    norm,
    param,
    residual_init_std,
    rotary_tables,
    scan_layers,
    stack_layers,
)


class SwiGLU(nnx.Module):
    """down(silu(gate(x)) * up(x)) (Shazeer 2020, "GLU Variants Improve Transformer")."""

    def __init__(self, cfg: LlamaConfig, numerics: Numerics, *, rngs: nnx.Rngs):
        d, f = cfg.d_model, cfg.ffn_dim
        dense = functools.partial(Dense, numerics=numerics, rngs=rngs, fp8=True)
        self.gate = dense("btd,df->btf", (d, f), ("embed", "mlp"))
        self.up = dense("btd,df->btf", (d, f), ("embed", "mlp"))
        self.down = dense("btf,fd->btd", (f, d), ("mlp", "embed"), init_std=residual_init_std(cfg.num_layers))

    def __call__(self, x: jax.Array) -> jax.Array:
        h = jax.nn.silu(self.gate(x)) * self.up(x)  # [B, T, F]
        h = constrain(h, ("batch", "seq", "act_mlp"))
        return self.down(h)  # [B, T, D]


class Block(nnx.Module):
    def __init__(self, cfg: LlamaConfig, numerics: Numerics, *, rngs: nnx.Rngs):
        self.attention_norm = norm("rms", cfg.d_model, eps=cfg.norm_eps, numerics=numerics, rngs=rngs)
        self.attention = SelfAttention(
            cfg.d_model,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            causal=True,
            use_bias=False,
            out_init_std=residual_init_std(cfg.num_layers),
            numerics=numerics,
            rngs=rngs,
        )
        self.mlp_norm = norm("rms", cfg.d_model, eps=cfg.norm_eps, numerics=numerics, rngs=rngs)
        self.mlp = SwiGLU(cfg, numerics, rngs=rngs)

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
        x = x + self.attention(self.attention_norm(x), rotary=(cos, sin))  # [B, T, D]
        x = x + self.mlp(self.mlp_norm(x))  # [B, T, D]
        return constrain(x, ("batch", "seq", "act_embed"))


class Llama(nnx.Module):
    def __init__(self, cfg: LlamaConfig, numerics: Numerics, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.numerics = numerics
        self.embedding = param(rngs, (cfg.vocab_size, cfg.d_model), ("vocab", "embed"))
        self.blocks = stack_layers(lambda r: Block(cfg, numerics, rngs=r), cfg.num_layers, rngs)
        self.final_norm = norm("rms", cfg.d_model, eps=cfg.norm_eps, numerics=numerics, rngs=rngs)
        self.lm_head = Dense(
            "btd,dv->btv", (cfg.d_model, cfg.vocab_size), ("embed", "vocab"), numerics=numerics, rngs=rngs
        )

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """tokens [B, T] int32 -> logits [B, T, V] float32."""
        x = jnp.take(self.embedding[...], tokens, axis=0).astype(self.numerics.compute_dtype)  # [B, T, D]
        x = constrain(x, ("batch", "seq", "act_embed"))
        cos, sin = rotary_tables(tokens.shape[1], self.cfg.head_dim, self.cfg.rope_theta)  # [T, H/2] each
        x = scan_layers(self.blocks, x, self.numerics, cos, sin)  # [B, T, D]
        logits = self.lm_head(self.final_norm(x))  # [B, T, V]
        return constrain(logits, ("batch", "seq", "act_vocab")).astype(jnp.float32)
