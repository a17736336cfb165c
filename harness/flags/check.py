"""Which XLA flags the installed jaxlib knows, asked of jaxlib itself and cached per jaxlib version.

XLA aborts the whole process when XLA_FLAGS holds a flag it does not know, so a stale flag would cost a
night. The flag names cannot be read off the binary (removed flags stay behind as reserved proto names), but
XLA's own parser answers exactly: a child process starts the CPU backend with the flags in XLA_FLAGS and
dies listing every unknown one. jaxlib parses one set of debug options for every backend, so a CPU start
checks the GPU flags too, and no GPU is touched (JAX_PLATFORMS=cpu). About a second per new set of flags;
answers are cached in $XDG_CACHE_HOME/jaxbench/xla-flags/jaxlib-<version>.json.

    jaxbench flags check "--xla_gpu_graph_level=2"
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from jaxbench.core.errors import InvalidInput
from jaxbench.core.files import cache_folder, write_atomic
from jaxbench.harness.flags.profiles import Rename

_UNKNOWN = re.compile(r"Unknown flags? in XLA_FLAGS: (.*)")
PROBE_TIMEOUT_S = 120
PROBE_CODE = "import jax; jax.devices('cpu')"


@dataclasses.dataclass(frozen=True)
class ProbeResult:
    unknown: list[str]
    """Names (no dashes) XLA rejected as unknown."""
    failure: str | None
    """Any other way the probe died (e.g. an illegal value), with XLA's message."""


def probe(flags: Mapping[str, str]) -> ProbeResult:
    """Start a CPU backend in a child process with these flags in XLA_FLAGS and read XLA's verdict."""
    environment = dict(
        os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=" ".join(f"--{k}={v}" for k, v in flags.items())
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE_CODE],
        env=environment,
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
    )
    if done.returncode == 0:
        return ProbeResult([], None)
    for line in done.stderr.splitlines():
        if match := _UNKNOWN.search(line):
            return ProbeResult([t[2:].split("=", 1)[0] for t in match.group(1).split()], None)
    fatal = [line for line in done.stderr.splitlines() if line.startswith(("F", "E")) and "]" in line]
    return ProbeResult(
        [], (fatal[-1] if fatal else done.stderr.strip()[-500:]) or f"exit code {done.returncode}"
    )


def jaxlib_version() -> str:
    try:
        return importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError as error:
        raise InvalidInput("jaxlib is not installed, so XLA flags cannot be checked") from error


def cache_path(version: str, environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    return cache_folder("xla-flags", environ) / f"jaxlib-{version}.json"


@dataclasses.dataclass
class FlagCache:
    """Flag=value pairs this jaxlib accepted, and flag names it rejected."""

    accepted: set[str]
    unknown: set[str]

    @classmethod
    def read(cls, path: Path) -> FlagCache:
        try:
            data = json.loads(path.read_text())
            return cls(set(data["accepted"]), set(data["unknown"]))
        except (OSError, ValueError, KeyError, TypeError):
            return cls(set(), set())  # no cache, or an unreadable one: ask jaxlib again

    def write(self, path: Path) -> None:
        write_atomic(path, json.dumps({"accepted": sorted(self.accepted), "unknown": sorted(self.unknown)}))


def unknown_flags(
    flags: Mapping[str, str],
    *,
    version: str,
    cache_file: Path,
    run_probe: Callable[[Mapping[str, str]], ProbeResult] = probe,
) -> list[str]:
    """Names of the flags this jaxlib does not know. Raises InvalidInput when a known flag has a value XLA
    rejects (nothing to drop then: the value must be fixed)."""
    cache = FlagCache.read(cache_file)
    pairs = {name: f"{name}={value}" for name, value in flags.items()}
    unknown = sorted(name for name in flags if name in cache.unknown)
    pending = {
        name: flags[name]
        for name, pair in pairs.items()
        if pair not in cache.accepted and name not in unknown
    }
    if pending:
        result = run_probe(pending)
        if result.failure is not None and not result.unknown:
            raise InvalidInput(f"jaxlib {version} rejects the XLA flags {pending}: {result.failure}")
        cache.unknown |= set(result.unknown)
        cache.accepted |= {pairs[name] for name in pending if name not in result.unknown}
        if result.failure is None:
            cache.write(cache_file)
        unknown = sorted(set(unknown) | set(result.unknown))
    return unknown


def describe(name: str, version: str, renames: Mapping[str, Rename], origins: Mapping[str, str]) -> str:
    """One line per unknown flag: what it is, where it came from, and what to use instead."""
    text = f"--{name} (from {origins.get(name, 'the flags')}) is not known to jaxlib {version}"
    rename = renames.get(name)
    if rename is None:
        return text
    instead = f"use --{rename.replacement}" if rename.replacement else "it was removed"
    return f"{text}: {instead} ({rename.how}; {rename.source})"


def check_or_drop(
    flags: Mapping[str, str],
    origins: Mapping[str, str],
    renames: Mapping[str, Rename],
    *,
    drop: bool,
    run_probe: Callable[[Mapping[str, str]], ProbeResult] = probe,
) -> list[str]:
    """The unknown flags to drop (when `drop`); otherwise InvalidInput naming each one."""
    version = jaxlib_version()
    unknown = unknown_flags(flags, version=version, cache_file=cache_path(version), run_probe=run_probe)
    if unknown and not drop:
        lines = [describe(name, version, renames, origins) for name in unknown]
        raise InvalidInput(
            f"XLA would abort on unknown flags: {'; '.join(lines)}. Remove them, or run with "
            "--drop-unknown-flags to run without them (recorded in the result)."
        )
    return unknown
