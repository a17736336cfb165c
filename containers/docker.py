"""The Docker adapter: is there an engine, build a planned stage, serve extra CA certificates to a build,
image sizes, run the harness in an image, push and pull an image and publish manifest lists (`DockerCli`;
its registry commands are retried as containers/registry_retries.py decides). Everything that shells out to
`docker` is here.

The `docker` CLI rather than the docker SDK: the CLI is what picks BuildKit/buildx or the classic builder
and speaks to whichever engine version is installed, and users can replay the printed command by hand.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import http.server
import ipaddress
import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from jaxbench.containers import registry_retries
from jaxbench.containers.build import StageBuild, plan_text
from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.core.processes import run_child, run_to_its_end
from jaxbench.core.retries import GaveUp, Retries, Transient
from jaxbench.harness.flags.autotune import ROOT_VARIABLE

CA_PATH = "/ca-certificates.pem"


def engine_version() -> str | None:
    """The Docker engine's version, or None when no engine answers (no CLI, no daemon, no permission)."""
    try:
        done = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def require_engine(subject: str) -> str:
    """The engine's version; an ExternalFailure naming `subject` (what needed it) when none answers."""
    version = engine_version()
    if version is None:
        raise ExternalFailure(f"{subject}: no Docker engine answers (docker version failed)")
    return version


def has_buildx() -> bool:
    try:
        return (
            subprocess.run(["docker", "buildx", "version"], capture_output=True, timeout=20).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextlib.contextmanager
def serve_ca_certificates(files: Sequence[Path]) -> Iterator[str | None]:
    """Serve the concatenated CA files on 127.0.0.1 for the duration of a build; yields their URL.

    Why not COPY: with the classic builder (no `RUN --mount=type=secret`) a copied file stays in a layer
    even when a later step deletes it, and a build argument holding the certificate stays in the image
    history. Builds run with `--network host`, so each RUN that needs the proxy fetches the bundle, uses it
    and deletes it in the same step: no layer and no history entry ever holds it."""
    if not files:
        yield None
        return
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise InvalidInput(f"CA_CERTS: no such certificate file: {', '.join(missing)}")
    bundle = b"".join(f.read_bytes().rstrip(b"\n") + b"\n" for f in files)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != CA_PATH:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-pem-file")
            self.send_header("Content-Length", str(len(bundle)))
            self.end_headers()
            self.wfile.write(bundle)

        def log_message(self, format: str, *args: object) -> None:  # builds print enough already
            pass

    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", preferred_ca_port(bundle)), Handler)
    except OSError:  # taken (another build serving the same bundle): any port, at the cost of the cache
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{CA_PATH}"
    finally:
        server.shutdown()
        server.server_close()


CA_PORTS = range(20000, 30000)


def preferred_ca_port(bundle: bytes) -> int:
    """The port the CA bundle is served on, the same for the same certificates: CA_URL is a build argument,
    so part of the cache key of every RUN step that uses it, and an ephemeral port would rebuild them all
    on every build."""
    digest = int.from_bytes(hashlib.sha256(bundle).digest()[:4], "big")
    return CA_PORTS.start + digest % len(CA_PORTS)


def build_command(build: StageBuild, context: Path, ca_url: str | None, buildx: bool) -> list[str]:
    argv = ["docker", "buildx", "build", "--load"] if buildx else ["docker", "build"]
    argv += ["--network", "host", "--file", str(context / build.dockerfile)]
    for tag in build.tags:
        argv += ["--tag", tag]
    for key, value in {**build.build_args, "CA_URL": ca_url or ""}.items():
        argv += ["--build-arg", f"{key}={value}"]
    for key, value in build.labels.items():
        argv += ["--label", f"{key}={value}"]
    return [*argv, str(context)]


def build_stage(build: StageBuild, context: Path, ca_url: str | None, buildx: bool) -> None:
    plan_file = context / build.plan_path
    plan_file.parent.mkdir(parents=True, exist_ok=True)
    plan_file.write_text(plan_text(build.plan))
    argv = build_command(build, context, ca_url, buildx)
    print("+ " + shlex.join(argv), flush=True)
    env = {**os.environ, "DOCKER_BUILDKIT": "1" if buildx else "0"}
    if run_to_its_end(argv, env) != 0:
        raise BuildFailed(f"stage {build.stage} ({build.dockerfile}) failed; its log is above")


class BuildFailed(RuntimeError):
    pass


def image_size(reference: str) -> int:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", reference],
        capture_output=True,
        text=True,
        check=False,
    )
    return int(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip().isdigit() else 0


def image_exists(reference: str) -> bool:
    return (
        subprocess.run(["docker", "image", "inspect", reference], capture_output=True, check=False).returncode
        == 0
    )


AUTOTUNE_MOUNT = "/autotune"


def run_command(
    image: str,
    args: Sequence[str],
    out_dir: Path,
    gpus: bool,
    env: dict[str, str] | None = None,
    autotune_cache: Path | None = None,
) -> list[str]:
    """`docker run` of the image's jaxbench entry point, writing results into `out_dir` on the host as the
    calling user; `autotune_cache`, the host's shared GEMM autotuning root (harness/flags/autotune.py), is
    mounted so that runs in successive containers compile one program, as runs on the host do."""
    argv = ["docker", "run", "--rm", "--network", "host", "--ipc", "host", "--shm-size", "1g"]
    if gpus:
        argv += ["--gpus", "all"]
    argv += ["--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp"]
    argv += ["-v", f"{out_dir.resolve()}:/results"]
    if autotune_cache is not None:
        argv += [
            "-v",
            f"{autotune_cache.resolve()}:{AUTOTUNE_MOUNT}",
            "-e",
            f"{ROOT_VARIABLE}={AUTOTUNE_MOUNT}",
        ]
    for key, value in (env or {}).items():
        argv += ["-e", f"{key}={value}"]
    return [*argv, image, *args]


class DockerCommandRunner(Protocol):
    """Runs one docker command: captured (stdout and stderr as text), or its output streamed to this
    process's, stderr coming back too (a registry's error decides whether to retry)."""

    def __call__(self, argv: Sequence[str], *, capture: bool) -> subprocess.CompletedProcess[str]: ...


def _run(argv: Sequence[str], *, capture: bool) -> subprocess.CompletedProcess[str]:
    done = run_child(argv, capture=capture, capture_stderr=True)
    if not capture and done.stderr:
        sys.stderr.write(done.stderr)  # a streamed command's errors reach the log too, after its output
    return done


class DockerFailed(RuntimeError):
    pass


# What `docker manifest inspect` says of a tag the registry does not hold (the CLI's own message, and the
# registry's MANIFEST_UNKNOWN error as some registries word it).
_ABSENT = ("no such manifest", "manifest unknown")


def insecure(reference: str) -> list[str]:
    """`--insecure` for a registry on this machine (localhost, 127.0.0.0/8, ::1), which is plain HTTP here
    (scripts/start-registry); the engine already treats 127.0.0.0/8 so for `docker push`."""
    host = reference.split("/", 1)[0]
    name = host[1:].partition("]")[0] if host.startswith("[") else host.partition(":")[0]
    if name == "localhost":
        return ["--insecure"]
    try:
        return ["--insecure"] if ipaddress.ip_address(name).is_loopback else []
    except ValueError:
        return []


@dataclasses.dataclass(frozen=True)
class DockerCli:
    """The docker commands of `jaxbench push`, `publish` and the image launcher. `run` and `retries` are
    injectable: tests pass a fake and assert the exact commands, and retry without sleeping. `docker
    manifest` talks to the registry directly and needs no engine."""

    run: DockerCommandRunner = _run
    retries: Retries = registry_retries.RETRIES

    def _check(
        self, argv: list[str], capture: bool = True, *, registry: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """`argv`'s result; DockerFailed when it fails (with `registry`, once retries are spent)."""
        done = self._retried(argv, capture) if registry else self._call(argv, capture)
        if done.returncode != 0:
            raise DockerFailed(_failure(argv, done, capture))
        return done

    def _retried(
        self, argv: list[str], capture: bool = True, before: list[str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`argv`, a command that talks to a registry, run again while it fails transiently; its last result,
        or DockerFailed when every attempt failed so. `before` runs, unchecked, ahead of each attempt."""

        def attempt() -> subprocess.CompletedProcess[str]:
            if before is not None:
                self._call(before)
            done = self._call(argv, capture)
            if done.returncode != 0 and registry_retries.transient(done.stderr or ""):
                raise Transient(_failure(argv, done, capture))
            return done

        try:
            return self.retries.run(attempt)
        except GaveUp as error:
            raise DockerFailed(str(error)) from None

    def _call(self, argv: list[str], capture: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            return self.run(argv, capture=capture)
        except OSError as error:  # no docker CLI at all
            return subprocess.CompletedProcess(argv, 127, "", str(error))

    def engine_architecture(self) -> str | None:
        """The engine's platform architecture (`docker version`'s Server.Arch, e.g. amd64), None when no
        engine answers."""
        done = self._call(["docker", "version", "--format", "{{.Server.Arch}}"])
        return done.stdout.strip() or None if done.returncode == 0 else None

    def image_architecture(self, reference: str) -> str | None:
        """A local image's architecture, None when there is no such image here."""
        done = self._call(["docker", "image", "inspect", "--format", "{{.Architecture}}", reference])
        return done.stdout.strip() or None if done.returncode == 0 else None

    def push(self, source: str, target: str) -> None:
        """Tag a local image as `target` and push that tag (progress streamed to the log)."""
        self._check(["docker", "tag", source, target])
        self._check(["docker", "push", target], capture=False, registry=True)

    def pull(self, reference: str) -> None:
        """Pull `reference` from its registry."""
        self._check(["docker", "pull", "--quiet", reference], capture=False, registry=True)

    def has_manifest_command(self) -> bool:
        """Whether this docker CLI has `docker manifest` (Docker 20.10 on; before, experimental)."""
        return self._call(["docker", "manifest", "--help"]).returncode == 0

    def remote_architecture(self, reference: str) -> str | None:
        """The architecture of the image `reference` names in its registry, None when the registry does not
        hold that tag. DockerFailed when the registry cannot be asked, or the tag is itself a list
        (`docker manifest create` takes single-platform images only)."""
        argv = ["docker", "manifest", "inspect", *insecure(reference), "--verbose", reference]
        done = self._retried(argv)
        if done.returncode != 0:
            if any(text in done.stderr.lower() for text in _ABSENT):
                return None
            raise DockerFailed(f"{shlex.join(argv)} failed: {done.stderr.strip() or 'no message'}")
        found = json.loads(done.stdout)
        if isinstance(found, list):
            raise DockerFailed(
                f"{reference} is a multi-platform list; expected one image per architecture tag"
            )
        return str(found["Descriptor"].get("platform", {}).get("architecture", "unknown"))

    def push_list(self, target: str, sources: Sequence[str]) -> str:
        """Create the manifest list `target` of `sources` (tags in the registry) and push it; its digest.

        A local list of that name left by an earlier run or attempt (a failed push keeps it, a failed create
        keeps the entries it fetched) is removed first, so each starts from exactly `sources` (`--amend`
        would keep the old entries). `docker manifest rm` usually answers "No such manifest"."""
        flag = insecure(target)
        create = ["docker", "manifest", "create", *flag, target, *sources]
        done = self._retried(create, before=["docker", "manifest", "rm", target])
        if done.returncode != 0:
            raise DockerFailed(_failure(create, done, capture=True))
        done = self._check(["docker", "manifest", "push", *flag, "--purge", target], registry=True)
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def _failure(argv: list[str], done: subprocess.CompletedProcess[str], capture: bool) -> str:
    """`argv` failed, with the last line of its error (a streamed command's output is in the log above)."""
    detail = " ".join((done.stderr or "").strip().splitlines()[-1:])
    return f"{shlex.join(argv)} failed: {detail or ('no message' if capture else 'its output is above')}"
