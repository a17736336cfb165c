"""GPT-3's configuration: the shape of one size, its parameter count and training FLOPs. No JAX here; the
model (Flax NNX) is harness/models/gpt3.py, imported when a run builds it.

Brown et al. 2020, "Language Models are Few-Shot Learners" (arXiv:2005.14165), table 2.1, in the shapes of
the Paxml GPT-3 configs; the sizes live in recipes/gpt3.yaml.

    jaxbench flops gpt3 --size 1.3b
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from jaxbench.harness.config import LanguageModelConfig
from jaxbench.harness.measure import flops

if TYPE_CHECKING:
    from flax import nnx

    from jaxbench.harness.models.gpt3 import GPT
    from jaxbench.harness.models.layers import Numerics


class GPTConfig(LanguageModelConfig):
    ffn_dim: Annotated[int, Field(gt=0)]
    vocab_size: Annotated[int, Field(gt=1)] = 50304
    seq_len: Annotated[int, Field(gt=0)] = 2048
    """Tokens per training sequence; also the size of the learned position table."""
    norm_eps: Annotated[float, Field(gt=0)] = 1e-5

    def shape(self) -> flops.TransformerShape:
        return flops.TransformerShape(
            self.num_layers, self.d_model, self.num_heads, self.num_heads, self.head_dim, self.ffn_dim, 2
        )

    def param_count(self) -> int:
        d = self.d_model
        biases = 4 * d + self.ffn_dim + d  # q, k, v, out; MLP up and down
        norms = 2 * 2 * d  # two LayerNorms, scale and bias
        embeddings = (self.vocab_size + self.seq_len) * d  # the token table doubles as the output projection
        return self.num_layers * (self.shape().block_matmul_params() + biases + norms) + 2 * d + embeddings

    def build(self, numerics: Numerics, *, rngs: nnx.Rngs) -> GPT:
        from jaxbench.harness.models.gpt3 import GPT

        return GPT(self, numerics, rngs=rngs)
