"""The same model sharded over 8 fake devices (data=2, fsdp=2, tensor=2) gives the same loss and gradients
as on one device, and its parameters really are split."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import pytest
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec

from jaxbench.harness import recipes
from jaxbench.harness.backends.native import train
from jaxbench.harness.runtime import preflight

SHARDED = {"data": 2, "fsdp": 2, "tensor": 2}
SINGLE = {"data": 1, "fsdp": 1, "tensor": 1}
OVERRIDES = {
    # Small enough to compile quickly; heads, kv heads, vocab and MLP widths all divisible by tensor=2.
    "llama2": ["model.num_heads=4", "model.num_kv_heads=2", "train.global_batch=8"],
    "gpt3": ["train.global_batch=8"],
    "vit": ["train.global_batch=8"],
}


def loss_and_grads(
    family: str, mesh_shape: dict[str, int]
) -> tuple[float, dict[str, Any], train.Initialized]:
    recipe = recipes.load(family, "tiny", OVERRIDES[family])
    devices = jax.devices()[: int(np.prod(list(mesh_shape.values())))]
    mesh = train.make_mesh(mesh_shape, devices)
    with train.sharding_context(recipe, mesh):
        init = train.initialize(recipe, mesh, mesh_shape)
        inputs, targets = init.stream.batch(jax.random.key(0))
        batch_sharding = NamedSharding(mesh, PartitionSpec(("data", "fsdp")))
        inputs, targets = jax.device_put((inputs, targets), batch_sharding)
        loss, grads = jax.jit(jax.value_and_grad(train.make_loss_fn(init.graphdef)))(
            init.state.params, inputs, targets
        )
    flat = {"/".join(map(str, path)): np.asarray(v[...]) for path, v in nnx.to_flat_state(grads)}
    return float(loss), flat, init


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama2", "gpt3", "vit"])
def test_sharded_loss_and_gradients_match_one_device(family: str) -> None:
    assert len(jax.devices()) == 8, "conftest provides 8 fake CPU devices"
    loss_1, grads_1, _ = loss_and_grads(family, SINGLE)
    loss_8, grads_8, init = loss_and_grads(family, SHARDED)

    assert loss_8 == pytest.approx(loss_1, rel=1e-5)
    assert grads_8.keys() == grads_1.keys()
    # Some gradients are zero in exact arithmetic (a key bias shifts every score of a row equally), so the
    # absolute tolerance is relative to the largest gradient anywhere, not per parameter.
    scale = max(np.abs(grad).max() for grad in grads_1.values())
    for name, grad in grads_1.items():
        np.testing.assert_allclose(grads_8[name], grad, atol=1e-5 * scale, rtol=1e-4, err_msg=name)

    # The comparison means something only if the sharded run was sharded: every mesh axis splits a weight.
    specs = {str(leaf.sharding.spec) for leaf in jax.tree.leaves(init.state.params)}
    assert any("fsdp" in spec for spec in specs) and any("tensor" in spec for spec in specs), specs
    kernel = jax.tree.leaves(init.state.params)[0]
    assert kernel.addressable_shards[0].data.size < kernel.size or len(specs) > 1


def test_optimizer_state_follows_the_parameter_layout() -> None:
    recipe = recipes.load("llama2", "tiny", OVERRIDES["llama2"])
    mesh = train.make_mesh(SHARDED, jax.devices())
    with train.sharding_context(recipe, mesh):
        init = train.initialize(recipe, mesh, SHARDED)
    param_specs = {
        jax.tree_util.keystr(path): leaf.sharding.spec
        for path, leaf in jax.tree_util.tree_flatten_with_path(init.state.params)[0]
    }
    moments = 0
    for path, leaf in jax.tree_util.tree_flatten_with_path(init.state.opt_state)[0]:
        key = jax.tree_util.keystr(path)
        matches = [spec for param_path, spec in param_specs.items() if key.endswith(param_path)]
        if leaf.ndim:
            assert matches == [leaf.sharding.spec], key
            moments += 1
    assert moments == 2 * len(param_specs), "AdamW keeps two moments per parameter"


def test_unshardable_rule_fails_before_compiling() -> None:
    recipe = recipes.load("gpt3", "tiny", ["model.num_heads=2", "model.d_model=62"])
    mesh_shape = {"data": 2, "fsdp": 4, "tensor": 1}
    mesh = train.make_mesh(mesh_shape, jax.devices())
    with (
        train.sharding_context(recipe, mesh),
        pytest.raises(recipes.RecipeError, match="parallelism.rules.embed = 'fsdp' cuts dimension 62"),
    ):
        train.initialize(recipe, mesh, mesh_shape)
    assert preflight.resolve_mesh_shape(recipe.parallelism.mesh, 8)["data"] == 8
