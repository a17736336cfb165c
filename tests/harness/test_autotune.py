"""Shared GEMM autotuning (harness/flags/autotune.py): one folder per compiled XLA and GPU, given to GPU runs
only, outside the flags' identity, and never where the user chose their own."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from jaxbench.harness import flags as harness_flags
from jaxbench.harness.config import FlagOverrides
from jaxbench.harness.flags import autotune, environment
from jaxbench.harness.flags.check import ProbeResult
from jaxbench.harness.runtime.result import flags_record

H200 = environment.DeviceHint("gpu", "NVIDIA H200")
LIBRARIES = ["jaxlib 0.11.2 jaxlib/_jax.so sha-a", "jax-cuda13-plugin 0.11.2 xla_cuda_plugin.so sha-b"]


def known_flags(_: object) -> ProbeResult:
    return ProbeResult([], None)


def test_the_cache_root_follows_the_variable_then_the_users_cache() -> None:
    assert autotune.cache_root({"JAXBENCH_AUTOTUNE_CACHE": "/shared/x"}) == Path("/shared/x")
    assert autotune.cache_root({"JAXBENCH_AUTOTUNE_CACHE": "OFF"}) is None
    assert autotune.cache_root({"XDG_CACHE_HOME": "/c", "HOME": "/h"}) == Path("/c/jaxbench/xla-autotune")
    assert autotune.cache_root({"HOME": "/h"}) == Path("/h/.cache/jaxbench/xla-autotune")


def test_one_folder_per_compiled_xla_and_gpu() -> None:
    root = Path("/cache")
    folder = autotune.folder_for(root, LIBRARIES, "NVIDIA H200")
    assert folder.parent.parent == root and folder.name == "NVIDIA-H200"
    assert autotune.folder_for(root, list(reversed(LIBRARIES)), "NVIDIA H200") == folder
    other_build = [LIBRARIES[0], LIBRARIES[1].replace("sha-b", "sha-c")]
    assert autotune.folder_for(root, other_build, "NVIDIA H200").parent != folder.parent
    assert autotune.folder_for(root, LIBRARIES, "NVIDIA H100 80GB HBM3").name == "NVIDIA-H100-80GB-HBM3"
    assert autotune.folder_for(root, LIBRARIES, "../..").name == "gpu"  # never a way out of the root


def test_the_installed_jaxlib_has_an_identity_and_a_missing_distribution_is_skipped() -> None:
    lines = autotune.library_identities()
    version = importlib.metadata.version("jaxlib")
    assert lines and all(line.startswith(f"jaxlib {version} ") for line in lines)
    assert all(".so" in line.split()[2] for line in lines)

    def nowhere(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    assert autotune.library_identities(find=nowhere) == []


def test_gpu_runs_share_a_folder_outside_their_identity(tmp_path: Path) -> None:
    environ = {"JAXBENCH_AUTOTUNE_CACHE": str(tmp_path / "cache")}

    def for_gpu(environ: dict[str, str]) -> harness_flags.FlagSet:
        return harness_flags.for_run(
            "auto", FlagOverrides(), H200, environ, drop_unknown=False, precision="bf16",
            run_probe=known_flags, autotune_libraries=lambda: LIBRARIES,
        )  # fmt: skip

    shared = for_gpu(environ)
    folder = autotune.folder_for(tmp_path / "cache", LIBRARIES, "NVIDIA H200")
    assert shared.autotune_cache == str(folder) and folder.is_dir()
    xla_flags = environment.variables(shared)["XLA_FLAGS"]
    assert f"--xla_gpu_per_fusion_autotune_cache_dir={folder}" in xla_flags.split()
    assert autotune.CACHE_FLAG not in shared.xla
    alone = for_gpu({"JAXBENCH_AUTOTUNE_CACHE": "off"})
    assert (
        alone.autotune_cache is None and autotune.CACHE_FLAG not in environment.variables(alone)["XLA_FLAGS"]
    )
    assert shared.identity_hash() == alone.identity_hash()
    record = flags_record(shared)
    assert record.autotune_cache == str(folder) and record.xla_flags == xla_flags
    assert record.identity == flags_record(alone).identity

    yours = for_gpu({**environ, "XLA_FLAGS": "--xla_gpu_per_fusion_autotune_cache_dir=/mine"})
    assert yours.autotune_cache is None
    assert environment.variables(yours)["XLA_FLAGS"].count("autotune_cache_dir") == 1


def test_cpu_runs_and_unusable_folders_tune_alone(tmp_path: Path) -> None:
    cpu = harness_flags.for_run(
        "auto", FlagOverrides(), environment.DeviceHint("cpu", "cpu"),
        {"JAXBENCH_AUTOTUNE_CACHE": str(tmp_path)}, drop_unknown=False, run_probe=known_flags,
    )  # fmt: skip
    assert cpu.autotune_cache is None and not any(tmp_path.iterdir())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    unusable = {"JAXBENCH_AUTOTUNE_CACHE": str(blocker)}
    assert autotune.shared_folder("gpu", "NVIDIA H200", {}, unusable, libraries=lambda: LIBRARIES) is None
    spaced = {"JAXBENCH_AUTOTUNE_CACHE": str(tmp_path / "with space")}
    assert autotune.shared_folder("gpu", "NVIDIA H200", {}, spaced, libraries=lambda: LIBRARIES) is None
