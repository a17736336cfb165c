"""Files that readers never see half-written: a result, a badge, a cache (a run killed mid-write, a page
served while it is rewritten)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

READABLE = 0o644
"""mkstemp makes files only their owner may read; results and badges are read by others (web servers,
the nightly's other jobs)."""


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same directory, flushed to disk, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, READABLE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
