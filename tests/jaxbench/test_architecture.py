"""The layer contracts (pyproject.toml, [tool.importlinter]: the packages, and the rooms inside harness) hold
and can fail; no Python file of the repository is past the line limit; the commands that do not train never
import jax or flax; every family in the registry agrees with its config.

    JAX_PLATFORMS=cpu python -m pytest -q tests/jaxbench/test_architecture.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxbench.harness.families import FAMILIES
from jaxbench.results.cli import HUMAN_VERDICTS
from tests.conftest import LAYERS, REPO

PACKAGES = (*sorted(LAYERS), "jaxbench")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _copy_packages(into: Path) -> None:
    """The package's Python sources (its layers copied where jaxbench/ links them) and the contract, in a
    folder of their own."""
    ignored = shutil.ignore_patterns("__pycache__", "*.j2", "recipes")
    shutil.copytree(REPO / "jaxbench", into / "jaxbench", ignore=ignored)
    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    lines = [f"root_packages = {json.dumps(contract['root_packages'])}"]
    for item in contract["contracts"]:
        lines += ["", "[[tool.importlinter.contracts]]"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in item.items()]
    (into / "pyproject.toml").write_text("[tool.importlinter]\n" + "\n".join(lines) + "\n")


def _lint_imports(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=folder,
        env={"PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _in_a_function(statement: str) -> str:
    """An import hidden inside a function, which the contracts count all the same."""
    return f"\n\ndef _hidden() -> None:\n    {statement}  # noqa: F401\n"


@pytest.mark.parametrize(
    ("module", "violation"),
    [
        # A lower layer importing a higher one at the top of a module...
        ("core/dates.py", "import jaxbench.harness.recipes\n"),
        # ...or hidden inside a function, as the old CLI did with the store and the images.
        ("harness/commands.py", _in_a_function("from jaxbench.results import store")),
        ("results/compare.py", _in_a_function("import jaxbench.nightly.commands")),
        ("nightly/matrix.py", "from jaxbench import main as _main  # noqa: F401\n"),
        # Within a layer: the judgement decides, the reports only render it.
        (
            "results/judgement/verdicts.py",
            "from jaxbench.results.report import github_markdown as _markdown  # noqa: F401\n",
        ),
        # Inside harness (harness-layers): a backend reaching up for the runner that drives it...
        (
            "harness/backends/native/backend.py",
            "from jaxbench.harness.run import runner as _runner  # noqa: F401\n",
        ),
        # ...the run vocabulary below the backends importing one, even inside a function...
        ("harness/runtime/result.py", _in_a_function("import jaxbench.harness.backends")),
        # ...or the config importing the native backend's data, as its data stream once did.
        (
            "harness/config.py",
            _in_a_function("from jaxbench.harness.backends.native.data import TokenStream"),
        ),
        # The family/model pairs are the only arrows back up: a model's family may not import another's.
        ("harness/families/gpt3.py", "from jaxbench.harness.models import vit as _vit  # noqa: F401\n"),
    ],
)
def test_the_contract_fails_on_a_violating_import(tmp_path: Path, module: str, violation: str) -> None:
    _copy_packages(tmp_path)
    kept = _lint_imports(tmp_path)
    assert kept.returncode == 0, kept.stdout + kept.stderr  # the copy as it is keeps the contract
    with (tmp_path / "jaxbench" / module).open("a") as handle:
        handle.write(violation)
    broken = _lint_imports(tmp_path)
    assert broken.returncode != 0
    assert (
        "BROKEN" in broken.stdout
        and "jaxbench." + module.removesuffix(".py").replace("/", ".") in broken.stdout
    )


def test_a_new_room_in_harness_must_be_placed_in_its_layers(tmp_path: Path) -> None:
    """harness-layers is exhaustive: a new module or package directly in harness breaks it until the
    contract names its layer."""
    _copy_packages(tmp_path)
    (tmp_path / "jaxbench" / "harness" / "stray.py").write_text('"""A room the contract does not name."""\n')
    broken = _lint_imports(tmp_path)
    assert broken.returncode != 0
    assert "jaxbench.harness.stray" in broken.stdout + broken.stderr


LINE_LIMIT = 400
"""A module past ~400 lines usually does two jobs (the house style): split it by responsibility rather than
raise this."""
NOT_THE_PROJECTS = {".git", "__pycache__"}
"""Folders anywhere whose files are not the project's own, besides virtualenvs (.venv, .venv-<flavor>)."""
OUTPUTS = {"build", "runs"}
"""Top-level folders that commands write into (.gitignore): what lands there is not the project's source."""


def python_files(root: Path) -> Iterator[Path]:
    """Every .py file of the repository at `root`: packages, tests, benchmarks, scripts, docs."""
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [
            name
            for name in subfolders
            if not name.startswith(".venv")
            and not name.endswith("_cache")
            and name not in NOT_THE_PROJECTS
            and not (Path(folder) == root and name in OUTPUTS)
        ]
        yield from (Path(folder) / name for name in files if name.endswith(".py"))


def test_no_python_file_in_the_repository_is_past_the_line_limit() -> None:
    lines = {str(path.relative_to(REPO)): len(path.read_text().splitlines()) for path in python_files(REPO)}
    assert {path: count for path, count in sorted(lines.items()) if count > LINE_LIMIT} == {}
    # The walk found every package, the tests and the benchmarks.
    assert {path.split("/")[0] for path in lines} >= {*PACKAGES, "tests", "benchmarks"}


def test_the_walk_leaves_out_virtualenvs_and_outputs_only(tmp_path: Path) -> None:
    for name in (".venv", ".venv-maxtext", ".git", "build", "runs", "harness/__pycache__", ".mypy_cache"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "long.py").write_text("x = 1\n" * (LINE_LIMIT + 1))
    for name in ("harness/build", "tests/support", ".github/scripts"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "kept.py").write_text("")
    found = sorted(str(path.relative_to(tmp_path)) for path in python_files(tmp_path))
    assert found == [".github/scripts/kept.py", "harness/build/kept.py", "tests/support/kept.py"]


COMMANDS_THAT_DO_NOT_TRAIN = [
    # --help, recipes, backends and flops: tests/jaxbench/test_import_budget.py allows them no jax either.
    ["nightly", "plan", "--flavors", "cpu", "--arches", "amd64", "--bench-flavor", "cpu", "--owner", "me"],
]


def _loaded_by(argv: list[str], modules: set[str]) -> dict[str, object]:
    """The command's exit code and which of `modules` (top-level names) it imported, in a fresh process."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from jaxbench.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        code = main({argv!r})\n"
        "    except SystemExit as stop:\n"
        "        code = stop.code\n"
        f"loaded = sorted({{name.split('.')[0] for name in sys.modules}} & set({sorted(modules)!r}))\n"
        "print(json.dumps({'code': code, 'loaded': loaded}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("argv", COMMANDS_THAT_DO_NOT_TRAIN, ids=lambda argv: " ".join(argv[:2]))
def test_commands_that_do_not_train_import_neither_jax_nor_flax(argv: list[str]) -> None:
    assert _loaded_by(argv, {"jax", "jaxlib", "flax", "optax"}) == {"code": 0, "loaded": []}


def test_the_probe_would_see_jax() -> None:
    """The check above is not vacuous: a command that trains does import jax in the same probe."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys\nfrom jaxbench.harness.backends import get_backend\n"
            "get_backend('native')\nprint('jax' in sys.modules)",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "True"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_entry_agrees_with_its_config(name: str) -> None:
    family = FAMILIES[name]
    assert family.name == name
    assert family.config().unit == family.unit
    assert family.config_module == f"jaxbench.harness.families.{name}"


def test_the_verdict_choices_are_the_judgement_vocabulary() -> None:
    from jaxbench.results.judgement.vocabulary import HumanVerdict

    assert tuple(verdict.value for verdict in HumanVerdict) == HUMAN_VERDICTS
