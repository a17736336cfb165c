"""The Docker adapter: is there an engine, build a planned stage, serve extra CA certificates to a build,
image sizes, run the harness in an image. Everything that shells out to `docker` is here.

The `docker` CLI rather than the docker SDK: the CLI is what picks BuildKit/buildx or the classic builder
and speaks to whichever engine version is installed, and users can replay the printed command by hand.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shlex
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from containers.build import StageBuild
from harness.config import InvalidInput

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

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{CA_PATH}"
    finally:
        server.shutdown()
        server.server_close()


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
    plan_file.write_text(json.dumps(build.plan, indent=2, sort_keys=True) + "\n")
    argv = build_command(build, context, ca_url, buildx)
    print("+ " + shlex.join(argv), flush=True)
    env = {**os.environ, "DOCKER_BUILDKIT": "1" if buildx else "0"}
    if subprocess.run(argv, env=env, check=False).returncode != 0:
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


def run_command(
    image: str, args: Sequence[str], out_dir: Path, gpus: bool, env: dict[str, str] | None = None
) -> list[str]:
    """`docker run` of the image's jaxbench entry point, writing results into `out_dir` on the host as the
    calling user."""
    argv = ["docker", "run", "--rm", "--network", "host", "--ipc", "host", "--shm-size", "1g"]
    if gpus:
        argv += ["--gpus", "all"]
    argv += ["--user", f"{os.getuid()}:{os.getgid()}", "-e", "HOME=/tmp"]
    argv += ["-v", f"{out_dir.resolve()}:/results"]
    for key, value in (env or {}).items():
        argv += ["-e", f"{key}={value}"]
    return [*argv, image, *args]
