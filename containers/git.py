"""The git adapter of the manifest tooling: reads remote refs and files through the `git` command, so bumps
need no API token and work against any host or a local mirror. Tests give `bump` a local repository."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from typing import Protocol

from core.errors import ExternalFailure

GIT_TIMEOUT_S = 300.0
"""A hung remote must not hang the nightly; a shallow fetch of jax takes seconds."""


class Remote(Protocol):
    def refs(self, repository: str, patterns: Sequence[str]) -> dict[str, str]:
        """{ref name: commit} of the refs matching `patterns`, peeled tags as `<tag>^{}`."""
        ...

    def read_file(self, repository: str, ref: str, path: str) -> str: ...


def run_git(args: list[str], what: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as e:
        raise ExternalFailure(f"{what}: git did not answer within {GIT_TIMEOUT_S:.0f} s") from e
    except OSError as e:
        raise ExternalFailure(f"{what}: cannot run git ({e})") from e
    if done.returncode != 0:
        raise ExternalFailure(f"{what}: git {args[0]} failed: {done.stderr.strip()[-400:]}")
    return done.stdout


class GitRemote:
    def refs(self, repository: str, patterns: Sequence[str]) -> dict[str, str]:
        output = run_git(["ls-remote", repository, *patterns], f"reading refs of {repository}")
        refs = {}
        for line in output.splitlines():
            commit, _, name = line.partition("\t")
            refs[name] = commit
        return refs

    def read_file(self, repository: str, ref: str, path: str) -> str:
        """`path` at `ref` (a branch or tag name) through a shallow fetch into a scratch repository."""
        with tempfile.TemporaryDirectory(prefix="jaxbench-git-") as scratch:
            run_git(["init", "--quiet", "--bare", scratch], "making a scratch repository")
            run_git(
                ["-C", scratch, "fetch", "--quiet", "--depth=1", repository, ref],
                f"fetching {ref} of {repository}",
            )
            return run_git(
                ["-C", scratch, "show", f"FETCH_HEAD:{path}"], f"reading {path} at {ref} of {repository}"
            )
