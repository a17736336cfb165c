"""`jaxbench` in a fresh process, as a user runs it: for what one process cannot show (XLA reads its flags
once per process, and a fingerprint must hold across processes); and a stand-in command on PATH for the
processes jaxbench starts (docker, a git remote helper)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest


def jaxbench(
    *args: str, out: Path, xla_flags: str = "", prefix: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """`jaxbench ARGS --no-ingest --out OUT` on the CPU with exactly `xla_flags` as XLA_FLAGS, after
    `prefix` (a wrapper such as taskset)."""
    environ = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags)
    return subprocess.run(
        [*prefix, sys.executable, "-m", "jaxbench", *args, "--no-ingest", "--out", str(out)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def command_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, script: str) -> Path:
    """An executable `name` running the shell `script`, first on PATH for this test; its path."""
    command = tmp_path / "bin" / name
    command.parent.mkdir(exist_ok=True)
    command.write_text(f"#!/bin/sh\n{script}")
    command.chmod(0o755)
    monkeypatch.setenv("PATH", f"{command.parent}:{os.environ['PATH']}")
    return command
