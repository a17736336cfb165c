"""`jaxbench push` and `publish` for real: against a registry from scripts/start-registry and this machine's
Docker engine (skipped where neither is here; .ci/run starts both). The plan and the docker commands
against fakes are tests/containers/test_publish.py.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from jaxbench.containers import docker, image_commands
from jaxbench.containers.publish import known_arch
from jaxbench.core.errors import ExitCode
from tests.conftest import REPO

pytestmark = pytest.mark.docker


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=300), out


def _engine_arch() -> str | None:
    return docker.DockerCli().engine_architecture() if shutil.which("docker") else None


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    if _engine_arch() is None:
        pytest.skip("no Docker engine answers (docker version); scripts/start-dockerd starts one")
    if not Path("/usr/bin/docker-registry").is_file():
        pytest.skip(
            "no /usr/bin/docker-registry (Debian's docker-registry; scripts/start-registry installs it)"
        )
    with socket.socket() as probe:  # a free port: a registry already on 5000 keeps its own contents
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    state = tmp_path / "registry"
    done = subprocess.run(
        [REPO / "scripts" / "start-registry", state, str(port)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"localhost:{port}"
    try:
        yield f"localhost:{port}/jaxbench"
    finally:
        os.kill(int((state / "registry.pid").read_text()), signal.SIGTERM)


def _inspect(reference: str) -> dict[str, object]:
    done = subprocess.run(
        ["docker", "manifest", "inspect", "--insecure", reference], capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


def test_push_and_publish_against_a_real_registry(registry: str, tmp_path: Path) -> None:
    """Night 1: this machine's arch only, so both tags. Night 2: another arch requested but missing, so
    the dated list of this one and exit 5, the undated tag still night 1's list."""
    arch = known_arch(_engine_arch() or "")
    assert arch is not None
    other = "arm64" if arch == "amd64" else "amd64"
    empty = tmp_path / "empty.tar"
    subprocess.run(["tar", "cf", empty, "--files-from", "/dev/null"], check=True)
    nights = ["2026-11-21", "2026-11-22"]
    local = [f"{registry}/jax:cpu-{night}" for night in nights]
    try:
        for reference in local:  # a tiny image per night; two imports differ in their created time
            subprocess.run(["docker", "import", empty, reference], check=True, capture_output=True)
        console, out = _console()
        assert image_commands.push_image("cpu", registry, nights[0], console) == 0
        assert image_commands.publish_images("cpu", registry, nights[0], [arch], console) == 0
        first = _inspect(f"{registry}/jax:cpu-{nights[0]}")
        assert first["mediaType"] == "application/vnd.docker.distribution.manifest.list.v2+json"
        assert [m["platform"]["architecture"] for m in first["manifests"]] == [arch]  # type: ignore[attr-defined]
        assert _inspect(f"{registry}/jax:cpu") == first

        assert image_commands.push_image("cpu", registry, nights[1], console) == 0
        code = image_commands.publish_images("cpu", registry, nights[1], [f"{arch},{other}"], console)
        assert code == ExitCode.INCOMPLETE, out.getvalue()
        second = _inspect(f"{registry}/jax:cpu-{nights[1]}")
        assert [m["platform"]["architecture"] for m in second["manifests"]] == [arch]  # type: ignore[attr-defined]
        assert second != first
        assert _inspect(f"{registry}/jax:cpu") == first  # not moved
        assert f"no {other} image of {nights[1]}" in out.getvalue()
        # A rerun (the missing arch arrived meanwhile, or not) starts from a clean local list.
        assert image_commands.publish_images("cpu", registry, nights[1], [arch], console) == 0
        assert _inspect(f"{registry}/jax:cpu") == second
    finally:
        tags = [*local, *(f"{reference}-{arch}" for reference in local)]
        subprocess.run(["docker", "image", "rm", *tags], capture_output=True, check=False)
