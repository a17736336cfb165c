"""Test setup: CPU only, with 8 fake devices so that sharded meshes (data x fsdp x tensor) can be tested.

The environment must be set before jax is first imported, hence at module import here.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile

os.environ["JAX_PLATFORMS"] = "cpu"
# One scratch cache per test session: jaxlib's answers about XLA flags are reused across tests, never
# written into a developer's own ~/.cache. pytest-xdist workers inherit the controller's; the process that
# made it removes it.
if "jaxbench-test-cache-" not in os.environ.get("XDG_CACHE_HOME", ""):
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="jaxbench-test-cache-")
    atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)
# pytest-xdist workers inherit the controller's environment, which already has it.
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
# A test session started in the background by a non-interactive shell (`cmd &`, as CI scripts do) inherits
# SIGINT ignored, and so would every run the tests start: the tests of Ctrl-C would then wait for a run
# that never stops. Python's own handler here is reset to the default in every process the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import ipaddress
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.support import postgres

REPO = Path(__file__).resolve().parent.parent


def _this_machine(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # a Unix socket path
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a name other than localhost: it would leave this machine


def _guarded(connect: Any) -> Any:
    def connect_here_only(self: socket.socket, address: Any) -> Any:
        if not _this_machine(address):
            raise ConnectionRefusedError(
                f"tests reach this machine only (127.0.0.1, ::1, Unix sockets), not {address}: the build and "
                "test machines fetch from PyPI, Debian's archive and npm alone (scripts/check-package-hosts)"
            )
        return connect(self, address)

    return connect_here_only


# Every connection a test makes in this process goes to this machine; scripts/check-package-hosts checks
# what tests hand to other processes.
socket.socket.connect = _guarded(socket.socket.connect)  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded(socket.socket.connect_ex)  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Recipes come from the repository and results go to a scratch store, never a developer's own."""
    monkeypatch.delenv("JAXBENCH_RECIPES", raising=False)
    monkeypatch.delenv("JAXBENCH_MANIFEST", raising=False)
    store = tmp_path_factory.mktemp("store") / "results.sqlite"
    monkeypatch.setenv("JAXBENCH_DB", f"sqlite:///{store}")


LAYERS = frozenset({"core", "harness", "results", "containers", "nightly", "prcheck", "backfill", "triage"})


@pytest.fixture(autouse=True)
def _layers_imported_as_jaxbench_only() -> Iterator[None]:
    """The layers are importable under their bare names from a checkout's root (the folders sit there), and a
    module imported both ways would exist twice: ruff bans such import statements, this catches the dotted
    strings (registries, plugins, patch targets) that name a module the old way."""
    yield
    bare = sorted(name for name in sys.modules if name.partition(".")[0] in LAYERS)
    assert not bare, f"imported under a bare name, not as jaxbench.<layer>: {', '.join(bare[:5])}"


INTEGRATION_MARKERS = ("docker", "postgres", "browser", "slurm", "frameworks", "slow", "quiet_cpu")
"""A test marked with any of these runs in the integration lane (`make test-integration`), every other one
in the unit lane (`make test`): CI runs both, a developer the first after every change."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and callspec.params.get("store_url") == "postgresql"
        if on_postgres or "postgres_admin_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)
        if any(item.get_closest_marker(name) for name in INTEGRATION_MARKERS):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    if postgres.binaries() is None:
        if os.environ.get(postgres.REQUIRE_ENV) == "1":
            pytest.fail(f"{postgres.REQUIRE_ENV}=1 but no PostgreSQL binaries were found")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql); .ci/run installs it")
    with postgres.server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store of each kind: a SQLite file, or a fresh database on the test PostgreSQL server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.sqlite'}"
        return
    admin_url = request.getfixturevalue("postgres_admin_url")
    name = f"test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as connection:
        connection.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))
    admin.dispose()
