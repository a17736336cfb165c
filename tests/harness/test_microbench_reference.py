"""The float64 references of harness/microbench/suite/reference.py, and the checks built on them.

A microbenchmark is only as good as its check: a wrong reference would fail a correct kernel, and a check
without teeth would time a wrong one. So the references are compared with JAX twice, with
`jax.nn.dot_product_attention` in float32 (the semantics the attention suite times: layout, grouping,
masking, scale) and with plain jax.numpy in float64 (the arithmetic, to float64 precision), and
`check_close` is shown to reject the plausible wrong kernels: the wrong mask, head grouping, scale or eps,
a forgotten parameter or term, NaNs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.typing import ArrayLike

from harness.microbench.suite import reference
from harness.microbench.suite import test_attention as attention_suite
from harness.microbench.suite import test_matmul as matmul_suite
from harness.microbench.suite import test_norms as norm_suite
from harness.microbench.work import ReferenceMismatch, check_close, relative_error, sample_indices

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


# Sampled checks. At the full sizes the suite compares some rows only, and the references compute exactly
# those: what they return must be the full results' rows, chunk boundaries included, and a wrong value
# in a compared row must still fail.


@pytest.mark.parametrize("layout", ATTENTION_LAYOUTS.values(), ids=ATTENTION_LAYOUTS.keys())
@pytest.mark.parametrize("scores_per_chunk", [1, 40, reference.SCORES_PER_CHUNK], ids=lambda n: f"chunk{n}")
def test_attention_rows_are_the_full_results_rows(
    layout: tuple[Any, ...], scores_per_chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    *shape, causal = layout
    q, k, v, dout = _attention_operands(*shape)
    out = reference.attention(q, k, v, causal=causal)
    grads = reference.attention_grad(q, k, v, dout, causal=causal)
    # 1 score per chunk is one query row at a time; 40 splits 16 keys' rows two by two.
    monkeypatch.setattr(reference, "SCORES_PER_CHUNK", scores_per_chunk)
    q_len, kv_len = shape[1], shape[2]
    query_rows = np.array([q_len - 1, 0, 3, 3, 1])  # unsorted, repeated, the first and the last
    key_rows = np.array([kv_len - 1, 2, 0, 5])
    sampled = reference.attention(q, k, v, causal=causal, rows=query_rows)
    assert relative_error(sampled, out[:, query_rows]) < FLOAT64_AGREEMENT
    dq, dk, dv = reference.attention_grad(
        q, k, v, dout, causal=causal, query_rows=query_rows, key_rows=key_rows
    )
    assert relative_error(dq, grads[0][:, query_rows]) < FLOAT64_AGREEMENT
    assert relative_error(dk, grads[1][:, key_rows]) < FLOAT64_AGREEMENT
    assert relative_error(dv, grads[2][:, key_rows]) < FLOAT64_AGREEMENT
    # Every row, a chunk at a time, is the whole result; no key rows skip dk and dv, not dq.
    for actual, expected in zip(reference.attention_grad(q, k, v, dout, causal=causal), grads, strict=True):
        assert relative_error(actual, expected) < FLOAT64_AGREEMENT
    dq_only, no_dk, no_dv = reference.attention_grad(
        q, k, v, dout, causal=causal, query_rows=query_rows, key_rows=[]
    )
    assert relative_error(dq_only, grads[0][:, query_rows]) < FLOAT64_AGREEMENT
    assert no_dk.shape == no_dv.shape == (shape[0], 0, shape[4], shape[5])


def test_attention_refuses_rows_outside_the_sequence() -> None:
    q, k, v, dout = _attention_operands(1, 8, 8, 2, 2, 8)
    with pytest.raises(ValueError, match=r"\[0, 8\)"):
        reference.attention(q, k, v, causal=False, rows=[0, 8])
    with pytest.raises(ValueError, match="key_rows"):
        reference.attention_grad(q, k, v, dout, causal=False, key_rows=[-1])
    with pytest.raises(ValueError, match="1-D"):
        reference.attention(q, k, v, causal=False, rows=[[0, 1]])


@pytest.fixture
def sampled_attention(monkeypatch: pytest.MonkeyPatch) -> Iterator[attention_suite.Problem]:
    """A small problem checked the way the suite checks its full sizes: two (batch, kv head) groups, the
    first and the last, at 6 sampled rows of 24, dk and dv in the last group only."""
    monkeypatch.setattr(attention_suite, "CHECK_ALL_UP_TO", 0)
    monkeypatch.setattr(attention_suite, "sample_indices", functools.partial(sample_indices, count=6))
    attention_suite._expected.cache_clear()
    yield attention_suite.Problem(
        batch=3, seq=24, heads=6, kv_heads=3, head_dim=8, dtype="float32", causal=True
    )
    attention_suite._expected.cache_clear()


def _attention_results(problem: attention_suite.Problem) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The right output and (dq, dk, dv) of a suite problem, whole."""
    q, k, v, dout = problem.operands()
    grads = reference.attention_grad(q, k, v, dout, causal=problem.causal)
    return reference.attention(q, k, v, causal=problem.causal), grads


def test_attention_suite_samples_two_groups_and_their_rows(
    sampled_attention: attention_suite.Problem,
) -> None:
    problem = sampled_attention
    assert problem.checked_groups() == [(0, 0), (2, 2)]
    assert problem.gradient_groups() == [(2, 2)]
    rows = problem.checked_rows()
    assert len(rows) == 6 and rows[0] == 0 and rows[-1] == 23
    out, grads = _attention_results(problem)
    # What the check compares with is the full reference's slice: batch b, the group's query heads (two
    # per kv head) or its kv head, the sampled rows.
    for (b, g), (want,) in attention_suite._expected(problem, False).items():
        assert relative_error(want, out[b : b + 1, rows, 2 * g : 2 * g + 2]) < FLOAT64_AGREEMENT
    (dq, dk, dv), (dq_first, dk_first, _) = (
        attention_suite._expected(problem, True)[2, 2],
        attention_suite._expected(problem, True)[0, 0],
    )
    assert relative_error(dq, grads[0][2:3, rows, 4:6]) < FLOAT64_AGREEMENT
    assert relative_error(dq_first, grads[0][0:1, rows, 0:2]) < FLOAT64_AGREEMENT
    assert relative_error(dk, grads[1][2:3, rows, 2:3]) < FLOAT64_AGREEMENT
    assert relative_error(dv, grads[2][2:3, rows, 2:3]) < FLOAT64_AGREEMENT
    assert dk_first.shape[1] == 0  # the first group's dk and dv are not computed
    attention_suite._check(problem, False, out, "attention")
    attention_suite._check(problem, True, grads, "attention")


def test_attention_suite_rejects_one_wrong_element_in_the_sample(
    sampled_attention: attention_suite.Problem,
) -> None:
    problem = sampled_attention
    rows = problem.checked_rows()
    out, grads = _attention_results(problem)
    for b, row, head in ((0, rows[2], 1), (2, rows[-1], 5), (2, rows[0], 4)):
        wrong = out.copy()
        wrong[b, row, head, 3] += 0.1 * np.abs(out).max()
        with pytest.raises(ReferenceMismatch, match=f"output of batch {b}"):
            attention_suite._check(problem, False, wrong, "attention")
    for index, name, (b, row, head) in (
        (0, "dq", (0, rows[1], 0)),
        (1, "dk", (2, rows[3], 2)),
        (2, "dv", (2, rows[4], 2)),
    ):
        wrong_grads = [g.copy() for g in grads]
        wrong_grads[index][b, row, head, 0] += 0.1 * np.abs(grads[index]).max()
        with pytest.raises(ReferenceMismatch, match=name):
            attention_suite._check(problem, True, tuple(wrong_grads), "attention")


def test_attention_suite_compares_only_the_sampled_rows(sampled_attention: attention_suite.Problem) -> None:
    # The other side of the sampling: a row outside the sample is not compared, and costs nothing.
    problem = sampled_attention
    unsampled = int(np.setdiff1d(np.arange(problem.seq), problem.checked_rows())[0])
    out, _ = _attention_results(problem)
    wrong = out.copy()
    wrong[0, unsampled, 0] += 1.0
    attention_suite._check(problem, False, wrong, "attention")


def test_attention_suite_rejects_wrong_heads_batches_and_masks(
    sampled_attention: attention_suite.Problem,
) -> None:
    problem = sampled_attention
    q, k, v, dout = problem.operands()
    out, grads = _attention_results(problem)
    swapped_heads = [1, 0, 2, 3, 5, 4]  # the two query heads of each group exchanged
    interleaved = reference.attention(q, np.tile(k, (1, 1, 2, 1)), np.tile(v, (1, 1, 2, 1)), causal=True)
    wrong_outputs = {
        "query heads swapped within a group": out[:, :, swapped_heads],
        "kv head h % kv_heads instead of h // group": interleaved,
        "batch elements reversed": out[::-1],
        "no causal mask": reference.attention(q, k, v, causal=False),
    }
    for why, wrong in wrong_outputs.items():
        with pytest.raises(ReferenceMismatch):
            attention_suite._check(problem, False, wrong, why)
    non_causal = reference.attention_grad(q, k, v, dout, causal=False)
    wrong_grads = {
        "dq of swapped heads": (grads[0][:, :, swapped_heads], grads[1], grads[2]),
        "dk and dv exchanged": (grads[0], grads[2], grads[1]),
        "dk of the wrong batch element": (grads[0], grads[1][::-1], grads[2]),
        "dv without the causal mask": (grads[0], grads[1], non_causal[2]),
    }
    for why, wrong_tuple in wrong_grads.items():
        with pytest.raises(ReferenceMismatch):
            attention_suite._check(problem, True, wrong_tuple, why)


def test_attention_suite_checks_every_group_and_row_of_a_small_problem() -> None:
    problem = attention_suite.Problem(
        batch=2, seq=16, heads=4, kv_heads=2, head_dim=8, dtype="float32", causal=False
    )
    assert problem.checked_groups() == problem.gradient_groups() == [(0, 0), (0, 1), (1, 0), (1, 1)]
    np.testing.assert_array_equal(problem.checked_rows(), np.arange(16))


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


@pytest.mark.parametrize("chunk_elements", [1, 50, reference.NORM_CHUNK_ELEMENTS], ids=lambda n: f"chunk{n}")
def test_norm_gradient_rows_are_the_full_gradients_rows(
    chunk_elements: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, scale, bias, dy = _norm_operands((7, 5, 16))  # rows pick along axis 0, each 5 x 16 here
    layer = reference.layer_norm_grad(x, scale, bias, EPS, dy)
    rms = reference.rms_norm_grad(x, scale, EPS, dy)
    # 1 element per chunk is a row at a time; 50 is a row too (80 elements each), 2^18 all of them.
    monkeypatch.setattr(reference, "NORM_CHUNK_ELEMENTS", chunk_elements)
    rows = np.array([6, 0, 3, 3])
    dx, dscale, dbias = reference.layer_norm_grad(x, scale, bias, EPS, dy, rows=rows)
    assert relative_error(dx, layer[0][rows]) < FLOAT64_AGREEMENT
    # The parameters' gradients still sum over every row, not the picked ones.
    assert relative_error(dscale, layer[1]) < FLOAT64_AGREEMENT
    assert relative_error(dbias, layer[2]) < FLOAT64_AGREEMENT
    rms_dx, rms_dscale = reference.rms_norm_grad(x, scale, EPS, dy, rows=rows)
    assert relative_error(rms_dx, rms[0][rows]) < FLOAT64_AGREEMENT
    assert relative_error(rms_dscale, rms[1]) < FLOAT64_AGREEMENT
    for actual, expected in zip(reference.layer_norm_grad(x, scale, bias, EPS, dy), layer, strict=True):
        assert relative_error(actual, expected) < FLOAT64_AGREEMENT


def test_norm_gradient_refuses_rows_it_cannot_pick() -> None:
    x, scale, bias, dy = _norm_operands((4, 8))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        reference.layer_norm_grad(x, scale, bias, EPS, dy, rows=[4])
    with pytest.raises(ValueError, match="2 axes"):
        reference.rms_norm_grad(x[0], scale, EPS, dy[0], rows=[0])


def _norm_suite_results(norm: str, operands: tuple[np.ndarray, ...]) -> tuple[Any, tuple[Any, ...]]:
    """The suite's own kernels' output and gradients for its operands."""
    *inputs, _ = operands
    return norm_suite._kernel(norm, False)(*inputs), tuple(norm_suite._kernel(norm, True)(*operands))


def test_norm_suite_compares_sampled_rows_and_whole_parameter_gradients() -> None:
    operands = norm_suite._operands("layer_norm", 600, 64, "float32")  # 600 rows: 256 are sampled
    x, scale, bias, dy = operands
    rows = sample_indices(600)
    y, grads = _norm_suite_results("layer_norm", operands)
    norm_suite._check("layer norm", "layer_norm", False, "float32", operands, y)
    norm_suite._check("layer norm", "layer_norm", True, "float32", operands, grads)
    (y_rows,) = norm_suite._expected("layer_norm", False, operands, rows)
    assert relative_error(y_rows, reference.layer_norm(x, scale, bias, EPS)[rows]) < FLOAT64_AGREEMENT
    full = reference.layer_norm_grad(x, scale, bias, EPS, dy)
    sampled = norm_suite._expected("layer_norm", True, operands, rows)
    for actual, expected in zip(sampled, (full[0][rows], full[1], full[2]), strict=True):
        assert relative_error(actual, expected) < FLOAT64_AGREEMENT


def test_norm_suite_rejects_wrong_sampled_rows_and_parameter_gradients() -> None:
    operands = norm_suite._operands("layer_norm", 600, 64, "float32")
    x, scale, _, dy = operands
    rows = sample_indices(600)
    y, grads = _norm_suite_results("layer_norm", operands)
    y = np.asarray(y)
    dx, dscale, dbias = (np.asarray(g) for g in grads)
    wrong_y = y.copy()
    wrong_y[rows[100], 7] += 1.0
    with pytest.raises(ReferenceMismatch):
        norm_suite._check("layer norm", "layer_norm", False, "float32", operands, wrong_y)
    outside = y.copy()
    outside[np.setdiff1d(np.arange(600), rows)[0], 7] += 1.0  # a row outside the sample is not compared
    norm_suite._check("layer norm", "layer_norm", False, "float32", operands, outside)

    x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
    inverse_std = 1 / np.sqrt(x64.var(axis=-1, keepdims=True) + EPS)
    x_hat = (x64 - x64.mean(axis=-1, keepdims=True)) * inverse_std
    one_wrong_dx, one_wrong_bias = dx.copy(), dbias.copy()
    one_wrong_dx[rows[-1], 0] += np.abs(dx).max()
    one_wrong_bias[5] *= 1.5
    wrong_gradients = [
        ("dx", (one_wrong_dx, dscale, dbias)),
        ("dx", (dy64 * scale * inverse_std, dscale, dbias)),  # mean and variance taken as constants
        ("dscale", (dx, (dy64[rows] * x_hat[rows]).sum(axis=0), dbias)),  # summed over the sample only
        ("dbias", (dx, dscale, one_wrong_bias)),
    ]
    for name, wrong in wrong_gradients:
        with pytest.raises(ReferenceMismatch, match=name):
            norm_suite._check("layer norm", "layer_norm", True, "float32", operands, wrong)


# Matmul: the suite compares sampled rows and columns of the product.


def test_matmul_check_compares_sampled_entries_of_the_exact_product() -> None:
    operands = matmul_suite._operands(300, 280, 64, "float32")
    rows, columns = sample_indices(300), sample_indices(280)
    assert len(rows) == 256 and len(columns) == 256
    a, b = (np.asarray(x, dtype=np.float64) for x in operands)
    expected = matmul_suite._reference(operands, rows, columns)
    assert relative_error(expected, (a @ b)[np.ix_(rows, columns)]) < FLOAT64_AGREEMENT
    check = matmul_suite._checker(operands, 300, 280, 64, "float32")
    check(matmul_suite._matmul(*operands))
    product = np.asarray(matmul_suite._matmul(*operands))
    outside = product.copy()
    outside[np.setdiff1d(np.arange(300), rows)[0], :] += 1.0  # a row outside the sample is not compared
    check(outside)
    one_wrong = product.copy()
    one_wrong[rows[17], columns[200]] += 0.1 * np.abs(product).max()
    with pytest.raises(ReferenceMismatch, match="matmul float32 300x280x64"):
        check(one_wrong)


def test_matmul_check_rejects_a_transposed_or_unscaled_product() -> None:
    operands = matmul_suite._operands(256, 256, 256, "float32")
    check = matmul_suite._checker(operands, 256, 256, 256, "float32")
    a, b = operands
    for wrong in (matmul_suite._matmul(a, b).T, matmul_suite._matmul(a, b.T), matmul_suite._matmul(b, a)):
        with pytest.raises(ReferenceMismatch):
            check(wrong)
    fp8 = matmul_suite._operands(512, 256, 128, "float8_e4m3fn")
    fp8_check = matmul_suite._checker(fp8, 512, 256, 128, "float8_e4m3fn")
    fp8_check(matmul_suite._fp8_matmul(*fp8))
    with pytest.raises(ReferenceMismatch):  # the per-tensor scales left out
        fp8_check(matmul_suite._fp8_matmul(fp8[0], fp8[1], jnp.float32(1), jnp.float32(1)))
