"""The layers of a `docker save` archive, in build order, with the history step that made each and its size
uncompressed and compressed as a registry stores it, read as a stream (nothing written to disk), and both
split among the owners of the files each layer carries (containers/owned_deflate.py).

Two layouts: Docker before 25 writes the docker-archive format (`manifest.json`, `<id>/layer.tar`,
`<id>.json`); Docker 25 and later write an OCI image layout (`oci-layout`, `index.json`, every manifest,
config and layer a blob under `blobs/sha256/<hex>`; a `manifest.json` beside it names blobs too). A blob's
name says nothing of what it is, so every member is measured while it streams past and the small JSON ones
are kept; `index.json` (or `manifest.json`) then says which are the config and the layers.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_image_size.py
"""

from __future__ import annotations

import dataclasses
import json
import tarfile
import zlib
from collections.abc import Mapping
from typing import IO, Any

from jaxbench.containers.owned_deflate import CHUNK, OwnerOf, Readable, deflate_split

MAX_DOCUMENT_BYTES = 64 << 20
"""Largest member kept as a possible JSON document (an index, manifest or config: kilobytes in practice)."""
_GZIP_MAGIC = b"\x1f\x8b"
_INDEX_MEDIA_TYPES = frozenset(
    {"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}
)


@dataclasses.dataclass(frozen=True)
class SavedLayer:
    created_by: str
    """The history step that made the layer, as the image config records it ("" when it names none)."""
    owners: Mapping[str, tuple[int, int]]
    """owner -> (bytes of the layer's tar, their share of it compressed as a registry stores it: gzip at
    Docker's default level, or the blob's own size where the archive holds it compressed), split among the
    owners of the files it carries (containers/owned_deflate.py)."""

    @property
    def bytes(self) -> int:
        return sum(plain for plain, _ in self.owners.values())

    @property
    def compressed_bytes(self) -> int:
        return sum(packed for _, packed in self.owners.values())


@dataclasses.dataclass(frozen=True)
class _Member:
    owners: dict[str, tuple[int, int]]
    """As a layer's (SavedLayer.owners), whatever the member is."""
    document: Any | None
    """The member parsed as JSON, where it is a small one (an object, or manifest.json's list)."""


class SavedArchiveError(ValueError):
    """The archive is not one `docker save` writes, or misses a part its manifest names."""


class _Replayed:
    """The member's bytes from its start again after the first chunk was read to tell what it is, keeping a
    copy of them where they may be a JSON document."""

    def __init__(self, first: bytes, rest: Readable, keep: bool) -> None:
        self._first, self._rest = first, rest
        self.kept: list[bytes] | None = [first] if keep else None

    def read(self, size: int = -1) -> bytes:
        if self._first:
            data, self._first = self._first, b""
            return data
        data = self._rest.read(size)
        if self.kept is not None and data:
            self.kept.append(data)
        return data


class _Inflated:
    """A gzip member's bytes, decompressed as they are read, at most `size` (or a chunk) a read: a layer of
    zeros inflates a thousandfold, which tarfile would otherwise slice again on every read."""

    def __init__(self, source: _Replayed) -> None:
        self._source = source
        self._inflate = zlib.decompressobj(31)  # 31: a gzip member

    def read(self, size: int = -1) -> bytes:
        limit = size if size > 0 else CHUNK
        while True:
            packed = self._inflate.unconsumed_tail or self._source.read(CHUNK)
            if not packed:
                return self._inflate.flush()
            data = self._inflate.decompress(packed, limit)
            if data:
                return data


def _stored_split(owners: Mapping[str, tuple[int, int]], stored: int) -> dict[str, tuple[int, int]]:
    """A compressed blob's own size split among the owners as their bytes deflated again split it (the
    blob's compressor is not ours; the shares are what one pass can tell)."""
    redone = sum(packed for _, packed in owners.values()) or 1
    split = {owner: (plain, stored * packed // redone) for owner, (plain, packed) in owners.items()}
    if split:
        largest = max(split, key=lambda owner: split[owner][1])
        plain, packed = split[largest]
        split[largest] = (plain, packed + stored - sum(p for _, p in split.values()))
    return split


def _measure(stream: IO[bytes], size: int, owner_of: OwnerOf | None) -> _Member:
    """Uncompressed and compressed length of one member, split among owners where it is a layer's tar, and
    its JSON where it is a small document. A gzip-compressed blob (an OCI layout may hold its layers so)
    counts as stored: its size, and the length of what it decompresses to."""
    first = stream.read(CHUNK)
    source = _Replayed(first, stream, keep=first[:1] in (b"{", b"[") and size <= MAX_DOCUMENT_BYTES)
    if first.startswith(_GZIP_MAGIC):
        split = deflate_split(_Inflated(source), owner_of)
        return _Member(_stored_split(split, size), None)
    owners = deflate_split(source, owner_of)
    document = None
    if source.kept is not None:
        try:
            document = json.loads(b"".join(source.kept))
        except ValueError:
            document = None  # a layer whose first file name starts with "{"
    return _Member(owners, document)


def _read_members(archive: IO[bytes], owner_of: OwnerOf | None) -> dict[str, _Member]:
    members: dict[str, _Member] = {}
    with tarfile.open(fileobj=archive, mode="r|") as tar:
        for member in tar:
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                members[member.name.removeprefix("./")] = _measure(handle, member.size, owner_of)
    return members


def _document(members: Mapping[str, _Member], name: str, what: str) -> Any:
    member = members.get(name)
    if member is None or member.document is None:
        raise SavedArchiveError(f"the archive has no {what} ({name})")
    return member.document


def _blob(descriptor: Any, what: str) -> str:
    """The member name of an OCI descriptor's blob: `blobs/<algorithm>/<hex>`."""
    digest = str(descriptor.get("digest") or "") if isinstance(descriptor, Mapping) else ""
    algorithm, colon, encoded = digest.partition(":")
    if not (colon and algorithm and encoded) or "/" in digest:  # a digest never names another folder
        raise SavedArchiveError(f"{what}: expected a descriptor with a digest, got {descriptor!r:.200}")
    return f"blobs/{algorithm}/{encoded}"


def _oci_parts(members: Mapping[str, _Member]) -> tuple[str, list[str]]:
    """(config, layers) member names through index.json, down nested indexes (a multi-platform image saved
    from containerd's store) to the first image manifest whose blob the archive holds."""
    document, what = _document(members, "index.json", "index.json"), "index.json"
    while isinstance(document, Mapping) and (
        "manifests" in document or document.get("mediaType") in _INDEX_MEDIA_TYPES
    ):
        present = [d for d in document.get("manifests") or [] if _blob(d, what) in members]
        if not present:
            raise SavedArchiveError(f"{what}: none of its manifests is in the archive")
        what = _blob(present[0], what)
        document = _document(members, what, "image manifest")
    if not isinstance(document, Mapping) or not isinstance(document.get("layers"), list):
        raise SavedArchiveError(f"{what}: expected an image manifest with layers")
    return _blob(document.get("config"), f"{what} config"), [
        _blob(d, f"{what} layers") for d in document["layers"]
    ]


def _docker_parts(members: Mapping[str, _Member]) -> tuple[str, list[str]]:
    """(config, layers) member names through manifest.json (docker-archive; Docker 25's names blobs)."""
    manifests = _document(members, "manifest.json", "manifest.json or index.json")
    if not isinstance(manifests, list) or len(manifests) != 1 or not isinstance(manifests[0], Mapping):
        raise SavedArchiveError("manifest.json: expected the manifest of one image")
    config, layers = manifests[0].get("Config"), manifests[0].get("Layers")
    if not isinstance(config, str) or not isinstance(layers, list):
        raise SavedArchiveError("manifest.json: expected Config and Layers")
    return config, [str(layer) for layer in layers]


def saved_layers(archive: IO[bytes], owner_of: OwnerOf | None = None) -> list[SavedLayer]:
    """Each layer of a `docker save` archive (either layout), in build order, its bytes split by `owner_of`
    (all under owned_deflate.NOT_A_TAR without one)."""
    members = _read_members(archive, owner_of)
    config_name, layer_names = _oci_parts(members) if "index.json" in members else _docker_parts(members)
    config = _document(members, config_name, "image config")
    history = config.get("history") if isinstance(config, Mapping) else ()
    if not isinstance(history, list | None):
        raise SavedArchiveError(f"{config_name}: expected an image config (an object, its history a list)")
    history = [h for h in history or [] if isinstance(h, Mapping) and not h.get("empty_layer")]
    steps = [str(h.get("created_by", "")) for h in history]
    steps += [""] * (len(layer_names) - len(steps))
    layers = []
    for step, name in zip(steps, layer_names, strict=False):
        if name not in members:
            raise SavedArchiveError(f"the archive has no layer {name}")
        layers.append(SavedLayer(step, members[name].owners))
    return layers
