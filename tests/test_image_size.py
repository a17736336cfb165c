"""`jaxbench image-size`: package groups, layer names, the layers of a `docker save` archive compressed as a
registry stores them, and the probe that runs inside an image, here on this machine's own files.

    JAX_PLATFORMS=cpu python -m pytest -q tests/test_image_size.py
"""

from __future__ import annotations

import gzip
import io
import json
import os
import sysconfig
import tarfile
from pathlib import Path

import pytest
import rich
from rich.console import Console

from containers import commands, docker, size_probe
from containers.image_size import (
    GROUPS,
    Size,
    build_report,
    group_of,
    group_sizes,
    largest_layers,
    layer_sizes,
    render,
    step_name,
)
from core.errors import ExternalFailure, InvalidInput


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
        ("/bin/sh -c " + "x" * 200, "RUN " + "x" * 83 + "..."),
    ],
)
def test_step_names(created_by: str, name: str) -> None:
    assert step_name(created_by) == name


def _saved_archive(layers: dict[str, bytes], history: list[dict[str, object]]) -> io.BytesIO:
    """A `docker save` archive (Docker 20.10's layout) with these layers and history."""
    buffer = io.BytesIO()
    config = {"history": history, "rootfs": {"type": "layers"}}
    manifest = [{"Config": "abc.json", "RepoTags": ["x:y"], "Layers": list(layers)}]
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in [*layers.items(), ("abc.json", json.dumps(config).encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


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
    layers = layer_sizes(archive)
    assert [layer.name for layer in layers] == ["(imported base)", "RUN pip install x"]
    assert [layer.bytes for layer in layers] == [len(base), len(step)]
    # gzip at Docker's default level: random bytes do not shrink, repeated ones do
    expected = [len(gzip.compress(data, compresslevel=6, mtime=0)) for data in (base, step)]
    assert [layer.compressed_bytes for layer in layers] == expected
    assert layers[1].compressed_bytes < len(step) / 50


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
        commands.image_size("x:y", False, console)
    monkeypatch.setattr(docker, "engine_version", lambda: "20.10")
    monkeypatch.setattr(docker, "image_exists", lambda reference: False)
    with pytest.raises(InvalidInput, match=r"x:y: no such image here \(make build FLAVOR=… or make pull"):
        commands.image_size("x:y", False, console)
