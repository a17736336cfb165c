"""The float64 references of harness/microbench/suite/reference.py, and the checks built on them.

A microbenchmark is only as good as its check: a wrong reference would fail a correct kernel, and a check
without teeth would time a wrong one. So the references are compared with JAX twice, with
`jax.nn.dot_product_attention` in float32 (the semantics the attention suite times: layout, grouping,
masking, scale) and with plain jax.numpy in float64 (the arithmetic, to float64 precision), and
`check_close` is shown to reject the plausible wrong kernels: the wrong mask, head grouping, scale or eps,
a forgotten parameter or term, NaNs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.typing import ArrayLike

from harness.microbench.suite import reference
from harness.microbench.suite import test_attention as attention_suite
from harness.microbench.work import ReferenceMismatch, check_close, relative_error

FLOAT32_AGREEMENT = 1e-5  # float32 kernels against the float64 reference: a few float32 roundings
FLOAT64_AGREEMENT = 1e-12

# (batch, q_len, kv_len, heads, kv_heads, head_dim, causal)
ATTENTION_LAYOUTS = {
    "multi-head": (2, 16, 16, 4, 4, 8, False),
    "multi-head causal": (2, 16, 16, 4, 4, 8, True),
    "grouped-query": (2, 16, 16, 8, 2, 8, False),
    "grouped-query causal": (2, 16, 16, 8, 2, 8, True),
    "multi-query causal": (1, 12, 12, 3, 1, 16, True),
    "cross lengths": (2, 6, 10, 4, 2, 8, False),
    # jax aligns the causal mask at the top left when the lengths differ: query i sees keys 0..i
    "causal, more keys": (1, 6, 10, 4, 2, 8, True),
}


def _attention_operands(
    batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int, seed: int = 0
) -> tuple[np.ndarray, ...]:
    """q, k, v and a cotangent for the output, float32."""
    rng = np.random.default_rng(seed)
    query_shape, kv_shape = (batch, q_len, heads, head_dim), (batch, kv_len, kv_heads, head_dim)
    return tuple(
        rng.standard_normal(shape, dtype=np.float32)
        for shape in (query_shape, kv_shape, kv_shape, query_shape)
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


def _value_and_vjp(fn: Callable[..., jax.Array], primals: tuple[Any, ...], cotangent: Any) -> tuple[Any, ...]:
    """fn(*primals) and its gradients against `cotangent`, as one compiled program: op-by-op autodiff
    would compile every primitive separately and take seconds per test."""

    def run(primals: tuple[Any, ...], cotangent: Any) -> tuple[Any, ...]:
        out, vjp = jax.vjp(fn, *primals)
        return (out, *vjp(cotangent))

    return tuple(jax.jit(run)(primals, cotangent))


@pytest.mark.parametrize("layout", ATTENTION_LAYOUTS.values(), ids=ATTENTION_LAYOUTS.keys())
def test_attention_matches_jax_nn(layout: tuple[Any, ...]) -> None:
    *shape, causal = layout
    q, k, v, _ = _attention_operands(*shape)
    got = _jax_nn_attention(q, k, v, is_causal=causal, implementation="xla")
    assert relative_error(got, reference.attention(q, k, v, causal=causal)) < FLOAT32_AGREEMENT


@pytest.mark.parametrize("layout", ATTENTION_LAYOUTS.values(), ids=ATTENTION_LAYOUTS.keys())
def test_attention_grad_matches_jax_nn(layout: tuple[Any, ...]) -> None:
    *shape, causal = layout
    q, k, v, dout = _attention_operands(*shape)

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal)

    _, *got = _value_and_vjp(attend, (q, k, v), dout)
    want = reference.attention_grad(q, k, v, dout, causal=causal)
    for name, actual, expected in zip(("dq", "dk", "dv"), got, want, strict=True):
        assert relative_error(actual, expected) < FLOAT32_AGREEMENT, name


@pytest.mark.parametrize("layout", ATTENTION_LAYOUTS.values(), ids=ATTENTION_LAYOUTS.keys())
def test_attention_and_grad_match_jax_in_float64(layout: tuple[Any, ...]) -> None:
    *shape, causal = layout
    q, k, v, dout = (x.astype(np.float64) for x in _attention_operands(*shape))
    with jax.enable_x64(True):
        got = _value_and_vjp(lambda q, k, v: _jax_attention_float64(q, k, v, causal), (q, k, v), dout)
    want = (
        reference.attention(q, k, v, causal=causal),
        *reference.attention_grad(q, k, v, dout, causal=causal),
    )
    for name, actual, expected in zip(("out", "dq", "dk", "dv"), got, want, strict=True):
        assert relative_error(actual, expected) < FLOAT64_AGREEMENT, name


def test_grouped_query_attention_shares_each_kv_head_with_consecutive_query_heads() -> None:
    # Independent of jax: GQA is MHA with each kv head repeated for its group of consecutive query heads.
    q, k, v, dout = _attention_operands(2, 8, 8, 6, 2, 4)
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
    q, k, v, _ = _attention_operands(2, 5, 5, 4, 2, 8)
    out = reference.attention(q, k, v, causal=True)
    np.testing.assert_allclose(out[:, 0], np.repeat(v[:, 0], 2, axis=1), rtol=1e-12)


def test_attention_scale_overrides_one_over_sqrt_head_dim() -> None:
    q, k, v, dout = _attention_operands(1, 8, 8, 2, 2, 16)
    got = _jax_nn_attention(q, k, v, scale=0.7)
    assert relative_error(got, reference.attention(q, k, v, causal=False, scale=0.7)) < FLOAT32_AGREEMENT
    _, *grads = _value_and_vjp(
        lambda q, k, v: jax.nn.dot_product_attention(q, k, v, scale=0.7), (q, k, v), dout
    )
    want = reference.attention_grad(q, k, v, dout, causal=False, scale=0.7)
    for actual, expected in zip(grads, want, strict=True):
        assert relative_error(actual, expected) < FLOAT32_AGREEMENT


def test_attention_refuses_shapes_jax_refuses() -> None:
    q, k, v, _ = _attention_operands(1, 4, 4, 6, 4, 8)  # 6 query heads cannot share 4 kv heads
    with pytest.raises(ValueError, match="multiple"):
        reference.attention(q, k, v, causal=False)


def test_check_accepts_a_correct_bfloat16_attention() -> None:
    # The other side of the rejections below: bfloat16 rounding alone stays within the tolerance.
    q, k, v, _ = (x.astype(jnp.bfloat16) for x in _attention_operands(2, 64, 64, 8, 2, 32))
    got = _jax_nn_attention(q, k, v, is_causal=True)
    check_close("bf16 attention", got, reference.attention(q, k, v, causal=True), "bfloat16")


def test_check_rejects_non_causal_attention_against_the_causal_reference() -> None:
    q, k, v, _ = _attention_operands(2, 32, 32, 4, 4, 16)
    got = _jax_nn_attention(q, k, v, is_causal=False)
    with pytest.raises(ReferenceMismatch, match="relative error"):
        check_close("attention", got, reference.attention(q, k, v, causal=True), "bfloat16")


def test_check_rejects_the_wrong_kv_head_for_a_query_head() -> None:
    # h % kv_heads instead of h // group: the interleaved grouping some hand-written kernels get wrong.
    q, k, v, _ = _attention_operands(2, 16, 16, 8, 2, 16)
    interleaved = reference.attention(q, np.tile(k, (1, 1, 4, 1)), np.tile(v, (1, 1, 4, 1)), causal=False)
    with pytest.raises(ReferenceMismatch):
        check_close("attention", interleaved, reference.attention(q, k, v, causal=False), "bfloat16")


def test_check_rejects_attention_without_the_logit_scale() -> None:
    q, k, v, _ = _attention_operands(1, 16, 16, 4, 4, 64)
    unscaled = _jax_nn_attention(q, k, v, scale=1.0)
    with pytest.raises(ReferenceMismatch):
        check_close("attention", unscaled, reference.attention(q, k, v, causal=False), "bfloat16")


def test_check_rejects_gradients_of_the_wrong_mask() -> None:
    q, k, v, dout = _attention_operands(1, 16, 16, 4, 4, 16)
    non_causal = reference.attention_grad(q, k, v, dout, causal=False)
    causal = reference.attention_grad(q, k, v, dout, causal=True)
    for name, actual, expected in zip(("dq", "dk", "dv"), non_causal, causal, strict=True):
        with pytest.raises(ReferenceMismatch):
            check_close(f"attention {name}", actual, expected, "bfloat16")


def test_check_rejects_nan_and_inf() -> None:
    q, k, v, _ = _attention_operands(1, 8, 8, 2, 2, 8)
    expected = reference.attention(q, k, v, causal=True)
    for poison in (np.nan, np.inf):
        bad = expected.copy()
        bad[0, 3, 1, 2] = poison
        with pytest.raises(ReferenceMismatch):
            check_close("attention", bad, expected, "bfloat16")


def test_check_rejects_a_wrong_shape() -> None:
    q, k, v, _ = _attention_operands(1, 8, 8, 2, 2, 8)
    expected = reference.attention(q, k, v, causal=True)
    with pytest.raises(ReferenceMismatch, match="shape"):
        check_close("attention", expected.transpose(0, 2, 1, 3), expected, "float32")


def test_attention_suite_checks_the_first_and_last_group_of_a_large_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At full sizes the suite checks two (batch, kv head) groups only: they must be the right slices, and
    a wrong result in either must fail."""
    monkeypatch.setattr(attention_suite, "CHECK_ALL_UP_TO", 0)
    attention_suite._expected.cache_clear()
    problem = attention_suite.Problem(
        batch=3, seq=16, heads=6, kv_heads=3, head_dim=8, dtype="float32", causal=True
    )
    assert problem.checked_groups() == [(0, 0), (2, 2)]
    q, k, v, dout = problem.operands()
    out = reference.attention(q, k, v, causal=True)
    grads = reference.attention_grad(q, k, v, dout, causal=True)
    attention_suite._check(problem, False, out, "attention")
    attention_suite._check(problem, True, grads, "attention")
    for b, head in ((0, 0), (0, 1), (2, 4), (2, 5)):  # both query heads of both checked groups
        wrong = out.copy()
        wrong[b, :, head] *= 1.1
        with pytest.raises(ReferenceMismatch):
            attention_suite._check(problem, False, wrong, "attention")
    for index in (1, 2):  # dk and dv of both checked groups
        for b, kv_head in problem.checked_groups():
            wrong_grads = [g.copy() for g in grads]
            wrong_grads[index][b, :, kv_head] *= 1.1
            with pytest.raises(ReferenceMismatch, match="d[kv]"):
                attention_suite._check(problem, True, tuple(wrong_grads), "attention")
    attention_suite._expected.cache_clear()


def test_attention_suite_checks_every_group_of_a_small_problem() -> None:
    problem = attention_suite.Problem(
        batch=2, seq=16, heads=4, kv_heads=2, head_dim=8, dtype="float32", causal=False
    )
    assert problem.checked_groups() == [(0, 0), (0, 1), (1, 0), (1, 1)]


# Norms. The eps of the tests is large against the inputs' variance where it has to be seen: with unit
# variance an eps of 1e-5 moves the output by about 5e-6, far inside any tolerance.

EPS = 1e-5


def _norm_operands(shape: tuple[int, ...], seed: int = 0) -> tuple[np.ndarray, ...]:
    """x (mean 0.5, so that centring matters), scale, bias and dy, float64."""
    rng = np.random.default_rng(seed)
    features = shape[-1]
    return (
        rng.standard_normal(shape) + 0.5,
        rng.uniform(0.5, 1.5, features),
        0.5 * rng.standard_normal(features),
        rng.standard_normal(shape),
    )


def _jax_layer_norm(x: ArrayLike, scale: ArrayLike, bias: ArrayLike, eps: float) -> jax.Array:
    centred = jnp.asarray(x) - jnp.mean(x, axis=-1, keepdims=True)
    return centred / jnp.sqrt(jnp.mean(centred**2, axis=-1, keepdims=True) + eps) * scale + bias


def _jax_rms_norm(x: ArrayLike, scale: ArrayLike, eps: float) -> jax.Array:
    return jnp.asarray(x) / jnp.sqrt(jnp.mean(jnp.square(x), axis=-1, keepdims=True) + eps) * scale


NORM_SHAPES = [(7, 16), (3, 5, 32)]  # the parameters' gradients sum over every leading axis


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("eps", [1e-5, 0.3])
def test_layer_norm_and_grad_match_jax_in_float64(shape: tuple[int, ...], eps: float) -> None:
    x, scale, bias, dy = _norm_operands(shape)
    with jax.enable_x64(True):
        got = _value_and_vjp(lambda x, s, b: _jax_layer_norm(x, s, b, eps), (x, scale, bias), dy)
    want = (reference.layer_norm(x, scale, bias, eps), *reference.layer_norm_grad(x, scale, bias, eps, dy))
    for name, actual, expected in zip(("y", "dx", "dscale", "dbias"), got, want, strict=True):
        assert relative_error(actual, expected) < FLOAT64_AGREEMENT, name


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("eps", [1e-5, 0.3])
def test_rms_norm_and_grad_match_jax_in_float64(shape: tuple[int, ...], eps: float) -> None:
    x, scale, _, dy = _norm_operands(shape)
    with jax.enable_x64(True):
        got = _value_and_vjp(lambda x, s: _jax_rms_norm(x, s, eps), (x, scale), dy)
    want = (reference.rms_norm(x, scale, eps), *reference.rms_norm_grad(x, scale, eps, dy))
    for name, actual, expected in zip(("y", "dx", "dscale"), got, want, strict=True):
        assert relative_error(actual, expected) < FLOAT64_AGREEMENT, name


def test_norm_grads_match_jax_in_float32() -> None:
    x, scale, bias, dy = (np.asarray(a, np.float32) for a in _norm_operands((64, 128)))
    _, *got = _value_and_vjp(lambda x, s, b: _jax_layer_norm(x, s, b, EPS), (x, scale, bias), dy)
    for actual, expected in zip(got, reference.layer_norm_grad(x, scale, bias, EPS, dy), strict=True):
        assert relative_error(actual, expected) < FLOAT32_AGREEMENT
    _, *got = _value_and_vjp(lambda x, s: _jax_rms_norm(x, s, EPS), (x, scale), dy)
    for actual, expected in zip(got, reference.rms_norm_grad(x, scale, EPS, dy), strict=True):
        assert relative_error(actual, expected) < FLOAT32_AGREEMENT


def test_normalized_rows_have_zero_mean_and_unit_variance_or_rms() -> None:
    x, *_ = _norm_operands((6, 64))
    ones, zeros = np.ones(64), np.zeros(64)
    layer = reference.layer_norm(x, ones, zeros, eps=0.0)
    np.testing.assert_allclose(layer.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(layer.var(axis=-1), 1.0, rtol=1e-12)
    rms = reference.rms_norm(x, ones, eps=0.0)
    np.testing.assert_allclose(np.sqrt(np.mean(rms**2, axis=-1)), 1.0, rtol=1e-12)


WrongNorm = Callable[[np.ndarray, np.ndarray, np.ndarray], Any]

# Plausible wrong LayerNorms, each checked against the right one at the loosest (bfloat16) tolerance.
WRONG_LAYER_NORMS: dict[str, WrongNorm] = {
    "eps 1e-3 instead of 1e-5": lambda x, s, b: _jax_layer_norm(x, s, b, 1e-3),
    "scale left out": lambda x, s, b: _jax_layer_norm(x, jnp.ones_like(s), b, EPS),
    "bias left out": lambda x, s, b: _jax_layer_norm(x, s, jnp.zeros_like(b), EPS),
    "not centred (an RMSNorm)": lambda x, s, b: _jax_rms_norm(x, s, EPS) + b,
    "unbiased variance": lambda x, s, b: (
        (x - x.mean(axis=-1, keepdims=True)) / jnp.sqrt(x.var(axis=-1, ddof=1, keepdims=True) + EPS) * s + b
    ),
}


@pytest.mark.parametrize("wrong", WRONG_LAYER_NORMS.values(), ids=WRONG_LAYER_NORMS.keys())
def test_check_rejects_a_wrong_layer_norm(wrong: WrongNorm) -> None:
    x, scale, bias, _ = (np.asarray(a, np.float32) for a in _norm_operands((32, 8)))
    # A spread of 0.01 (variance 1e-4) against eps 1e-3 or 1e-5: the eps decides the output's size. Eight
    # features make the unbiased variance 8/7 of the biased one, a 7% change.
    x = 0.5 + 0.01 * (x - 0.5)
    expected = reference.layer_norm(x, scale, bias, EPS)
    check_close("right layer norm", _jax_layer_norm(x, scale, bias, EPS), expected, "float32")
    with pytest.raises(ReferenceMismatch):
        check_close("layer norm", wrong(x, scale, bias), expected, "bfloat16")


def test_check_rejects_a_wrong_rms_norm() -> None:
    x, scale, _, _ = (np.asarray(a, np.float32) for a in _norm_operands((32, 64)))
    small = 0.01 * x
    expected = reference.rms_norm(small, scale, EPS)
    check_close("right rms norm", _jax_rms_norm(small, scale, EPS), expected, "float32")
    for wrong in (_jax_rms_norm(small, scale, 1e-3), _jax_rms_norm(small, np.ones_like(scale), EPS)):
        with pytest.raises(ReferenceMismatch):
            check_close("rms norm", wrong, expected, "bfloat16")


def test_check_rejects_a_norm_gradient_that_ignores_the_statistics() -> None:
    # The classic backward bug: treating mean and variance as constants, dx = dy * scale / std.
    x, scale, bias, dy = _norm_operands((16, 32))
    dx, _, _ = reference.layer_norm_grad(x, scale, bias, EPS, dy)
    inverse_std = 1 / np.sqrt(x.var(axis=-1, keepdims=True) + EPS)
    with pytest.raises(ReferenceMismatch):
        check_close("layer norm dx", dy * scale * inverse_std, dx, "bfloat16")
    rms_dx, _ = reference.rms_norm_grad(x, scale, EPS, dy)
    inverse_rms = 1 / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + EPS)
    with pytest.raises(ReferenceMismatch):
        check_close("rms norm dx", dy * scale * inverse_rms, rms_dx, "bfloat16")


def test_check_rejects_a_norm_with_nan() -> None:
    x, scale, bias, _ = _norm_operands((4, 16))
    expected = reference.layer_norm(x, scale, bias, EPS)
    bad = expected.copy()
    bad[2, 5] = np.nan
    with pytest.raises(ReferenceMismatch, match="inf"):
        check_close("layer norm", bad, expected, "float32")
