"""Only PyPI, Debian's archive and npm: scripts/check-package-hosts (in make lint) passes on the repository
and fails, naming the file, on each way a CI path or a test could name another host to fetch from; and
the tests' own guard refuses a connection to another machine.

    JAX_PLATFORMS=cpu python -m pytest -q tests/repository/test_package_hosts.py
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

CHECK = REPO / "scripts" / "check-package-hosts"


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), "--root", str(root)], capture_output=True, text=True, timeout=60
    )


def _copy(into: Path) -> Path:
    """The files the check reads, in a tree of their own."""
    for folder in ("scripts", "tests", ".ci"):
        shutil.copytree(REPO / folder, into / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (into / "containers").mkdir()
    for path in [*REPO.glob("containers/*.Dockerfile"), REPO / "containers" / "manifest.yaml"]:
        shutil.copy(path, into / "containers" / path.name)
    for name in ("with-ca", "install_stage.py"):
        shutil.copy(REPO / "containers" / name, into / "containers" / name)
    shutil.copy(REPO / "Makefile", into / "Makefile")
    return into


def test_the_repository_passes() -> None:
    done = _check(REPO)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("path", "addition", "named"),
    [
        # A script CI reaches only through another script.
        ("scripts/os-base-image", "curl -fsS http://archive.ubuntu.com/ubuntu/x.deb\n", "archive.ubuntu.com"),
        (".ci/run", "git clone https://github.com/jax-ml/jax\n", "github.com"),
        (
            "containers/jax.Dockerfile",
            "RUN pip install --index-url https://pypi.nvidia.com x\n",
            "pypi.nvidia.com",
        ),
        ("containers/base.Dockerfile", "FROM nvidia/cuda:13.0.0-devel-ubuntu24.04\n", "FROM nvidia/cuda"),
        (
            "tests/test_fetching.py",
            "import subprocess\nsubprocess.run(['git', 'ls-remote', 'https://github.com/openxla/xla'])\n",
            "github.com",
        ),
        ("tests/test_fetching.py", "import httpx\nhttpx.get('https://ghcr.io/v2/')\n", "ghcr.io"),
        (
            "tests/test_fetching.py",
            "build(pip_index_url='https://mirror.corp.net/simple')\n",
            "mirror.corp.net",
        ),
    ],
)
def test_each_way_of_naming_another_host_fails(tmp_path: Path, path: str, addition: str, named: str) -> None:
    root = _copy(tmp_path)
    assert _check(root).returncode == 0
    with (root / path).open("a") as handle:
        handle.write(addition)
    done = _check(root)
    assert done.returncode == 1 and named in done.stderr and path in done.stderr


def test_data_urls_and_reserved_names_are_not_fetching(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    (root / "tests" / "test_data.py").write_text(
        "import subprocess\n"
        "REPOSITORY = 'https://github.com/jax-ml/jax'  # an identity, never fetched\n"
        "subprocess.run(['curl', 'https://registry.example/v2/', 'http://127.0.0.1:5000/v2/'])\n"
        "subprocess.run(['pip', 'download', '--index-url', 'https://pypi.org/simple', 'jax'])\n"
    )
    done = _check(root)
    assert done.returncode == 0, done.stderr


def test_the_tests_cannot_reach_another_machine() -> None:
    """tests/conftest.py refuses connections beyond this machine, so a test that fetches fails at once."""
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock,
        pytest.raises(OSError, match="203.0.113.7"),
    ):
        sock.connect(("203.0.113.7", 443))  # TEST-NET-3: documentation only, never routed
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname(), timeout=5):
            pass  # this machine is allowed
