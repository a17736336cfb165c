"""Child processes that share this one's terminal and are allowed to finish what Ctrl-C interrupts."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence


def run_to_its_end(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """Run `argv` and return its exit code. On Ctrl-C the child got the same signal and is writing what it
    has (a result, a report): wait for it, then raise KeyboardInterrupt. subprocess.run would kill it a
    quarter of a second later, mid-write (a microbenchmark report was left empty that way)."""
    with subprocess.Popen(list(argv), env=None if env is None else dict(env)) as process:
        try:
            return process.wait()
        except KeyboardInterrupt:
            process.wait()
            raise
