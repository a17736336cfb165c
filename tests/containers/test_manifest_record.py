"""The resolved manifest images and virtualenvs carry, and the stage installer's pure parts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from jaxbench.containers import install_stage, record
from jaxbench.containers.manifest import load_manifest
from jaxbench.containers.resolve import Resolved, resolve
from jaxbench.core.errors import InvalidInput
from jaxbench.harness.provenance.collection import PACKAGES_FILE, VENV_MANIFEST, read_image_info


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


def _component(
    install: str, requirements: list[str], build_requires: list[str] | None = None
) -> dict[str, object]:
    return {
        "install": install,
        "build": "pip",
        "requirements": requirements,
        "no_deps": False,
        "build_requires": build_requires or [],
        "extra_requires": None,
        "subdirectory": None,
        "patches": [],
        "wheel_commit": None,
        "commit": None,
    }


def test_installer_builds_components_with_build_requirements_in_place_after_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TransformerEngine's JAX extension compiles against the installed jax: jax, flax and TE's build
    requirements go in first, then TE without build isolation, which would fetch another jax."""
    calls: list[tuple[list[str], dict[str, str] | None]] = []
    monkeypatch.setattr(install_stage, "run", lambda argv, cwd=None, env=None: calls.append((argv, env)))
    monkeypatch.setattr(install_stage, "installed_versions", lambda python: {})
    monkeypatch.setattr(install_stage, "has_cuda_toolkit", lambda: True)
    plan = {
        "stage": "jax",
        "accelerator": "cuda",
        "components": {
            "jax": _component("wheel", ["jax==0.12.0.1"]),
            "transformer-engine": _component(
                "wheel", ["transformer-engine==2.18", "transformer-engine-jax==2.18"], ["pybind11", "ninja"]
            ),
            "flax": _component("wheel", ["flax==0.12.12"]),
        },
    }
    install_stage.install(plan, "/venv/python", tmp_path, tmp_path)
    pips = [argv[argv.index("-c") + 2 :] for argv, _ in calls]  # what follows the earlier stages' pins
    assert pips[0] == [
        "jax==0.12.0.1",
        "flax==0.12.12",
        "pybind11",
        "ninja",
    ]
    assert pips[1] == [
        "--no-build-isolation",
        "transformer-engine==2.18",
        "transformer-engine-jax==2.18",
    ]
    assert calls[1][1] is not None and calls[1][1]["NVTE_CUDA_ARCHS"] == "80;90;100"
    assert len(calls) == 2


def test_compile_env_links_the_versioned_libraries_of_a_pip_cuda(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    for library in ("nccl/lib/libnccl.so.2", "cu13/lib/libcudart.so.13", "cudnn/lib/libcudnn.so.9"):
        (site / "nvidia" / library).parent.mkdir(parents=True, exist_ok=True)
        (site / "nvidia" / library).write_bytes(b"")
    links = tmp_path / "links"
    links.mkdir()
    environ = {"CUDA_COMPUTE_CAPABILITIES": "sm_90, sm_100", "LIBRARY_PATH": "/usr/lib/extra"}
    env = install_stage.compile_env("cuda", site, links, environ)
    assert env["NVTE_CUDA_ARCHS"] == "90;100"
    assert env["LIBRARY_PATH"] == f"{links}:/usr/lib/extra"
    assert sorted(p.name for p in links.iterdir()) == ["libcudart.so", "libcudnn.so", "libnccl.so"]
    assert (links / "libnccl.so").resolve() == (site / "nvidia/nccl/lib/libnccl.so.2").resolve()
    assert environ == {"CUDA_COMPUTE_CAPABILITIES": "sm_90, sm_100", "LIBRARY_PATH": "/usr/lib/extra"}
    # A devel base's toolkit is used as it is; a cpu flavor compiles nothing against CUDA.
    toolkit = install_stage.compile_env("cuda", None, links, {})
    assert "LIBRARY_PATH" not in toolkit and toolkit["NVTE_CUDA_ARCHS"] == "80;90;100"
    assert install_stage.compile_env("cpu", site, links, {"A": "1"}) == {"A": "1"}


def test_installer_checks_out_xla_before_building_jaxlib_whatever_the_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[tuple[Path, Path | None]] = []
    monkeypatch.setattr(install_stage, "run", lambda argv, cwd=None, env=None: None)
    monkeypatch.setattr(install_stage, "installed_versions", lambda python: {})
    monkeypatch.setattr(install_stage, "checkout", lambda name, component, patches: tmp_path / name)
    monkeypatch.setattr(
        install_stage, "build_jaxlib", lambda jax, xla, accelerator, python: built.append((jax, xla))
    )
    jax = _component("source", []) | {"build": "jaxlib"}
    xla = _component("source", []) | {"build": "with-jax"}
    plan = {"stage": "jax", "accelerator": "cpu", "components": {"jax": jax, "xla": xla}}
    install_stage.install(plan, "/venv/python", tmp_path, tmp_path)
    assert built == [(tmp_path / "jax", tmp_path / "xla")]


def test_extra_requirements_reads_an_extra_without_the_excluded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MaxText's runtime dependencies sit under its `cuda12` extra beside a CUDA 12 jax stack: the installer
    takes the extra's own requirements for this platform, and leaves out what the manifest excludes."""
    info = tmp_path / "demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
        "Requires-Dist: always-needed>=1\n"
        "Requires-Dist: absl-py>=2; extra == 'cuda12'\n"
        "Requires-Dist: chex>=0.1; python_version >= '3.0' and extra == 'cuda12'\n"
        "Requires-Dist: jax>=0.10; extra == 'cuda12'\n"
        "Requires-Dist: jax-cuda12-plugin>=0.10; (sys_platform == 'linux') and extra == 'cuda12'\n"
        "Requires-Dist: Nvidia_Cublas_CU12>=12; extra == 'cuda12'\n"
        "Requires-Dist: pywin32; sys_platform == 'win32' and extra == 'cuda12'\n"
        "Requires-Dist: sphinx; extra == 'docs'\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    found = install_stage.extra_requirements(
        sys.executable, "demo", "cuda12", ["jax", "jax-cuda*", "nvidia-*"]
    )
    assert found == ["absl-py>=2", "chex>=0.1"]
    assert install_stage.extra_requirements(sys.executable, "demo", "docs", []) == ["sphinx"]
    everything = install_stage.extra_requirements(sys.executable, "demo", "cuda12", [])
    assert "jax>=0.10" in everything and "always-needed>=1" not in everything
