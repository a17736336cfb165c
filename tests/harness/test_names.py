"""Names from recipes and the command line are used as given only where they are safe: a size or recipe name
that is not a plain name is refused when the recipe loads, a result never lands outside --out, and the
tables a run prints show user text literally (never as rich markup).

    JAX_PLATFORMS=cpu python -m pytest -q tests/harness/test_names.py
"""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from rich.console import Console

from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import file_in
from jaxbench.harness import recipes
from jaxbench.harness.families import FAMILIES
from jaxbench.harness.runtime.reporter import summary_table
from jaxbench.harness.runtime.result import RunResult, write_result
from jaxbench.results import synthetic

UNSAFE_NAMES = ["../../x", "x[/oops]", "a/b", ".hidden", "..", "", "-rf", "two words"]


def recipe_with_size(tmp_path: Path, size: str) -> Path:
    """The shipped llama2 recipe with one more size, named `size`."""
    document = yaml.safe_load((recipes.recipes_dir() / "llama2.yaml").read_text())
    document["sizes"][size] = document["sizes"][recipes.TINY]
    path = tmp_path / "named.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize("size", UNSAFE_NAMES)
def test_a_size_that_is_not_a_plain_name_is_refused_naming_the_file_and_field(
    tmp_path: Path, size: str
) -> None:
    path = recipe_with_size(tmp_path, size)
    expected = f"{path}: sizes: Value error, size {size!r}: expected a plain name"
    with pytest.raises(recipes.RecipeError, match=f"^{re.escape(expected)}"):
        recipes.load(str(path), size)


@pytest.mark.parametrize("name", ["../recipes/llama2", "llama2/../llama2", "x[/oops]"])
def test_a_recipe_name_that_is_not_plain_is_refused(name: str) -> None:
    with pytest.raises(recipes.RecipeError, match=r"plain name .*or the path of a .yaml recipe file"):
        recipes.recipe_path(name)


def test_a_resolved_recipe_refuses_an_unsafe_size() -> None:
    resolved = recipes.load("llama2").resolved()
    with pytest.raises(ValidationError, match=r"size\n.*name '\.\./x': expected a plain name"):
        FAMILIES["llama2"].recipe_type().model_validate({**resolved, "size": "../x"})


@pytest.mark.parametrize("name", ["../x.json", "a/b.json", "..", ".", "", "/etc/x.json"])
def test_nothing_is_written_outside_the_folder(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidInput, match=r"expected a plain file name"):
        file_in(tmp_path / "out", name)


def synthetic_run(recipe: str) -> RunResult:
    document = synthetic.run_result(dt.date(2026, 11, 24), 0.25, recipe=recipe)
    return RunResult.model_validate(document)


def test_a_result_whose_name_leaves_the_folder_is_not_written(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    with pytest.raises(InvalidInput, match=r"expected a plain file name"):
        write_result(synthetic_run("llama2-../../x"), out)
    assert list(tmp_path.rglob("*.json")) == []


def test_the_summary_table_shows_names_and_status_literally() -> None:
    screen = io.StringIO()
    Console(file=screen, width=100).print(summary_table(synthetic_run("llama2-x[/oops]")))
    text = screen.getvalue()
    assert "llama2-x[/oops]  [ok]" in text


def test_a_run_that_timed_few_steps_says_so_and_one_that_timed_enough_does_not() -> None:
    """`--steps 8` with 5 warmup steps times 3: its p10 and p90 are of 3 samples."""
    from jaxbench.harness.runtime.reporter import FEW_TIMED_STEPS, few_steps_warning

    run = synthetic_run("llama2-7b")
    assert run.timing.step_time_s is not None
    few = run.model_copy(
        update={
            "timing": run.timing.model_copy(
                update={"step_time_s": run.timing.step_time_s.model_copy(update={"count": 3})}
            )
        }
    )
    warning = few_steps_warning(few)
    assert warning is not None and warning.startswith("warning: only 3 steps timed")
    assert f"--steps {run.timing.warmup_steps + FEW_TIMED_STEPS} or more" in warning
    enough = run.timing.step_time_s.model_copy(update={"count": FEW_TIMED_STEPS})
    assert (
        few_steps_warning(
            run.model_copy(update={"timing": run.timing.model_copy(update={"step_time_s": enough})})
        )
        is None
    )
