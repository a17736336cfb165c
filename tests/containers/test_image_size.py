"""`jaxbench image-size`: package groups, layer names, the layers of a `docker save` archive compressed as a
registry stores them, and the probe that runs inside an image, here on this machine's own files. How a
layer's bytes split among the owners of its files: tests/containers/test_owned_deflate.py.

    JAX_PLATFORMS=cpu python -m pytest -q tests/containers/test_image_size.py
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sysconfig
import tarfile
from pathlib import Path

import pytest
import rich
from rich.console import Console

from jaxbench.containers import docker, image_commands, size_probe
from jaxbench.containers.image_size import (
    GROUPS,
    Size,
    build_report,
    group_of,
    group_sizes,
    largest_layers,
    measure_archive,
    render,
    saved_image,
    step_name,
)
from jaxbench.core.errors import ExternalFailure, InvalidInput
from tests.support.processes import command_on_path


@pytest.mark.parametrize(
    ("bucket", "group"),
    [
        ("nvidia-cudnn-cu13", "CUDA libraries"),
        ("nvidia_nccl_cu13", "CUDA libraries"),
        ("cuda-bindings", "CUDA libraries"),
        ("jaxlib", "jaxlib"),
        ("jax", "jaxlib"),
        ("jax-cuda13-plugin", "jaxlib"),
        ("jax_cuda13_pjrt", "jaxlib"),
        ("transformer_engine_jax", "TransformerEngine"),
        ("transformer-engine-cu13", "TransformerEngine"),
        ("Flax", "frameworks"),
        ("orbax-checkpoint", "frameworks"),
        ("maxtext", "frameworks"),
        ("numpy", "Python"),
        ("jaxbench", "Python"),
        ("(python)", "Python"),
        ("(os)", "OS"),
    ],
)
def test_buckets_fall_into_their_group(bucket: str, group: str) -> None:
    assert group_of(bucket) == group


def test_groups_sum_their_buckets_largest_first() -> None:
    buckets = {
        "nvidia-cublas": {"bytes": 900, "compressed_bytes": 500},
        "nvidia-cudnn-cu13": {"bytes": 800, "compressed_bytes": 400},
        "jaxlib": {"bytes": 300, "compressed_bytes": 100},
        "(os)": {"bytes": 200, "compressed_bytes": 150},
    }
    groups = group_sizes(buckets)
    assert [g.name for g in groups][:3] == ["CUDA libraries", "OS", "jaxlib"]
    assert groups[0] == Size("CUDA libraries", 1700, 900)
    assert sorted(g.name for g in groups) == sorted(GROUPS)  # empty groups are shown, at zero


@pytest.mark.parametrize(
    ("created_by", "name"),
    [
        (
            "|3 CA_URL=http://127.0.0.1:1/ca.pem PIP_INDEX_URL= PLAN=a.json /bin/bash -o pipefail -c "
            "with-ca python3 /opt/jaxbench/install_stage.py plan.json",
            "RUN with-ca python3 /opt/jaxbench/install_stage.py plan.json",
        ),
        (
            "/bin/sh -c #(nop) COPY dir:0123abcd in /opt/jaxbench/src/harness/ ",
            "COPY … in /opt/jaxbench/src/harness/",
        ),
        ("/bin/sh -c #(nop)  ENV PATH=/opt/venv/bin", "ENV PATH=/opt/venv/bin"),
        ("", "(imported base)"),
        ("RUN |1 PLAN=a.json /bin/sh -c with-ca make install # buildkit", "RUN with-ca make install"),
        (
            "COPY containers/ /opt/jaxbench/src/containers/ # buildkit",
            "COPY containers/ /opt/jaxbench/src/containers/",
        ),
        ("ENV PATH=/opt/venv/bin # buildkit", "ENV PATH=/opt/venv/bin"),
        ("/bin/sh -c " + "x" * 200, "RUN " + "x" * 83 + "..."),
    ],
)
def test_step_names(created_by: str, name: str) -> None:
    assert step_name(created_by) == name


def tar_of(members: dict[str, bytes]) -> io.BytesIO:
    """A tar archive of these members, in this order, read from its start."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def _saved_archive(layers: dict[str, bytes], history: list[dict[str, object]]) -> io.BytesIO:
    """A `docker save` archive (Docker 20.10's layout) with these layers and history."""
    return tar_of(_saved_members(layers, history))


def _saved_members(layers: dict[str, bytes], history: list[dict[str, object]]) -> dict[str, bytes]:
    config = {"history": history, "rootfs": {"type": "layers"}}
    manifest = [{"Config": "abc.json", "RepoTags": ["x:y"], "Layers": list(layers)}]
    return {**layers, "abc.json": json.dumps(config).encode(), "manifest.json": json.dumps(manifest).encode()}


def test_layers_of_a_saved_archive_are_measured_as_a_registry_stores_them() -> None:
    base, step = os.urandom(50_000), b"repetitive layer " * 20_000
    archive = _saved_archive(
        {"1/layer.tar": base, "2/layer.tar": step},
        [
            {"created_by": ""},
            {"created_by": "/bin/sh -c #(nop)  ENV A=1", "empty_layer": True},
            {"created_by": "/bin/sh -c pip install x"},
        ],
    )
    layers = measure_archive(archive).layers
    assert [layer.name for layer in layers] == ["(imported base)", "RUN pip install x"]
    assert [layer.bytes for layer in layers] == [len(base), len(step)]
    # gzip at Docker's default level: random bytes do not shrink, repeated ones do
    expected = [len(gzip.compress(data, compresslevel=6, mtime=0)) for data in (base, step)]
    assert [layer.compressed_bytes for layer in layers] == expected
    assert layers[1].compressed_bytes < len(step) / 50


# --- Docker 25 and later: the OCI image layout ----------------------------------------------------------

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"


def _descriptor(media_type: str, data: bytes) -> dict[str, object]:
    return {
        "mediaType": media_type,
        "digest": f"sha256:{hashlib.sha256(data).hexdigest()}",
        "size": len(data),
    }


def _oci_archive(
    layers: list[bytes],
    history: list[dict[str, object]],
    *,
    docker_manifest: bool = False,
    nested: bool = False,
    layer_type: str = LAYER,
) -> io.BytesIO:
    """An archive in the OCI image layout (image-spec v1.1, image-layout.md): `oci-layout`, `index.json`,
    and each layer, the config and the manifest as a blob named by its sha256. `docker_manifest`: with the
    `manifest.json` Docker 25+ writes beside it (naming blobs); `nested`: the index points at another index
    of two platforms, of which only amd64's manifest is in the archive (containerd's image store)."""
    blobs: dict[str, bytes] = {}

    def blob(media_type: str, data: bytes) -> dict[str, object]:
        descriptor = _descriptor(media_type, data)
        blobs[f"blobs/sha256/{str(descriptor['digest']).removeprefix('sha256:')}"] = data
        return descriptor

    config = blob(
        "application/vnd.oci.image.config.v1+json",
        json.dumps({"architecture": "amd64", "os": "linux", "history": history, "rootfs": {}}).encode(),
    )
    layer_descriptors = [blob(layer_type, data) for data in layers]
    manifest = json.dumps(
        {"schemaVersion": 2, "mediaType": MANIFEST, "config": config, "layers": layer_descriptors}
    ).encode()
    top = blob(MANIFEST, manifest) | {"platform": {"architecture": "amd64", "os": "linux"}}
    if nested:
        elsewhere = _descriptor(MANIFEST, b"{}") | {"platform": {"architecture": "arm64", "os": "linux"}}
        top = blob(
            INDEX,
            json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [elsewhere, top]}).encode(),
        )
    files = {
        **blobs,
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [top]}).encode(),
    }
    if docker_manifest:
        names = [f"blobs/sha256/{str(d['digest']).removeprefix('sha256:')}" for d in layer_descriptors]
        config_name = f"blobs/sha256/{str(config['digest']).removeprefix('sha256:')}"
        files["manifest.json"] = json.dumps(
            [{"Config": config_name, "RepoTags": ["x:y"], "Layers": names}]
        ).encode()
    return tar_of(files)


HISTORY = [
    {"created_by": ""},
    {"created_by": "ENV A=1", "empty_layer": True},
    {"created_by": "RUN /bin/sh -c pip install x"},
]


@pytest.mark.parametrize(
    "layout", [{}, {"docker_manifest": True}, {"nested": True}], ids=["OCI", "Docker 25", "containerd"]
)
def test_layers_of_an_oci_layout_archive_are_measured(layout: dict[str, bool]) -> None:
    base, step = os.urandom(50_000), b"repetitive layer " * 20_000
    layers = measure_archive(_oci_archive([base, step], HISTORY, **layout)).layers
    assert [layer.name for layer in layers] == ["(imported base)", "RUN pip install x"]
    assert [layer.bytes for layer in layers] == [len(base), len(step)]
    expected = [len(gzip.compress(data, compresslevel=6, mtime=0)) for data in (base, step)]
    assert [layer.compressed_bytes for layer in layers] == expected


def test_a_compressed_layer_blob_counts_as_stored() -> None:
    data = b"a file's bytes " * 10_000
    packed = gzip.compress(data, mtime=0)
    [layer] = measure_archive(
        _oci_archive([packed], [{"created_by": "RUN make"}], layer_type=LAYER + "+gzip")
    ).layers
    assert (layer.bytes, layer.compressed_bytes) == (len(data), len(packed))


def test_an_archive_missing_what_its_index_names_is_refused_by_name() -> None:
    with tarfile.open(fileobj=_oci_archive([b"layer"], HISTORY[:1])) as tar:
        members = [(m, tar.extractfile(m)) for m in tar.getmembers()]
        contents = [(m, handle.read()) for m, handle in members if handle is not None]
    broken = io.BytesIO()
    with tarfile.open(fileobj=broken, mode="w") as tar:
        for member, data in contents:
            if b'"layers"' not in data:  # every member but the image manifest
                tar.addfile(member, io.BytesIO(data))
    broken.seek(0)
    with pytest.raises(ValueError, match=r"index.json: none of its manifests is in the archive"):
        measure_archive(broken)


def test_docker_save_of_docker_25_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`image-size` and the build record read `docker save` through saved_image: a docker that writes the
    OCI layout (as Docker 25 and later do) is measured, not refused with exit 6."""
    archive = tmp_path / "saved.tar"
    archive.write_bytes(
        _oci_archive([b"x" * 1000], [{"created_by": "RUN true"}], docker_manifest=True).getvalue()
    )
    command_on_path(tmp_path, monkeypatch, "docker", f'[ "$1" = save ] && exec cat {archive}\nexit 1\n')
    [layer] = saved_image("ghcr.io/example/jax:cpu").layers
    assert layer.name == "RUN true" and layer.bytes == 1000


def test_small_layers_fold_into_one_row() -> None:
    layers = [Size("big", 5_000_000, 2_000_000), Size("a", 10, 5), Size("b", 20, 7), Size("mid", 3e6, 1e6)]
    shown = largest_layers(layers)  # type: ignore[arg-type]
    assert [s.name for s in shown] == ["big", "mid", "(2 layers under 1 MB)"]
    assert shown[-1] == Size("(2 layers under 1 MB)", 30, 12)


def test_report_totals_json_and_table() -> None:
    buckets = {"jaxlib": {"bytes": 300, "compressed_bytes": 100}, "(os)": {"bytes": 5, "compressed_bytes": 4}}
    report = build_report("x:y", [Size("RUN a", 1000, 300), Size("(imported base)", 500, 200)], buckets)
    document = report.as_json()
    assert document["total"] == {"name": "total", "bytes": 1500, "compressed_bytes": 500}
    assert json.loads(json.dumps(document)) == document
    assert document["largest_distributions"] == [{"name": "jaxlib", "bytes": 300, "compressed_bytes": 100}]
    out = io.StringIO()
    render(report, Console(file=out, width=200))
    assert "x:y: 0.0 MB compressed" in out.getvalue() and "by package group" in out.getvalue()


@pytest.mark.slow
def test_the_probe_buckets_this_machines_files() -> None:
    files, folders = size_probe.owners()
    roots = size_probe.python_roots()
    rich_init = os.path.realpath(rich.__file__)
    assert size_probe.bucket_of(rich_init, files, folders, roots) == "rich"
    cached = Path(rich_init).parent / "__pycache__" / "never-recorded.pyc"  # RECORD leaves byte-code out
    assert size_probe.bucket_of(str(cached), files, folders, roots) == "rich"
    stdlib_json = os.path.realpath(Path(sysconfig.get_paths()["stdlib"]) / "json" / "__init__.py")
    assert size_probe.bucket_of(stdlib_json, files, folders, roots) == size_probe.OTHER_PYTHON
    assert size_probe.bucket_of("/etc/hostname", files, folders, roots) == size_probe.OS


def test_image_size_needs_an_engine_and_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    console = Console(file=io.StringIO())
    monkeypatch.setattr(docker, "engine_version", lambda: None)
    with pytest.raises(ExternalFailure, match="x:y: no Docker engine answers"):
        image_commands.image_size("x:y", False, console)
    monkeypatch.setattr(docker, "engine_version", lambda: "20.10")
    monkeypatch.setattr(docker, "image_exists", lambda reference: False)
    with pytest.raises(InvalidInput, match=r"x:y: no such image here \(make build FLAVOR=… or make pull"):
        image_commands.image_size("x:y", False, console)


def test_a_config_that_is_no_object_is_refused() -> None:
    """Found by the fuzzing (tests/jaxbench/test_fuzz_commands.py): a config blob holding a list raised
    AttributeError, a bug's exit 70, instead of a refused archive."""
    members = _saved_members({"1/layer.tar": b"x"}, []) | {"abc.json": b"[]"}
    with pytest.raises(ValueError, match=r"abc.json: expected an image config"):
        measure_archive(tar_of(members))
