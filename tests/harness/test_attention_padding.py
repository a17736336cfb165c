"""Odd sequence lengths under cuDNN attention: padded by one masked position (harness/models/layers.py).

cuDNN itself needs a GPU; the padding arithmetic is checked on the CPU through jax's XLA implementation,
and the routing by recording what reaches jax.nn.dot_product_attention.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbench.harness.config import AttentionImpl, Precision
from jaxbench.harness.models import layers


def qkv(length: int, heads: int = 4, kv_heads: int = 2) -> tuple[jax.Array, jax.Array, jax.Array]:
    keys = jax.random.split(jax.random.key(7), 3)
    q = jax.random.normal(keys[0], (2, length, heads, 16))
    k = jax.random.normal(keys[1], (2, length, kv_heads, 16))
    v = jax.random.normal(keys[2], (2, length, kv_heads, 16))
    return q, k, v


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True])
def test_padded_attention_equals_attention_in_values_and_gradients(causal: bool) -> None:
    q, k, v = qkv(length=197)

    def plain(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation="xla")

    def padded(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return layers._even_length_attention(q, k, v, causal=causal, implementation="xla")

    np.testing.assert_allclose(padded(q, k, v), plain(q, k, v), rtol=1e-5, atol=1e-6)
    weights = jax.random.normal(jax.random.key(8), q.shape)
    grads = [
        jax.grad(lambda q, k, v, f=f: jnp.sum(f(q, k, v) * weights), argnums=(0, 1, 2))(q, k, v)
        for f in (padded, plain)
    ]
    for got, want in zip(*grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("impl", "length", "reaches"),
    [
        (AttentionImpl.CUDNN, 197, 198),  # ViT-B/16: 196 patches and the class token
        (AttentionImpl.CUDNN, 256, 256),
        (AttentionImpl.XLA, 197, 197),
    ],
)
def test_only_odd_lengths_under_cudnn_are_padded(
    monkeypatch: pytest.MonkeyPatch, impl: AttentionImpl, length: int, reaches: int
) -> None:
    seen: list[dict[str, Any]] = []

    def record(q: jax.Array, k: jax.Array, v: jax.Array, **kwargs: Any) -> jax.Array:
        seen.append({"length": q.shape[1], "kv_lengths": kwargs.get("key_value_seq_lengths")})
        return q

    monkeypatch.setattr(jax.nn, "dot_product_attention", record)
    q, k, v = qkv(length, heads=2, kv_heads=2)
    out = layers.attention(q, k, v, causal=False, numerics=layers.Numerics(Precision.BF16, impl))
    assert out.shape == q.shape
    assert seen[0]["length"] == reaches
    if reaches != length:  # the appended key is masked out
        assert seen[0]["kv_lengths"].tolist() == [length, length]
    else:
        assert seen[0]["kv_lengths"] is None
