"""FP8 matmuls (E4M3 forward, E5M2 gradients, per-tensor current scaling), checked numerically on CPU.

The FP8 GEMM itself needs a Hopper-class GPU; the quantisation arithmetic is the same everywhere.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbench.harness.models.fp8 import E4M3_MAX, E5M2_MAX, fp8_einsum


def relative_error(a: jax.Array, b: jax.Array) -> float:
    return float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))


def test_format_limits() -> None:
    assert (E4M3_MAX, E5M2_MAX) == (448.0, 57344.0)


def test_forward_is_close_to_the_exact_product_but_not_equal() -> None:
    x = jax.random.normal(jax.random.key(0), (4, 32, 64)) * 3.0
    w = jax.random.normal(jax.random.key(1), (64, 48)) * 0.02
    exact = jnp.einsum("btd,df->btf", x, w)
    quantised = fp8_einsum("btd,df->btf", x, w)
    error = relative_error(quantised, exact)
    # E4M3 keeps 3 mantissa bits: about 2^-4 relative rounding per element, averaging down in the sum.
    assert 1e-3 < error < 0.05


def test_scaling_uses_the_range_whatever_the_magnitude() -> None:
    x = jax.random.normal(jax.random.key(2), (8, 64))
    w = jax.random.normal(jax.random.key(3), (64, 16))
    for scale in (1e-6, 1.0, 1e6):  # without per-tensor scaling, 1e-6 underflows and 1e6 overflows E4M3
        exact = jnp.einsum("bd,df->bf", x * scale, w)
        assert relative_error(fp8_einsum("bd,df->bf", x * scale, w), exact) < 0.05


def test_gradients_match_the_exact_ones_to_fp8_accuracy() -> None:
    x = jax.random.normal(jax.random.key(4), (16, 64))
    w = jax.random.normal(jax.random.key(5), (64, 32)) * 0.1
    target = jax.random.normal(jax.random.key(6), (16, 32))

    def loss(einsum, x, w):  # type: ignore[no-untyped-def]
        return jnp.mean((einsum("bd,df->bf", x, w) - target) ** 2)

    exact = jax.grad(lambda x, w: loss(lambda s, a, b: jnp.einsum(s, a, b), x, w), argnums=(0, 1))(x, w)
    fp8 = jax.grad(lambda x, w: loss(fp8_einsum, x, w), argnums=(0, 1))(x, w)
    for got, want in zip(fp8, exact, strict=True):
        # E5M2 gradients keep only 2 mantissa bits: coarser than the forward pass.
        assert relative_error(got, want) < 0.1
        assert not np.allclose(got, want, rtol=1e-6)


def test_dequantized_operands_go_to_the_dot_in_the_compute_dtype() -> None:
    """XLA's FP8 GEMM rewrite needs convert(f8 -> T) * scale to feed the dot directly: a float32
    dequantization followed by a convert to bf16 breaks the pattern and leaves a bf16 GEMM."""
    x = jnp.ones((16, 64), jnp.bfloat16)
    w = jnp.ones((64, 32), jnp.bfloat16)
    for fn in (
        lambda a, b: fp8_einsum("bd,df->bf", a, b),
        jax.grad(lambda a, b: fp8_einsum("bd,df->bf", a, b).astype(jnp.float32).sum(), argnums=(0, 1)),
    ):
        jaxpr = jax.make_jaxpr(fn)(x, w).jaxpr
        equations = [*jaxpr.eqns, *(e for eq in jaxpr.eqns for e in _inner_equations(eq))]
        from_fp8 = [
            eq
            for eq in equations
            if eq.primitive.name == "convert_element_type" and "float8" in str(eq.invars[0].aval.dtype)
        ]
        assert from_fp8, "no FP8 operand in the program"
        assert {str(eq.outvars[0].aval.dtype) for eq in from_fp8} == {"bfloat16"}
        dots = [eq for eq in equations if eq.primitive.name == "dot_general"]
        assert dots and all(str(v.aval.dtype) == "bfloat16" for eq in dots for v in eq.invars)


def _inner_equations(eq):  # type: ignore[no-untyped-def]
    """The equations of the sub-programs of one equation (custom_vjp, pjit), recursively."""
    for param in eq.params.values():
        inner = getattr(param, "jaxpr", None)
        inner = getattr(inner, "jaxpr", inner)
        if inner is not None and hasattr(inner, "eqns"):
            for sub in inner.eqns:
                yield sub
                yield from _inner_equations(sub)


@pytest.mark.gpu
def test_fp8_runs_on_a_hopper_gpu() -> None:
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("needs an NVIDIA GPU with FP8 tensor cores")
    x = jax.random.normal(jax.random.key(0), (256, 512), jnp.bfloat16)
    w = jax.random.normal(jax.random.key(1), (512, 256), jnp.bfloat16)
    hlo = jax.jit(lambda a, b: fp8_einsum("bd,df->bf", a, b)).lower(x, w).compile().as_text()
    # The quantised operands must reach cuBLASLt as FP8, not be dequantised into a bf16 GEMM.
    assert "__cublas$lt$matmul$f8" in hlo
