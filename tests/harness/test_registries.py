"""One source per registry: a throwaway family (its config module, its model module, one FAMILIES line, a
recipe) and a throwaway framework backend (one module, one BACKENDS line) reach every consumer with no
other change; docs/architecture.md's "where new things go" table names exactly the registries the code
declares.

    JAX_PLATFORMS=cpu python -m pytest -q tests/harness/test_registries.py
"""

from __future__ import annotations

import importlib
import io
import json
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from jaxbench.core.errors import InvalidInput
from jaxbench.harness import catalog, recipes
from jaxbench.harness.backends import BACKENDS, BackendEntry, check_pair, check_settings, get_backend
from jaxbench.harness.config import TokenDataConfig
from jaxbench.harness.families import FAMILIES, Family
from jaxbench.harness.smoke import SmokeOptions, SmokeRun, smoke_plan
from jaxbench.main import main
from jaxbench.nightly.commands import nightly_plan
from jaxbench.nightly.matrix import NightlyInputs
from tests.conftest import LAYERS, REPO

FAMILY_MODULE = '''
from jaxbench.harness.families.gpt3 import GPTConfig


class ThrowawayConfig(GPTConfig):
    """A GPT-3 under a name no registry has seen."""
'''
MODEL_MODULE = """
from jaxbench.harness.models.gpt3 import GPT as Throwaway
"""
BACKEND_MODULE = """
class ThrowawayBackend:
    name = "throwaway-trainer"
    profiles = False

    def prepare(self, recipe, flag_set, hint):
        raise NotImplementedError
"""


@pytest.fixture
def throwaways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The family `throwaway` and the framework backend `throwaway-trainer`, each registered by one line."""
    for name, text in (
        ("throwaway_family", FAMILY_MODULE),
        ("throwaway_model", MODEL_MODULE),
        ("throwaway_trainer", BACKEND_MODULE),
    ):
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    recipes = tmp_path / "recipes"
    shutil.copytree(REPO / "recipes", recipes)
    text = (REPO / "recipes" / "gpt3.yaml").read_text()
    (recipes / "throwaway.yaml").write_text(text.replace("family: gpt3", "family: throwaway"))
    monkeypatch.setenv("JAXBENCH_RECIPES", str(recipes))
    # The one line each.
    family = Family(
        "throwaway", "token", TokenDataConfig, "throwaway_family", "ThrowawayConfig", "throwaway_model"
    )
    monkeypatch.setitem(FAMILIES, "throwaway", family)
    trainer = BackendEntry("throwaway_trainer", "ThrowawayBackend", "levanter", ("throwaway", "llama2"))
    monkeypatch.setitem(BACKENDS, "throwaway-trainer", trainer)


def _printed_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    """The `data` of the command's --json document."""
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)["data"]


@pytest.mark.usefixtures("throwaways")
def test_a_new_family_and_framework_reach_every_consumer(capsys: pytest.CaptureFixture[str]) -> None:
    recipes = _printed_json(["recipes", "--json"], capsys)
    assert {(row["recipe"], row["family"]) for row in recipes} >= {("throwaway", "throwaway")}
    # The native backend trains every family that names its model.
    assert "throwaway" in BACKENDS["native"].families
    check_pair("native", "throwaway")
    listed = {view["name"]: view for view in _printed_json(["backends", "--json"], capsys)}
    assert "throwaway" in listed["native"]["recipes"]
    assert listed["throwaway-trainer"] == {
        "name": "throwaway-trainer",
        "framework": True,
        "flavor": "levanter",
        "families": ["throwaway", "llama2"],
        "recipes": ["llama2", "throwaway"],
    }
    # What make makes a virtualenv for.
    assert main(["backends", "--frameworks"]) == 0
    assert capsys.readouterr().out.split() == ["maxtext", "levanter", "pax", "throwaway-trainer"]
    assert type(get_backend("throwaway-trainer")).__name__ == "ThrowawayBackend"
    # The smoke: natively every backend, inside an image only native.
    plan = smoke_plan(catalog.backend_views(), SmokeOptions())
    assert {SmokeRun("native", "throwaway"), SmokeRun("throwaway-trainer", "throwaway")} <= set(plan)
    in_image = smoke_plan(catalog.backend_views(), SmokeOptions(image="img"))
    assert {run.backend for run in in_image} == {"native"} and SmokeRun("native", "throwaway") in in_image
    # The nightly plan: the framework's jobs in its flavor's image, the family on each backend training it.
    inputs = NightlyInputs(
        flavors="jax,levanter",
        arches="amd64",
        benchmarks="throwaway:tiny",
        bench_runners=json.dumps({"h100": ["gpu"]}),
        registry_owner="me",
    )
    out = io.StringIO()
    assert nightly_plan(inputs, None, Console(file=out, width=10_000)) == 0
    outputs = dict(line.split("=", 1) for line in out.getvalue().splitlines())
    bench = json.loads(outputs["bench"])["include"]
    assert {(job["recipe"], job["backend"], job["flavor"]) for job in bench} == {
        ("throwaway", "native", "jax"),
        ("throwaway", "throwaway-trainer", "levanter"),
    }


def test_every_declared_refusal_names_a_real_setting_and_value() -> None:
    """A refusal with a misspelt setting or value would refuse nothing: each one, set on a recipe the
    backend trains, must load (a valid value of a real setting) and be refused, naming itself."""
    for name, entry in BACKENDS.items():
        for refused in entry.refuses:
            for value in refused.values:
                recipe = recipes.load(entry.families[0], "tiny", [f"{refused.setting}={value}"])
                with pytest.raises(
                    InvalidInput, match=rf"^{re.escape(refused.setting)}={value}: .* with --backend {name}$"
                ):
                    check_settings(name, recipe)


def test_no_family_or_framework_is_listed_twice() -> None:
    """The native backend's families come from FAMILIES, and the Makefile lists no backends or families."""
    assert BACKENDS["native"].trains is None
    assert BACKENDS["native"].families == tuple(name for name, f in FAMILIES.items() if f.model_module)
    for name, family in FAMILIES.items():
        assert family.model_module == f"jaxbench.harness.models.{name}"
        assert importlib.util.find_spec(family.model_module) is not None
    names = {*BACKENDS, *FAMILIES} - {"native"}
    assignments = [
        line for line in (REPO / "Makefile").read_text().splitlines() if re.match(r"^\w+ *[:?]?=", line)
    ]
    # MODEL's default is one recipe, not a list.
    listing = [line for line in assignments if len(names & set(re.findall(r"[\w-]+", line))) > 1]
    assert listing == []


# --- docs/architecture.md's table of where new things go ---------------------------------------------------

PACKAGES = (*sorted(LAYERS), "jaxbench")


def _table_rows(page: str) -> list[list[str]]:
    section = page.split("Where new things go", 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif rows:
            break
    return rows[2:]  # below the header and its rule


def page_registries(page: str) -> dict[str, str]:
    """Registry name -> the module the table says holds it (`NAME`, `path/to/module.py`)."""
    found = {}
    for row in _table_rows(page):
        for name, path in re.findall(r"`([A-Z][A-Z_]+)`, `([\w/]+\.py)`", row[-1]):
            found[name] = path
    return found


def _module_of(path: str) -> str:
    """The module a repository path holds, as the package installs it ("harness/launch/__init__.py" ->
    "jaxbench.harness.launch"; the top floor's "jaxbench/wiring.py" -> "jaxbench.wiring")."""
    dotted = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    return dotted if dotted.partition(".")[0] == "jaxbench" else f"jaxbench.{dotted}"


def code_registries() -> dict[str, str]:
    """Registry name -> module, as each registry's module declares it: "A new ...: ... one line in NAME"."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            module = _module_of(str(path.relative_to(REPO)))
            source = path.read_text()
            doc = re.match(r'\s*(?:#.*\n)*\s*"""(.*?)"""', source, re.S)
            for name in re.findall(r"one line in ([A-Z][A-Z_]+)", doc.group(1) if doc else ""):
                found[name] = str(path.relative_to(REPO))
                assert hasattr(importlib.import_module(module), name), f"{module} declares {name}, has none"
    return found


def test_the_architecture_table_names_exactly_the_registries_the_code_declares() -> None:
    page = (REPO / "docs" / "architecture.md").read_text()
    assert page_registries(page) == code_registries()
    for name, path in page_registries(page).items():
        module = importlib.import_module(_module_of(path))
        registry = getattr(module, name)
        assert isinstance(registry, Mapping) and registry and all(isinstance(key, str) for key in registry)
    # A subcommand's registration is its package's cli.py: every package that offers subcommands has one.
    assert "a `Subcommand` in that package's `cli.py`" in page
    offering = {p.parent.name for p in REPO.glob("*/cli.py")} - {"core"}
    assert offering == {"harness", "results", "containers", "nightly", "triage", "backfill", "prcheck"}


def test_the_table_check_fails_on_a_registry_the_page_omits() -> None:
    """Not vacuous: a table without the backends row, or naming a registry elsewhere, disagrees."""
    page = (REPO / "docs" / "architecture.md").read_text()
    without = "\n".join(line for line in page.splitlines() if "`BACKENDS`" not in line)
    assert "BACKENDS" not in page_registries(without)
    assert page_registries(without) != code_registries()
    moved = page.replace("`LAUNCHERS`, `jaxbench/wiring.py`", "`LAUNCHERS`, `harness/launch/__init__.py`")
    assert page_registries(moved) != code_registries()


def test_every_registry_line_is_the_only_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removing a backend's one line removes it from `jaxbench run --backend`'s choices and the listings."""
    monkeypatch.delitem(BACKENDS, "levanter")
    assert "levanter" not in {view.name for view in catalog.backend_views()}
    with pytest.raises(SystemExit):
        main(["run", "llama2", "--backend", "levanter"])
