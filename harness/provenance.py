"""Where a run's numbers came from: library versions, devices, GPU driver, performance-relevant
environment, container image and git commit, as frozen pydantic models embedded in the run's JSON result.

A nightly result is only useful if, when it moves, it names what moved with it: a new jaxlib, another
driver, an `XLA_FLAGS` change, another image or another commit. The pure parts (`performance_env`,
`parse_nvidia_smi`) take plain data; everything that touches the machine goes through a small adapter
(`installed_version`, `run_command`, JAX in `collect_devices`) that tests replace with fakes.

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
from typing import Annotated, Any

from pydantic import AfterValidator

from core.credentials import looks_like_credential
from core.documents import parse_yaml
from core.errors import InvalidInput
from core.files import read_text
from core.schema import Strict
from core.urls import scrub_document

# Environment variables that change what XLA, NCCL, CUDA, cuDNN, cuBLAS, JAX, TransformerEngine or libtpu do,
# so can move a number: an allowlist, since results are published and the environment holds other things.
# Matched case-sensitively: these libraries only read the upper-case spellings.
PERFORMANCE_ENV_PREFIXES: tuple[str, ...] = (
    "XLA_",
    "JAX_",
    "NCCL_",
    "CUDA_",
    "CUDNN_",
    "CUBLAS_",
    "TF_",
    "NVTE_",
    "LIBTPU_",
)
# NVIDIA_ as a whole would also take the labels NGC images set (NVIDIA_BUILD_ID, NVIDIA_REQUIRE_CUDA), which
# the image reference already records: only the two that change what runs.
PERFORMANCE_ENV_NAMES: frozenset[str] = frozenset({"NVIDIA_TF32_OVERRIDE", "NVIDIA_VISIBLE_DEVICES"})
# Terraform shares the "TF_" prefix with TensorFlow/TSL (XLA reads TSL's TF_CPP_* logging knobs) and passes
# secrets as TF_VAR_* and TF_TOKEN_*.
_NOT_PERFORMANCE_PREFIXES: tuple[str, ...] = ("TF_VAR_", "TF_TOKEN_", "TF_CLI_", "TF_LOG", "TF_CLOUD_")


def _is_performance_variable(name: str) -> bool:
    if name.startswith(_NOT_PERFORMANCE_PREFIXES):
        return False
    return name.startswith(PERFORMANCE_ENV_PREFIXES) or name in PERFORMANCE_ENV_NAMES


def performance_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted variables of `environ`, sorted by name, without any whose name or value looks like a
    credential (a key in NCCL_ACCESS_KEY_ID, a token in XLA_FLAGS): the whole variable goes, not just the
    value, so a result never says which secret was set."""
    return {
        name: value
        for name, value in sorted(environ.items())
        if _is_performance_variable(name) and not looks_like_credential(name, value)
    }


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


class Versions(Strict):
    """Installed distribution versions; None when a distribution is not installed."""

    python: str
    jax: str | None
    jaxlib: str | None
    cuda_plugin: str | None
    """Distribution name and version, e.g. "jax-cuda13-plugin 0.12.0"; several joined with " + "."""
    flax: str | None
    optax: str | None
    orbax_checkpoint: str | None
    transformer_engine: str | None
    numpy: str | None
    cudnn: str | None = None
    nccl: str | None = None


class DeviceInfo(Strict):
    platform: str
    """JAX platform, e.g. "gpu" or "cpu"."""
    kind: str
    """`device_kind` of the devices, e.g. "NVIDIA H100 80GB HBM3"; distinct kinds joined with " + "."""
    count: int
    """Devices across all processes."""
    local_count: int
    """Devices attached to this process."""
    process_count: int
    hostname: str


class GpuDriver(Strict):
    """From the `nvidia-smi` header; both None where nvidia-smi is absent or fails."""

    driver_version: str | None
    cuda_version: str | None
    """Highest CUDA version the driver supports, not the toolkit the wheels were built with."""


class ImageInfo(Strict):
    reference: str | None
    """Container image reference from $JAXBENCH_IMAGE; None outside our images."""
    # Scrubbed again when a result is read, as `env` is: a manifest recorded by hand or by an older jaxbench
    # may name a repository with its token.
    manifest: Annotated[dict[str, Any] | None, AfterValidator(scrub_document)]
    """Resolved pin manifest of the image or virtualenv (what containers/manifest.yaml resolved to), every
    URL in it without credentials (core/urls.py)."""
    manifest_path: str | None
    packages: list[str] | None = None
    """Every installed distribution as `name==version`, from the packages.txt beside the manifest."""


class GitInfo(Strict):
    commit: str | None
    dirty: bool | None
    """Tracked files differ from `commit`; None when unknown (no checkout, or git failed)."""


class FrameworkInfo(Strict):
    """The framework whose own trainer ran the recipe (a framework backend); None for native runs."""

    name: str
    """The backend, e.g. "maxtext"."""
    distribution: str
    version: str | None
    """The installed distribution's version, as its environment reports it."""
    commit: str | None
    """The framework's commit from its environment's resolved manifest, where known."""
    python: str
    """The interpreter that ran the trainer (its own virtualenv's, or the image's)."""


SLURM_VERSION_ENV = "JAXBENCH_SLURM_VERSION"
"""Set by the SLURM launcher in the job's script (`scontrol --version` on the login node)."""


class ClusterJob(Strict):
    """The scheduler's job a run was part of: a SLURM job, as its processes read it from the environment
    SLURM sets; or, in a result that a cluster launcher wrote because no process did, the job as the
    launcher saw it (harness/launch/job_result.py), a SLURM job or a Kubernetes JobSet."""

    scheduler: str
    """`slurm` or `kubernetes`."""
    job_id: str
    """SLURM's job id; a JobSet's namespace/name."""
    nodes: str | None
    """The job's nodes: SLURM's node list as it writes it (node-[0-3]); a JobSet's pods' nodes, in rank order,
    comma-separated."""
    node_count: int | None
    tasks: int | None
    """Processes of the job (a JobSet's: its pods)."""
    version: str | None
    """The scheduler's version: `scontrol --version`; None for a JobSet (not asked)."""


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


class Provenance(Strict):
    versions: Versions
    """Of the environment that trained: the framework's own for a framework backend."""
    devices: DeviceInfo
    driver: GpuDriver
    # Filtered again when a result is read, so one written before the credential rule (or by hand) cannot
    # carry a secret into the store.
    env: Annotated[dict[str, str], AfterValidator(performance_env)]
    """Performance-relevant environment variables only (see `performance_env`), sorted by name."""
    image: ImageInfo
    git: GitInfo
    framework: FrameworkInfo | None = None
    job: ClusterJob | None = None
    """The cluster job of a run launched through a scheduler (`--launcher slurm`; `--launcher k8s` where the
    launcher wrote the result)."""


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
