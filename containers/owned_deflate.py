"""A layer's tar deflated once, as a registry stores it, its bytes before and after compression split among
the owners of the files they carry (a Python distribution, Python's own files, the OS's): one pass serves
the layer view and the package view of an image's size.

A file's compressed bytes must be out of the compressor when the next owner's file begins, so at each
change of owner the deflate block is ended (zlib's Z_BLOCK: the window is kept, at most seven bits are left
unattributed). A distribution's files lie together, so owners change hundreds to thousands of times in an
image and the stream stays within about 0.01 % of an uninterrupted one. Entries without data (folders,
links, whiteouts) never change the owner: their headers go with the file before them (before the first,
with it). A member that is no tar (a config, a manifest), or a layer without file data, is measured whole
as `NOT_A_TAR`.
"""

from __future__ import annotations

import tarfile
import zlib
from collections.abc import Callable, Iterator
from typing import Protocol

GZIP_LEVEL = 6
"""Go's compress/gzip DefaultCompression: what `docker push` uses for each layer."""
CHUNK = 1 << 20
NOT_A_TAR = "(not a tar)"


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


OwnerOf = Callable[[str], str]
"""A path in the image ("/opt/venv/…") to the owner its bytes are counted under."""


class _SplitDeflate:
    """A reader over the layer's bytes for tarfile to parse, deflating what passes through. Bytes are
    deflated only once the entry they belong to is known: tarfile reads ahead of the header it returns."""

    def __init__(self, source: Readable, level: int = GZIP_LEVEL) -> None:
        self._source = source
        self._deflate = zlib.compressobj(level, zlib.DEFLATED, 31)  # 31: a gzip member
        self._pending = bytearray()
        self._read = 0  # bytes taken from the source
        self._fed = 0  # of those, bytes deflated (and attributed)
        self._owned_until = 0  # bytes before this belong to the current owner
        self.owner: str | None = None
        """Whose bytes pass now; the first file's owner also takes the headers before it."""
        self.sizes: dict[str, list[int]] = {}
        """owner -> [bytes, compressed bytes]"""
        self.source_failed = False

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._source.read(size)
        except Exception:
            self.source_failed = True  # the archive around the layer is damaged, not the layer
            raise
        self._read += len(data)
        self._pending += data
        self._feed(self._owned_until)
        return data

    def _count(self, plain: int, packed: bytes) -> None:
        total = self.sizes.setdefault(self.owner or NOT_A_TAR, [0, 0])
        total[0] += plain
        total[1] += len(packed)

    def _feed(self, until: int) -> None:
        count = min(until, self._read) - self._fed
        if count > 0:
            self._count(count, self._deflate.compress(self._pending[:count]))
            del self._pending[:count]
            self._fed += count

    def enter(self, header: int, data_end: int, owner: str) -> None:
        """An entry whose header starts at byte `header` and whose data ends before `data_end`."""
        if self.owner is None:
            self.owner = owner
        self._feed(header)  # the padding of the entry before, and the headers of entries without data
        if owner != self.owner:
            self._count(0, self._deflate.flush(zlib.Z_BLOCK))
            self.owner = owner
        self._owned_until = data_end
        self._feed(data_end)

    def finish(self) -> None:
        """Deflate the rest (the tar's end blocks, or all of a member that is no tar) and end the stream."""
        while self.read(CHUNK):
            pass
        self._feed(self._read)
        self._count(0, self._deflate.flush())


def image_path(name: str) -> str:
    """A tar member's name as the path it has in the image."""
    parts = [part for part in name.split("/") if part not in ("", ".")]
    return "/" + "/".join(parts)


def _data_entries(split: _SplitDeflate) -> Iterator[tuple[tarfile.TarInfo, int]]:
    """Each entry with data of the tar passing through `split`, and where its data ends in the stream: at
    its size, or sooner where the next header starts (a sparse file's size is its expanded one). Stops
    quietly where the member is no tar or its tar is damaged; a damaged archive around it is raised."""
    try:
        with tarfile.open(fileobj=split, mode="r|", bufsize=CHUNK) as tar:  # type: ignore[call-overload]
            for entry in tar:
                if entry.isreg() and entry.size > 0:
                    yield entry, min(entry.offset_data + entry.size, tar.offset)
    except (tarfile.TarError, ValueError):
        if split.source_failed:
            raise


def deflate_split(source: Readable, owner_of: OwnerOf | None = None) -> dict[str, tuple[int, int]]:
    """owner -> (bytes, bytes deflated) of one member of a saved image, whose sums are the member's length
    and its length gzipped at `GZIP_LEVEL`; all under `NOT_A_TAR` where the member is no tar (or no
    `owner_of` is given). What is left after a damaged tar stays with the last owner."""
    split = _SplitDeflate(source)
    if owner_of is not None:
        for entry, data_end in _data_entries(split):
            split.enter(entry.offset, data_end, owner_of(image_path(entry.name)))
    split.finish()
    return {owner: (plain, packed) for owner, (plain, packed) in split.sizes.items()}
