"""Reading a run's provenance (record.py) from the machine: installed versions, devices, the GPU driver, the
environment, the container image and its manifest, the git commit and the cluster job. A nightly result is
only useful if, when it moves, it names what moved with it: a new jaxlib, another driver, an `XLA_FLAGS`
change, another image or another commit. Parsing takes plain data (`parse_nvidia_smi`); everything that
touches the machine goes through a small adapter (`installed_version`, `run_command`, JAX in
`collect_devices`) that tests replace with fakes.

    jaxbench run llama2       # the result's "provenance" section is `collect(...)` for that run
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxbench.core.documents import parse_yaml
from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import read_text
from jaxbench.harness.provenance.record import (
    ClusterJob,
    DeviceInfo,
    FrameworkInfo,
    GitInfo,
    GpuDriver,
    ImageInfo,
    Provenance,
    Versions,
    performance_env,
)

# Set inside our container images (containers/): the image reference, the pin manifest, and the commit the
# image was built from (for runs where the checkout itself is not a git repository).
IMAGE_ENV = "JAXBENCH_IMAGE"
MANIFEST_ENV = "JAXBENCH_MANIFEST"
OVERLAY_KIND = "virtualenv-overlay"
"""The `kind` of an overlay's manifest (containers/overlay.py): this virtualenv with some components at
other commits, put in front on PYTHONPATH, its manifest named by JAXBENCH_MANIFEST."""
GIT_COMMIT_ENV = "JAXBENCH_GIT_COMMIT"
VENV_MANIFEST = Path("share") / "jaxbench" / "manifest.yaml"
"""Under a virtualenv's prefix: the resolved manifest `make` records there (containers/record.py)."""
# An image's resolved manifest, then the one `make build`/`make venv` records in the virtualenv.
DEFAULT_MANIFEST_PATHS: tuple[Path, ...] = (
    Path("/opt/jaxbench/manifest.yaml"),
    Path(sys.prefix) / VENV_MANIFEST,
)
PACKAGES_FILE = "packages.txt"
"""Beside the manifest: the full `name==version` list of the environment."""

# Distribution names to look up per field, first found wins. importlib.metadata normalizes names
# ("transformer_engine" == "transformer-engine"); "transformer-engine-jax" is the JAX extension that pip
# installs beside the "transformer-engine" meta-package, and the only one present in some source builds.
_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "jax": ("jax",),
    "jaxlib": ("jaxlib",),
    "flax": ("flax",),
    "optax": ("optax",),
    "orbax_checkpoint": ("orbax-checkpoint",),
    "transformer_engine": ("transformer-engine", "transformer-engine-jax"),
    "numpy": ("numpy",),
    # The CUDA libraries jax's wheels load: the pip-installed ones (images may use system libraries instead,
    # which their manifest records).
    "cudnn": ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12"),
    "nccl": ("nvidia-nccl-cu13", "nvidia-nccl-cu12"),
}
_CUDA_PLUGINS: tuple[str, ...] = ("jax-cuda13-plugin", "jax-cuda12-plugin")

COMMAND_TIMEOUT_S = 5.0
"""nvidia-smi can hang on a wedged GPU or driver; recording provenance must never stall a run."""


SLURM_VERSION_ENV = "JAXBENCH_SLURM_VERSION"
"""Set by the SLURM launcher in the job's script (`scontrol --version` on the login node)."""


def read_cluster_job(environ: Mapping[str, str]) -> ClusterJob | None:
    """The SLURM job this process runs in, or None outside one."""
    job_id = environ.get("SLURM_JOB_ID")
    if not job_id:
        return None

    def number(name: str) -> int | None:
        value = environ.get(name, "")
        return int(value) if value.isdigit() else None

    return ClusterJob(
        scheduler="slurm",
        job_id=job_id,
        nodes=environ.get("SLURM_JOB_NODELIST"),
        node_count=number("SLURM_JOB_NUM_NODES"),
        tasks=number("SLURM_NTASKS"),
        version=environ.get(SLURM_VERSION_ENV),
    )


# --- adapters: the only functions here that touch the machine ---------------------------------------------


def installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_command(argv: list[str], timeout_s: float = COMMAND_TIMEOUT_S) -> str | None:
    """stdout of `argv`, or None if it cannot start, exits non-zero or runs past `timeout_s`."""
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


# --- collection ---------------------------------------------------------------------------------------------


DISTRIBUTIONS: tuple[str, ...] = tuple(
    dict.fromkeys([*(n for names in _DISTRIBUTIONS.values() for n in names), *_CUDA_PLUGINS])
)
"""Every distribution `collect_versions` asks about (another environment's probe answers for these)."""


def collect_versions(
    *,
    distribution_version: Callable[[str], str | None] = installed_version,
    python: str | None = None,
) -> Versions:
    def first_found(names: tuple[str, ...]) -> str | None:
        return next((v for v in map(distribution_version, names) if v is not None), None)

    plugins = [f"{name} {v}" for name in _CUDA_PLUGINS if (v := distribution_version(name)) is not None]
    return Versions(
        python=python or platform.python_version(),
        cuda_plugin=" + ".join(plugins) or None,
        **{field: first_found(names) for field, names in _DISTRIBUTIONS.items()},
    )


def _distinct(values: Sequence[str]) -> str:
    return " + ".join(dict.fromkeys(values))


def collect_devices(
    devices: Sequence[Any] | None = None,
    process_count: int | None = None,
    hostname: str | None = None,
    *,
    local_devices: Sequence[Any] | None = None,
) -> DeviceInfo:
    """Arguments left None are read from JAX (imported here only) and the host name from the OS.

    Call this after the run's environment is final: the first JAX call initializes the backend and freezes
    `XLA_FLAGS` and friends for the process.
    """
    if devices is None or local_devices is None or process_count is None:
        import jax

        devices = jax.devices() if devices is None else devices
        local_devices = jax.local_devices() if local_devices is None else local_devices
        process_count = jax.process_count() if process_count is None else process_count
    if not devices:
        raise ValueError("collect_devices needs at least one device")
    return DeviceInfo(
        platform=_distinct([d.platform for d in devices]),
        kind=_distinct([d.device_kind for d in devices]),
        count=len(devices),
        local_count=len(local_devices),
        process_count=process_count,
        hostname=socket.gethostname() if hostname is None else hostname,
    )


# Header line of plain `nvidia-smi`:
# "| NVIDIA-SMI 580.159.03     Driver Version: 580.159.03     CUDA Version: 13.0     |"
_DRIVER_RE = re.compile(r"Driver Version:\s*([0-9][0-9.]*)")
_CUDA_RE = re.compile(r"CUDA Version:\s*([0-9][0-9.]*)")


def parse_nvidia_smi(output: str) -> GpuDriver:
    driver = _DRIVER_RE.search(output)
    cuda = _CUDA_RE.search(output)
    return GpuDriver(
        driver_version=driver.group(1) if driver else None,
        cuda_version=cuda.group(1) if cuda else None,
    )


def collect_driver(*, run: Callable[[list[str]], str | None] = run_command) -> GpuDriver:
    output = run(["nvidia-smi"])
    return (
        parse_nvidia_smi(output) if output is not None else GpuDriver(driver_version=None, cuda_version=None)
    )


def _load_manifest(path: Path) -> dict[str, Any]:
    loaded = parse_yaml(read_text(path), f"image manifest {path}")
    if not isinstance(loaded, dict) or not all(isinstance(k, str) for k in loaded):
        raise InvalidInput(
            f"image manifest {path} must be a YAML mapping with string keys, got {loaded!r:.80}"
        )
    return loaded


def read_image_info(
    environ: Mapping[str, str], default_manifest_paths: Sequence[Path] = DEFAULT_MANIFEST_PATHS
) -> ImageInfo:
    """Image reference and pin manifest. No manifest at the default paths gives None fields (not inside one
    of our images); a manifest named by JAXBENCH_MANIFEST that is missing, or a broken one, is an error."""
    path: Path | None
    if environ.get(MANIFEST_ENV):
        path = Path(environ[MANIFEST_ENV])
        if not path.is_file():
            raise InvalidInput(f"{MANIFEST_ENV}={path}: no such manifest file")
    else:
        path = next((p for p in default_manifest_paths if p.exists()), None)
    packages_path = path.parent / PACKAGES_FILE if path is not None else None
    return ImageInfo(
        reference=environ.get(IMAGE_ENV) or None,
        manifest=_load_manifest(path) if path is not None else None,
        manifest_path=str(path) if path is not None else None,
        packages=_load_packages(packages_path)
        if packages_path is not None and packages_path.is_file()
        else None,
    )


def _load_packages(path: Path) -> list[str]:
    try:
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInput(f"package list {path} is unreadable: {e}") from e


def read_git_info(
    repo_dir: Path,
    *,
    run: Callable[[list[str]], str | None] = run_command,
    environ: Mapping[str, str] | None = None,
) -> GitInfo:
    """Commit and dirtiness of the checkout at `repo_dir`; outside one, the commit an image baked in."""
    git = ["git", "-C", str(repo_dir)]
    head = run([*git, "rev-parse", "HEAD"])
    if head is not None and head.strip():
        # Untracked files (results, caches) don't change what ran, so they don't make the checkout dirty.
        status = run([*git, "status", "--porcelain", "--untracked-files=no"])
        return GitInfo(commit=head.strip(), dirty=None if status is None else bool(status.strip()))
    environ = os.environ if environ is None else environ
    return GitInfo(commit=environ.get(GIT_COMMIT_ENV) or None, dirty=None)


def collect(
    repo_dir: Path,
    environ: Mapping[str, str] | None = None,
    *,
    devices: DeviceInfo | None = None,
    versions: Versions | None = None,
    image: ImageInfo | None = None,
    framework: FrameworkInfo | None = None,
) -> Provenance:
    """`devices`: what the backend ran on; read from JAX in this process when not given. `versions` and
    `image`: of the environment that trained, where that is not this process's (a framework's own)."""
    environ = os.environ if environ is None else environ
    return Provenance(
        versions=versions or collect_versions(),
        devices=devices or collect_devices(),
        driver=collect_driver(),
        env=performance_env(environ),
        image=image or read_image_info(environ),
        git=read_git_info(repo_dir, environ=environ),
        framework=framework,
        job=read_cluster_job(environ),
    )
