"""Registry commands tried again (containers/registry_retries.py, containers.docker.DockerCli): which errors
are transient, then `docker push`, `pull`, `manifest inspect` and `manifest create`/`push` against a fake
runner that fails the first attempts. Waits are recorded, not slept.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_registry_retries.py
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Sequence

import pytest

from jaxbench.containers import docker
from jaxbench.containers.registry_retries import RETRIES, transient

TARGET = "ghcr.io/jaxbench/jax:cpu-2026-11-22-amd64"
RESET = 'Get "https://ghcr.io/v2/": read tcp 10.0.0.2:51234->140.82.1.1:443: read: connection reset by peer'


@pytest.mark.parametrize(
    "stderr",
    [
        RESET,
        'Get "https://ghcr.io/v2/": dial tcp 140.82.1.1:443: connect: connection refused',
        'Get "https://ghcr.io/v2/": net/http: TLS handshake timeout',
        "received unexpected HTTP status: 503 Service Unavailable",
        "received unexpected HTTP status: 500 Internal Server Error",
        "toomanyrequests: You have reached your pull rate limit.",
        'Head "https://ghcr.io/v2/x/manifests/cpu": net/http: request canceled (Client.Timeout exceeded while'
        " awaiting headers)",
        'Put "https://ghcr.io/v2/x/blobs/uploads/1": unexpected EOF',
    ],
)
def test_transient_errors(stderr: str) -> None:
    assert transient(f"Error response from daemon: {stderr}\n")


@pytest.mark.parametrize(
    "stderr",
    [
        "unauthorized: authentication required",
        "denied: requested access to the resource is denied",
        "denied: permission_denied: write_package",
        "Error response from daemon: pull access denied for x, repository does not exist or may require"
        " 'docker login'",
        "Error response from daemon: manifest for ghcr.io/x:cpu not found: manifest unknown",
        "no such manifest: ghcr.io/x:cpu",
        "An image does not exist locally with the tag: ghcr.io/x",
        "invalid reference format",
        "received unexpected HTTP status: 503 Service Unavailable; unauthorized: token expired",
        "",
    ],
)
def test_refusals_and_missing_images_are_not_transient(stderr: str) -> None:
    assert not transient(stderr)


class FlakyDocker:
    """A docker CLI whose registry commands (push, pull, manifest) fail with `error` the first `failures`
    times; the rest succeeds. `waits`: the waits of the retries (recorded by `cli`, not slept)."""

    def __init__(self, failures: int, error: str = RESET) -> None:
        self.failures = failures
        self.error = error
        self.calls: list[tuple[list[str], bool]] = []
        self.waits: list[float] = []

    def __call__(self, argv: Sequence[str], *, capture: bool) -> subprocess.CompletedProcess[str]:
        argv = list(argv)
        self.calls.append((argv, capture))
        registry = argv[1] in ("push", "pull") or argv[1:3] in (
            ["manifest", "inspect"],
            ["manifest", "create"],
        )
        if registry and self.failures > 0:
            self.failures -= 1
            return subprocess.CompletedProcess(argv, 1, "", f"{self.error}\n")
        if argv[1:3] == ["manifest", "inspect"]:
            found = {"Descriptor": {"platform": {"architecture": "amd64"}}}
            return subprocess.CompletedProcess(argv, 0, json.dumps(found), "")
        if argv[1:3] == ["manifest", "push"]:
            return subprocess.CompletedProcess(argv, 0, "sha256:" + "ab" * 32 + "\n", "")
        return subprocess.CompletedProcess(argv, 0, "", "")

    def argvs(self) -> list[list[str]]:
        return [argv for argv, _ in self.calls]


def cli(fake: FlakyDocker) -> docker.DockerCli:
    """The docker adapter on `fake`, its waits recorded in fake.waits, its retry lines printed."""
    return docker.DockerCli(
        run=fake, retries=dataclasses.replace(RETRIES, sleep=fake.waits.append, notify=print)
    )


def test_a_push_is_tried_again_after_a_reset_connection(capsys: pytest.CaptureFixture[str]) -> None:
    fake = FlakyDocker(failures=2)
    cli(fake).push("jax:cpu", TARGET)
    assert fake.calls == [
        (["docker", "tag", "jax:cpu", TARGET], True),
        *[(["docker", "push", TARGET], False)] * 3,  # progress still goes to the log
    ]
    assert len(fake.waits) == 2 and 2.0 <= fake.waits[0] <= 4.0  # backoff from 2 s, with jitter
    assert f"docker push {TARGET} failed: " in capsys.readouterr().out  # a line per retry


def test_a_pull_is_tried_again_and_the_bound_holds() -> None:
    fake = FlakyDocker(failures=100, error="toomanyrequests: rate limit")
    with pytest.raises(
        docker.DockerFailed, match=rf"^docker pull --quiet {TARGET} failed: toomanyrequests.*\(4 attempts\)$"
    ):
        cli(fake).pull(TARGET)
    assert fake.argvs() == [["docker", "pull", "--quiet", TARGET]] * RETRIES.attempts
    assert len(fake.waits) == RETRIES.attempts - 1


@pytest.mark.parametrize(
    "error", ["unauthorized: authentication required", "manifest unknown: manifest unknown"]
)
def test_an_auth_error_or_a_missing_image_fails_at_once(error: str) -> None:
    fake = FlakyDocker(failures=1, error=error)
    with pytest.raises(docker.DockerFailed, match=rf"^docker pull --quiet {TARGET} failed: {error}$"):
        cli(fake).pull(TARGET)
    assert (len(fake.calls), fake.waits) == (1, [])


def test_manifest_inspect_is_tried_again() -> None:
    fake = FlakyDocker(failures=1, error="received unexpected HTTP status: 502 Bad Gateway")
    assert cli(fake).remote_architecture(TARGET) == "amd64"
    assert len(fake.calls) == 2 and len(fake.waits) == 1


def test_a_missing_tag_is_none_without_retrying() -> None:
    fake = FlakyDocker(failures=1, error=f"no such manifest: {TARGET}")
    assert cli(fake).remote_architecture(TARGET) is None
    assert (len(fake.calls), fake.waits) == (1, [])


def test_a_manifest_list_is_created_afresh_at_each_attempt_and_pushed() -> None:
    """A failed `docker manifest create` may keep the entries it fetched: each attempt removes them first."""
    list_tag, sources = "ghcr.io/jaxbench/jax:cpu-2026-11-22", [TARGET]
    fake = FlakyDocker(failures=1)
    assert cli(fake).push_list(list_tag, sources) == "sha256:" + "ab" * 32
    rm, create = ["docker", "manifest", "rm", list_tag], ["docker", "manifest", "create", list_tag, *sources]
    assert fake.argvs() == [rm, create, rm, create, ["docker", "manifest", "push", "--purge", list_tag]]
    assert len(fake.waits) == 1
