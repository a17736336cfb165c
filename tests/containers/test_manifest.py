"""The pin manifest: the shipped containers/manifest.yaml, its schema's errors and `resolve`."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jaxbench.containers.manifest import (
    MANIFEST_PATH,
    FilePatch,
    Manifest,
    PinnedRelease,
    PullPatch,
    TagRelease,
    load_manifest,
)
from jaxbench.containers.resolve import constraints, main, resolve
from jaxbench.core.errors import InvalidInput

CPU_WHEELS = ("jax", "flax", "optax", "orbax-checkpoint")
"""The components whose published wheels the cpu flavor pins (jax brings jaxlib)."""


@pytest.fixture(scope="module")
def shipped() -> Manifest:
    return load_manifest()


def _shipped_data() -> dict[str, Any]:
    return yaml.safe_load(MANIFEST_PATH.read_text())


def _load_mutated(tmp_path: Path, mutate: Callable[[dict[str, Any]], object]) -> Manifest:
    data = copy.deepcopy(_shipped_data())
    mutate(data)
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_manifest(path)


def test_shipped_manifest_loads(shipped: Manifest) -> None:
    assert {"xla", "jax", "flax", "optax", "orbax-checkpoint", "transformer-engine"} <= set(
        shipped.components
    )
    assert "cpu" in shipped.flavors and shipped.flavors["cpu"].install == "wheel"
    assert isinstance(shipped.components["jax"].release, TagRelease)
    xla_release = shipped.components["xla"].release
    assert isinstance(xla_release, PinnedRelease) and xla_release.pinned_by == "jax"


@pytest.mark.parametrize("stage", list(_shipped_data()["stages"]))
def test_every_stage_dockerfile_exists(shipped: Manifest, stage: str) -> None:
    assert (MANIFEST_PATH.parent / shipped.stages[stage].dockerfile).is_file()


@pytest.mark.parametrize("install", ["source", "wheel"])
@pytest.mark.parametrize("flavor", list(_shipped_data()["flavors"]))
def test_every_flavor_resolves_in_both_modes(shipped: Manifest, flavor: str, install: str) -> None:
    resolved = resolve(shipped, flavor, install)  # type: ignore[arg-type]
    assert resolved.flavor == flavor
    assert [s.name for s in resolved.stages] == shipped.flavors[flavor].stages
    accelerator = shipped.flavors[flavor].accelerator
    for stage in resolved.stages:
        expected = [
            c
            for c in shipped.stages[stage.name].components
            if accelerator in shipped.components[c].accelerators
        ]
        assert list(stage.components) == expected


def test_cpu_constraints_are_exactly_the_release_pins(shipped: Manifest) -> None:
    versions = {}
    for name in CPU_WHEELS:
        release = shipped.components[name].release
        assert isinstance(release, TagRelease)
        versions[name] = release.version
    expected = {
        f"jax=={versions['jax']}",
        f"jaxlib=={versions['jax']}",
        f"flax=={versions['flax']}",
        f"optax=={versions['optax']}",
        f"orbax-checkpoint=={versions['orbax-checkpoint']}",
    }
    pins = constraints(resolve(shipped, "cpu"))
    assert len(pins) == len(expected) and set(pins) == expected


def test_transformer_engine_only_in_cuda_flavors(shipped: Manifest) -> None:
    for name, flavor in shipped.flavors.items():
        for install in ("source", "wheel"):
            resolved = resolve(shipped, name, install)  # type: ignore[arg-type]
            assert ("transformer-engine" in resolved.components) == (flavor.accelerator == "cuda"), name
    cuda_pins = constraints(resolve(shipped, "jax", "wheel"))
    assert any(p.startswith("transformer-engine") for p in cuda_pins)
    assert any("cuda" in p for p in cuda_pins)  # jax's cuda_pip is added on CUDA flavors only
    assert not any("cuda" in p for p in constraints(resolve(shipped, "cpu", "wheel")))


def test_source_build_records_the_branch_head(shipped: Manifest) -> None:
    jax = resolve(shipped, "jax", "source").components["jax"]
    assert jax.install == "source"
    assert jax.commit == shipped.components["jax"].commit
    assert jax.version is None and jax.release_tag is None and jax.requirements == []


def test_wheel_install_records_the_release(shipped: Manifest) -> None:
    resolved = resolve(shipped, "cpu")  # the cpu flavor's default is wheel
    for name in ("jax", "optax"):
        release = shipped.components[name].release
        assert isinstance(release, TagRelease)
        component = resolved.components[name]
        assert component.install == "wheel"
        assert component.commit == release.commit != shipped.components[name].commit
        assert component.version == release.version
        assert component.release_tag == release.tag


def test_xla_wheel_gets_jax_release_tag(shipped: Manifest) -> None:
    jax_release = shipped.components["jax"].release
    xla_release = shipped.components["xla"].release
    assert isinstance(jax_release, TagRelease) and isinstance(xla_release, PinnedRelease)
    xla = resolve(shipped, "jax", "wheel").components["xla"]
    assert xla.install == "wheel"
    assert xla.release_tag == jax_release.tag
    assert xla.commit == xla_release.commit
    assert xla.version is None and xla.requirements == []
    assert resolve(shipped, "jax", "source").components["xla"].release_tag is None


def test_resolve_names_an_unknown_flavor(shipped: Manifest) -> None:
    with pytest.raises(InvalidInput, match=r"FLAVOR=gpu: expected one of .*cpu"):
        resolve(shipped, "gpu")


def test_local_base_replaces_the_base_image_and_its_python(shipped: Manifest) -> None:
    local = resolve(shipped, "jax", "wheel", local_base=True)
    assert (local.base_image, local.python) == ("local/debian:trixie", "3.13")
    default = resolve(shipped, "jax", "wheel")
    assert default.base_image.startswith("nvidia/cuda:") and default.python == "3.12"
    assert local.components == default.components  # the same pins, another base
    assert resolve(shipped, "cpu", local_base=True).base_image == "local/debian:trixie"


def test_local_base_refusals_name_the_flavor(shipped: Manifest) -> None:
    with pytest.raises(InvalidInput, match=r"FLAVOR=jax LOCAL_BASE=1: .*no CUDA toolkit.*INSTALL=wheel"):
        resolve(shipped, "jax", "source", local_base=True)
    with pytest.raises(InvalidInput, match=r"FLAVOR=t5x LOCAL_BASE=1: the flavor names no local_base"):
        resolve(shipped, "t5x", "wheel", local_base=True)


def test_the_scripts_ask_for_the_local_base_by_flavor(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--local-base", "jax"]) == 0
    assert capsys.readouterr().out == "local/debian:trixie\n"
    assert main(["--local-base", "t5x"]) == 1
    assert "FLAVOR=t5x LOCAL_BASE=1: the flavor names no local_base" in capsys.readouterr().err
    assert main(["cpu"]) == 0 and "jax==" in capsys.readouterr().out  # the constraints, as before


def test_patches_refuse_a_forced_wheel(tmp_path: Path) -> None:
    def add_patch(data: dict[str, Any]) -> None:
        data["components"]["flax"]["patches"] = [{"pull": 4242}]

    manifest = _load_mutated(tmp_path, add_patch)
    assert manifest.components["flax"].patches == [PullPatch(pull=4242)]
    assert resolve(manifest, "jax", "source").components["flax"].install == "source"
    with pytest.raises(InvalidInput, match=r"components\.flax: has patches"):
        resolve(manifest, "jax", "wheel")


def test_with_jax_source_build_refuses_a_jax_wheel(tmp_path: Path) -> None:
    manifest = _load_mutated(tmp_path, lambda d: d["components"]["xla"].pop("release"))
    assert resolve(manifest, "jax", "source").components["xla"].install == "source"
    with pytest.raises(InvalidInput, match=r"components\.xla: built into jaxlib from source"):
        resolve(manifest, "jax", "wheel")


def test_file_patch_present_in_patches_dir_loads(tmp_path: Path) -> None:
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "fix.patch").write_text("--- a\n+++ b\n")
    manifest = _load_mutated(
        tmp_path, lambda d: d["components"]["jax"].update(patches=[{"file": "fix.patch"}])
    )
    assert manifest.components["jax"].patches == [FilePatch(file="fix.patch")]


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        *parents, key = path.split(".")
        for part in parents:
            data = data[part]
        data[key] = value

    return mutate


def _wheel_without_release(data: dict[str, Any]) -> None:
    del data["components"]["flax"]["release"]
    data["components"]["flax"]["install"] = "wheel"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_set("components.jax.commit", "cec06d1"), r"components\.jax\.commit: String should match"),
        (_set("components.jax.commit", "C" * 40), r"components\.jax\.commit: String should match"),
        (_set("components.jax.release.tag", "v0.12.0"), r"components\.jax\.release.*does not match tags"),
        (_set("components.jax.release.commit", "z" * 40), r"components\.jax\.release.*commit"),
        (_wheel_without_release, r"components\.flax: .*install: wheel needs a release"),
        (_set("components.praxis.patches", [{"pull": 1}]), r"components\.praxis: .*source builds only"),
        (
            lambda d: d["stages"]["jax"]["components"].append("jaxx"),
            r"stages\.jax\.components: unknown component 'jaxx'",
        ),
        (lambda d: d["flavors"]["cpu"]["stages"].append("gpu"), r"flavors\.cpu\.stages: unknown stage 'gpu'"),
        (_set("components.jax.patches", [{"file": "absent.patch"}]), r"components\.jax\.patches: no file"),
        (
            _set("components.xla.release.pinned_by", "haliax"),
            r"components\.xla\.release\.pinned_by: 'haliax' must be a component released by tags",
        ),
        (_set("components.jax.colour", "blue"), r"components\.jax\.colour: Extra inputs"),
        # git would read these as options: `--upload-pack=` runs a command during a build.
        (
            _set("components.jax.repository", "--upload-pack=touch /tmp/owned"),
            r"components\.jax\.repository: String should match",
        ),
        (_set("components.jax.ref", "--output=x"), r"components\.jax\.ref: String should match"),
        (
            _set("flavors.levanter.pins", {"jax": "v0.10.2"}),
            r"flavors\.levanter\.pins\.jax: expected a component released by tags and a tag matching them",
        ),
        (
            _set("flavors.levanter.pins", {"levanter": "v1.2"}),
            r"flavors\.levanter\.pins\.levanter: expected a component released by tags",
        ),
        (
            _set("flavors.jax.local_base.image", "local/ubuntu:noble"),
            r"flavors\.jax\.local_base\.image: String should match",
        ),
    ],
)
def test_bad_manifest_names_file_and_field(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], object], expected: str
) -> None:
    with pytest.raises(InvalidInput, match=expected) as caught:
        _load_mutated(tmp_path, mutate)
    assert str(caught.value).startswith(str(tmp_path / "manifest.yaml"))


def test_unreadable_manifest_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="absent.yaml"):
        load_manifest(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("components: [unclosed\n")
    with pytest.raises(InvalidInput, match="not valid YAML"):
        load_manifest(bad)


def test_a_flavor_pin_installs_that_release_and_xla_follows_jax(shipped: Manifest) -> None:
    """Levanter pins its own jax: Haliax calls an API jax 0.11 removed."""
    levanter = resolve(shipped, "levanter").components
    assert (levanter["jax"].install, levanter["jax"].version) == ("wheel", "0.7.2")
    assert levanter["jax"].release_tag == "jax-v0.7.2" and levanter["jax"].commit is None
    assert (levanter["xla"].install, levanter["xla"].release_tag, levanter["xla"].commit) == (
        "wheel",
        "jax-v0.7.2",
        None,
    )
    assert levanter["flax"].requirements == ["flax==0.12.0"]
    assert levanter["levanter"].install == "source"  # the rest of the flavor as the mode says
    # Every other flavor keeps the stack's own pins.
    jax = resolve(shipped, "jax").components["jax"]
    assert (jax.install, jax.commit) == ("source", shipped.components["jax"].commit)
