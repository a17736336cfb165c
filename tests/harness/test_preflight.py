"""Checks that run before compilation: mesh, batch, numerics and parameter sharding against the machine."""

from __future__ import annotations

import pytest

from jaxbench.harness import recipes
from jaxbench.harness.config import AttentionImpl, ParallelismConfig, Precision
from jaxbench.harness.runtime import preflight
from jaxbench.harness.runtime.preflight import Machine, ParamSpec

CPU8 = Machine("cpu", "cpu", 8)
H100 = Machine("gpu", "NVIDIA H100 80GB HBM3", 8)
A100 = Machine("gpu", "NVIDIA A100-SXM4-80GB", 8)


@pytest.mark.parametrize(
    ("mesh", "devices", "expected"),
    [
        ({"data": -1}, 8, {"data": 8, "fsdp": 1, "tensor": 1}),
        ({"data": 2, "fsdp": -1, "tensor": 2}, 8, {"data": 2, "fsdp": 2, "tensor": 2}),
        ({"data": 1, "fsdp": 4, "tensor": 2}, 8, {"data": 1, "fsdp": 4, "tensor": 2}),
        ({"tensor": -1}, 1, {"data": 1, "fsdp": 1, "tensor": 1}),
    ],
)
def test_mesh_resolution(mesh: dict[str, int], devices: int, expected: dict[str, int]) -> None:
    assert preflight.resolve_mesh_shape(mesh, devices) == expected


def test_mesh_that_does_not_divide_the_devices() -> None:
    with pytest.raises(
        recipes.RecipeError, match=r"parallelism.mesh \(data=-1, fsdp=1, tensor=3\).*does not divide the 8"
    ):
        preflight.resolve_mesh_shape({"data": -1, "tensor": 3}, 8)


def test_mesh_with_the_wrong_product() -> None:
    with pytest.raises(recipes.RecipeError, match="multiply to 4 but 8 devices are available"):
        preflight.resolve_mesh_shape({"data": 2, "fsdp": 2, "tensor": 1}, 8)


def test_batch_must_divide_the_batch_shards() -> None:
    parallelism = ParallelismConfig(rules={"batch": ("data", "fsdp")})
    preflight.check_batch(16, parallelism, {"data": 2, "fsdp": 4, "tensor": 1})
    with pytest.raises(
        recipes.RecipeError, match=r"train.global_batch \(12\) must be divisible by the 8 shards"
    ):
        preflight.check_batch(12, parallelism, {"data": 2, "fsdp": 4, "tensor": 1})


def test_fp8_needs_a_gpu_with_fp8() -> None:
    preflight.check_numerics(Precision.FP8, AttentionImpl.CUDNN, H100)
    for machine in (CPU8, A100):
        with pytest.raises(recipes.RecipeError, match="train.precision: fp8 needs an NVIDIA GPU with FP8"):
            preflight.check_numerics(Precision.FP8, AttentionImpl.XLA, machine)


def test_cudnn_attention_needs_a_gpu_and_half_precision() -> None:
    with pytest.raises(recipes.RecipeError, match="train.attention: cudnn needs an NVIDIA GPU"):
        preflight.check_numerics(Precision.BF16, AttentionImpl.CUDNN, CPU8)
    with pytest.raises(recipes.RecipeError, match="supports bf16/fp16 only"):
        preflight.check_numerics(Precision.FP32, AttentionImpl.CUDNN, A100)
    preflight.check_numerics(Precision.BF16, AttentionImpl.CUDNN, A100)


def test_shipped_gpu_sizes_are_rejected_on_cpu_before_compiling() -> None:
    with pytest.raises(recipes.RecipeError, match="cudnn needs an NVIDIA GPU"):
        preflight.check(recipes.load("llama2", "7b"), CPU8)


def test_param_sharding_needs_a_rule_per_axis() -> None:
    parallelism = ParallelismConfig(rules={"embed": "fsdp"})
    params = [ParamSpec("blocks/mlp/up/kernel", (2, 64, 128), ("layers", "embed", "mlp"))]
    with pytest.raises(recipes.RecipeError, match=r"no entry for the parameter axes \['layers', 'mlp'\]"):
        preflight.check_param_sharding(params, parallelism, {"data": 1, "fsdp": 2, "tensor": 1})


def test_param_dimension_must_divide() -> None:
    parallelism = ParallelismConfig(
        rules={"heads": "tensor", "embed": "fsdp", "head_dim": None, "layers": None}
    )
    params = [
        ParamSpec("blocks/attention/query/kernel", (2, 64, 6, 16), ("layers", "embed", "heads", "head_dim"))
    ]
    preflight.check_param_sharding(params, parallelism, {"data": 1, "fsdp": 4, "tensor": 2})
    with pytest.raises(
        recipes.RecipeError,
        match=r"parallelism.rules.heads = 'tensor' cuts dimension 6 of parameter "
        r"blocks/attention/query/kernel \(2, 64, 6, 16\) into 4 pieces",
    ):
        preflight.check_param_sharding(params, parallelism, {"data": 1, "fsdp": 2, "tensor": 4})


def test_a_mesh_axis_shards_only_one_dimension() -> None:
    # 'vocab' and 'embed' both map to fsdp: flax keeps fsdp on the first, so 'embed' stays whole.
    parallelism = ParallelismConfig(rules={"vocab": "fsdp", "embed": "fsdp"})
    params = [ParamSpec("embedding", (64, 6), ("vocab", "embed"))]
    preflight.check_param_sharding(params, parallelism, {"data": 1, "fsdp": 4, "tensor": 1})
