"""Each model's forward pass against an independent float64 NumPy reference given the same random weights.

The shapes are small and deliberately unequal (4 query heads over 2 key/value heads, sequence lengths 11,
6, 13 and 7, a 3 x 3 patch grid, 5 classes) so that a transposed or mis-grouped axis cannot go unnoticed,
and every model has two layers so that the scan over stacked layers is exercised.

    PYTHONPATH=. JAX_PLATFORMS=cpu python -m pytest tests/harness/test_reference_models.py -q
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxbench.harness.config import Precision
from jaxbench.harness.families.gpt3 import GPTConfig
from jaxbench.harness.families.llama2 import LlamaConfig
from jaxbench.harness.families.vit import ViTConfig
from jaxbench.harness.models.layers import Numerics
from tests.support.reference import numpy_models as ref

LLAMA = LlamaConfig(
    num_layers=2, d_model=48, num_heads=4, num_kv_heads=2, ffn_dim=80, vocab_size=37, seq_len=11
)
GPT = GPTConfig(num_layers=2, d_model=40, num_heads=5, ffn_dim=72, vocab_size=29, seq_len=13)
# 12 / 4 = a 3 x 3 patch grid, 4 * 4 * 3 = 48 values per patch, none equal to d_model or mlp_dim.
VIT = ViTConfig(num_layers=2, d_model=36, num_heads=3, mlp_dim=56, patch_size=4, image_size=12, num_classes=5)

# Weights are redrawn as N(0, 0.3^2), norm scales as 1 + N(0, 0.3^2), biases included, so that neither a
# zero bias nor a unit scale can hide a missing or misplaced term. At 0.3 the attention scores have a std of
# 3-4 and the largest weight of a row averages 0.6-0.8: peaked, not one-hot, so a wrong mask or head grouping
# still changes the logits by more than their scale.
WEIGHT_STD = 0.3

# float32 against float64 on CPU: each matmul (<= 80 terms) and norm rounds at ~1e-7 relative; through two
# blocks whose residual stream grows to O(10) the logits (largest |logit| 3-8 here) were seen to differ by at
# most 1.5e-6 of the largest. Tolerating 2e-5 of it leaves 13x headroom yet fails the smallest modelling
# error tried, tanh instead of exact GELU (1.3e-4; see the control test). rtol is 0: an absolute bound scaled
# to the logits, since rounding error does not shrink for logits near 0. Only valid where float32 matmuls are
# exact float32: on NVIDIA GPUs they default to TF32 (conftest keeps tests on CPU).
FP32_TOLERANCE = 2e-5
# bfloat16 keeps 8 significant bits (relative rounding 2^-9 = 2e-3); rounding every matmul input and
# activation through two blocks was seen to leave a relative RMS error of 1.2-1.9% and a worst logit off by
# 1.4-3.2% of the largest. Bounds of 15% of the largest logit and 8% RMS leave headroom for other XLA versions
# yet fail any precision path that computes another function (a dropped mask, rotation or norm term moves the
# logits by 40-150% of their scale in the fp32 checks).
BF16_TOLERANCE = 0.15
BF16_RMS_TOLERANCE = 0.08


def build_with_random_weights(config: Any, numerics: Numerics, seed: int) -> tuple[Any, dict[str, Any]]:
    """The model with every parameter redrawn; returns it and the same weights as a float64 nested dict.

    The model is built abstractly (nnx.eval_shape) since every parameter is overwritten anyway; the float64
    copy holds exactly the float32 values that the model computes with.
    """
    model = nnx.eval_shape(lambda: config.build(numerics, rngs=nnx.Rngs(0)))
    assert not jax.tree.leaves(nnx.state(model, nnx.Not(nnx.Param)))  # anything else would stay abstract
    state = nnx.state(model, nnx.Param)
    rng = np.random.default_rng(seed)

    def draw(path: tuple[Any, ...], leaf: jax.ShapeDtypeStruct) -> np.ndarray:
        noise = WEIGHT_STD * rng.standard_normal(leaf.shape)
        value = 1.0 + noise if path[-1].key == "scale" else noise
        return value.astype(np.float32).astype(np.float64)

    weights = jax.tree_util.tree_map_with_path(draw, nnx.to_pure_dict(state))
    nnx.replace_by_pure_dict(state, jax.tree.map(lambda w: jnp.asarray(w, jnp.float32), weights))
    nnx.update(model, state)
    return model, weights


def reference_attention(a: dict[str, Any], layer: int) -> ref.Attention:
    """A layer's kernels as matrices: [D, heads, H] -> [D, heads * H], head n in columns n*H:(n+1)*H."""

    def columns(name: str) -> np.ndarray:
        kernel = a[name]["kernel"][layer]  # [D, heads, H]
        return kernel.reshape(kernel.shape[0], -1)

    def bias(name: str) -> np.ndarray | None:
        return a[name]["bias"][layer].reshape(-1) if "bias" in a[name] else None

    out = a["out"]["kernel"][layer]  # [heads, H, D]
    return ref.Attention(
        wq=columns("query"), wk=columns("key"), wv=columns("value"), wo=out.reshape(-1, out.shape[-1]),
        bq=bias("query"), bk=bias("key"), bv=bias("value"), bo=bias("out"),
    )  # fmt: skip


def llama_reference(w: dict[str, Any]) -> ref.LlamaWeights:
    b = w["blocks"]
    layers = [
        ref.LlamaLayer(
            attention_norm=b["attention_norm"]["scale"][i],
            attention=reference_attention(b["attention"], i),
            mlp_norm=b["mlp_norm"]["scale"][i],
            w_gate=b["mlp"]["gate"]["kernel"][i],
            w_up=b["mlp"]["up"]["kernel"][i],
            w_down=b["mlp"]["down"]["kernel"][i],
        )
        for i in range(b["attention_norm"]["scale"].shape[0])
    ]
    return ref.LlamaWeights(w["embedding"], layers, w["final_norm"]["scale"], w["lm_head"]["kernel"])


def pre_ln_blocks(b: dict[str, Any]) -> list[ref.PreLayerNormBlock]:
    return [
        ref.PreLayerNormBlock(
            norm1_scale=b["attention_norm"]["scale"][i],
            norm1_bias=b["attention_norm"]["bias"][i],
            attention=reference_attention(b["attention"], i),
            norm2_scale=b["mlp_norm"]["scale"][i],
            norm2_bias=b["mlp_norm"]["bias"][i],
            w_in=b["mlp"]["up"]["kernel"][i],
            b_in=b["mlp"]["up"]["bias"][i],
            w_out=b["mlp"]["down"]["kernel"][i],
            b_out=b["mlp"]["down"]["bias"][i],
        )
        for i in range(b["attention_norm"]["scale"].shape[0])
    ]


def gpt_reference(w: dict[str, Any]) -> ref.GptWeights:
    return ref.GptWeights(
        token_embedding=w["token_embedding"],
        position_embedding=w["position_embedding"],
        layers=pre_ln_blocks(w["blocks"]),
        final_norm_scale=w["final_norm"]["scale"],
        final_norm_bias=w["final_norm"]["bias"],
    )


def vit_reference(w: dict[str, Any], cfg: ViTConfig) -> ref.VitWeights:
    p = cfg.patch_size
    return ref.VitWeights(
        # vit.py flattens each patch in (row, column, channel) order, so its [p*p*C, D] kernel is the
        # [p, p, C, D] convolution kernel read in C order.
        patch_kernel=w["patch_embedding"]["kernel"].reshape(p, p, cfg.channels, cfg.d_model),
        patch_bias=w["patch_embedding"]["bias"],
        class_token=w["class_token"].reshape(cfg.d_model),
        position_embedding=w["position_embedding"],
        layers=pre_ln_blocks(w["blocks"]),
        final_norm_scale=w["final_norm"]["scale"],
        final_norm_bias=w["final_norm"]["bias"],
        head=w["head"]["kernel"],
        head_bias=w["head"]["bias"],
    )


def llama_reference_logits(cfg: Any, w: dict[str, Any], tokens: np.ndarray) -> np.ndarray:
    return ref.llama2_logits(
        tokens, llama_reference(w), num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads, eps=cfg.norm_eps,
        rope_theta=cfg.rope_theta,
    )  # fmt: skip


def gpt_reference_logits(cfg: Any, w: dict[str, Any], tokens: np.ndarray) -> np.ndarray:
    return ref.gpt3_logits(tokens, gpt_reference(w), num_heads=cfg.num_heads, eps=cfg.norm_eps)


def vit_reference_logits(cfg: Any, w: dict[str, Any], images: np.ndarray) -> np.ndarray:
    return ref.vit_logits(images, vit_reference(w, cfg), num_heads=cfg.num_heads, eps=cfg.norm_eps)


def token_batch(batch: int) -> Callable[[Any, np.random.Generator, int | None], np.ndarray]:
    def make(cfg: Any, rng: np.random.Generator, length: int | None) -> np.ndarray:
        """Token ids [batch, length], the config's full seq_len unless a length is given."""
        return rng.integers(0, cfg.vocab_size, (batch, length or cfg.seq_len)).astype(np.int32)

    return make


def image_batch(cfg: Any, rng: np.random.Generator, length: int | None) -> np.ndarray:
    del length  # a ViT's sequence length follows from image_size and patch_size
    return rng.standard_normal((3, cfg.image_size, cfg.image_size, cfg.channels)).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Family:
    config: LlamaConfig | GPTConfig | ViTConfig
    make_inputs: Callable[[Any, np.random.Generator, int | None], np.ndarray]
    reference: Callable[[Any, dict[str, Any], np.ndarray], np.ndarray]


FAMILIES = {
    "llama2": Family(LLAMA, token_batch(3), llama_reference_logits),
    "gpt3": Family(GPT, token_batch(2), gpt_reference_logits),
    "vit": Family(VIT, image_batch, vit_reference_logits),
}


def compare(
    name: str, numerics: Numerics, length: int | None = None, **overrides: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(model logits, reference logits) for one family, its config updated by `overrides`."""
    family = FAMILIES[name]
    cfg = family.config.model_copy(update=overrides)
    model, weights = build_with_random_weights(cfg, numerics, seed=1)
    inputs = family.make_inputs(cfg, np.random.default_rng(2), length)
    logits = np.asarray(model(jnp.asarray(inputs)))
    return logits, family.reference(cfg, weights, inputs)


def assert_fp32_close(logits: np.ndarray, expected: np.ndarray) -> None:
    assert logits.shape == expected.shape
    np.testing.assert_allclose(logits, expected, rtol=0, atol=FP32_TOLERANCE * np.abs(expected).max())


@pytest.mark.parametrize(
    ("name", "length"), [("llama2", None), ("llama2", 6), ("gpt3", None), ("gpt3", 7), ("vit", None)]
)
def test_fp32_forward_matches_reference(name: str, length: int | None) -> None:
    """At full length, and shorter: positions (rotary angles, rows of the learned table) must start at 0."""
    assert_fp32_close(*compare(name, Numerics(), length))


@pytest.mark.parametrize("name", FAMILIES)
def test_norm_epsilon_is_the_configured_one_inside_the_square_root(name: str) -> None:
    """At the recipes' eps (1e-5, 1e-6) eps outside the square root, or a norm ignoring norm_eps, moves the
    logits by < 1e-4 of their scale, too little to see; at eps = 0.1 it moves them by 5-40%."""
    assert_fp32_close(*compare(name, Numerics(), norm_eps=0.1))


@pytest.mark.parametrize("name", FAMILIES)
def test_bf16_forward_matches_reference(name: str) -> None:
    logits, expected = compare(name, Numerics(precision=Precision.BF16))
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits, expected, rtol=0, atol=BF16_TOLERANCE * np.abs(expected).max())
    relative_rms = np.sqrt(np.mean((logits - expected) ** 2) / np.mean(expected**2))
    assert relative_rms < BF16_RMS_TOLERANCE


def test_fp32_tolerance_tells_tanh_from_exact_gelu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: the smallest modelling error considered, the other GELU in GPT, must fail the fp32 check."""
    model, weights = build_with_random_weights(GPT, Numerics(), seed=1)
    tokens = token_batch(2)(GPT, np.random.default_rng(2), None)
    logits = np.asarray(model(jnp.asarray(tokens)))
    assert_fp32_close(logits, gpt_reference_logits(GPT, weights, tokens))
    monkeypatch.setattr(ref, "gelu_tanh", ref.gelu_exact)
    with pytest.raises(AssertionError):
        assert_fp32_close(logits, gpt_reference_logits(GPT, weights, tokens))
