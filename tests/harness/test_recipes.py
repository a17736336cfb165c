"""Every shipped recipe parses at every size; bad files and overrides fail with the file, key path and
expectation in the message."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jaxbench.harness import recipes
from jaxbench.harness.config import Precision

SHIPPED = {path.stem: path for path in recipes.available_recipes()}

# Published parameter counts: LLaMA 2 (Touvron et al. 2023, table 1: 7B/13B/70B; exact counts from the
# released checkpoints), TinyLlama 1.1B, GPT-3 (Brown et al. 2020, table 2.1), ViT (Dosovitskiy et al.
# 2021, table 1).
PUBLISHED_PARAMS = {
    ("llama2", "1b"): 1_100_048_384,
    ("llama2", "7b"): 6_738_415_616,
    ("llama2", "13b"): 13_015_864_320,
    ("llama2", "70b"): 68_976_648_192,
    ("gpt3", "126m"): 125e6,
    ("gpt3", "1.3b"): 1.3e9,
    ("gpt3", "5b"): 5.0e9,
    ("gpt3", "175b"): 175e9,
    ("vit", "b16"): 86e6,
    ("vit", "l16"): 307e6,
    ("vit", "h14"): 632e6,
}

ARCHITECTURES = {
    # (family, size): (layers, width, heads, kv heads or None, ffn/mlp)
    ("llama2", "7b"): (32, 4096, 32, 32, 11008),
    ("llama2", "13b"): (40, 5120, 40, 40, 13824),
    ("llama2", "70b"): (80, 8192, 64, 8, 28672),
    ("llama2", "1b"): (22, 2048, 32, 4, 5632),
    ("gpt3", "126m"): (12, 768, 12, None, 3072),
    ("gpt3", "1.3b"): (24, 2048, 16, None, 8192),
    ("gpt3", "5b"): (24, 4096, 32, None, 16384),
    ("gpt3", "175b"): (96, 12288, 96, None, 49152),
    ("vit", "b16"): (12, 768, 12, None, 3072),
    ("vit", "l16"): (24, 1024, 16, None, 4096),
    ("vit", "h14"): (32, 1280, 16, None, 5120),
}


def all_sizes() -> list[tuple[str, str]]:
    return [
        (family, size) for family, path in SHIPPED.items() for size in recipes.load_recipe_file(path).sizes
    ]


def test_the_three_families_ship() -> None:
    assert set(SHIPPED) == {"llama2", "gpt3", "vit"}


@pytest.mark.parametrize(("family", "size"), all_sizes())
def test_every_size_resolves(family: str, size: str) -> None:
    recipe = recipes.load(family, size)
    assert recipe.family == family and recipe.size == size
    assert recipe.model.param_count() > 0
    assert recipe.model.training_flops_per_unit() > 0


@pytest.mark.parametrize(("family", "size"), sorted(ARCHITECTURES))
def test_sizes_match_the_published_architectures(family: str, size: str) -> None:
    model = recipes.load(family, size).model
    layers, width, heads, kv_heads, hidden = ARCHITECTURES[(family, size)]
    assert (model.num_layers, model.d_model, model.num_heads) == (layers, width, heads)  # type: ignore[attr-defined]
    if kv_heads is not None:
        assert model.num_kv_heads == kv_heads  # type: ignore[attr-defined]
    hidden_width = getattr(model, "ffn_dim", None) or model.mlp_dim  # type: ignore[attr-defined]
    assert hidden_width == hidden


@pytest.mark.parametrize(("family", "size"), sorted(PUBLISHED_PARAMS))
def test_parameter_counts_match_published_figures(family: str, size: str) -> None:
    count = recipes.load(family, size).model.param_count()
    expected = PUBLISHED_PARAMS[(family, size)]
    if isinstance(expected, int):
        assert count == expected
    else:  # rounded headline figures
        assert count == pytest.approx(expected, rel=0.03)


def test_family_constants() -> None:
    llama = recipes.load("llama2", "7b").model
    assert (llama.vocab_size, llama.seq_len, llama.rope_theta, llama.norm_eps) == (32000, 4096, 10000.0, 1e-5)  # type: ignore[attr-defined]
    gpt = recipes.load("gpt3", "175b").model
    assert (gpt.vocab_size, gpt.seq_len) == (50304, 2048)  # type: ignore[attr-defined]
    vit = recipes.load("vit", "h14").model
    assert (vit.patch_size, vit.image_size, vit.num_classes) == (14, 224, 1000)  # type: ignore[attr-defined]


def test_tiny_runs_on_cpu_settings() -> None:
    for family in SHIPPED:
        recipe = recipes.load(family)  # no size: tiny
        assert recipe.size == "tiny"
        assert recipe.train.precision is Precision.FP32
        assert recipe.train.attention.value == "xla"


def test_default_size_when_a_gpu_is_present() -> None:
    assert recipes.load("llama2", default_to_tiny=False).size == "1b"


def test_hash_is_stable_and_sensitive() -> None:
    a = recipes.recipe_hash(recipes.load("llama2", "tiny"))
    assert a == recipes.recipe_hash(recipes.load("llama2", "tiny"))
    assert a != recipes.recipe_hash(recipes.load("llama2", "tiny", ["train.seed=1"]))


# --- overrides -------------------------------------------------------------------------------------------


def test_override_changes_the_field_and_keeps_types() -> None:
    recipe = recipes.load(
        "llama2",
        "tiny",
        ["train.global_batch=16", "optimizer.learning_rate=1e-4", "parallelism.rules.batch=[data]"],
    )
    assert recipe.train.global_batch == 16
    assert recipe.optimizer.learning_rate == pytest.approx(1e-4)
    assert recipe.parallelism.rules["batch"] == ("data",)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "train.global_batch=abc",
            "--set train.global_batch=abc: train.global_batch: Input should be a valid integer",
        ),
        ("train.bogus=1", "--set train.bogus=1: train.bogus: no such setting"),
        (
            "train.precision=fp16",
            "--set train.precision=fp16: train.precision: Input should be 'fp32', 'bf16' or 'fp8'",
        ),
        ("model.num_heads=0", "--set model.num_heads=0: model.num_heads: Input should be greater than 0"),
        (
            "model.num_kv_heads=3",
            "--set model.num_kv_heads=3: model: Value error, num_heads (4) must be a multiple",
        ),
        ("parallelism.mesh.pipeline=2", "mesh axes must be among ['data', 'fsdp', 'tensor']"),
        ("train", "--set train: expected key.path=value"),
        ("family=gpt3", "family cannot be overridden"),
    ],
)
def test_bad_overrides_name_flag_key_and_expectation(override: str, expected: str) -> None:
    with pytest.raises(recipes.RecipeError) as error:
        recipes.load("llama2", "tiny", [override])
    assert expected in str(error.value)


def test_unknown_size_lists_the_sizes() -> None:
    with pytest.raises(recipes.RecipeError, match=r"no size 'huge'; expected one of \['tiny', '1b', '7b'"):
        recipes.load("llama2", "huge")


def test_unknown_recipe_lists_the_recipes() -> None:
    with pytest.raises(recipes.RecipeError, match="no recipe named 'llama3'.*available: gpt3, llama2, vit"):
        recipes.load("llama3")


# --- bad files ---------------------------------------------------------------------------------------------


def write_variant(tmp_path: Path, edit: dict) -> Path:  # type: ignore[type-arg]
    raw = yaml.safe_load(SHIPPED["llama2"].read_text())
    merged = recipes.deep_merge(raw, edit)
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(merged))
    return path


def test_error_in_a_size_points_into_that_size(tmp_path: Path) -> None:
    path = write_variant(tmp_path, {"sizes": {"7b": {"model": {"d_model": "wide"}}}})
    with pytest.raises(recipes.RecipeError) as error:
        recipes.load(str(path), "7b")
    assert f"{path}: sizes.7b.model.d_model: Input should be a valid integer" in str(error.value)


def test_error_in_base_points_into_base(tmp_path: Path) -> None:
    path = write_variant(tmp_path, {"base": {"train": {"warmup_steps": -1}}})
    with pytest.raises(recipes.RecipeError) as error:
        recipes.load(str(path), "7b")
    assert f"{path}: base.train.warmup_steps: Input should be greater than or equal to 0" in str(error.value)


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write_variant(tmp_path, {"optimiser": {"learning_rate": 1}})
    with pytest.raises(recipes.RecipeError, match=rf"{path}: optimiser: no such setting"):
        recipes.load(str(path), "tiny")


def test_file_without_tiny_size(tmp_path: Path) -> None:
    raw = yaml.safe_load(SHIPPED["gpt3"].read_text())
    del raw["sizes"]["tiny"]
    path = tmp_path / "no_tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(recipes.RecipeError, match="sizes must include 'tiny'"):
        recipes.load(str(path), "126m")


def test_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("family: [unclosed\n")
    with pytest.raises(recipes.RecipeError, match=rf"{path}: not valid YAML: line 2, column 1: "):
        recipes.load(str(path))


def test_warmup_must_leave_timed_steps() -> None:
    with pytest.raises(recipes.RecipeError, match="warmup_steps .5. must be smaller than steps .5."):
        recipes.load("vit", "tiny", ["train.steps=5"])


def test_a_misspelt_setting_is_named_with_the_nearest_key_of_its_section() -> None:
    """Not pydantic's "Extra inputs are not permitted": which key, and the one meant."""
    with pytest.raises(
        recipes.RecipeError, match=r"train.global_bach: no such setting \(did you mean 'global_batch'\?\)"
    ):
        recipes.load("llama2", "tiny", ["train.global_bach=4"])
    with pytest.raises(recipes.RecipeError, match=r"modle: no such setting \(did you mean 'model'\?\)"):
        recipes.load("llama2", "tiny", ["modle.d_model=4"])
    with pytest.raises(
        recipes.RecipeError, match=r"model.d_modle: no such setting \(did you mean 'd_model'\?\)"
    ):
        recipes.load("llama2", "tiny", ["model.d_modle=4"])
