"""Names that say what they are: no two modules of the packages share a file name, and no two define a class
or type alias of the same name, so that an import, a traceback or a search names one thing. The exceptions
are deliberate (each package's entry points; a family's config and model, both named by the family) or
listed in SHARED_MODULE_NAMES and SHARED_TYPE_NAMES, which may only shrink.

    JAX_PLATFORMS=cpu python -m pytest -q tests/jaxbench/test_colliding_names.py
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from jaxbench.harness.families import FAMILIES
from tests.conftest import REPO
from tests.jaxbench.test_architecture import PACKAGES

ENTRY_POINTS = {"__init__", "cli", "commands"}
"""Every package offers its subcommands and its namespace through these; the package names them."""
SHARED_MODULE_NAMES = {
    "build",
    "check",
    "environment",
    "launch",
    "options",
    "record",
    "schema",
    "settings",
    "terminal",
}
"""Module names that two packages still share, each awaiting a name of its own. None may be added."""
SHARED_TYPE_NAMES = {
    # One numpy alias, the same in each detector module.
    "Array",
    "BoolArray",
    # Awaiting names of their own.
    "Component",
    "HardwareClass",
    "Measure",
    "Measurement",
    "Move",
    "Outcome",
    "Plan",
    "Probe",
    "Problem",
    "Settings",
    "Terminated",
    "Timing",
    "Verdict",
}
"""Class or type-alias names that two modules still define. None may be added."""


def _modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from (p for p in sorted((REPO / package).rglob("*.py")) if "__pycache__" not in p.parts)


def _camel_case(name: str) -> bool:
    """`Runner`, `_Runs`: a type's name, not a constant's (`LIMITS`) or a variable's."""
    return name.lstrip("_")[:1].isupper() and not name.isupper()


def _type_names(tree: ast.Module) -> Iterator[str]:
    """Classes, and aliases of a generic or union type (`X = Callable[...]`, `X = A | B`, `type X = ...`)."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.TypeAlias) and isinstance(node.name, ast.Name):
            yield node.name.id
        elif isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(
            node.value, ast.Subscript | ast.BinOp
        ):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Name)
                    and target.id.lstrip("_")[:1].isupper()
                    and not target.id.isupper()
                ):
                    yield target.id


def shared_module_names(paths: list[Path]) -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        if path.stem not in ENTRY_POINTS and path.stem not in FAMILIES:
            by_name[path.stem].append(str(path.relative_to(REPO)))
    return {name: places for name, places in sorted(by_name.items()) if len(places) > 1}


def shared_type_names(paths: list[Path]) -> dict[str, list[str]]:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        for name in set(_type_names(ast.parse(path.read_text()))):
            by_name[name].append(str(path.relative_to(REPO)))
    return {name: places for name, places in sorted(by_name.items()) if len(places) > 1}


def test_no_two_modules_share_a_name_beyond_the_known_ones() -> None:
    shared = shared_module_names(list(_modules()))
    assert {name: places for name, places in shared.items() if name not in SHARED_MODULE_NAMES} == {}
    assert set(shared) == SHARED_MODULE_NAMES  # a rename done: take its name off the list


def test_no_two_modules_define_a_type_of_one_name_beyond_the_known_ones() -> None:
    shared = shared_type_names(list(_modules()))
    assert {name: places for name, places in shared.items() if name not in SHARED_TYPE_NAMES} == {}
    assert set(shared) == SHARED_TYPE_NAMES  # a rename done: take its name off the list


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("Runner = Callable[[list[str]], None]\n", ["Runner"]),
        ("class _Runs(Protocol):\n    pass\n", ["_Runs"]),
        ("Runner = Callable[[list[str]], int] | None\n", ["Runner"]),
        ("type Runner = Callable[[list[str]], int]\n", ["Runner"]),
        ("LIMITS = limits[0]\nrunner = table['x']\ndef f() -> None:\n    Runner = int | str\n", []),
    ],
)
def test_the_type_names_of_a_module(source: str, names: list[str]) -> None:
    assert list(_type_names(ast.parse(source))) == names


def test_a_module_name_in_two_packages_is_found() -> None:
    paths = [
        REPO / "core" / "markdown.py",
        REPO / "results" / "report" / "markdown.py",
        REPO / "nightly" / "cli.py",
    ]
    paths.append(REPO / "results" / "cli.py")
    assert shared_module_names(paths) == {"markdown": ["core/markdown.py", "results/report/markdown.py"]}
