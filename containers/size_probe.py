"""Runs inside an image (standard library only, like install_stage.py): every regular file's size, by the
Python distribution that installed it, by the Python install it sits in, or else as the OS's; each bucket
also compressed the way a registry stores a layer (gzip at its default level), so the sizes add up to
what `docker push` sends. `jaxbench image-size` runs it with `docker run` and groups the buckets.

    docker run --rm --entrypoint python3 IMAGE - < containers/size_probe.py
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import stat
import sys
import sysconfig
import zlib

SKIPPED = ("/proc", "/sys", "/dev", "/run", "/tmp", "/results")
"""Mounts and scratch folders of the running container, not the image."""
PYTHON_ROOTS = ("/opt/pax", "/usr/lib/python3", "/usr/local/lib/python3")
"""Where Python installs live besides this interpreter's own (the pax flavor's Python 3.10 in /opt/pax):
files under them that no distribution claims are Python's own."""


def python_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return (
        sys.prefix,
        paths["stdlib"],
        paths["platstdlib"],
        paths["purelib"],
        paths["platlib"],
        *PYTHON_ROOTS,
    )


OTHER_PYTHON = "(python)"
OS = "(os)"
CHUNK = 1 << 20
GZIP_LEVEL = 6
"""Go's compress/gzip DefaultCompression, which `docker push` uses for layers."""


def owners() -> tuple[dict[str, str], dict[str, str]]:
    """file path -> distribution, and folder -> distribution (for byte-code and data RECORD leaves out)."""
    files: dict[str, str] = {}
    folders: dict[str, str] = {}
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"] or "unknown"
        for member in distribution.files or []:
            path = os.path.realpath(str(distribution.locate_file(member)))
            files[path] = name
            folder = os.path.dirname(path)
            if not folder.endswith("site-packages"):
                folders.setdefault(folder, name)
    return files, folders


def bucket_of(path: str, files: dict[str, str], folders: dict[str, str], roots: tuple[str, ...]) -> str:
    """The distribution that installed `path` (or whose folder holds it), else Python's own, else the OS's."""
    if path in files:
        return files[path]
    folder = os.path.dirname(path)
    while folder not in ("/", "") and not folder.endswith("site-packages"):
        if folder in folders:
            return folders[folder]
        folder = os.path.dirname(folder)
    return OTHER_PYTHON if path.startswith(roots) else OS


def main() -> None:
    files, folders = owners()
    roots = python_roots()
    sizes: dict[str, list[int]] = {}
    compressors: dict[str, zlib._Compress] = {}
    seen: set[tuple[int, int]] = set()
    for root, directories, names in os.walk("/"):
        directories[:] = [d for d in directories if os.path.join(root, d) not in SKIPPED]
        for name in names:
            path = os.path.join(root, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) in seen:
                continue  # links and hard links count once, where the data is
            seen.add((info.st_dev, info.st_ino))
            bucket = bucket_of(os.path.realpath(path), files, folders, roots)
            compressor = compressors.setdefault(bucket, zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31))
            total = sizes.setdefault(bucket, [0, 0])
            total[0] += info.st_size
            try:
                with open(path, "rb") as handle:
                    while chunk := handle.read(CHUNK):
                        total[1] += len(compressor.compress(chunk))
            except OSError:
                continue
    for bucket, compressor in compressors.items():
        sizes[bucket][1] += len(compressor.flush())
    json.dump({b: {"bytes": s[0], "compressed_bytes": s[1]} for b, s in sizes.items()}, sys.stdout)


if __name__ == "__main__":
    main()
