"""Wheel overlays (containers/wheel_overlay.py): a stack of published releases in front of the harness's
virtualenv. The pip command and its environment are checked as data; an overlay is made for real with pip
from a local wheelhouse of a tiny package built here (offline).

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_wheel_overlay.py
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
import yaml

from jaxbench.containers.manifest import Component, load_manifest
from jaxbench.containers.wheel_overlay import (
    LEAKING_SOURCES,
    WheelPins,
    create_wheel_overlay,
    flavor_components,
    harness_owned,
    pip_command,
    pip_environ,
    wheel_entries,
)
from jaxbench.core.errors import InvalidInput, RunFailed
from tests.support.wheels import package_wheel

AS_OF = dt.datetime(2025, 4, 17, 23, 59, 59, tzinfo=dt.UTC)
TINY = Component.model_validate(
    {
        "repository": "https://example.org/tinypkg.git",
        "ref": "main",
        "commit": "c" * 40,
        "install": "wheel",
        "pip": ["tinypkg=={version}"],
        "release": {"tags": "v*", "tag": "v1.0", "commit": None},
    }
)


def test_an_as_of_stack_comes_from_one_index_with_upload_times_and_no_other_source() -> None:
    pins = WheelPins(("jax==0.6.0", "jaxlib==0.6.0"), ("flax", "optax"), as_of=AS_OF)
    argv = pip_command("python", pins, Path("/o/site"))
    assert argv[argv.index("--uploaded-prior-to") + 1] == "2025-04-17T23:59:59Z"
    assert argv[argv.index("--index-url") + 1] == "https://pypi.org/simple"
    assert argv[-4:] == ["jax==0.6.0", "jaxlib==0.6.0", "flax", "optax"] and "--no-deps" not in argv
    environ = {key: "x" for key in LEAKING_SOURCES} | {"PIP_CERT": "/ca.pem", "HOME": "/root"}
    cleaned = pip_environ(pins, environ)
    assert not set(LEAKING_SOURCES) & set(cleaned)  # a local mirror has no upload times: never consulted
    assert cleaned["PIP_CONFIG_FILE"] == os.devnull and cleaned["PIP_CERT"] == "/ca.pem"


def test_a_wheelhouse_installs_the_named_wheels_alone_and_has_no_dates(tmp_path: Path) -> None:
    pins = WheelPins(("optax==0.2.4",), index=str(tmp_path), with_dependencies=False)
    argv = pip_command("python", pins, tmp_path / "site")
    assert (
        argv[argv.index("--find-links") + 1] == str(tmp_path) and "--no-index" in argv and "--no-deps" in argv
    )
    assert pip_environ(pins, {"PIP_FIND_LINKS": "/opt/wheels"}) == {"PIP_FIND_LINKS": "/opt/wheels"}
    with pytest.raises(InvalidInput, match="a wheelhouse has no upload times"):
        WheelPins(("optax==0.2.4",), index=str(tmp_path), as_of=AS_OF)
    with pytest.raises(InvalidInput, match="not a requirement"):
        WheelPins(("optax >> 1",))


def test_the_manifest_names_each_component_at_its_installed_release_and_xla_follows_jax() -> None:
    components = flavor_components(load_manifest(), "cpu")
    installed = {"jax": "0.6.0", "jaxlib": "0.6.0", "flax": "0.10.5", "numpy": "2.2.4"}
    entries = wheel_entries(components, installed, {"jax": "d" * 40})
    assert set(entries) == {"jax", "flax", "xla"}  # optax and orbax were not installed: the base's stay
    assert (entries["jax"]["version"], entries["jax"]["release_tag"], entries["jax"]["commit"]) == (
        "0.6.0",
        "jax-v0.6.0",
        "d" * 40,
    )
    assert entries["flax"]["release_tag"] == "v0.10.5" and entries["flax"]["commit"] is None
    assert entries["xla"]["release_tag"] == "jax-v0.6.0" and entries["xla"]["version"] is None


def test_the_harness_keeps_its_own_requirements_and_the_stack_its_own() -> None:
    owned = harness_owned({"jax", "jaxlib", "flax", "optax", "orbax-checkpoint"})
    assert {"pydantic", "typing-extensions", "rich", "numpy", "sqlalchemy"} <= owned
    assert not {"jax", "jaxlib", "flax", "optax", "ml-dtypes", "opt-einsum"} & owned


def tiny_wheel(tmp_path: Path, version: str) -> Path:
    package = tmp_path / "src" / "tinypkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f"VALUE = {version!r}\n")
    return package_wheel(package, "tinypkg", version, tmp_path / "project", tmp_path / "wheels", '"pydantic"')


@pytest.mark.slow
def test_a_wheelhouse_overlay_is_made_for_real_reused_and_never_left_half_made(tmp_path: Path) -> None:
    wheels = tiny_wheel(tmp_path, "1.0").parent
    pins = WheelPins(("tinypkg==1.0",), index=str(wheels), with_dependencies=False)
    base = {"schema_version": 1, "kind": "virtualenv", "components": {"jax": {"version": "0.12.0"}}}
    overlay = create_wheel_overlay(
        pins,
        tmp_path / "stack",
        components={"tinypkg": TINY},
        base_manifest=base,
        base_packages=["jax==0.12.0"],
    )
    assert (overlay.site / "tinypkg" / "__init__.py").read_text() == "VALUE = '1.0'\n"
    manifest = yaml.safe_load(overlay.manifest.read_text())
    assert manifest["components"]["tinypkg"]["version"] == "1.0"
    assert manifest["components"]["tinypkg"]["release_tag"] == "v1.0"
    assert manifest["components"]["jax"] == {"version": "0.12.0"}  # the base's, untouched
    assert (overlay.manifest.parent / "packages.txt").read_text().split() == ["jax==0.12.0", "tinypkg==1.0"]
    again = create_wheel_overlay(pins, tmp_path / "stack", components={"tinypkg": TINY}, base_manifest=base)
    assert again.reused

    missing = WheelPins(("tinypkg==9.9",), index=str(wheels), with_dependencies=False)
    with pytest.raises(RunFailed, match="tinypkg==9.9"):
        create_wheel_overlay(missing, tmp_path / "nine", components={"tinypkg": TINY}, base_manifest=base)
    assert not (tmp_path / "nine").exists() and not list(tmp_path.glob(".nine.new-*"))
