"""Recipe values the code cannot take are refused as invalid input, naming the key path, before anything
runs: integers past what numpy, jax and optax hold, floats that are not finite (harness/config.py:
Section), overrides that would hide one another (harness/recipes.py: check_overlaps), and `--profile 0`."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxbench import main as cli
from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness import recipes
from jaxbench.harness.config import INT64_MAX, SEED_LIMIT, STEP_LIMIT
from jaxbench.harness.runtime.options import profile_steps

DIGITS_26 = "12345678901234567890123456"


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (f"train.seed={DIGITS_26}", f"train.seed: Input should be less than or equal to {SEED_LIMIT}"),
        ("train.seed=-1", "train.seed: Input should be greater than or equal to 0"),
        ("optimizer.learning_rate=.inf", "optimizer.learning_rate: Input should be a finite number"),
        ("optimizer.learning_rate=.nan", "optimizer.learning_rate: Input should be a finite number"),
        ("optimizer.grad_clip=.inf", "optimizer.grad_clip: Input should be a finite number"),
        ("data.zipf_exponent=.inf", "data.zipf_exponent: Input should be a finite number"),
        ("model.rope_theta=-.inf", "model.rope_theta: Input should be a finite number"),
        (f"train.global_batch={DIGITS_26}", f"train.global_batch: Value error, {DIGITS_26} does not fit"),
        (f"model.num_layers={DIGITS_26}", f"model.num_layers: Value error, {DIGITS_26} does not fit"),
        (f"parallelism.mesh.data={DIGITS_26}", "parallelism.mesh: Value error"),
        (f"train.steps={STEP_LIMIT + 1}", f"train.steps: Input should be less than or equal to {STEP_LIMIT}"),
        (f"optimizer.lr_warmup_steps={STEP_LIMIT + 1}", "optimizer.lr_warmup_steps: Input should be less"),
    ],
)
def test_values_the_code_cannot_take_are_refused_with_their_key_path(override: str, expected: str) -> None:
    """Before, a 26-digit seed compiled and failed (a compile_error result, exit 3, ingested), and an
    infinite learning rate ran and was stored as null."""
    with pytest.raises(recipes.RecipeError) as refused:
        recipes.load("llama2", "tiny", [override])
    assert f"--set {override}: {expected}" in str(refused.value)


def test_the_largest_values_the_code_takes_are_accepted() -> None:
    recipe = recipes.load("llama2", "tiny", [f"train.seed={SEED_LIMIT}", f"train.steps={STEP_LIMIT}"])
    assert (recipe.train.seed, recipe.train.steps) == (SEED_LIMIT, STEP_LIMIT) and SEED_LIMIT == INT64_MAX


@pytest.mark.parametrize(
    ("overrides", "steps", "expected"),
    [
        (["train.steps=abc"], 8, "--set train.steps=abc and --steps 8 both set train.steps"),
        (["train.steps=30"], 8, "--set train.steps=30 and --steps 8 both set train.steps"),
        (["train={steps: abc}"], 8, "--set train={steps: abc} and --steps 8 both set train.steps"),
        (["train=7"], 8, "--set train=7 and --steps 8 both set train"),
        (
            ["train.seed=x", "train.seed=1"],
            None,
            "--set train.seed=x and --set train.seed=1 both set train.seed",
        ),
        (["optimizer={b1: 0.5}", "optimizer.b1=0.6"], None, "both set optimizer.b1"),
    ],
)
def test_overrides_that_would_hide_one_another_are_refused(
    overrides: list[str], steps: int | None, expected: str
) -> None:
    """`--steps 8` silently replaced an invalid `--set train.steps=abc`, which was never validated."""
    with pytest.raises(recipes.RecipeError, match="expected each setting once") as refused:
        recipes.load("llama2", "tiny", overrides, steps=steps)
    assert expected in str(refused.value)


def test_overrides_of_different_keys_still_combine() -> None:
    recipe = recipes.load("llama2", "tiny", ["train={global_batch: 4}", "optimizer.b1=0.5"], steps=12)
    assert (recipe.train.global_batch, recipe.train.steps, recipe.optimizer.b1) == (4, 12, 0.5)


def test_a_long_override_is_shortened_so_that_what_is_wrong_stays_in_the_line() -> None:
    with pytest.raises(recipes.RecipeError) as refused:
        recipes.load("llama2", "tiny", ["train.seed=" + "9" * 4000])
    message = str(refused.value)
    assert message.startswith("--set train.seed=" + "9" * 60) and len(message) < 400
    assert "train.seed: Input should be less than or equal to" in message


@pytest.mark.parametrize("given", [0, -2])
def test_profile_steps_must_be_positive(
    given: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--profile 0` was taken as "no profile" and ran without one."""
    with pytest.raises(InvalidInput, match=rf"--profile {given}: expected a positive number of steps"):
        profile_steps(given)
    assert profile_steps(None) == 0 and profile_steps(2) == 2
    code = cli.main(["run", "llama2", "--profile", str(given), "--no-ingest", "--out", str(tmp_path / "o")])
    assert code == ExitCode.INVALID_INPUT and f"--profile {given}: expected" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["--set", f"train.seed={DIGITS_26}"],
        ["--set", "optimizer.learning_rate=.inf"],
        ["--steps", "8", "--set", "train.steps=abc"],
    ],
    ids=["seed", "inf", "steps-hide-set"],
)
def test_the_run_command_refuses_them_before_anything_runs(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert cli.main(["run", "llama2", *argv, "--no-ingest", "--out", str(out)]) == ExitCode.INVALID_INPUT
    assert capsys.readouterr().err.startswith("error: --set ") and not out.exists()
