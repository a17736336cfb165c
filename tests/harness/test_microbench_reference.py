"""The float64 attention reference of harness/microbench/suite/reference.py, and the checks built on it.

A microbenchmark is only as good as its check: a wrong reference would fail a correct kernel, and a check
without teeth would time a wrong one. So the reference is compared with JAX twice, with
`jax.nn.dot_product_attention` in float32 (the semantics the attention suite times: layout, grouping,
masking, scale) and with plain jax.numpy in float64 (the arithmetic, to float64 precision), and
`check_close` is shown to reject the plausible wrong kernels: the wrong mask, head grouping or scale, NaNs.
The sampled checks: tests/harness/test_microbench_sampled.py; the norms: test_microbench_norms.py.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbench.harness.microbench.suite import reference
from jaxbench.harness.microbench.work import ReferenceMismatch, check_close, relative_error
from tests.harness.microbench_operands import (
    ATTENTION_LAYOUTS,
    FLOAT32_AGREEMENT,
    FLOAT64_AGREEMENT,
    attention_operands,
    value_and_vjp,
)

# Compiled once per set of static options: op-by-op it would compile each primitive on every call.
_jax_nn_attention = jax.jit(
    jax.nn.dot_product_attention, static_argnames=("is_causal", "scale", "implementation")
)


def _jax_attention_float64(q: jax.Array, k: jax.Array, v: jax.Array, causal: bool) -> jax.Array:
    """Attention written out in jax.numpy, for float64 autodiff; jax.nn.dot_product_attention cannot
    serve, as it always takes the softmax in float32."""
    group = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
    logits = jnp.einsum("btnh,bsnh->bnts", q, k) / jnp.sqrt(q.shape[3])
    if causal:
        logits = jnp.where(jnp.tri(q.shape[1], k.shape[1], dtype=bool), logits, -jnp.inf)
    return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(logits, axis=-1), v)


@pytest.mark.parametrize("layout", ATTENTION_LAYOUTS.values(), ids=ATTENTION_LAYOUTS.keys())
def test_attention_matches_jax_nn(layout: tuple[Any, ...]) -> None:
    *shape, causal = layout
    q, k, v, _ = attention_operands(*shape)
    got = _jax_nn_attention(q, k, v, is_causal=causal, implementation="xla")
    assert relative_error(got, reference.attention(q, k, v, causal=causal)) < FLOAT32_AGREEMENT


@pytest.mark.parametrize("layout", ATTENTION_LAYOUTS.values(), ids=ATTENTION_LAYOUTS.keys())
def test_attention_grad_matches_jax_nn(layout: tuple[Any, ...]) -> None:
    *shape, causal = layout
    q, k, v, dout = attention_operands(*shape)

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal)

    _, *got = value_and_vjp(attend, (q, k, v), dout)
    want = reference.attention_grad(q, k, v, dout, causal=causal)
    for name, actual, expected in zip(("dq", "dk", "dv"), got, want, strict=True):
        assert relative_error(actual, expected) < FLOAT32_AGREEMENT, name


@pytest.mark.parametrize("layout", ATTENTION_LAYOUTS.values(), ids=ATTENTION_LAYOUTS.keys())
def test_attention_and_grad_match_jax_in_float64(layout: tuple[Any, ...]) -> None:
    *shape, causal = layout
    q, k, v, dout = (x.astype(np.float64) for x in attention_operands(*shape))
    with jax.enable_x64(True):
        got = value_and_vjp(lambda q, k, v: _jax_attention_float64(q, k, v, causal), (q, k, v), dout)
    want = (
        reference.attention(q, k, v, causal=causal),
        *reference.attention_grad(q, k, v, dout, causal=causal),
    )
    for name, actual, expected in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        assert relative_error(actual, expected) < FLOAT64_AGREEMENT, name


def test_grouped_query_attention_shares_each_kv_head_with_consecutive_query_heads() -> None:
    # Independent of jax: GQA is MHA with each kv head repeated for its group of consecutive query heads.
    q, k, v, dout = attention_operands(2, 8, 8, 6, 2, 4)
    k_repeated, v_repeated = np.repeat(k, 3, axis=2), np.repeat(v, 3, axis=2)
    np.testing.assert_allclose(
        reference.attention(q, k, v, causal=True), reference.attention(q, k_repeated, v_repeated, causal=True)
    )
    dq, dk, dv = reference.attention_grad(q, k, v, dout, causal=True)
    dq_mha, dk_mha, dv_mha = reference.attention_grad(q, k_repeated, v_repeated, dout, causal=True)
    np.testing.assert_allclose(dq, dq_mha)
    np.testing.assert_allclose(dk, dk_mha.reshape(2, 8, 2, 3, 4).sum(axis=3))
    np.testing.assert_allclose(dv, dv_mha.reshape(2, 8, 2, 3, 4).sum(axis=3))


def test_causal_attention_of_the_first_query_is_the_first_value() -> None:
    q, k, v, _ = attention_operands(2, 5, 5, 4, 2, 8)
    out = reference.attention(q, k, v, causal=True)
    np.testing.assert_allclose(out[:, 0], np.repeat(v[:, 0], 2, axis=1), rtol=1e-12)


def test_attention_scale_overrides_one_over_sqrt_head_dim() -> None:
    q, k, v, dout = attention_operands(1, 8, 8, 2, 2, 16)
    got = _jax_nn_attention(q, k, v, scale=0.7)
    assert relative_error(got, reference.attention(q, k, v, causal=False, scale=0.7)) < FLOAT32_AGREEMENT
    _, *grads = value_and_vjp(
        lambda q, k, v: jax.nn.dot_product_attention(q, k, v, scale=0.7), (q, k, v), dout
    )
    want = reference.attention_grad(q, k, v, dout, causal=False, scale=0.7)
    for actual, expected in zip(grads, want, strict=True):
        assert relative_error(actual, expected) < FLOAT32_AGREEMENT


def test_attention_refuses_shapes_jax_refuses() -> None:
    q, k, v, _ = attention_operands(1, 4, 4, 6, 4, 8)  # 6 query heads cannot share 4 kv heads
    with pytest.raises(ValueError, match="multiple"):
        reference.attention(q, k, v, causal=False)


def test_check_accepts_a_correct_bfloat16_attention() -> None:
    # The other side of the rejections below: bfloat16 rounding alone stays within the tolerance.
    q, k, v, _ = (x.astype(jnp.bfloat16) for x in attention_operands(2, 64, 64, 8, 2, 32))
    got = _jax_nn_attention(q, k, v, is_causal=True)
    check_close("bf16 attention", got, reference.attention(q, k, v, causal=True), "bfloat16")


def test_check_rejects_non_causal_attention_against_the_causal_reference() -> None:
    q, k, v, _ = attention_operands(2, 32, 32, 4, 4, 16)
    got = _jax_nn_attention(q, k, v, is_causal=False)
    with pytest.raises(ReferenceMismatch, match="relative error"):
        check_close("attention", got, reference.attention(q, k, v, causal=True), "bfloat16")


def test_check_rejects_the_wrong_kv_head_for_a_query_head() -> None:
    # h % kv_heads instead of h // group: the interleaved grouping some hand-written kernels get wrong.
    q, k, v, _ = attention_operands(2, 16, 16, 8, 2, 16)
    interleaved = reference.attention(q, np.tile(k, (1, 1, 4, 1)), np.tile(v, (1, 1, 4, 1)), causal=False)
    with pytest.raises(ReferenceMismatch):
        check_close("attention", interleaved, reference.attention(q, k, v, causal=False), "bfloat16")


def test_check_rejects_attention_without_the_logit_scale() -> None:
    q, k, v, _ = attention_operands(1, 16, 16, 4, 4, 64)
    unscaled = _jax_nn_attention(q, k, v, scale=1.0)
    with pytest.raises(ReferenceMismatch):
        check_close("attention", unscaled, reference.attention(q, k, v, causal=False), "bfloat16")


def test_check_rejects_gradients_of_the_wrong_mask() -> None:
    q, k, v, dout = attention_operands(1, 16, 16, 4, 4, 16)
    non_causal = reference.attention_grad(q, k, v, dout, causal=False)
    causal = reference.attention_grad(q, k, v, dout, causal=True)
    for name, actual, expected in zip(("dq", "dk", "dv"), non_causal, causal, strict=True):
        with pytest.raises(ReferenceMismatch):
            check_close(f"attention {name}", actual, expected, "bfloat16")


def test_check_rejects_nan_and_inf() -> None:
    q, k, v, _ = attention_operands(1, 8, 8, 2, 2, 8)
    expected = reference.attention(q, k, v, causal=True)
    for poison in (np.nan, np.inf):
        bad = expected.copy()
        bad[0, 3, 1, 2] = poison
        with pytest.raises(ReferenceMismatch):
            check_close("attention", bad, expected, "bfloat16")


def test_check_rejects_a_wrong_shape() -> None:
    q, k, v, _ = attention_operands(1, 8, 8, 2, 2, 8)
    expected = reference.attention(q, k, v, causal=True)
    with pytest.raises(ReferenceMismatch, match="shape"):
        check_close("attention", expected.transpose(0, 2, 1, 3), expected, "float32")
