"""Runs inside an image (standard library only, like install_stage.py): who owns each file — the Python
distribution that installed it, the Python install it sits in, or else the OS. It prints the map, not
sizes: `jaxbench image-size` reads the image's layers from `docker save` and splits each layer's bytes by
`bucket_of` under this map (containers/owned_deflate.py), so the package view and the layer view come from
one pass and add up to the same total.

    docker run --rm --entrypoint python3 IMAGE - < containers/size_probe.py
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
import sysconfig

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
    json.dump({"files": files, "folders": folders, "roots": list(python_roots())}, sys.stdout)


if __name__ == "__main__":
    main()
