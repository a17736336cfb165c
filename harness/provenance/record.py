"""What a run's result records of where its numbers came from: library versions, devices, GPU driver,
performance-relevant environment, container image, git commit, framework and cluster job, as frozen pydantic
models embedded in the run's JSON result. `performance_env` is the allowlist of environment variables a
record may hold, applied again whenever a result is read. Pure: collection.py reads these from the machine.

    jaxbench run llama2       # the result's "provenance" section
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator

from jaxbench.core.credentials import looks_like_credential
from jaxbench.core.schema import Strict
from jaxbench.core.urls import scrub_document

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
