"""The microbenchmarks' sampled checks: at the full sizes the suite compares some rows only, and the float64
references (harness/microbench/suite/reference.py) compute exactly those. What they return must be the full
results' rows, chunk boundaries included, and a wrong value in a compared row must still fail: attention's
rows and (batch, kv head) groups, and the matmul's sampled rows and columns.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

from jaxbench.harness.microbench.suite import reference
from jaxbench.harness.microbench.suite import test_attention as attention_suite
from jaxbench.harness.microbench.suite import test_matmul as matmul_suite
from jaxbench.harness.microbench.work import ReferenceMismatch, relative_error, sample_indices
from tests.harness.microbench_operands import ATTENTION_LAYOUTS, FLOAT64_AGREEMENT, attention_operands


@pytest.mark.parametrize("layout", ATTENTION_LAYOUTS.values(), ids=ATTENTION_LAYOUTS.keys())
@pytest.mark.parametrize("scores_per_chunk", [1, 40, reference.SCORES_PER_CHUNK], ids=lambda n: f"chunk{n}")
def test_attention_rows_are_the_full_results_rows(
    layout: tuple[Any, ...], scores_per_chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    *shape, causal = layout
    q, k, v, dout = attention_operands(*shape)
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
    q, k, v, dout = attention_operands(1, 8, 8, 2, 2, 8)
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
