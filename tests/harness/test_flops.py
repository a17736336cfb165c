"""The FLOPs convention checked against independent estimates: published formulas and figures, the parameter
shapes of the real models, and XLA's own cost analysis."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from jaxbench.harness import recipes
from jaxbench.harness.families.vit import ViTConfig
from jaxbench.harness.measure import flops
from jaxbench.harness.models.layers import Numerics


def test_megatron_formula_for_gpt3_175b() -> None:
    # Narayanan et al. 2021 (Megatron-LM, sec. 5.1): training FLOPs per token without recomputation are
    # 72 l h^2 (1 + s/(6h) + V/(12 l h)), counting causal attention in full. Ours counts it as half.
    model = recipes.load("gpt3", "175b").model
    layers, h, s, v = 96, 12288, 2048, 50304
    megatron = 72 * layers * h**2 * (1 + s / (6 * h) + v / (12 * layers * h))
    full_attention_half = 6 * layers * s * h  # the half that the causal convention leaves out
    assert model.training_flops_per_unit() == pytest.approx(megatron - full_attention_half, rel=1e-12)


def test_palm_formula_for_llama2_7b() -> None:
    # Chowdhery et al. 2022 (PaLM, appendix B): 6N + 12 L H Q T per token, N = non-embedding parameters.
    # With untied weights the output projection is a matmul touched per token, so N includes it here.
    model = recipes.load("llama2", "7b").model
    layers, heads, head_dim, seq, width, vocab = 32, 32, 128, 4096, 4096, 32000
    n_matmul = model.param_count() - vocab * width - (2 * layers + 1) * width  # minus lookup table and norms
    palm_causal_half = 6 * n_matmul + 12 * layers * heads * head_dim * seq / 2
    assert model.training_flops_per_unit() == pytest.approx(palm_causal_half, rel=1e-12)


@pytest.mark.parametrize(("size", "gmacs"), [("b16", 17.6), ("l16", 61.6), ("h14", 167.4)])
def test_vit_forward_macs_match_published_figures(size: str, gmacs: float) -> None:
    # timm's model table (fvcore counts): forward multiply-accumulates per 224 px image. Training = 3 x
    # forward and 2 FLOPs per MAC.
    model = recipes.load("vit", size).model
    assert model.training_flops_per_unit() / 6 / 1e9 == pytest.approx(gmacs, rel=0.005)


def kernel_params(model: nnx.Module) -> int:
    """Matmul weights of a built model: every `kernel` (embedding tables are lookups, not counted)."""
    total = 0
    for path, variable in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        if path[-1] == "kernel":
            total += int(np.prod(variable.shape))
    return total


@pytest.mark.parametrize("family", ["llama2", "gpt3"])
def test_language_model_flops_from_the_built_model(family: str) -> None:
    cfg = recipes.load(family, "tiny").model
    model = nnx.eval_shape(lambda: cfg.build(Numerics(), rngs=nnx.Rngs(0)))
    matmul = kernel_params(model)
    if family == "gpt3":
        matmul += cfg.vocab_size * cfg.d_model  # tied: the token table is also the output projection
    attention = 6 * cfg.num_layers * cfg.seq_len * cfg.num_heads * cfg.head_dim  # 12 L T d, causal half
    assert cfg.training_flops_per_unit() == 6 * matmul + attention


def test_vit_flops_from_the_built_model() -> None:
    cfg = recipes.load("vit", "tiny").model
    model = nnx.eval_shape(lambda: cfg.build(Numerics(), rngs=nnx.Rngs(0)))
    tokens = cfg.num_patches + 1
    per_layer = (
        kernel_params(model) - model.patch_embedding.kernel.size - model.head.kernel.size
    ) / cfg.num_layers
    matmul_per_image = (
        cfg.num_patches * model.patch_embedding.kernel.size  # every patch
        + tokens * cfg.num_layers * per_layer  # every token through every block
        + model.head.kernel.size  # the class token only
    )
    attention = 12 * cfg.num_layers * tokens**2 * cfg.d_model
    assert cfg.training_flops_per_unit() == pytest.approx(6 * matmul_per_image + attention, rel=1e-12)


@pytest.mark.slow
def test_xla_cost_analysis_agrees_for_a_matmul_dominated_vit() -> None:
    # XLA counts every op, so it exceeds our matmul-only count by the elementwise work (norms, GELU,
    # softmax): a few percent at this width. A wrong factor (e.g. forgetting the backward pass or the
    # attention matmuls) would be off by 30% or more. One layer: XLA counts a while loop (the scan over
    # layers) body once, whatever its trip count.
    cfg = ViTConfig(
        num_layers=1, d_model=512, num_heads=8, mlp_dim=2048, patch_size=8, image_size=64, num_classes=16
    )
    model = cfg.build(Numerics(), rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model)
    batch = 4
    images = jnp.zeros((batch, 64, 64, 3))
    labels = jnp.zeros((batch,), jnp.int32)

    def loss(params: nnx.State) -> jax.Array:
        logits = nnx.merge(graphdef, params)(images)  # type: ignore[operator]
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1).mean()

    compiled = jax.jit(jax.grad(loss)).lower(params).compile()
    cost = compiled.cost_analysis()
    xla_flops = (cost[0] if isinstance(cost, list) else cost)["flops"]
    ours = batch * cfg.training_flops_per_unit()
    assert 0.97 * ours <= xla_flops <= 1.15 * ours, xla_flops / ours


def test_attention_is_half_when_causal() -> None:
    shape = flops.TransformerShape(
        num_layers=2, d_model=512, num_heads=8, num_kv_heads=2, head_dim=64, ffn_dim=1024, ffn_matrices=3
    )
    full = shape.attention_flops_per_query(1024, causal=False)
    assert full == 12 * 1024 * 8 * 64 * 2  # grouped-query attention still scores every query head
    assert shape.attention_flops_per_query(1024, causal=True) == full / 2


def test_sequence_length_override_changes_only_attention() -> None:
    model = recipes.load("llama2", "7b").model
    longer = model.with_sequence_length(8192)
    extra = longer.training_flops_per_unit() - model.training_flops_per_unit()
    assert extra == 6 * 32 * (8192 - 4096) * 4096
