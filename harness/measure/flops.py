"""Training FLOPs of the recipe models: pure arithmetic on explicit architecture numbers.

The one convention jaxbench uses everywhere (TFLOP/s, MFU, `jaxbench flops`), stated in docs/recipes.md:
6 x the matmul parameters touched per token (Kaplan et al. 2020, sec. 2.1), plus the attention score and
value matmuls forward and backward, causal attention counted as half (Chowdhery et al. 2022, appendix B).
Model FLOPs, not hardware FLOPs: rematerialization is not counted, so MFU does not reward recomputation.
What counts as a matmul parameter: docs/design.md, "FLOPs convention".

    jaxbench flops llama2 --size 7b
"""

from __future__ import annotations

import dataclasses

FLOPS_CONVENTION = (
    "6*N_matmul + attention (QK^T and AV, fwd+bwd, causal counted as half); "
    "N_matmul includes the unembedding, excludes embedding lookups, norms and biases; no remat"
)

# 2 FLOPs per multiply-accumulate, times 3: forward, backward w.r.t. activations, backward w.r.t. weights.
TRAINING_FLOPS_PER_MATMUL_PARAM = 6
# Q K^T plus A V (2 matmuls) x 2 FLOPs per multiply-accumulate x 3 (forward + backward).
TRAINING_ATTENTION_FACTOR = 12


@dataclasses.dataclass(frozen=True)
class TransformerShape:
    """The dimensions of a stack of transformer blocks that its FLOPs depend on."""

    num_layers: int
    d_model: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_dim: int
    ffn_matrices: int
    """3 for SwiGLU (gate, up, down), 2 for a GELU MLP (up, down)."""

    def block_matmul_params(self) -> int:
        """Matmul weights of one block: the Q, K, V, O projections and the MLP."""
        heads = 2 * self.num_heads + 2 * self.num_kv_heads  # Q and O per query head; K and V per kv head
        return self.d_model * self.head_dim * heads + self.ffn_matrices * self.d_model * self.ffn_dim

    def attention_flops_per_query(self, seq_len: int, *, causal: bool) -> float:
        """Score and value matmuls of all layers for one query position, forward and backward."""
        flops = TRAINING_ATTENTION_FACTOR * seq_len * self.num_heads * self.head_dim * self.num_layers
        return flops / 2 if causal else float(flops)


def decoder_training_flops_per_token(shape: TransformerShape, *, vocab_size: int, seq_len: int) -> float:
    """Training FLOPs per token of a causal decoder-only language model (LLaMA, GPT)."""
    matmul_params = (
        shape.num_layers * shape.block_matmul_params() + shape.d_model * vocab_size
    )  # + unembedding
    return TRAINING_FLOPS_PER_MATMUL_PARAM * matmul_params + shape.attention_flops_per_query(
        seq_len, causal=True
    )


def vit_sequence_length(*, image_size: int, patch_size: int) -> int:
    """Tokens the encoder sees per image: one per patch plus the class token."""
    return (image_size // patch_size) ** 2 + 1


def vit_training_flops_per_image(
    shape: TransformerShape, *, patch_size: int, image_size: int, channels: int, num_classes: int
) -> float:
    """Training FLOPs per image of a ViT classifier (class token, non-causal attention).

    Matmuls per image: the patch embedding on every patch, every encoder block on every token (patches and
    the class token), and the classification head on the class token only.
    """
    seq_len = vit_sequence_length(image_size=image_size, patch_size=patch_size)
    num_patches = seq_len - 1
    patch_embedding = num_patches * patch_size * patch_size * channels * shape.d_model
    encoder = seq_len * shape.num_layers * shape.block_matmul_params()
    head = shape.d_model * num_classes
    attention = seq_len * shape.attention_flops_per_query(seq_len, causal=False)
    return TRAINING_FLOPS_PER_MATMUL_PARAM * (patch_embedding + encoder + head) + attention
