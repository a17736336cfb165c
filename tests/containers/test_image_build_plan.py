"""What `make build FLAVOR=…` plans: the stage chain, tags, build arguments, labels and plans; the docker
command line and the CA certificates served to builds."""

from __future__ import annotations

import io
import itertools
import json
import re
import socket
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from typing import Literal

import pytest
from rich.console import Console

from jaxbench.containers import docker, image_commands
from jaxbench.containers.build import BuildRequest, StageBuild, image_tags, plan_build, plan_text
from jaxbench.containers.manifest import Manifest, load_manifest
from jaxbench.containers.resolve import Resolved, resolve
from jaxbench.core.errors import InvalidInput
from tests.conftest import REPO

DATE = "2026-11-22"
REGISTRY = "ghcr.io/acme"
REVISION = "0123456789abcdef0123456789abcdef01234567"
SOURCE = "https://github.com/jaxbench/jaxbench"
CREATED = "2026-11-22T08:00:00+00:00"
COMPONENT = "dev.jaxbench.component."
OCI = "org.opencontainers.image."


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return load_manifest()


def request(**overrides: str | None) -> BuildRequest:
    fields: dict[str, str | None] = {
        "registry": REGISTRY,
        "date": DATE,
        "created": CREATED,
        "revision": REVISION,
        "source": SOURCE,
    }
    return BuildRequest(**(fields | overrides))  # type: ignore[arg-type]


def plan(manifest: Manifest, flavor: str, **overrides: str | None) -> tuple[Resolved, list[StageBuild]]:
    resolved = resolve(manifest, flavor)
    return resolved, plan_build(resolved, request(**overrides))


def plan_with(
    manifest: Manifest, flavor: str, install: Literal["source", "wheel"]
) -> tuple[Resolved, list[StageBuild]]:
    resolved = resolve(manifest, flavor, install)
    return resolved, plan_build(resolved, request())


@pytest.mark.parametrize("flavor", ["cpu", "maxtext"])
def test_stage_chain_tags_and_base_images(manifest: Manifest, flavor: str) -> None:
    resolved, builds = plan(manifest, flavor)
    stages = manifest.flavors[flavor].stages
    assert [b.stage for b in builds] == stages
    assert [b.dockerfile for b in builds] == [
        Path("containers") / manifest.stages[s].dockerfile for s in stages
    ]
    for build in builds[:-1]:
        assert build.tags == (f"jaxbench-stage/{flavor}-{build.stage}:{DATE}",)
        assert build.labels == {} and "JAXBENCH_IMAGE" not in build.build_args
    assert builds[-1].tags == (f"{REGISTRY}/jax:{flavor}-{DATE}", f"{REGISTRY}/jax:{flavor}")
    assert [b.build_args["BASE_IMAGE"] for b in builds] == [
        manifest.flavors[flavor].base_image,
        *(b.tags[0] for b in builds[:-1]),
    ]
    assert builds[0].build_args["PYTHON_VERSION"] == resolved.python
    assert "PLAN" not in builds[0].build_args
    for build in builds[1:]:
        assert build.build_args["PLAN"] == build.plan_path.as_posix()
        assert build.plan_path.parent == Path("build/plan")
        assert build.plan_path.name.startswith(f"{build.stage}-")
        assert "PYTHON_VERSION" not in build.build_args


def test_a_stage_with_a_python_of_its_own_is_told_which(manifest: Manifest) -> None:
    """Pax's stage installs into a Python 3.10 of its own (the manifest's stages.pax.python), the rest of the
    chain into the flavor's: only that stage gets STAGE_PYTHON, which pax.Dockerfile reads."""
    _, builds = plan(manifest, "pax")
    assert {b.stage: b.build_args.get("STAGE_PYTHON") for b in builds} == {
        "base": None,
        "jax": None,
        "pax": "3.10",
        "harness": None,
    }
    assert "ARG STAGE_PYTHON" in (REPO / "containers" / "pax.Dockerfile").read_text()


def test_flavors_share_the_plans_of_their_common_stages(manifest: Manifest) -> None:
    """The CUDA flavors' base and jax stages get the same plan file and arguments, so the layer cache
    builds them once; stages that differ, and every flavor's own last stage, get their own."""
    _, jax_builds = plan(manifest, "jax")
    _, maxtext_builds = plan(manifest, "maxtext")
    _, cpu_builds = plan(manifest, "cpu")
    for shared, other in zip(jax_builds[:2], maxtext_builds[:2], strict=True):
        assert shared.stage == other.stage
        assert shared.plan_path == other.plan_path and shared.plan == other.plan
        assert {k: v for k, v in shared.build_args.items() if k != "BASE_IMAGE"} == {
            k: v for k, v in other.build_args.items() if k != "BASE_IMAGE"
        }
    assert jax_builds[1].plan_path != cpu_builds[1].plan_path  # cuda vs cpu: other components
    assert jax_builds[-1].plan_path != maxtext_builds[-1].plan_path
    _, wheels = plan_with(manifest, "jax", "wheel")
    assert wheels[1].plan_path != jax_builds[1].plan_path


def test_base_image_override(manifest: Manifest) -> None:
    _, builds = plan(manifest, "maxtext", base_image="registry.local/cuda:13")
    assert builds[0].build_args["BASE_IMAGE"] == "registry.local/cuda:13"
    assert builds[1].build_args["BASE_IMAGE"] == f"jaxbench-stage/maxtext-base:{DATE}"
    assert builds[-1].labels[f"{OCI}base.name"] == "registry.local/cuda:13"
    _, default = plan(manifest, "maxtext")
    assert default[-1].labels[f"{OCI}base.name"] == manifest.flavors["maxtext"].base_image


def test_the_final_image_ships_on_the_runtime_base(manifest: Manifest) -> None:
    """Only the last stage gets RUNTIME_IMAGE: NVIDIA's runtime image for its devel image by default, the
    user's own BASE_IMAGE when given (the same OS, known to work), the Debian base itself when local."""
    _, builds = plan(manifest, "jax")
    assert builds[-1].build_args["RUNTIME_IMAGE"] == "nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04"
    assert builds[0].build_args["BASE_IMAGE"] == "nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04"
    assert all("RUNTIME_IMAGE" not in b.build_args for b in builds[:-1])
    _, override = plan(manifest, "jax", base_image="registry.local/cuda:13")
    assert override[-1].build_args["RUNTIME_IMAGE"] == "registry.local/cuda:13"
    local = plan_build(resolve(manifest, "jax", "wheel", local_base=True), request())
    assert local[-1].build_args["RUNTIME_IMAGE"] == "local/debian:trixie"
    _, cpu = plan(manifest, "cpu")  # no runtime_image in the manifest: its base image
    assert cpu[-1].build_args["RUNTIME_IMAGE"] == manifest.flavors["cpu"].base_image


@pytest.mark.parametrize("flavor", ["cpu", "maxtext"])
def test_final_stage_labels_and_image_args(manifest: Manifest, flavor: str) -> None:
    resolved, builds = plan(manifest, flavor)
    final = builds[-1]
    dated = f"{REGISTRY}/jax:{flavor}-{DATE}"
    assert final.labels[f"{OCI}source"] == SOURCE
    assert final.labels[f"{OCI}revision"] == REVISION
    assert final.labels[f"{OCI}created"] == CREATED
    assert final.labels[f"{OCI}version"] == DATE
    assert final.labels[f"{OCI}ref.name"] == dated
    assert final.labels["dev.jaxbench.flavor"] == flavor
    commits = {k: v for k, v in final.labels.items() if k.startswith(COMPONENT) and k.endswith(".commit")}
    assert commits == {
        f"{COMPONENT}{n}.commit": c.commit or "unknown" for n, c in resolved.components.items()
    }
    assert len(commits) == sum(len(s.components) for s in resolved.stages) > 0
    assert final.build_args["JAXBENCH_IMAGE"] == dated == final.tags[0]
    assert final.build_args["JAXBENCH_GIT_COMMIT"] == REVISION
    assert final.build_args["CREATED"] == CREATED


def test_wheel_versions_are_labelled_and_unknown_commits_say_so(manifest: Manifest) -> None:
    resolved, builds = plan(manifest, "cpu")
    labels = builds[-1].labels
    jax = resolved.components["jax"]
    assert jax.install == "wheel" and jax.version is not None
    assert labels[f"{COMPONENT}jax.version"] == jax.version
    assert labels[f"{COMPONENT}jax.commit"] == jax.commit
    unknown = [n for n, c in resolved.components.items() if c.commit is None]
    assert unknown, "the shipped cpu flavor has releases whose commit is not known yet"
    assert all(labels[f"{COMPONENT}{n}.commit"] == "unknown" for n in unknown)
    _, source_builds = plan(manifest, "maxtext")
    assert not any(k.startswith(COMPONENT) and k.endswith(".version") for k in source_builds[-1].labels)


def test_no_revision_means_no_revision_label(manifest: Manifest) -> None:
    _, builds = plan(manifest, "cpu", revision=None)
    assert f"{OCI}revision" not in builds[-1].labels
    assert builds[-1].build_args["JAXBENCH_GIT_COMMIT"] == ""


def test_plans_hold_only_their_stage_components(manifest: Manifest) -> None:
    resolved, builds = plan(manifest, "maxtext")
    by_stage = {s.name: s for s in resolved.stages}
    for index, build in enumerate(builds):
        stage = by_stage[build.stage]
        assert build.plan["stage"] == build.stage and build.plan["index"] == index
        assert build.plan["accelerator"] == "cuda"
        # Only the last stage names the flavor (the harness records it); the others are shared.
        assert build.plan.get("flavor") == ("maxtext" if build is builds[-1] else None)
        assert list(build.plan["components"]) == list(stage.components)
        for name, component in stage.components.items():
            assert build.plan["components"][name] == component.model_dump(mode="json")
    assert builds[0].plan["components"] == {} and builds[-1].plan["components"] == {}
    assert list(builds[2].plan["components"]) == ["maxtext"]
    assert "transformer-engine" in builds[1].plan["components"]


def test_pip_index_urls_reach_every_stage(manifest: Manifest) -> None:
    _, builds = plan(manifest, "cpu", pip_index_url="https://proxy.test/simple")
    assert all(b.build_args["PIP_INDEX_URL"] == "https://proxy.test/simple" for b in builds)
    assert all(b.build_args["PIP_EXTRA_INDEX_URL"] == "" for b in builds)


@pytest.mark.parametrize(
    ("registry", "date", "expected"),
    [
        ("GHCR.io/Acme", DATE, "REGISTRY"),
        ("ghcr.io/my org", DATE, "REGISTRY"),
        ("ghcr.io/", DATE, "REGISTRY"),
        ("", DATE, "REGISTRY"),
        (REGISTRY, "2026-02-30", "DATE '2026-02-30'"),
        (REGISTRY, "2026-1-05", "DATE"),
        (REGISTRY, "20261122", "DATE"),
        (REGISTRY, "yesterday", "DATE"),
    ],
)
def test_bad_registry_or_date(manifest: Manifest, registry: str, date: str, expected: str) -> None:
    with pytest.raises(InvalidInput, match=expected):
        plan(manifest, "cpu", registry=registry, date=date)


def test_good_registries() -> None:
    assert image_tags("localhost:5000/team/sub", "cpu", "2024-02-29") == (
        "localhost:5000/team/sub/jax:cpu-2024-02-29",
        "localhost:5000/team/sub/jax:cpu",
    )


@pytest.mark.parametrize("buildx", [True, False])
def test_build_command(manifest: Manifest, tmp_path: Path, buildx: bool) -> None:
    _, builds = plan(manifest, "cpu")
    final = builds[-1]
    argv = docker.build_command(final, tmp_path, "http://127.0.0.1:1/ca.pem", buildx)
    head = ["docker", "buildx", "build", "--load"] if buildx else ["docker", "build"]
    assert argv[: len(head)] == head and argv[-1] == str(tmp_path)
    pairs = list(itertools.pairwise(argv))
    assert ("--network", "host") in pairs
    assert ("--file", str(tmp_path / final.dockerfile)) in pairs
    assert [v for k, v in pairs if k == "--tag"] == list(final.tags)
    build_args = [v for k, v in pairs if k == "--build-arg"]
    assert "CA_URL=http://127.0.0.1:1/ca.pem" in build_args
    assert f"JAXBENCH_IMAGE={final.tags[0]}" in build_args
    assert len(build_args) == len(final.build_args) + 1
    assert [v for k, v in pairs if k == "--label"] == [f"{k}={v}" for k, v in final.labels.items()]
    no_ca = docker.build_command(builds[0], tmp_path, None, buildx)
    assert "CA_URL=" in no_ca and not any(a.startswith("--label") for a in no_ca)


def _fetch(url: str) -> bytes:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
    with opener.open(url, timeout=10) as response:
        return response.read()


def test_serve_ca_certificates_serves_the_bundle(tmp_path: Path) -> None:
    first, second = tmp_path / "a.crt", tmp_path / "b.crt"
    first.write_text("-----BEGIN A-----\nAAA\n-----END A-----\n\n")
    second.write_text("-----BEGIN B-----\nBBB\n-----END B-----")
    with docker.serve_ca_certificates([first, second]) as url:
        assert url is not None and url.startswith("http://127.0.0.1:")
        assert url.endswith(docker.CA_PATH)
        assert (
            _fetch(url)
            == b"-----BEGIN A-----\nAAA\n-----END A-----\n-----BEGIN B-----\nBBB\n-----END B-----\n"
        )
        with pytest.raises(urllib.error.HTTPError) as not_found:
            _fetch(url.removesuffix(docker.CA_PATH) + "/etc/shadow")
        assert not_found.value.code == 404
    with pytest.raises(urllib.error.URLError):
        _fetch(url)  # the server is gone after the build


def test_serve_ca_certificates_edges(tmp_path: Path) -> None:
    with docker.serve_ca_certificates([]) as url:
        assert url is None
    present = tmp_path / "present.crt"
    present.write_text("x\n")
    with (
        pytest.raises(InvalidInput, match=r"CA_CERTS: no such certificate file: .*absent\.crt"),
        docker.serve_ca_certificates([present, tmp_path / "absent.crt"]),
    ):
        pass


def test_build_refuses_a_missing_dockerfile_before_asking_docker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def engine() -> str:
        raise AssertionError("asked docker before checking the Dockerfiles")

    monkeypatch.setattr(docker, "engine_version", engine)
    (tmp_path / "containers").mkdir()
    (tmp_path / "containers" / "base.Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(InvalidInput, match=r"stages\.jax\.dockerfile: no containers/jax\.Dockerfile"):
        options = image_commands.BuildOptions("cpu", registry=REGISTRY, date=DATE)
        image_commands.build_images(options, tmp_path, Console(file=io.StringIO()))


def test_ca_certificates_keep_their_port_so_the_layer_cache_holds(tmp_path: Path) -> None:
    bundle = tmp_path / "proxy.crt"
    bundle.write_text("-----BEGIN C-----\nCCC\n-----END C-----\n")
    port = docker.preferred_ca_port(b"-----BEGIN C-----\nCCC\n-----END C-----\n")
    assert port in docker.CA_PORTS
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            pytest.skip(f"something else listens on 127.0.0.1:{port}")
    with docker.serve_ca_certificates([bundle]) as first:
        pass
    with docker.serve_ca_certificates([bundle]) as second:
        assert first == second == f"http://127.0.0.1:{port}{docker.CA_PATH}"
        # The port is busy (a concurrent build of the same bundle): another one still serves it.
        with docker.serve_ca_certificates([bundle]) as third:
            assert third is not None and third != second
            assert _fetch(third) == bundle.read_bytes()
    other = tmp_path / "other.crt"
    other.write_text("-----BEGIN D-----\nDDD\n-----END D-----\n")
    assert docker.preferred_ca_port(other.read_bytes()) != port


def test_build_names_a_missing_local_base_before_building(monkeypatch: pytest.MonkeyPatch) -> None:
    def build_stage(*args: object) -> None:
        raise AssertionError("built with a base image that is not there")

    monkeypatch.setattr(docker, "engine_version", lambda: "20.10.24")
    monkeypatch.setattr(docker, "image_exists", lambda reference: False)
    monkeypatch.setattr(docker, "build_stage", build_stage)
    repo = REPO
    with pytest.raises(
        InvalidInput,
        match=r"BASE_IMAGE=local/debian:trixie: no such local image; make it first with "
        r"scripts/os-base-image trixie local/debian:trixie",
    ):
        options = image_commands.BuildOptions(
            "jax", install="wheel", registry=REGISTRY, date=DATE, local_base=True
        )
        image_commands.build_images(options, repo, Console(file=io.StringIO()))


def test_a_base_image_and_the_local_base_are_one_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docker, "engine_version", lambda: pytest.fail("asked docker before the input"))
    options = image_commands.BuildOptions("cpu", base_image="local/debian:trixie", local_base=True)
    with pytest.raises(InvalidInput, match=r"BASE_IMAGE=local/debian:trixie and LOCAL_BASE=1: give one"):
        image_commands.build_images(options, Path("."), Console(file=io.StringIO()))


def test_the_local_base_plan_builds_on_debian_with_its_python(manifest: Manifest) -> None:
    resolved = resolve(manifest, "jax", "wheel", local_base=True)
    builds = plan_build(resolved, request())
    assert builds[0].build_args["BASE_IMAGE"] == "local/debian:trixie"
    assert builds[0].build_args["PYTHON_VERSION"] == "3.13"


def test_plan_files_keep_the_stage_order_of_components(manifest: Manifest) -> None:
    """The installer follows the plan's order (jax before TransformerEngine, which compiles against it)."""
    _, builds = plan(manifest, "jax")
    jax_stage = builds[1]
    written = json.loads(plan_text(jax_stage.plan))
    assert list(written["components"]) == manifest.stages["jax"].components
    assert list(written["components"]) != sorted(written["components"])  # the order is not by name


def test_the_harness_image_gets_every_package_of_the_jaxbench_command() -> None:
    """The image's `jaxbench` builds its whole parser: a package left out of the build context or the
    harness stage fails at its first command (a new layer once did)."""
    root = REPO
    packages = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    copied = set(
        re.findall(
            r"^COPY (\w+)/ /opt/jaxbench/src/\1/$", (root / "containers/harness.Dockerfile").read_text(), re.M
        )
    )
    let_in = set(re.findall(r"^!(\w+)/$", (root / ".dockerignore").read_text(), re.M))
    assert set(packages) <= copied, f"harness.Dockerfile does not copy {sorted(set(packages) - copied)}"
    assert set(packages) <= let_in, f".dockerignore keeps out {sorted(set(packages) - let_in)}"
