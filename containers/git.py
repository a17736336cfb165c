"""The git adapter of the manifest tooling and the nightly: reads remote refs and files through the `git`
command, so bumps need no API token and work against any host or a local mirror. Tests give `bump` a local
repository.

Every revision, remote or repository that comes from a user or a file goes through `git_argument` (git would
take `--output=PATH` for an option and write that file), and sits after `--` where the subcommand has one; a
repository also through `git_repository`, and git runs with only network and file transports allowed.

    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/containers/test_git_args.py
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.core.processes import run_child
from jaxbench.core.urls import scrub_urls

GIT_TIMEOUT_S = 300.0
"""A hung remote must not hang the nightly; a shallow fetch of jax takes seconds."""


ALLOWED_PROTOCOLS = ("file", "git", "http", "https", "ssh")
"""What git may use for a remote, as GIT_ALLOW_PROTOCOL names them (a local path is `file`): every other
transport, remote helpers such as `ext` and `fd` included, git itself refuses."""
ALLOWED_SCHEMES = ("https", "http", "ssh", "git", "file", "git+ssh", "ssh+git")
"""The `SCHEME://` forms of those protocols that git knows (`git+ssh` and `ssh+git` are ssh)."""
_HELPER = re.compile(r"([A-Za-z0-9][A-Za-z0-9+.-]*)::")
"""`NAME::ADDRESS`, how git spells a remote helper (transport.c: a URL scheme, then "::")."""


class Remote(Protocol):
    def refs(self, repository: str, patterns: Sequence[str]) -> dict[str, str]:
        """{ref name: commit} of the refs matching `patterns`, peeled tags as `<tag>^{}`."""
        ...

    def read_file(self, repository: str, ref: str, path: str) -> str: ...


def git_argument(value: str, what: str) -> str:
    """`value` (a revision, remote or repository given by a user or a file), once sure git cannot read it as
    an option; `what` names where it came from in the error."""
    if value.startswith("-"):
        raise InvalidInput(
            f"{what} {value!r}: starts with '-', so git would read it as an option; "
            "expected a revision, remote or repository"
        )
    return value


def git_repository(value: str, what: str) -> str:
    """`value` (a repository URL or path from a user or a file), once sure git reaches it over a network or
    file transport (ALLOWED_PROTOCOLS), never through a remote helper: `fd::3` reads a file descriptor and
    hangs, `ext::CMD` runs CMD, and any other `NAME::` or unknown `NAME://` starts a `git-remote-NAME`."""
    git_argument(value, what)
    helper = _HELPER.match(value)
    if helper is not None:
        raise InvalidInput(
            f"{what} {value!r}: {helper.group(1)}:: asks git for a remote helper; expected a repository URL "
            f"({', '.join(ALLOWED_SCHEMES)}), user@host:path or a local path"
        )
    scheme, separator, _ = value.partition("://")
    if separator and scheme.lower() not in ALLOWED_SCHEMES:
        raise InvalidInput(
            f"{what} {value!r}: {scheme}:// is not a transport jaxbench lets git use; expected "
            f"{', '.join(f'{s}://' for s in ALLOWED_SCHEMES)}, user@host:path or a local path"
        )
    return value


def run_git(args: list[str], what: str) -> str:
    """git's output; ExternalFailure with `what` and git's words, every URL in them without credentials
    (a clone URL may carry a token, and failures are printed and stored)."""
    what = scrub_urls(what)
    try:
        done = run_child(
            ["git", *args],
            env=os.environ | {"GIT_ALLOW_PROTOCOL": ":".join(ALLOWED_PROTOCOLS)},
            capture=True,
            timeout_s=GIT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        raise ExternalFailure(f"{what}: git did not answer within {GIT_TIMEOUT_S:.0f} s") from e
    except OSError as e:
        raise ExternalFailure(f"{what}: cannot run git ({e})") from e
    if done.returncode != 0:
        # One line: an error is shown as one line, and git's own message runs over several.
        said = scrub_urls(" ".join(done.stderr.split()))[-400:]
        raise ExternalFailure(f"{what}: git {_subcommand(args)} failed: {said}")
    return done.stdout


def _subcommand(args: Sequence[str]) -> str:
    """The git subcommand of `args`, past the global options that take a value (-C DIR, -c NAME=VALUE)."""
    position = 0
    while position < len(args) and args[position] in ("-C", "-c"):
        position += 2
    return args[position] if position < len(args) else "(no subcommand)"


def file_at(directory: Path | str, revision: str, path: str, what: str | None = None) -> str:
    """`path` as committed at `revision` in the repository at `directory`; `what` says what is read, for
    the error when git fails."""
    spec = f"{git_argument(revision, 'revision')}:{path}"
    # The "--" after the revision: git must not take "REV:path" for a path to filter by.
    return run_git(["-C", str(directory), "show", spec, "--"], what or f"reading {path} at {revision}")


def head_commit(directory: Path) -> str | None:
    """The commit checked out at `directory`; None outside a git checkout (or without git)."""
    try:
        return run_git(["-C", str(directory), "rev-parse", "--verify", "HEAD"], "reading HEAD").strip()
    except ExternalFailure:
        return None


class GitRemote:
    def refs(self, repository: str, patterns: Sequence[str]) -> dict[str, str]:
        git_repository(repository, "repository")
        output = run_git(["ls-remote", "--", repository, *patterns], f"reading refs of {repository}")
        refs = {}
        for line in output.splitlines():
            commit, _, name = line.partition("\t")
            refs[name] = commit
        return refs

    def read_file(self, repository: str, ref: str, path: str) -> str:
        """`path` at `ref` (a branch or tag name) through a shallow fetch into a scratch repository; from a
        repository on this machine, read in place (a mirror may lack objects a fetch would pack)."""
        git_repository(repository, "repository")
        if Path(repository).is_dir():
            return file_at(repository, ref, path, f"reading {path} at {ref} of {repository}")
        with tempfile.TemporaryDirectory(prefix="jaxbench-git-") as scratch:
            run_git(["init", "--quiet", "--bare", scratch], "making a scratch repository")
            run_git(
                ["-C", scratch, "fetch", "--quiet", "--depth=1", "--", repository, git_argument(ref, "ref")],
                f"fetching {ref} of {repository}",
            )
            return file_at(scratch, "FETCH_HEAD", path, f"reading {path} at {ref} of {repository}")
