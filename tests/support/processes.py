"""`jaxbench` in a fresh process, as a user runs it: for what one process cannot show (XLA reads its flags
once per process, and a fingerprint must hold across processes)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


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
