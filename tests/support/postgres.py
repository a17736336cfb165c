"""A throwaway PostgreSQL server for the tests, on 127.0.0.1, started from the Debian binaries.

initdb refuses to run as root, so as root the server runs as the `postgres` user (its data folder must be
writable by that user); the tests connect over TCP. Without PostgreSQL binaries the PostgreSQL variants of
the store tests are skipped, unless JAXBENCH_REQUIRE_POSTGRES=1 (CI), where they fail.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REQUIRE_ENV = "JAXBENCH_REQUIRE_POSTGRES"


def binaries() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server() -> Iterator[str]:
    """Yields the admin URL of a fresh server; stops it and removes its data afterwards."""
    bin_dir = binaries()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL binaries (pg_ctl) found; install postgresql")
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="jaxbench-pg-"))
    root.chmod(0o777)
    data, port = root / "data", _free_port()
    run = lambda *argv: subprocess.run([*as_postgres, *argv], check=True, capture_output=True, timeout=120)  # noqa: E731
    run(str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off"
    run(
        str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-o", options, "-w", "start"
    )
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)
