"""Provenance: pure parsers on fixed text, adapters with fakes, git against a real throwaway repository."""

from __future__ import annotations

import re
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.provenance.collection import (
    collect,
    collect_devices,
    collect_driver,
    collect_versions,
    parse_nvidia_smi,
    read_git_info,
    read_image_info,
    run_command,
)
from jaxbench.harness.provenance.record import GitInfo, GpuDriver, Provenance, performance_env
from tests.conftest import REPO

REPO_ROOT = REPO

# Header of `nvidia-smi` 580 on an H100 node, trimmed after the first GPU row.
NVIDIA_SMI_OUTPUT = """\
Tue Mar  3 02:14:07 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.03             Driver Version: 580.159.03     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   31C    P0             71W /  700W |       0MiB /  81559MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+
"""


# --- performance_env ----------------------------------------------------------------------------------------


def test_performance_env_keeps_only_performance_variables_sorted() -> None:
    kept = {
        "XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=true",
        "NCCL_DEBUG": "WARN",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "JAX_PLATFORMS": "cuda",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "NVTE_FUSED_ATTN": "1",
        "LIBTPU_INIT_ARGS": "--xla_tpu_enable_async_collective_fusion=true",
    }
    dropped = {"PATH": "/usr/bin", "HOME": "/root", "xla_flags": "--lookalike", "JAXBENCH_IMAGE": "img:1"}
    # Terraform shares the TF_ prefix and carries credentials in it; results are published.
    secrets = {
        "TF_VAR_db_password": "hunter2",
        "TF_TOKEN_app_terraform_io": "tok",
        "TF_CLI_CONFIG_FILE": "/root/.terraformrc",
        "CUDA_API_TOKEN": "tok",
        "NCCL_SECRET": "s",
    }

    env = performance_env({**dropped, **secrets, **kept})

    assert env == kept
    assert list(env) == sorted(kept)


# --- nvidia-smi ---------------------------------------------------------------------------------------------


def test_parse_nvidia_smi_reads_driver_and_cuda_version() -> None:
    assert parse_nvidia_smi(NVIDIA_SMI_OUTPUT) == GpuDriver(driver_version="580.159.03", cuda_version="13.0")


@pytest.mark.parametrize("garbage", ["", "command not found", "Driver Version: N/A   CUDA Version: |"])
def test_parse_nvidia_smi_garbage_gives_none(garbage: str) -> None:
    assert parse_nvidia_smi(garbage) == GpuDriver(driver_version=None, cuda_version=None)


def test_collect_driver_without_nvidia_smi_gives_none() -> None:
    calls: list[list[str]] = []

    def absent(argv: list[str]) -> str | None:
        calls.append(argv)
        return None

    assert collect_driver(run=absent) == GpuDriver(driver_version=None, cuda_version=None)
    assert calls == [["nvidia-smi"]]


def test_collect_driver_parses_what_nvidia_smi_prints() -> None:
    driver = collect_driver(run=lambda argv: NVIDIA_SMI_OUTPUT)
    assert driver == GpuDriver(driver_version="580.159.03", cuda_version="13.0")


def test_run_command_returns_none_on_failure_instead_of_raising() -> None:
    assert run_command(["/nonexistent/jaxbench-no-such-binary"]) is None
    assert run_command(["git", "--no-such-option"]) is None
    assert run_command(["sleep", "5"], timeout_s=0.1) is None
    assert run_command(["echo", "hi"]) == "hi\n"


# --- image


def test_read_image_info_from_env(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text("jax:\n  url: https://github.com/jax-ml/jax.git\n  commit: abc123\n")

    image = read_image_info(
        {"JAXBENCH_IMAGE": "ghcr.io/example/jaxbench:nightly", "JAXBENCH_MANIFEST": str(manifest)},
        default_manifest_paths=(),
    )

    assert image.reference == "ghcr.io/example/jaxbench:nightly"
    assert image.manifest == {"jax": {"url": "https://github.com/jax-ml/jax.git", "commit": "abc123"}}
    assert image.manifest_path == str(manifest)


def test_read_image_info_falls_back_to_default_path(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text("flax: {version: 0.12.0}\n")

    image = read_image_info({}, default_manifest_paths=(tmp_path / "absent.yaml", manifest))

    assert image.reference is None
    assert image.manifest == {"flax": {"version": "0.12.0"}}
    assert image.manifest_path == str(manifest)


def test_no_manifest_outside_an_image_gives_none(tmp_path: Path) -> None:
    image = read_image_info({}, default_manifest_paths=(tmp_path / "absent.yaml",))
    assert (image.reference, image.manifest, image.manifest_path) == (None, None, None)


def test_a_named_manifest_that_is_missing_is_an_error(tmp_path: Path) -> None:
    absent = tmp_path / "absent.yaml"
    with pytest.raises(InvalidInput, match=re.escape(f"JAXBENCH_MANIFEST={absent}: no such manifest file")):
        read_image_info({"JAXBENCH_MANIFEST": str(absent)}, default_manifest_paths=(tmp_path / "also.yaml",))


@pytest.mark.parametrize("text", ["jax: [unclosed\n", "- just\n- a list\n", ""])
def test_read_image_info_invalid_manifest_names_the_path(tmp_path: Path, text: str) -> None:
    manifest = tmp_path / "broken.yaml"
    manifest.write_text(text)

    with pytest.raises(InvalidInput, match=re.escape(str(manifest))):
        read_image_info({"JAXBENCH_MANIFEST": str(manifest)})


# --- git


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=jaxbench",
            "-c",
            "user.email=jaxbench@example.com",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        check=True,
        capture_output=True,
    )


def test_read_git_info_in_a_real_repository(tmp_path: Path) -> None:
    tracked = tmp_path / "recipe.yaml"
    tracked.write_text("steps: 10\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "recipe.yaml")
    _git(tmp_path, "commit", "-q", "-m", "first")

    clean = read_git_info(tmp_path, environ={})
    assert clean.commit is not None and re.fullmatch(r"[0-9a-f]{40}", clean.commit)
    assert clean.dirty is False

    (tmp_path / "untracked.txt").write_text("results do not make a checkout dirty\n")
    assert read_git_info(tmp_path, environ={}).dirty is False

    tracked.write_text("steps: 20\n")
    assert read_git_info(tmp_path, environ={}) == GitInfo(commit=clean.commit, dirty=True)


def test_read_git_info_outside_a_repository(tmp_path: Path) -> None:
    # A fake run stands for git failing, so a git checkout above tmp_path cannot leak in.
    def not_a_repo(argv: list[str]) -> str | None:
        return None

    baked = "0123456789abcdef0123456789abcdef01234567"
    assert read_git_info(tmp_path, run=not_a_repo, environ={}) == GitInfo(commit=None, dirty=None)
    assert read_git_info(tmp_path, run=not_a_repo, environ={"JAXBENCH_GIT_COMMIT": baked}) == GitInfo(
        commit=baked, dirty=None
    )


def test_read_git_info_outside_a_repository_with_real_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stop git's discovery at tmp_path's parent so the test means the same wherever tmp_path lives.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert read_git_info(tmp_path, environ={}) == GitInfo(commit=None, dirty=None)


# --- devices


@dataclass(frozen=True)
class FakeDevice:
    platform: str
    device_kind: str


def test_collect_devices_with_real_cpu_jax(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only takes effect if JAX has not been initialized yet; the pytest command sets it too.
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")

    info = collect_devices()

    assert info.platform == "cpu"
    assert info.kind
    assert info.count >= 1 and info.local_count == info.count
    assert info.process_count == 1
    assert info.hostname == socket.gethostname()


def test_collect_devices_joins_distinct_kinds_in_order() -> None:
    devices = [
        FakeDevice("gpu", "NVIDIA H100 80GB HBM3"),
        FakeDevice("gpu", "NVIDIA H200"),
        FakeDevice("gpu", "NVIDIA H100 80GB HBM3"),
    ]

    info = collect_devices(devices, process_count=2, hostname="node-7", local_devices=devices[:2])

    assert info.platform == "gpu"
    assert info.kind == "NVIDIA H100 80GB HBM3 + NVIDIA H200"
    assert (info.count, info.local_count, info.process_count, info.hostname) == (3, 2, 2, "node-7")


def test_collect_devices_rejects_no_devices() -> None:
    with pytest.raises(ValueError, match="at least one device"):
        collect_devices([], process_count=1, hostname="h", local_devices=[])


# --- versions


def test_collect_versions_with_fake_lookup() -> None:
    installed = {
        "jax": "0.12.0",
        "jaxlib": "0.12.0",
        "jax-cuda13-plugin": "0.12.0",
        "flax": "0.12.1",
        "orbax-checkpoint": "0.11.0",
        "transformer-engine-jax": "2.8.0",
        "numpy": "2.3.1",
    }

    versions = collect_versions(distribution_version=installed.get)

    assert versions.python
    assert (versions.jax, versions.jaxlib, versions.flax) == ("0.12.0", "0.12.0", "0.12.1")
    assert versions.cuda_plugin == "jax-cuda13-plugin 0.12.0"
    assert versions.optax is None
    assert versions.orbax_checkpoint == "0.11.0"
    assert versions.transformer_engine == "2.8.0"
    assert versions.numpy == "2.3.1"


def test_collect_versions_without_cuda_plugin() -> None:
    versions = collect_versions(distribution_version={"jax": "0.12.0"}.get)
    assert versions.jax == "0.12.0"
    assert versions.cuda_plugin is None and versions.jaxlib is None


def test_collect_versions_real_environment_sees_jax() -> None:
    import jax

    assert collect_versions().jax == jax.__version__


# --- everything together


def test_collect_round_trips_through_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")

    p = collect(REPO_ROOT)

    assert Provenance.model_validate_json(p.model_dump_json()) == p
    assert p.env["NCCL_DEBUG"] == "WARN"
    assert "PATH" not in p.env
