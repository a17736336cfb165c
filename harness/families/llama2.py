"""LLaMA 2's configuration: the shape of one size, its parameter count and training FLOPs. No JAX here, so
`jaxbench recipes` and `jaxbench flops` answer without starting a backend; the model itself (Flax NNX) is
harness/models/llama2.py, imported when a run builds it.

Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat Models" (arXiv:2307.09288); the sizes
live in recipes/llama2.yaml.

    jaxbench flops llama2 --size 7b
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Self

from pydantic import Field, model_validator

from jaxbench.harness.config import LanguageModelConfig
from jaxbench.harness.measure import flops

if TYPE_CHECKING:
    from flax import nnx

    from jaxbench.harness.models.layers import Numerics
    from jaxbench.harness.models.llama2 import Llama


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

    def build(self, numerics: Numerics, *, rngs: nnx.Rngs) -> Llama:
        from jaxbench.harness.models.llama2 import Llama

        return Llama(self, numerics, rngs=rngs)
