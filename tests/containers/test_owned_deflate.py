"""A layer's tar deflated once, its bytes split among the owners of its files (containers/owned_deflate.py):
the split adds up to the layer, each owner gets its own file's compressed bytes (not its neighbour's), and
`jaxbench image-size` deflates every byte of the saved image once, the probe inside the image only naming
owners.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_owned_deflate.py
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest
import rich

from jaxbench.containers import measure, owned_deflate
from jaxbench.containers.owned_deflate import NOT_A_TAR, deflate_split, image_path
from jaxbench.containers.saved_image import _Inflated, _Replayed, saved_layers
from jaxbench.core.errors import ExternalFailure
from tests.containers.test_image_size import HISTORY, LAYER, _oci_archive, _saved_archive
from tests.support.processes import command_on_path

RANDOM = os.urandom(200_000)
"""Bytes that do not shrink: their owner's compressed share is at least their length."""
REPEATED = b"the same line again\n" * 10_000
"""Bytes that shrink to almost nothing."""


def layer_tar(entries: list[tuple[str, bytes | None]]) -> bytes:
    """A layer's tar: (name, data) files, a folder where data is None, a symbolic link for names with '->'."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in entries:
            link = name.partition(" -> ")
            info = tarfile.TarInfo(link[0])
            if link[1]:
                info.type, info.linkname = tarfile.SYMTYPE, link[2]
            elif data is None:
                info.type = tarfile.DIRTYPE
            else:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
    return buffer.getvalue()


def owner(path: str) -> str:
    return path.split("/")[2] if path.startswith("/site/") else "(os)"


def test_the_split_adds_up_to_the_layer_deflated_whole() -> None:
    tar = layer_tar(
        [("site", None), ("site/noise/a.so", RANDOM), ("site/text/b.py", REPEATED), ("etc/x", b"k")]
    )
    split = deflate_split(io.BytesIO(tar), owner)
    assert sum(plain for plain, _ in split.values()) == len(tar)
    whole = len(gzip.compress(tar, compresslevel=6, mtime=0))
    # a block ended per change of owner moves zlib's own block boundaries: a little, either way
    assert abs(sum(packed for _, packed in split.values()) - whole) < 0.005 * whole


def test_each_owner_gets_its_own_files_compressed_bytes() -> None:
    """Owners alternate, each of its files far from the compressor's window of the other: were the output of
    one file counted under the next (deflate holds back what it has not emitted), the random bytes' share
    would land on the repeated ones."""
    entries: list[tuple[str, bytes | None]] = []
    for round_ in range(3):
        entries += [(f"site/noise/{round_}.so", RANDOM), (f"site/text/{round_}.py", REPEATED)]
    split = deflate_split(io.BytesIO(layer_tar(entries)), owner)
    assert set(split) == {"noise", "text"}
    noise, text = split["noise"], split["text"]
    assert noise[1] >= 3 * len(RANDOM)
    assert text[1] < 0.02 * text[0]


def test_entries_without_data_go_with_a_file_and_never_change_the_owner() -> None:
    """Folders before the first file go with it; a link and a folder between two files of one owner leave
    one owner, not three."""
    tar = layer_tar(
        [
            ("site", None),
            ("site/text", None),
            ("site/text/a.py", REPEATED),
            ("site/text/link.py -> a.py", None),
            ("usr", None),
            ("site/text/b.py", REPEATED),
        ]
    )
    assert set(deflate_split(io.BytesIO(tar), owner)) == {"text"}


def test_a_member_that_is_no_tar_is_measured_whole() -> None:
    config = json.dumps({"history": []}).encode() * 100
    assert deflate_split(io.BytesIO(config), owner) == {
        NOT_A_TAR: (len(config), len(gzip.compress(config, compresslevel=6, mtime=0)))
    }


def test_a_damaged_archive_around_the_layer_is_not_taken_for_a_layer_that_is_no_tar() -> None:
    tar = layer_tar([("site/noise/a.so", RANDOM)])

    class Cut(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            if self.tell() > 50_000:
                raise tarfile.ReadError("unexpected end of data")
            return super().read(min(size or 0, 10_000) if size and size > 0 else 10_000)

    with pytest.raises(tarfile.ReadError, match="unexpected end of data"):
        deflate_split(Cut(tar), owner)


@pytest.mark.skipif(shutil.which("tar") is None, reason="needs GNU tar to write a sparse file")
@pytest.mark.parametrize("tar_format", ["gnu", "posix"])
def test_a_sparse_file_keeps_only_its_own_bytes(tmp_path: Path, tar_format: str) -> None:
    """A sparse entry's size is its expanded one (50 MB here) while the tar holds 100 kB of it: the file
    after it keeps its own bytes."""
    site = tmp_path / "site"
    (site / "noise").mkdir(parents=True)
    (site / "text").mkdir()
    with open(site / "noise" / "sparse.so", "wb") as sparse:
        sparse.truncate(50_000_000)
        sparse.seek(10_000_000)
        sparse.write(RANDOM[:100_000])
    (site / "text" / "b.py").write_bytes(REPEATED)
    archive = tmp_path / "layer.tar"
    subprocess.run(
        [
            "tar",
            "--sparse",
            "--sort=name",
            f"--format={tar_format}",
            "-cf",
            str(archive),
            "-C",
            str(tmp_path),
            "site",
        ],
        check=True,
    )
    split = deflate_split(io.BytesIO(archive.read_bytes()), owner)
    assert sum(plain for plain, _ in split.values()) == archive.stat().st_size
    assert split["text"][0] >= len(REPEATED) and split["noise"][0] < archive.stat().st_size - len(REPEATED)


def test_a_gzip_blob_inflates_a_read_at_a_time() -> None:
    """A layer of zeros inflates a thousandfold: each read returns at most what was asked for."""
    tar = layer_tar([("site/text/zeros", bytes(20_000_000))])
    packed = gzip.compress(tar, mtime=0)
    inflated = _Inflated(_Replayed(packed[:1000], io.BytesIO(packed[1000:]), keep=False))
    sizes = []
    while chunk := inflated.read(65_536):
        sizes.append(len(chunk))
    assert sum(sizes) == len(tar) and max(sizes) <= 65_536


@pytest.mark.parametrize(
    ("name", "path"),
    [("./opt/venv/x.py", "/opt/venv/x.py"), ("usr//lib/a.so", "/usr/lib/a.so"), ("etc", "/etc")],
)
def test_member_names_are_image_paths(name: str, path: str) -> None:
    assert image_path(name) == path


def test_a_copy_a_later_layer_shadows_counts_where_the_registry_stores_it() -> None:
    """Pushed bytes: a file rewritten by a later layer is stored twice, once in each layer."""
    first = layer_tar([("site/text/a.py", REPEATED)])
    second = layer_tar([("site/text/a.py", REPEATED + b"changed\n")])
    layers = saved_layers(_saved_archive({"1/layer.tar": first, "2/layer.tar": second}, HISTORY), owner)
    assert [layer.owners["text"][0] for layer in layers] == [len(first), len(second)]


def test_a_compressed_blob_splits_its_stored_size() -> None:
    tar = layer_tar([("site/noise/a.so", RANDOM), ("site/text/b.py", REPEATED)])
    packed = gzip.compress(tar, compresslevel=9, mtime=0)
    archive = _oci_archive([packed], [{"created_by": "RUN make"}], layer_type=LAYER + "+gzip")
    [layer] = saved_layers(archive, owner)
    assert sum(p for _, p in layer.owners.values()) == layer.compressed_bytes == len(packed)
    assert sum(b for b, _ in layer.owners.values()) == layer.bytes == len(tar)
    assert layer.owners["noise"][1] > 0.95 * len(RANDOM) > 50 * layer.owners["text"][1]


class CountingDeflate:
    """zlib as owned_deflate uses it, counting the bytes given to every compressor."""

    def __init__(self) -> None:
        self.fed = 0
        self.Z_BLOCK, self.DEFLATED = zlib.Z_BLOCK, zlib.DEFLATED

    def compressobj(self, *args: Any) -> Any:
        inner, counter = zlib.compressobj(*args), self

        class Counted:
            def compress(self, data: bytes) -> bytes:
                counter.fed += len(data)
                return inner.compress(data)

            def flush(self, *mode: int) -> bytes:
                return inner.flush(*mode)

        return Counted()


def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: str) -> Path:
    """`docker save` prints the archive written to the returned path; `docker run` runs `run` (sh)."""
    archive = tmp_path / "saved.tar"
    command_on_path(
        tmp_path,
        monkeypatch,
        "docker",
        f'[ "$1" = save ] && exec cat {archive}\n[ "$1" = run ] && {run}\nexit 1\n',
    )
    return archive


def test_a_probe_that_fails_stops_the_measurement_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a layer measured as no tar, nor `docker save` blamed: the owners' question failed."""
    archive = fake_docker(tmp_path, monkeypatch, "echo 'python3: not found' >&2; exit 127")
    archive.write_bytes(
        _saved_archive({"1/layer.tar": layer_tar([("etc/x", REPEATED)])}, HISTORY[:1]).getvalue()
    )
    with pytest.raises(
        ExternalFailure, match=r"asking who owns the files inside x:y failed: python3: not found"
    ):
        measure.size_report("x:y")


def test_image_size_deflates_each_byte_of_the_saved_image_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget of the measurement: one pass. `docker save` here is an archive of two layers whose files
    sit where this machine's rich and Python are; `docker run … python3 -` runs the real size_probe.py on
    this machine, which names owners and compresses nothing."""
    site = Path(rich.__file__).resolve().parent
    stdlib = Path(json.__file__).resolve().parent
    layers = {
        "1/layer.tar": layer_tar(
            [(str(stdlib / "big.py").lstrip("/"), REPEATED), ("etc/os-release", RANDOM)]
        ),
        "2/layer.tar": layer_tar([(str(site / "console.py").lstrip("/"), RANDOM + REPEATED)]),
    }
    archive = fake_docker(tmp_path, monkeypatch, f"exec {sys.executable} -")
    archive.write_bytes(_saved_archive(layers, HISTORY).getvalue())
    counting = CountingDeflate()
    monkeypatch.setattr(owned_deflate, "zlib", counting)

    report = measure.size_report("ghcr.io/example/jax:cpu")

    with tarfile.open(archive) as saved:
        assert counting.fed == sum(member.size for member in saved.getmembers() if member.isfile())
    groups = {group.name: group for group in report.groups}
    total = report.total
    assert sum(g.bytes for g in groups.values()) == total.bytes == sum(len(t) for t in layers.values())
    assert sum(g.compressed_bytes for g in groups.values()) == total.compressed_bytes
    assert groups["OS"].compressed_bytes >= len(RANDOM) and groups["Python"].compressed_bytes >= len(RANDOM)
    [rich_size] = report.distributions  # stdlib's file is Python's own, not a distribution's
    assert rich_size.name == "rich" and rich_size.compressed_bytes >= len(RANDOM)
