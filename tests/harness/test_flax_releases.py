"""The models across flax releases (a backfill runs stacks as old as flax 0.10): the metadata key that names a
parameter's logical axes follows the release, and the norms' gains are annotated after the fact (no
`scale_metadata`, which releases before 0.12.2 lack): replicated, and exempt from weight decay.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/harness/test_flax_releases.py
"""

from __future__ import annotations

import jax
import pytest
from flax import nnx

from jaxbench.harness import recipes
from jaxbench.harness.backends.native.train import decay_mask, numerics_for, param_specs
from jaxbench.harness.models.layers import SHARDING, norm, sharding_key


@pytest.mark.parametrize(
    ("release", "key"),
    [
        ("0.10.5", "sharding"),
        ("0.11.2", "sharding"),
        ("0.12.0", "sharding_names"),
        ("0.12.3", "sharding_names"),
        ("0.12.4", "out_sharding"),
        ("0.12.10", "out_sharding"),
    ],
)
def test_the_sharding_key_follows_the_flax_release(release: str, key: str) -> None:
    assert sharding_key(release) == key


@pytest.mark.parametrize("kind", ["rms", "layer"])
def test_a_norm_s_gains_are_replicated_and_not_decayed(kind: str) -> None:
    recipe = recipes.load("llama2", "tiny")
    module = norm(kind, 16, eps=1e-5, numerics=numerics_for(recipe), rngs=nnx.Rngs(params=0))
    gains = [module.scale] + ([module.bias] if kind == "layer" else [])
    for gain in gains:
        assert isinstance(gain, nnx.Param)
        metadata = gain.get_metadata()
        assert (metadata[SHARDING], metadata["weight_decay"]) == (("norm",), False)
    out = module(jax.numpy.ones((2, 16)))
    assert out.shape == (2, 16)


def test_a_model_decays_its_matrices_and_not_its_norms() -> None:
    recipe = recipes.load("llama2", "tiny")
    model = recipe.model.build(numerics_for(recipe), rngs=nnx.Rngs(params=0))
    params = nnx.state(model, nnx.Param)
    decayed = {"/".join(map(str, path)): flag for path, flag in nnx.to_flat_state(decay_mask(params))}
    specs = {spec.path: spec for spec in param_specs(params)}
    assert decayed.keys() == specs.keys()
    norms = [name for name in specs if "norm" in name]
    assert norms and not any(decayed[name] for name in norms)
    assert all(specs[name].logical_axes[-1] == "norm" for name in norms)
    assert any(decayed[name] for name in specs if name not in norms)
