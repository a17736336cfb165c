"""Building blocks shared by the model families: numerics, a sharded dense layer, attention, constraints.

Parameters carry *logical* axis names ("embed", "heads", "mlp", ...); the recipe's `parallelism.rules` map
them to mesh axes when the model is built and traced under `nnx.logical_axis_rules`. The same model code
therefore runs unsharded on one CPU and sharded over (data, fsdp, tensor) on many GPUs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx
from packaging.version import Version

from jaxbench.harness.config import AttentionImpl, Precision, RematPolicy
from jaxbench.harness.models.fp8 import fp8_einsum

LogicalAxes = tuple[str | None, ...]


@dataclasses.dataclass(frozen=True)
class Numerics:
    """How a model computes, resolved from the recipe's train section; hashable so it can stay static."""

    precision: Precision = Precision.FP32
    attention: AttentionImpl = AttentionImpl.XLA
    remat: RematPolicy = RematPolicy.NONE

    @property
    def compute_dtype(self) -> jnp.dtype:
        return jnp.dtype(jnp.float32 if self.precision is Precision.FP32 else jnp.bfloat16)

    @property
    def fp8_matmuls(self) -> bool:
        return self.precision is Precision.FP8


def constrain(x: jax.Array, axes: LogicalAxes) -> jax.Array:
    """Pin an activation's layout by logical axis names (a no-op outside a mesh)."""
    return nn.with_logical_constraint(x, axes)


def residual_init_std(num_layers: int) -> float:
    """Init scale of residual-branch output projections, shrinking with depth so that the residual stream's
    variance stays O(1) (Radford et al. 2019, GPT-2, sec. 2.3)."""
    return 0.02 / math.sqrt(2 * num_layers)


DEFAULT_INIT = nnx.initializers.normal(0.02)


def sharding_key(flax_version: str) -> str:
    """The metadata that names a parameter's logical axes, as flax's transforms (the layer scan's vmap) and
    partition specs read it: `out_sharding` from flax 0.12.4, `sharding_names` from 0.12.0, `sharding`
    before (a backfill runs those releases)."""
    version = Version(flax_version)
    if version >= Version("0.12.4"):
        return "out_sharding"
    return "sharding_names" if version >= Version("0.12") else "sharding"


SHARDING = sharding_key(flax.__version__)
STATE_LEAVES: tuple[type, ...] = (
    (nnx.Variable,) if Version(flax.__version__) >= Version("0.11") else (nnx.Variable, nnx.VariableState)
)
"""What a split model's state holds: Variables, and VariableStates before flax 0.11 (which later releases
deprecate, so the name is looked up only where it is current)."""


def param(
    rngs: nnx.Rngs,
    shape: Sequence[int],
    axes: LogicalAxes,
    init: Callable[..., jax.Array] = DEFAULT_INIT,
    *,
    weight_decay: bool = True,
) -> nnx.Param:
    """A float32 master weight annotated with logical sharding names (one per dimension).

    weight_decay=False exempts it from AdamW's decoupled decay (biases, norm gains).
    """
    if len(shape) != len(axes):
        raise ValueError(f"parameter of shape {tuple(shape)} needs {len(shape)} axis names, got {axes}")
    # Sharding is applied once, by the jit that initialises the model (harness.backends.native.train),
    # not per variable.
    metadata: dict[str, Any] = {SHARDING: axes, "eager_sharding": False, "weight_decay": weight_decay}
    return nnx.Param(init(rngs.params(), tuple(shape), jnp.float32), **metadata)


def _bias_for(spec: str, shape: Sequence[int], axes: LogicalAxes, rngs: nnx.Rngs) -> nnx.Param:
    """A zero bias over the kernel dimensions that appear in the einsum's output."""
    inputs, output = spec.split("->")
    kernel_letters = inputs.split(",")[1]
    kept = [
        (size, axis)
        for letter, size, axis in zip(kernel_letters, shape, axes, strict=True)
        if letter in output
    ]
    return param(
        rngs,
        [size for size, _ in kept],
        tuple(a for _, a in kept),
        nnx.initializers.zeros,
        weight_decay=False,
    )


class Dense(nnx.Module):
    """y = einsum(spec, x, W) (+ b): a linear map whose weight shape and sharding are spelled out.

    Weights are float32 masters; they are cast to the compute dtype for the matmul (bf16 in the bf16 and
    fp8 recipes), or quantised to FP8 when `fp8` is set. The bias, if any, spans the kernel dimensions that
    appear in the output (e.g. heads and head_dim for "btd,dnh->btnh").
    """

    def __init__(
        self,
        spec: str,
        shape: Sequence[int],
        axes: LogicalAxes,
        *,
        numerics: Numerics,
        rngs: nnx.Rngs,
        use_bias: bool = False,
        init_std: float = 0.02,
        fp8: bool = False,
    ):
        self.spec = spec
        self.dtype = numerics.compute_dtype
        self.fp8 = fp8 and numerics.fp8_matmuls
        self.kernel = param(rngs, shape, axes, nnx.initializers.normal(init_std))
        self.bias = _bias_for(spec, shape, axes, rngs) if use_bias else None

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x.astype(self.dtype)
        kernel = self.kernel[...].astype(self.dtype)
        y = fp8_einsum(self.spec, x, kernel) if self.fp8 else jnp.einsum(self.spec, x, kernel)
        if self.bias is not None:
            y = y + self.bias[...].astype(self.dtype)
        return y


def norm(kind: str, dim: int, *, eps: float, numerics: Numerics, rngs: nnx.Rngs) -> nnx.Module:
    """RMSNorm or LayerNorm over the last axis; statistics in float32, output in the compute dtype."""
    if kind == "rms":
        module: nnx.RMSNorm | nnx.LayerNorm = nnx.RMSNorm(
            dim, epsilon=eps, dtype=numerics.compute_dtype, rngs=rngs
        )
    elif kind == "layer":
        module = nnx.LayerNorm(dim, epsilon=eps, dtype=numerics.compute_dtype, rngs=rngs)
    else:
        raise ValueError(f"unknown norm kind {kind!r}; expected 'rms' or 'layer'")
    # The gains (and biases) annotated after the fact rather than through `scale_metadata`, which flax
    # releases before 0.12.2 lack (a backfill runs them): replicated, and exempt from weight decay.
    unsharded: dict[str, Any] = {SHARDING: ("norm",), "eager_sharding": False, "weight_decay": False}
    for name in ("scale", "bias"):
        gain = getattr(module, name, None)
        if isinstance(gain, nnx.Param):
            setattr(module, name, nnx.Param(gain[...], **unsharded))
    return module


def attention(q: jax.Array, k: jax.Array, v: jax.Array, *, causal: bool, numerics: Numerics) -> jax.Array:
    """Softmax attention through jax.nn.dot_product_attention; kv heads < heads means grouped-query.

    q: [B, T, N, H], k and v: [B, S, K, H] with N a multiple of K -> [B, T, N, H].
    """
    if numerics.attention is AttentionImpl.CUDNN and q.shape[1] % 2 == 1:
        return _even_length_attention(q, k, v, causal=causal, implementation="cudnn")
    return jax.nn.dot_product_attention(q, k, v, is_causal=causal, implementation=numerics.attention.value)


def _even_length_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, *, causal: bool, implementation: Literal["xla", "cudnn"]
) -> jax.Array:
    """Attention over one zero position appended to q, k and v and masked out of the keys, then dropped.

    jax's cuDNN attention refuses odd sequence lengths in training ("Unsupported sequence length Q 197, KV
    197": ViT-B/16's 196 patches and class token failed to compile on an H200). The appended key is
    excluded by `key_value_seq_lengths` (and, being last, by a causal mask too), so every kept output and
    every gradient equals unpadded attention's; the extra query row is computed and discarded.
    """
    batch, length = q.shape[0], q.shape[1]
    pad = [(0, 0), (0, 1), (0, 0), (0, 0)]
    q, k, v = (jnp.pad(x, pad) for x in (q, k, v))
    lengths = jnp.full((batch,), length, dtype=jnp.int32)
    out = jax.nn.dot_product_attention(
        q,
        k,
        v,
        is_causal=causal,
        key_value_seq_lengths=lengths,
        query_seq_lengths=lengths,
        implementation=implementation,
    )
    return out[:, :length]


REMAT_POLICIES: dict[RematPolicy, Callable[..., bool] | None] = {
    RematPolicy.FULL: jax.checkpoint_policies.nothing_saveable,
    RematPolicy.DOTS: jax.checkpoint_policies.dots_saveable,
    RematPolicy.DOTS_NO_BATCH: jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def stack_layers(make_block: Callable[[nnx.Rngs], nnx.Module], num_layers: int, rngs: nnx.Rngs) -> nnx.Module:
    """Create num_layers blocks whose parameters are stacked on a leading 'layers' axis (for scan)."""

    @nnx.split_rngs(splits=num_layers)
    @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
    def create(rngs: nnx.Rngs) -> nnx.Module:
        return make_block(rngs)

    return create(rngs)


def scan_layers(blocks: nnx.Module, x: jax.Array, numerics: Numerics, *extra: jax.Array) -> jax.Array:
    """Apply stacked blocks in sequence with lax.scan (one compiled block, not num_layers copies).

    `extra` arrays (e.g. rotary tables) are passed unchanged to every block.
    """

    def body(block: nnx.Module, carry: jax.Array) -> jax.Array:
        return block(carry, *extra)

    if numerics.remat is not RematPolicy.NONE:
        body = nnx.remat(body, policy=REMAT_POLICIES[numerics.remat], prevent_cse=False)

    scanned = nnx.scan(
        body, in_axes=(0, nnx.Carry), out_axes=nnx.Carry, transform_metadata={nnx.PARTITION_NAME: "layers"}
    )
    return scanned(blocks, x)


def rotary_tables(seq_len: int, head_dim: int, theta: float) -> tuple[jax.Array, jax.Array]:
    """cos and sin of the rotary position angles, each [T, H/2] (Su et al. 2021, RoFormer, eq. 34)."""
    inv_freq = theta ** -(jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim)  # [H/2]
    angles = jnp.arange(seq_len, dtype=jnp.float32)[:, None] * inv_freq[None, :]  # [T, H/2]
    return jnp.cos(angles), jnp.sin(angles)


def apply_rotary(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate each (first-half, second-half) pair of head dimensions; x: [B, T, N, H] -> same shape."""
    first, second = jnp.split(x.astype(jnp.float32), 2, axis=-1)  # [B, T, N, H/2] each
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]  # [1, T, 1, H/2]
    rotated = jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
    return rotated.astype(x.dtype)


class SelfAttention(nnx.Module):
    """Multi-head self-attention; grouped-query when num_kv_heads < num_heads; optional rotary positions."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        *,
        causal: bool,
        use_bias: bool,
        out_init_std: float,
        numerics: Numerics,
        rngs: nnx.Rngs,
    ):
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads ({num_heads}) must be a multiple of num_kv_heads ({num_kv_heads})")
        self.causal = causal
        self.numerics = numerics

        def projection(heads: int, axis: str) -> Dense:
            shape, axes = (d_model, heads, head_dim), ("embed", axis, "head_dim")
            return Dense(
                "btd,dnh->btnh", shape, axes, use_bias=use_bias, numerics=numerics, rngs=rngs, fp8=True
            )

        self.query = projection(num_heads, "heads")
        self.key = projection(num_kv_heads, "kv_heads")
        self.value = projection(num_kv_heads, "kv_heads")
        self.out = Dense(
            "btnh,nhd->btd",
            (num_heads, head_dim, d_model),
            ("heads", "head_dim", "embed"),
            use_bias=use_bias,
            init_std=out_init_std,
            numerics=numerics,
            rngs=rngs,
            fp8=True,
        )

    def __call__(self, x: jax.Array, rotary: tuple[jax.Array, jax.Array] | None = None) -> jax.Array:
        q = self.query(x)  # [B, T, N, H]
        k = self.key(x)  # [B, T, K, H]
        v = self.value(x)  # [B, T, K, H]
        if rotary is not None:
            q, k = apply_rotary(q, *rotary), apply_rotary(k, *rotary)
        q = constrain(q, ("batch", "seq", "act_heads", None))
        k = constrain(k, ("batch", "seq", "act_kv_heads", None))
        v = constrain(v, ("batch", "seq", "act_kv_heads", None))
        out = attention(q, k, v, causal=self.causal, numerics=self.numerics)  # [B, T, N, H]
        return self.out(out)  # [B, T, D]


class GeluMLP(nnx.Module):
    """Two-layer MLP with biases and GELU (GPT and ViT)."""

    def __init__(
        self,
        d_model: int,
        hidden: int,
        *,
        approximate_gelu: bool,
        out_init_std: float,
        numerics: Numerics,
        rngs: nnx.Rngs,
    ):
        self.approximate_gelu = approximate_gelu
        self.up = Dense(
            "btd,df->btf",
            (d_model, hidden),
            ("embed", "mlp"),
            use_bias=True,
            numerics=numerics,
            rngs=rngs,
            fp8=True,
        )
        self.down = Dense(
            "btf,fd->btd",
            (hidden, d_model),
            ("mlp", "embed"),
            use_bias=True,
            init_std=out_init_std,
            numerics=numerics,
            rngs=rngs,
            fp8=True,
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        h = jax.nn.gelu(self.up(x), approximate=self.approximate_gelu)  # [B, T, F]
        h = constrain(h, ("batch", "seq", "act_mlp"))
        return self.down(h)  # [B, T, D]


class PreLayerNormBlock(nnx.Module):
    """x + attention(LN(x)), then x + MLP(LN(x)): the GPT-2/3 and ViT block (biases, GELU, full heads)."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        mlp_dim: int,
        *,
        causal: bool,
        approximate_gelu: bool,
        norm_eps: float,
        out_init_std: float,
        numerics: Numerics,
        rngs: nnx.Rngs,
    ):
        self.attention_norm = norm("layer", d_model, eps=norm_eps, numerics=numerics, rngs=rngs)
        self.attention = SelfAttention(
            d_model,
            num_heads,
            num_heads,
            d_model // num_heads,
            causal=causal,
            use_bias=True,
            out_init_std=out_init_std,
            numerics=numerics,
            rngs=rngs,
        )
        self.mlp_norm = norm("layer", d_model, eps=norm_eps, numerics=numerics, rngs=rngs)
        self.mlp = GeluMLP(
            d_model,
            mlp_dim,
            approximate_gelu=approximate_gelu,
            out_init_std=out_init_std,
            numerics=numerics,
            rngs=rngs,
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attention(self.attention_norm(x))  # [B, T, D]
        x = x + self.mlp(self.mlp_norm(x))  # [B, T, D]
        return constrain(x, ("batch", "seq", "act_embed"))
