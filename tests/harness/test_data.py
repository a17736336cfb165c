"""The synthetic streams: their structure, that their stated optimal loss is what an oracle achieves, and that
the native backend chooses each recipe's stream by its data section (the configs know no stream)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxbench.harness import recipes
from jaxbench.harness.backends.native.data import (
    ImageDataConfig,
    ImageStream,
    TokenDataConfig,
    TokenStream,
    entropy_nats,
    label_noise_entropy,
    optimal_loss,
    stream_for,
    zipf_probabilities,
)
from jaxbench.harness.families import FAMILIES
from jaxbench.harness.recipes import RecipeError


def token_stream(batch: int = 64, seq: int = 128) -> TokenStream:
    return TokenStream(
        vocab_size=97, seq_len=seq, global_batch=batch, config=TokenDataConfig(successors=8), seed=3
    )


def test_targets_are_inputs_shifted_by_one() -> None:
    inputs, targets = token_stream().batch(jax.random.key(0))
    assert inputs.shape == targets.shape == (64, 128)
    np.testing.assert_array_equal(inputs[:, 1:], targets[:, :-1])


def test_every_step_is_one_of_the_offsets_with_zipf_frequencies() -> None:
    stream = token_stream(batch=256)
    inputs, targets = stream.batch(jax.random.key(1))
    steps = np.asarray((targets - inputs) % stream.vocab_size).ravel()
    offsets = stream.offsets
    assert set(np.unique(steps)) <= set(offsets.tolist())
    frequencies = np.array([(steps == o).mean() for o in offsets])
    np.testing.assert_allclose(frequencies, stream.probabilities, atol=0.01)


def test_oracle_cross_entropy_equals_the_stated_optimum() -> None:
    stream = token_stream(batch=256)
    inputs, targets = (np.asarray(x) for x in stream.batch(jax.random.key(2)))
    step_probability = dict(zip(stream.offsets.tolist(), stream.probabilities, strict=True))
    oracle = -np.log([step_probability[int(s)] for s in ((targets - inputs) % stream.vocab_size).ravel()])
    assert oracle.mean() == pytest.approx(stream.optimal_loss, abs=0.01)
    assert stream.optimal_loss == pytest.approx(entropy_nats(zipf_probabilities(8, 1.0)))


def test_batches_differ_per_key_and_repeat_per_key() -> None:
    stream = token_stream()
    a, _ = stream.batch(jax.random.key(5))
    b, _ = stream.batch(jax.random.key(5))
    c, _ = stream.batch(jax.random.key(6))
    assert jnp.array_equal(a, b) and not jnp.array_equal(a, c)


def test_offsets_must_fit_the_vocabulary() -> None:
    with pytest.raises(
        ValueError, match=r"data.successors \(16\) must be smaller than model.vocab_size \(16\)"
    ):
        TokenStream(vocab_size=16, seq_len=8, global_batch=2, config=TokenDataConfig(successors=16), seed=0)


def test_zipf_entropy_known_values() -> None:
    assert entropy_nats(zipf_probabilities(4, 0.0)) == pytest.approx(np.log(4))
    assert label_noise_entropy(0.0, 10) == 0.0
    # eps = 0.1 over 10 classes: -(0.9 ln 0.9) - 0.1 ln(0.1/9)
    assert label_noise_entropy(0.1, 10) == pytest.approx(0.5448054311250702)


def image_stream() -> ImageStream:
    return ImageStream(
        image_size=32,
        cell_size=4,
        channels=3,
        num_classes=10,
        global_batch=2048,
        config=ImageDataConfig(label_noise=0.1, pixel_noise=0.5),
        seed=7,
    )


@pytest.mark.slow
def test_images_are_class_patterns_plus_noise_and_labels_flip_at_the_stated_rate() -> None:
    stream = image_stream()
    images, labels = (np.asarray(x) for x in stream.batch(jax.random.key(3)))
    assert images.shape == (2048, 32, 32, 3) and labels.shape == (2048,)
    # Nearest pattern (average each cell, compare signs) recovers the true class of every image.
    cells = images.reshape(2048, 8, 4, 8, 4, 3).mean(axis=(2, 4))
    patterns = np.asarray(stream.patterns())
    true_class = np.argmax(np.einsum("bxyc,kxyc->bk", np.sign(cells), patterns), axis=1)
    assert np.array_equal(np.sign(cells), patterns[true_class])
    flipped = labels != true_class
    assert flipped.mean() == pytest.approx(0.1, abs=0.02)


def test_image_oracle_cross_entropy_equals_the_stated_optimum() -> None:
    stream = image_stream()
    images, labels = (np.asarray(x) for x in stream.batch(jax.random.key(4)))
    cells = images.reshape(2048, 8, 4, 8, 4, 3).mean(axis=(2, 4))
    true_class = np.argmax(np.einsum("bxyc,kxyc->bk", np.sign(cells), np.asarray(stream.patterns())), axis=1)
    eps, classes = 0.1, 10
    oracle = np.where(labels == true_class, -np.log(1 - eps), -np.log(eps / (classes - 1)))
    assert oracle.mean() == pytest.approx(stream.optimal_loss, abs=0.05)


STREAM_OF_DATA = {TokenDataConfig: TokenStream, ImageDataConfig: ImageStream}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_trains_on_the_stream_its_data_section_names(name: str) -> None:
    recipe = recipes.load(name, "tiny", ("train.global_batch=6", "train.seed=11"))
    stream = stream_for(recipe)
    assert type(stream) is STREAM_OF_DATA[FAMILIES[name].data]
    assert (stream.global_batch, stream.seed, stream.config) == (6, 11, recipe.data)
    assert optimal_loss(recipe) == stream.optimal_loss > 0


def test_the_stream_has_the_models_shape() -> None:
    llama = recipes.load("llama2", "tiny")
    tokens = stream_for(llama)
    assert isinstance(tokens, TokenStream)
    assert (tokens.vocab_size, tokens.seq_len) == (llama.model.vocab_size, llama.model.seq_len)
    vit = recipes.load("vit", "tiny")
    images = stream_for(vit)
    assert isinstance(images, ImageStream)
    model = vit.model
    assert (images.image_size, images.cell_size, images.channels, images.num_classes) == (
        model.image_size,
        model.patch_size,
        model.channels,
        model.num_classes,
    )


def test_data_that_does_not_fit_the_model_is_a_recipe_error() -> None:
    recipe = recipes.load("llama2", "tiny", ("model.vocab_size=8", "data.successors=8"))
    with pytest.raises(
        RecipeError, match=r"data.successors \(8\) must be smaller than model.vocab_size \(8\)"
    ):
        optimal_loss(recipe)
