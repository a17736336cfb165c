"""The float64 LayerNorm and RMSNorm references of harness/microbench/suite/reference.py and the checks built
on them: they match JAX in float64 and float32, their gradients' sampled rows are the full gradients' rows,
and `check_close` rejects the plausible wrong norms (the wrong eps, a forgotten term, statistics ignored in
the gradient, NaNs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.typing import ArrayLike

from jaxbench.harness.microbench.suite import reference
from jaxbench.harness.microbench.suite import test_norms as norm_suite
from jaxbench.harness.microbench.work import ReferenceMismatch, check_close, relative_error, sample_indices
from tests.harness.microbench_operands import FLOAT32_AGREEMENT, FLOAT64_AGREEMENT, value_and_vjp

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
        got = value_and_vjp(lambda x, s, b: _jax_layer_norm(x, s, b, eps), (x, scale, bias), dy)
    want = (reference.layer_norm(x, scale, bias, eps), *reference.layer_norm_grad(x, scale, bias, eps, dy))
    for name, actual, expected in zip(("y", "dx", "dscale", "dbias"), got, want, strict=True):
        assert relative_error(actual, expected) < FLOAT64_AGREEMENT, name


@pytest.mark.parametrize("shape", NORM_SHAPES, ids=str)
@pytest.mark.parametrize("eps", [1e-5, 0.3])
def test_rms_norm_and_grad_match_jax_in_float64(shape: tuple[int, ...], eps: float) -> None:
    x, scale, _, dy = _norm_operands(shape)
    with jax.enable_x64(True):
        got = value_and_vjp(lambda x, s: _jax_rms_norm(x, s, eps), (x, scale), dy)
    want = (reference.rms_norm(x, scale, eps), *reference.rms_norm_grad(x, scale, eps, dy))
    for name, actual, expected in zip(("y", "dx", "dscale"), got, want, strict=True):
        assert relative_error(actual, expected) < FLOAT64_AGREEMENT, name


def test_norm_grads_match_jax_in_float32() -> None:
    x, scale, bias, dy = (np.asarray(a, np.float32) for a in _norm_operands((64, 128)))
    _, *got = value_and_vjp(lambda x, s, b: _jax_layer_norm(x, s, b, EPS), (x, scale, bias), dy)
    for actual, expected in zip(got, reference.layer_norm_grad(x, scale, bias, EPS, dy), strict=True):
        assert relative_error(actual, expected) < FLOAT32_AGREEMENT
    _, *got = value_and_vjp(lambda x, s: _jax_rms_norm(x, s, EPS), (x, scale), dy)
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
