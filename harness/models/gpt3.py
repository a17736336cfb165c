"""GPT-3: a pre-LayerNorm decoder with learned positions, GELU MLP, biases and tied embeddings.

Brown et al. 2020, "Language Models are Few-Shot Learners" (arXiv:2005.14165), table 2.1, in the shapes of
the Paxml GPT-3 configs (vocab padded to 50304); the sizes live in recipes/gpt3.yaml. Dense attention in
every layer (the paper's alternating sparse bands are not used by any public JAX recipe).

The Flax NNX model; the configuration is harness/families/gpt3.py.

    jaxbench run gpt3 --size tiny
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from flax import nnx

from jaxbench.harness.families.gpt3 import GPTConfig
from jaxbench.harness.models.layers import (
    Numerics,
    PreLayerNormBlock,
    constrain,
    norm,
    param,
    residual_init_std,
    scan_layers,
    stack_layers,
)


class GPT(nnx.Module):
    def __init__(self, cfg: GPTConfig, numerics: Numerics, *, rngs: nnx.Rngs):
        self.numerics = numerics
        self.token_embedding = param(rngs, (cfg.vocab_size, cfg.d_model), ("vocab", "embed"))
        self.position_embedding = param(rngs, (cfg.seq_len, cfg.d_model), ("position", "embed"))
        # GPT-2/3 use the tanh approximation of GELU (Hendrycks & Gimpel 2016, eq. 2).
        block = functools.partial(
            PreLayerNormBlock,
            cfg.d_model,
            cfg.num_heads,
            cfg.ffn_dim,
            causal=True,
            approximate_gelu=True,
            norm_eps=cfg.norm_eps,
            out_init_std=residual_init_std(cfg.num_layers),
            numerics=numerics,
        )
        self.blocks = stack_layers(lambda r: block(rngs=r), cfg.num_layers, rngs)
        self.final_norm = norm("layer", cfg.d_model, eps=cfg.norm_eps, numerics=numerics, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """tokens [B, T] int32 -> logits [B, T, V] float32."""
        dtype = self.numerics.compute_dtype
        table = self.token_embedding[...]  # [V, D]
        positions = self.position_embedding[...][: tokens.shape[1]]  # [T, D]
        x = (jnp.take(table, tokens, axis=0) + positions[None]).astype(dtype)  # [B, T, D]
        x = constrain(x, ("batch", "seq", "act_embed"))
        x = scan_layers(self.blocks, x, self.numerics)  # [B, T, D]
        logits = jnp.einsum("btd,vd->btv", self.final_norm(x), table.astype(dtype))  # tied output projection
        return constrain(logits, ("batch", "seq", "act_vocab")).astype(jnp.float32)
