"""The resolved manifest images and virtualenvs carry, and the stage installer's pure parts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from containers import install_stage, record
from containers.manifest import Resolved, load_manifest, resolve
from harness.config import InvalidInput
from harness.provenance import PACKAGES_FILE, VENV_MANIFEST, read_image_info


def _stage_record(path: Path, stage: str, components: dict[str, dict[str, object]]) -> None:
    path.write_text(json.dumps({"stage": stage, "components": components}))


def test_image_record_keeps_stage_order_and_the_harness_reads_it(tmp_path: Path) -> None:
    stages = tmp_path / "stages"
    stages.mkdir()
    jax = {"repository": "https://github.com/jax-ml/jax.git", "ref": "main", "commit": "a" * 40}
    _stage_record(stages / "01-jax.json", "jax", {"jax": jax | {"version": "0.12.0.1", "install": "wheel"}})
    _stage_record(
        stages / "02-maxtext.json", "maxtext", {"maxtext": {"commit": "b" * 40, "install": "source"}}
    )
    out = tmp_path / "opt" / "manifest.yaml"
    record.record_image(
        stages, {"kind": "image", "image": "ghcr.io/x/jax:cpu-2026-11-22"}, ["b==2", "A==1"], out
    )

    written = yaml.safe_load(out.read_text())
    assert list(written["components"]) == ["jax", "maxtext"]
    assert written["components"]["jax"]["commit"] == "a" * 40
    assert written["components"]["jax"]["stage"] == "jax"
    assert written["components"]["maxtext"]["stage"] == "maxtext"
    info = read_image_info({"JAXBENCH_MANIFEST": str(out), "JAXBENCH_IMAGE": "ghcr.io/x/jax:cpu-2026-11-22"})
    assert info.manifest == written
    assert info.packages == ["A==1", "b==2"]


def test_image_record_without_stage_records_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no stage records"):
        record.record_image(tmp_path, {}, [], tmp_path / "m.yaml")


def _with(resolved: Resolved, name: str, **update: object) -> Resolved:
    changed = resolved.model_copy(deep=True)
    for stage in changed.stages:
        if name in stage.components:
            stage.components[name] = stage.components[name].model_copy(update=update)
    return changed


def test_venv_record_checks_the_installed_pins(tmp_path: Path) -> None:
    resolved = resolve(load_manifest(), "cpu", "wheel")
    manifest = record.record_venv(resolved, prefix=tmp_path)
    written = yaml.safe_load((tmp_path / VENV_MANIFEST).read_text())
    assert written == manifest
    jax = written["components"]["jax"]
    assert jax["version"] == resolved.components["jax"].version
    assert jax["commit"] == resolved.components["jax"].commit
    packages = (tmp_path / VENV_MANIFEST).parent / PACKAGES_FILE
    assert any(line.startswith("jax==") for line in packages.read_text().splitlines())

    stale = _with(resolved, "flax", version="0.0.1")
    with pytest.raises(InvalidInput, match=r"flax .* but the manifest pins 0\.0\.1"):
        record.record_venv(stale, prefix=tmp_path / "other")


def test_venv_record_refuses_a_wheel_built_from_another_commit(tmp_path: Path) -> None:
    resolved = resolve(load_manifest(), "cpu", "wheel")
    wrong = _with(resolved, "jax", commit="0" * 40)
    with pytest.raises(InvalidInput, match="built from"):
        record.record_venv(wrong, prefix=tmp_path)


def test_installer_requirement_names_and_constraints(tmp_path: Path) -> None:
    assert install_stage.requirement_name("jax-cuda13-plugin[with-cuda]==0.12.0.1") == "jax-cuda13-plugin"
    assert install_stage.requirement_name("Orbax_Checkpoint>=0.5") == "orbax-checkpoint"
    assert install_stage.requirement_name("fiddle >= 0.2.5") == "fiddle"
    python = sys.executable
    _stage_record(
        tmp_path / "01-jax.json",
        "jax",
        {
            "jax": {"python": python, "distribution": "jax", "version": "0.12.0.1"},
            "xla": {"python": python, "distribution": None, "version": None},
            "paxml": {"python": "/opt/pax/venv/bin/python", "distribution": "paxml", "version": "1.4.0"},
        },
    )
    assert install_stage.earlier_constraints(tmp_path, python) == ["jax==0.12.0.1"]


def test_installer_picks_the_distribution_that_stands_for_a_component() -> None:
    versions = {"jax": "0.12.0.1", "jaxlib": "0.12.0.1", "maxtext": "0.2.4", "t5x": "0.0.0"}
    wheel = {"build": "pip", "requirements": ["jax==0.12.0.1", "jaxlib==0.12.0.1"], "no_deps": False}
    assert install_stage.distribution_of("jax", wheel, versions) == "jax"
    source = {"build": "pip", "requirements": [], "no_deps": False}
    assert install_stage.distribution_of("maxtext", source, versions) == "maxtext"
    listed = {"build": "pip", "requirements": ["absl-py"], "no_deps": True}
    assert install_stage.distribution_of("t5x", listed, versions) == "t5x"
    assert install_stage.distribution_of("xla", {"build": "with-jax", "requirements": []}, versions) is None
