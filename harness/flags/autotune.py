"""One GEMM autotuning per compiled XLA and GPU, shared by every run on the machine, so that one configuration
compiles to one program.

XLA picks each GPU matmul's backend and tiling by timing candidates, so two processes of one configuration
can compile different programs; sharing XLA's per-fusion autotune cache makes them agree, and "the program
changed" then means the stack changed it. The folder is keyed by the compiled XLA's libraries and the GPU,
and is not part of the run's flag identity. Why, and what was measured: docs/design.md, "Shared GEMM
autotuning".

    JAXBENCH_AUTOTUNE_CACHE=/shared/cache jaxbench run llama2     # JAXBENCH_AUTOTUNE_CACHE=off: no sharing
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from jaxbench.core.files import cache_folder

CACHE_FLAG = "xla_gpu_per_fusion_autotune_cache_dir"
ROOT_VARIABLE = "JAXBENCH_AUTOTUNE_CACHE"
OFF = "off"
XLA_DISTRIBUTIONS = (
    "jaxlib",
    "jax-cuda12-plugin",
    "jax-cuda12-pjrt",
    "jax-cuda13-plugin",
    "jax-cuda13-pjrt",
)
"""The distributions that hold the compiled XLA a GPU run uses."""


def cache_root(environ: Mapping[str, str]) -> Path | None:
    """Where the shared folders live: JAXBENCH_AUTOTUNE_CACHE, else the user's cache folder; None when off."""
    chosen = environ.get(ROOT_VARIABLE, "").strip()
    if chosen.lower() == OFF:
        return None
    if chosen:
        return Path(chosen)
    return cache_folder("xla-autotune", environ)


def library_identities(
    distributions: Iterable[str] = XLA_DISTRIBUTIONS,
    find: Callable[[str], importlib.metadata.Distribution] = importlib.metadata.distribution,
) -> list[str]:
    """One line per shared library of the installed XLA: distribution, version, file and the hash its wheel
    recorded (its size where none was recorded)."""
    lines = []
    for name in distributions:
        try:
            distribution = find(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in distribution.files or []:
            if not re.search(r"\.so(\.|$)", file.name):
                continue
            if file.hash is not None:
                identity = file.hash.value
            else:
                path = Path(str(distribution.locate_file(file)))
                identity = f"size {path.stat().st_size}" if path.is_file() else "missing"
            lines.append(f"{name} {distribution.version} {file} {identity}")
    return sorted(lines)


def folder_for(root: Path, libraries: Iterable[str], device_kind: str) -> Path:
    """root/<digest of the compiled XLA>/<device kind as a plain name>."""
    digest = hashlib.sha256("\n".join(sorted(libraries)).encode()).hexdigest()[:16]
    device = re.sub(r"[^A-Za-z0-9_-]+", "-", device_kind).strip("-") or "gpu"
    return root / digest / device


def _created_or_none(folder: Path) -> Path | None:
    """`folder`, created; None where it cannot be (the run then tunes alone)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return folder


def shared_root(environ: Mapping[str, str]) -> Path | None:
    """The root of the shared folders, created; None when sharing is off or the root cannot be made. The
    image launcher mounts it into a GPU run's container."""
    root = cache_root(environ)
    return None if root is None else _created_or_none(root)


def shared_folder(
    platform: str,
    device_kind: str,
    user_flags: Iterable[str],
    environ: Mapping[str, str],
    libraries: Callable[[], list[str]] = library_identities,
) -> Path | None:
    """The folder a GPU run shares its autotuning through, created; None on a CPU, when the user set the
    flag themselves, when sharing is off, or when the folder cannot be made or named in XLA_FLAGS (which
    splits at white space): the run then tunes alone."""
    if platform != "gpu" or CACHE_FLAG in user_flags:
        return None
    root = cache_root(environ)
    if root is None or re.search(r"\s", str(root)):
        return None
    return _created_or_none(folder_for(root, libraries(), device_kind))
