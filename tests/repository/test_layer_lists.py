"""The files that must name every layer name them all: the links in jaxbench/ make a folder a layer of the
package, and the image's build context (.dockerignore), its COPY lines (harness.Dockerfile), the banned bare
imports and the import-linter contract (pyproject.toml) each list the layers again by nature of their
format. A layer added to one and not the others builds here and fails in the image, or imports twice.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/repository/test_layer_lists.py
"""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.conftest import LAYERS, REPO

DATA = {"recipes"}
"""Linked into the package as data (YAML), not a layer of code."""


def linked_layers() -> set[str]:
    return {link.name for link in (REPO / "jaxbench").iterdir() if link.is_symlink()} - DATA


def test_the_package_links_are_the_layers() -> None:
    assert linked_layers() == LAYERS


def test_the_image_sees_and_copies_every_layer() -> None:
    context = set(re.findall(r"^!([a-z]+)/$", (REPO / ".dockerignore").read_text(), re.MULTILINE))
    dockerfile = (REPO / "containers" / "harness.Dockerfile").read_text()
    copied = set(re.findall(r"^COPY ([a-z]+)/ /opt/jaxbench/src/\1/$", dockerfile, re.MULTILINE))
    assert context >= LAYERS, f".dockerignore does not let in {sorted(LAYERS - context)}"
    assert copied >= LAYERS, f"containers/harness.Dockerfile does not copy {sorted(LAYERS - copied)}"


@pytest.fixture(scope="module")
def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_layer_is_banned_as_a_bare_import_and_ordered_by_the_contract(pyproject: dict) -> None:
    banned = set(pyproject["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"])
    assert banned == LAYERS
    [contract] = [c for c in pyproject["tool"]["importlinter"]["contracts"] if c["id"] == "layers"]
    ordered = {layer for layer in contract["layers"] if ":" not in layer}  # the top: the command's modules
    assert ordered == LAYERS
