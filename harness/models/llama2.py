"""LLaMA 2: a pre-RMSNorm decoder with rotary positions, SwiGLU and grouped-query attention.

Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat Models" (arXiv:2307.09288); the sizes
live in recipes/llama2.yaml. Untied input embedding and output projection, no biases.

    jaxbench run llama2 --size tiny
"""

from __future__ import annotations

import functools
from typing import Annotated, Self

import jax
import jax.numpy as jnp
from flax import nnx
from pydantic import Field, model_validator

from harness import flops
from harness.config import LanguageModelConfig
from harness.data import TokenDataConfig, TokenStream
from harness.models.layers import (
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


class LlamaConfig(LanguageModelConfig):
    num_kv_heads: Annotated[int, Field(gt=0)]
    """Key/value heads; fewer than num_heads means grouped-query attention."""
    ffn_dim: Annotated[int, Field(gt=0)]
    """Hidden width of the SwiGLU MLP."""
    vocab_size: Annotated[int, Field(gt=1)] = 32000
    seq_len: Annotated[int, Field(gt=0)] = 4096
    rope_theta: Annotated[float, Field(gt=0)] = 10000.0
    norm_eps: Annotated[float, Field(gt=0)] = 1e-5

    @model_validator(mode="after")
    def _grouped_rotary_heads(self) -> Self:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(
                f"head_dim = d_model / num_heads ({self.head_dim}) must be even for rotary positions"
            )
        return self

    def shape(self) -> flops.TransformerShape:
        return flops.TransformerShape(
            self.num_layers, self.d_model, self.num_heads, self.num_kv_heads, self.head_dim, self.ffn_dim, 3
        )

    def param_count(self) -> int:
        norms = 2 * self.d_model
        embedding_and_head = 2 * self.vocab_size * self.d_model
        return (
            self.num_layers * (self.shape().block_matmul_params() + norms) + self.d_model + embedding_and_head
        )

    def data_stream(self, data: TokenDataConfig, global_batch: int, seed: int) -> TokenStream:
        return TokenStream(self.vocab_size, self.seq_len, global_batch, data, seed)

    def build(self, numerics: Numerics, *, rngs: nnx.Rngs) -> Llama:
        return Llama(self, numerics, rngs=rngs)


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
