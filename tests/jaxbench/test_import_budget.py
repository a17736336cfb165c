"""The import budget of commands that neither train nor judge: which third-party distributions a fresh
`jaxbench` process imports for every parser's `--help` and for the listing commands. Deterministic, unlike a
stopwatch: a module that starts importing numpy, scipy, SQLAlchemy or jax where the command does not need it
fails here, in the unit lane (a parser module importing scipy once made `jaxbench --help` take 1.2 s; the
result model importing numpy made `jaxbench recipes` load it for nothing). Where a command's needs grow,
its line in BUDGET says so in review.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/jaxbench/test_import_budget.py
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from jaxbench.main import build_parser, subcommands
from tests.conftest import LAYERS

REPO = Path(__file__).resolve().parents[2]

PARSER = frozenset({"rich"})
"""What building the parsers may import: the console every command prints with."""
CONFIG = PARSER | {"PyYAML", "pydantic"}
"""... and what reading the recipes and the flag profiles takes: YAML into validated models."""

BUDGET: dict[tuple[str, ...], frozenset[str]] = {
    ("recipes",): CONFIG,
    ("recipes", "--json"): CONFIG,
    ("flops", "llama2", "--size", "7b"): CONFIG,
    ("flops", "llama2", "--size", "7b", "--json"): CONFIG,
    ("backends",): CONFIG,
    ("backends", "--json"): CONFIG,
    ("flags", "show"): CONFIG,
    ("flags", "show", "--json"): CONFIG,
    ("--version",): CONFIG,
    ("--version", "--json"): CONFIG,
}
"""Listing commands: the distributions each may import (pydantic's own dependencies count as pydantic's)."""

PART_OF = {
    "pydantic-core": "pydantic",
    "pydantic_core": "pydantic",
    "annotated-types": "pydantic",
    "annotated_types": "pydantic",
    "typing-extensions": "pydantic",
    "typing_extensions": "pydantic",
    "typing-inspection": "pydantic",
    "typing_inspection": "pydantic",
    "markdown-it-py": "rich",
    "mdurl": "rich",
    "Pygments": "rich",
    "pygments": "rich",
}
"""A distribution that comes with another one only: counted as that one."""

PROBE = """
import contextlib, io, json, sys
from jaxbench.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(ARGV)
    except SystemExit as stop:
        code = stop.code
tops = {name.split(".")[0] for name in sys.modules} - set(sys.stdlib_module_names)
print(json.dumps({"code": code, "modules": sorted(tops)}))
"""
OURS = {*LAYERS, "jaxbench", "tests"}
OWNERS = importlib.metadata.packages_distributions()


def distributions(modules: Iterable[str]) -> list[str]:
    """The distributions that top-level `modules` come from, ours and private ones left out. cython_runtime
    is made by any Cython extension (PyYAML's), not a distribution of its own."""
    found = {
        PART_OF.get(dist, dist)
        for top in modules
        if top not in OURS and not top.startswith("_") and top != "cython_runtime"
        for dist in OWNERS.get(top, [top])
    }
    return sorted(found)


def imported(argv: tuple[str, ...], before: str = "", **environ: str) -> dict[str, object]:
    """The command's exit code and the third-party distributions a fresh process imported to run it."""
    probe = PROBE.replace("ARGV", repr(list(argv))).replace("import contextlib", f"{before}import contextlib")
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, **environ},
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return {"code": report["code"], "distributions": distributions(report["modules"])}


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every subcommand, nested ones too ("nightly plan"), as the words that name it."""
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from command_paths(sub, (*prefix, name))


HELP = [("--help",), *((*path, "--help") for path in command_paths(build_parser(subcommands())))]


def test_every_subcommand_is_in_the_help_budget() -> None:
    """The walk finds the nested parsers too, so a new subcommand is budgeted without a line here."""
    paths = {" ".join(argv[:-1]) for argv in HELP}
    assert {"recipes", "report", "nightly", "nightly plan", "triage", "pr-check"} <= paths
    assert len(HELP) > 30


@pytest.mark.parametrize("argv", HELP, ids=" ".join)
def test_a_parsers_help_imports_only_the_console(argv: tuple[str, ...]) -> None:
    assert imported(argv) == {"code": 0, "distributions": sorted(PARSER)}


@pytest.mark.parametrize("argv", list(BUDGET), ids=" ".join)
def test_a_listing_command_imports_only_its_budget(argv: tuple[str, ...]) -> None:
    report = imported(argv)
    assert report["code"] == 0
    assert set(report["distributions"]) <= BUDGET[argv]  # type: ignore[arg-type]


def test_the_probe_sees_numpy_where_a_command_imports_it() -> None:
    """Not vacuous: the same probe, in a process that imports numpy first, reports numpy."""
    assert "numpy" in imported(("--help",), before="import numpy\n")["distributions"]  # type: ignore[operator]


def test_a_report_of_an_empty_store_loads_no_detector(tmp_path: Path) -> None:
    """Nothing to judge: numpy and scipy stay out (results/detection loads its detectors on first use), and
    the report costs the store's libraries alone."""
    report = imported(("report",), JAXBENCH_DB=f"sqlite:///{tmp_path / 'empty.sqlite'}")
    found = report["distributions"]
    assert report["code"] == 0 and isinstance(found, list)
    assert not {"numpy", "scipy", "jax"} & set(found)
    assert "SQLAlchemy" in found
