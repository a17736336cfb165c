"""Float64 NumPy forward passes of LLaMA 2, GPT-3 and ViT, written from the papers, not from harness/models.

They run one example at a time, attention head by head, and use formulations that differ from the JAX code
on purpose: rotary positions as complex multiplication, softmax with an explicit -inf causal mask, grouped
query attention by repeating key/value heads, two-pass LayerNorm variance, GELU spelled out, and patches
cut out of the image with loops. Weights are plain matrices in the `x @ W` convention, heads concatenated
along the columns (Vaswani et al. 2017, sec. 3.2.2: MultiHead = Concat(head_1..head_h) W^O).

    PYTHONPATH=. python -m pytest tests/harness/test_reference_models.py
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

_erf = np.vectorize(math.erf, otypes=[np.float64])
Activation = Callable[[np.ndarray], np.ndarray]


# --- elementwise functions and norms -------------------------------------------------------------------


def silu(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x) (Elfwing et al. 2017; the Swish of SwiGLU, Shazeer 2020)."""
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU, tanh approximation (Hendrycks & Gimpel 2016, sec. 2), as in GPT-2/3."""
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gelu_exact(x: np.ndarray) -> np.ndarray:
    """GELU, x * Phi(x) with the Gaussian CDF through erf (Hendrycks & Gimpel 2016, eq. 1), as in ViT."""
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def layer_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """(x - mean) / sqrt(biased variance + eps) * scale + bias over the last axis (Ba et al. 2016, eq. 4)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    variance = (centred**2).mean(axis=-1, keepdims=True)  # two-pass, divided by D (biased)
    return centred / np.sqrt(variance + eps) * scale + bias


def rms_norm(x: np.ndarray, scale: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * scale over the last axis (Zhang & Sennrich 2019, eq. 4)."""
    return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps) * scale


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; exp(-inf) = 0 removes masked entries."""
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- attention -----------------------------------------------------------------------------------------


def rotate(x: np.ndarray, theta: float) -> np.ndarray:
    """Rotary position embedding of x [T, heads, H] (Su et al. 2021, RoFormer, sec. 3.4.2).

    Dimension i is paired with dimension i + H/2 (the "rotate half" layout): z = x[:H/2] + i x[H/2:] is
    multiplied by exp(i t theta^(-2k/H)) at position t. Meta's LLaMA pairs (2k, 2k+1) instead; the two
    differ only by a fixed permutation of the q/k projection columns, so are equivalent for weights trained
    in one layout.
    """
    t, _, h = x.shape
    freqs = theta ** (-2.0 * np.arange(h // 2) / h)  # [H/2]
    phase = np.exp(1j * np.outer(np.arange(t), freqs))  # [T, H/2]
    z = (x[..., : h // 2] + 1j * x[..., h // 2 :]) * phase[:, None, :]
    return np.concatenate([z.real, z.imag], axis=-1)


@dataclasses.dataclass(frozen=True)
class Attention:
    """Projections [D, heads * H] and output [heads * H, D]; biases None where the model has none."""

    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    bq: np.ndarray | None = None
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    bo: np.ndarray | None = None


def _affine(x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    return x @ w if b is None else x @ w + b


def attention(
    x: np.ndarray, w: Attention, *, num_heads: int, num_kv_heads: int, causal: bool, rope_theta: float | None
) -> np.ndarray:
    """Scaled dot-product attention of one sequence x [T, D] -> [T, D] (Vaswani et al. 2017, eq. 1).

    Grouped-query attention (Ainslie et al. 2023): each key/value head serves num_heads / num_kv_heads
    consecutive query heads, so query head n reads key/value head n // (num_heads / num_kv_heads).
    """
    t = x.shape[0]
    h = w.wq.shape[1] // num_heads
    q = _affine(x, w.wq, w.bq).reshape(t, num_heads, h)
    k = _affine(x, w.wk, w.bk).reshape(t, num_kv_heads, h)
    v = _affine(x, w.wv, w.bv).reshape(t, num_kv_heads, h)
    if rope_theta is not None:
        q, k = rotate(q, rope_theta), rotate(k, rope_theta)
    k = np.repeat(k, num_heads // num_kv_heads, axis=1)  # [T, heads, H]
    v = np.repeat(v, num_heads // num_kv_heads, axis=1)
    mask = np.triu(np.full((t, t), -np.inf), k=1) if causal else np.zeros((t, t))  # -inf above the diagonal
    heads = []
    for n in range(num_heads):
        scores = q[:, n, :] @ k[:, n, :].T / math.sqrt(h) + mask  # [T, T]
        heads.append(softmax(scores) @ v[:, n, :])  # [T, H]
    return _affine(np.concatenate(heads, axis=-1), w.wo, w.bo)


# --- LLaMA 2 (Touvron et al. 2023, arXiv:2307.09288, sec. 2.2) -----------------------------------------


@dataclasses.dataclass(frozen=True)
class LlamaLayer:
    attention_norm: np.ndarray  # [D]
    attention: Attention
    mlp_norm: np.ndarray  # [D]
    w_gate: np.ndarray  # [D, F]
    w_up: np.ndarray  # [D, F]
    w_down: np.ndarray  # [F, D]


@dataclasses.dataclass(frozen=True)
class LlamaWeights:
    embedding: np.ndarray  # [V, D]
    layers: list[LlamaLayer]
    final_norm: np.ndarray  # [D]
    output: np.ndarray  # [D, V], untied from the embedding


def llama2_logits(
    tokens: np.ndarray, w: LlamaWeights, *, num_heads: int, num_kv_heads: int, eps: float, rope_theta: float
) -> np.ndarray:
    """tokens [B, T] -> logits [B, T, V]: pre-RMSNorm blocks, rotary positions, SwiGLU MLP."""
    out = []
    for sequence in tokens:
        x = w.embedding[sequence]  # [T, D]
        for layer in w.layers:
            a = rms_norm(x, layer.attention_norm, eps)
            x = x + attention(
                a,
                layer.attention,
                num_heads=num_heads,
                num_kv_heads=num_kv_heads,
                causal=True,
                rope_theta=rope_theta,
            )
            m = rms_norm(x, layer.mlp_norm, eps)
            x = x + (silu(m @ layer.w_gate) * (m @ layer.w_up)) @ layer.w_down  # Shazeer 2020, eq. 6
        out.append(rms_norm(x, w.final_norm, eps) @ w.output)
    return np.stack(out)


# --- GPT-3 (Brown et al. 2020, arXiv:2005.14165, sec. 2.1; GPT-2 layout, Radford et al. 2019) and ViT ----


@dataclasses.dataclass(frozen=True)
class PreLayerNormBlock:
    """A transformer block with LayerNorm before each sublayer and biases everywhere (GPT-2/3 and ViT)."""

    norm1_scale: np.ndarray  # [D]
    norm1_bias: np.ndarray
    attention: Attention
    norm2_scale: np.ndarray
    norm2_bias: np.ndarray
    w_in: np.ndarray  # [D, F]
    b_in: np.ndarray  # [F]
    w_out: np.ndarray  # [F, D]
    b_out: np.ndarray  # [D]


def _pre_ln_block(
    x: np.ndarray, b: PreLayerNormBlock, *, num_heads: int, causal: bool, gelu: Activation, eps: float
) -> np.ndarray:
    a = layer_norm(x, b.norm1_scale, b.norm1_bias, eps)
    x = x + attention(
        a, b.attention, num_heads=num_heads, num_kv_heads=num_heads, causal=causal, rope_theta=None
    )
    m = layer_norm(x, b.norm2_scale, b.norm2_bias, eps)
    return x + gelu(m @ b.w_in + b.b_in) @ b.w_out + b.b_out


@dataclasses.dataclass(frozen=True)
class GptWeights:
    token_embedding: np.ndarray  # [V, D], also the output projection (tied)
    position_embedding: np.ndarray  # [T_max, D]
    layers: list[PreLayerNormBlock]
    final_norm_scale: np.ndarray
    final_norm_bias: np.ndarray


def gpt3_logits(tokens: np.ndarray, w: GptWeights, *, num_heads: int, eps: float) -> np.ndarray:
    """tokens [B, T] -> logits [B, T, V]: learned positions, causal pre-LN blocks, tanh GELU, tied head."""
    out = []
    for sequence in tokens:
        x = w.token_embedding[sequence] + w.position_embedding[: len(sequence)]  # [T, D]
        for layer in w.layers:
            x = _pre_ln_block(x, layer, num_heads=num_heads, causal=True, gelu=gelu_tanh, eps=eps)
        out.append(layer_norm(x, w.final_norm_scale, w.final_norm_bias, eps) @ w.token_embedding.T)
    return np.stack(out)


@dataclasses.dataclass(frozen=True)
class VitWeights:
    patch_kernel: np.ndarray  # [p, p, C, D]: a stride-p convolution kernel (rows, columns, channels, out)
    patch_bias: np.ndarray  # [D]
    class_token: np.ndarray  # [D]
    position_embedding: np.ndarray  # [1 + patches, D], class token first
    layers: list[PreLayerNormBlock]
    final_norm_scale: np.ndarray
    final_norm_bias: np.ndarray
    head: np.ndarray  # [D, classes]
    head_bias: np.ndarray  # [classes]


def vit_logits(images: np.ndarray, w: VitWeights, *, num_heads: int, eps: float) -> np.ndarray:
    """images [B, H, W, C] -> logits [B, classes] (Dosovitskiy et al. 2021, eqs. 1-4)."""
    p = w.patch_kernel.shape[0]
    out = []
    for image in images:
        rows, cols = image.shape[0] // p, image.shape[1] // p
        tokens = [w.class_token]
        for i in range(rows):  # patches in reading order: left to right, then top to bottom
            for j in range(cols):
                patch = image[i * p : (i + 1) * p, j * p : (j + 1) * p, :]  # [p, p, C]
                tokens.append(np.tensordot(patch, w.patch_kernel, axes=3) + w.patch_bias)
        x = np.stack(tokens) + w.position_embedding  # [1 + patches, D]
        for layer in w.layers:
            x = _pre_ln_block(x, layer, num_heads=num_heads, causal=False, gelu=gelu_exact, eps=eps)
        out.append(layer_norm(x[0], w.final_norm_scale, w.final_norm_bias, eps) @ w.head + w.head_bias)
    return np.stack(out)
