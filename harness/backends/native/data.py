"""Synthetic, learnable training data with an exactly known optimal loss, generated on the device.

Real datasets would mean downloads and pipelines whose speed varies night to night; random tokens would
make the loss meaningless. Tokens are a seeded random walk with Zipf-distributed steps (optimal loss H(p)
nats); images are seeded class patterns plus noise with label noise eps (optimal loss its entropy). Both
are cheap inside the jitted step. The stream is chosen by the type of the recipe's data section
(`stream`), so the configs never import this module. The derivations: docs/design.md, "Training data".

    pytest tests/harness/test_data.py
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from jaxbench.harness.config import ImageDataConfig, LanguageModelConfig, ModelConfig, Recipe, TokenDataConfig
from jaxbench.harness.families.vit import ViTConfig
from jaxbench.harness.recipes import RecipeError


class SyntheticStream(Protocol):
    """One global batch per call, as (inputs, targets), generated from a key inside the jitted step."""

    @property
    def optimal_loss(self) -> float:
        """The Bayes-optimal mean cross-entropy (nats) of this data."""
        ...

    def batch(self, key: jax.Array) -> tuple[jax.Array, jax.Array]: ...


def zipf_probabilities(count: int, exponent: float) -> np.ndarray:
    weights = np.arange(1, count + 1, dtype=np.float64) ** -exponent
    return weights / weights.sum()


def entropy_nats(probabilities: np.ndarray) -> float:
    nonzero = probabilities[probabilities > 0]
    return float(-(nonzero * np.log(nonzero)).sum())


def label_noise_entropy(label_noise: float, num_classes: int) -> float:
    """Bayes-optimal cross-entropy when the true class is identifiable and labels flip with prob. eps."""
    if label_noise == 0:
        return 0.0
    eps = label_noise
    return -(1 - eps) * math.log(1 - eps) - eps * math.log(eps / (num_classes - 1))


@dataclasses.dataclass(frozen=True)
class TokenStream:
    """Sequences of seq_len + 1 tokens: the model reads the first seq_len and predicts the last seq_len."""

    vocab_size: int
    seq_len: int
    global_batch: int
    config: TokenDataConfig
    seed: int

    def __post_init__(self) -> None:
        if self.config.successors >= self.vocab_size:
            raise ValueError(
                f"data.successors ({self.config.successors}) must be smaller than model.vocab_size "
                f"({self.vocab_size}) so that every offset leads to a distinct token"
            )

    @property
    def offsets(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        return rng.choice(np.arange(1, self.vocab_size), size=self.config.successors, replace=False)

    @property
    def probabilities(self) -> np.ndarray:
        return zipf_probabilities(self.config.successors, self.config.zipf_exponent)

    @property
    def optimal_loss(self) -> float:
        return entropy_nats(self.probabilities)

    def host_walk(self, length: int) -> np.ndarray:
        """One walk of `length` tokens from the same stream, drawn on the host with NumPy: for trainers that
        read their data from files (a framework's own data pipeline). Every token after the first has
        entropy H(p) given its predecessor, so any window of it has the same optimal loss."""
        rng = np.random.default_rng(self.seed + 1)  # not the offsets' generator
        steps = self.offsets[rng.choice(self.config.successors, size=length - 1, p=self.probabilities)]
        start = rng.integers(0, self.vocab_size, size=1)
        return np.cumsum(np.concatenate([start, steps])) % self.vocab_size

    def batch(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        start_key, step_key = jax.random.split(key)
        shape = (self.global_batch, self.seq_len)
        start = jax.random.randint(start_key, (self.global_batch, 1), 0, self.vocab_size)  # [B, 1]
        log_p = jnp.log(jnp.asarray(self.probabilities, jnp.float32))
        choice = jax.random.categorical(step_key, log_p, shape=shape)  # [B, T] offset indices
        steps = jnp.asarray(self.offsets, jnp.int32)[choice]  # [B, T]
        walk = jnp.cumsum(jnp.concatenate([start, steps], axis=1), axis=1) % self.vocab_size  # [B, T+1]
        tokens = walk.astype(jnp.int32)
        return tokens[:, :-1], tokens[:, 1:]


@dataclasses.dataclass(frozen=True)
class ImageStream:
    """Images [B, H, W, C] in float32 and integer labels [B]."""

    image_size: int
    cell_size: int
    channels: int
    num_classes: int
    global_batch: int
    config: ImageDataConfig
    seed: int

    @property
    def optimal_loss(self) -> float:
        return label_noise_entropy(self.config.label_noise, self.num_classes)

    def patterns(self) -> jax.Array:
        cells = self.image_size // self.cell_size
        key = jax.random.key(self.seed)
        signs = jax.random.rademacher(key, (self.num_classes, cells, cells, self.channels), jnp.float32)
        return signs  # [classes, cells, cells, C]

    def batch(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        class_key, flip_key, other_key, noise_key = jax.random.split(key, 4)
        true_class = jax.random.randint(class_key, (self.global_batch,), 0, self.num_classes)  # [B]
        cells = self.patterns()[true_class]  # [B, cells, cells, C]
        clean = jnp.repeat(jnp.repeat(cells, self.cell_size, axis=1), self.cell_size, axis=2)  # [B, H, W, C]
        noise = jax.random.normal(noise_key, clean.shape, jnp.float32)
        images = clean + self.config.pixel_noise * noise
        flip = jax.random.bernoulli(flip_key, self.config.label_noise, (self.global_batch,))
        shift = jax.random.randint(other_key, (self.global_batch,), 1, self.num_classes)
        labels = jnp.where(flip, (true_class + shift) % self.num_classes, true_class)
        return images, labels.astype(jnp.int32)


@functools.singledispatch
def stream(data: object, model: ModelConfig, global_batch: int, seed: int) -> SyntheticStream:
    """The synthetic stream that a recipe's data section describes, for its model: chosen by the data
    section's type (each family's `Family.data`, harness/families/__init__.py), one registration each."""
    raise TypeError(f"no synthetic stream is registered for a data section of type {type(data).__name__}")


@stream.register
def token_stream(data: TokenDataConfig, model: ModelConfig, global_batch: int, seed: int) -> TokenStream:
    if not isinstance(model, LanguageModelConfig):
        raise TypeError(f"a token stream needs a language model, not {type(model).__name__}")
    return TokenStream(model.vocab_size, model.seq_len, global_batch, data, seed)


@stream.register
def image_stream(data: ImageDataConfig, model: ModelConfig, global_batch: int, seed: int) -> ImageStream:
    if not isinstance(model, ViTConfig):
        raise TypeError(f"an image stream needs a vision model, not {type(model).__name__}")
    # Each class pattern is constant over one patch: cell_size = patch_size.
    return ImageStream(
        model.image_size, model.patch_size, model.channels, model.num_classes, global_batch, data, seed
    )


def stream_for(recipe: Recipe) -> SyntheticStream:
    """The stream `recipe` trains on (ValueError where its data and model do not fit together)."""
    return stream(recipe.data, recipe.model, recipe.train.global_batch, recipe.train.seed)


def optimal_loss(recipe: Recipe) -> float:
    """The synthetic data's best possible loss; building its stream also checks data vs model."""
    try:
        chosen = stream_for(recipe)
    except ValueError as error:
        raise RecipeError(str(error)) from error
    return float(chosen.optimal_loss)
