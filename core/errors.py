"""The two ways a command stops early, every exit code of `jaxbench` in one table, and which exceptions of
the standard library are expected failures rather than bugs.

An `InvalidInput` is the user's to fix (a recipe, flag, file or variable): nothing has been run or written.
An `ExternalFailure` is a service outside jaxbench that failed (git, docker, a registry, the network): the
input may be right, and the same command may work once that service does.

    jaxbench run llama2 --steps 0        # exit 1: --steps 0: expected a positive number of steps
    JAX_PLATFORMS=cpu .venv/bin/python -m pytest -q tests/jaxbench/test_errors.py
"""

from __future__ import annotations

import enum
import re
import shlex
import socket
import subprocess
from typing import ClassVar


class ExitCode(enum.IntEnum):
    """What `jaxbench`'s exit status means; the README's table lists the same."""

    OK = 0
    INVALID_INPUT = 1
    """Invalid input: nothing was run or written; the message names the file, field, flag or variable."""
    USAGE = 2
    """The command line does not parse (argparse), or the command needs hardware this machine lacks."""
    FAILED = 3
    """The work ran and failed: a run (compile error, OOM, NaN; its result was written), an image build, or
    a docker push or manifest command."""
    REGRESSION = 4
    """`detect`: a regression incident is open."""
    INCOMPLETE = 5
    """`publish`: an architecture's image is missing, so the undated tag was not moved."""
    EXTERNAL = 6
    """A service outside jaxbench failed (git, docker, a registry, the network, the store's database
    server); retrying may work."""
    INTERNAL = 70
    """A bug in jaxbench, not in the input: the traceback is shown, to report (sysexits.h's EX_SOFTWARE)."""
    INTERRUPTED = 130
    """Interrupted by SIGINT or SIGTERM (a run's result was written); Ctrl-C stops any other command with
    one line, no traceback."""


class JaxbenchError(Exception):
    """An expected way for a command to stop: its message is shown as is, in one line, and the command exits
    with `exit_code`."""

    exit_code: ClassVar[ExitCode]


class InvalidInput(JaxbenchError, ValueError):
    """Input the user can fix (a recipe, a flag, a file, an environment variable); the message names it and
    says what was expected, and nothing has been run or written."""

    exit_code = ExitCode.INVALID_INPUT


class RunFailed(JaxbenchError):
    """Work that was started failed (a run that a comparison needs, a suite that wrote nothing); what it
    wrote is kept, and the message says where."""

    exit_code = ExitCode.FAILED


class ExternalFailure(JaxbenchError):
    """git, docker, a container registry or a network service failed or did not answer; the message names
    the command or URL and what it said."""

    exit_code = ExitCode.EXTERNAL


ONE_LINE_LIMIT = 500
"""The most characters a refusal shows: enough for the file, the field and what was expected, while a
message that quotes a huge input (a value of millions of elements) stays a line."""

_WORD = re.compile(r"\S+")


def one_line(text: str, limit: int = ONE_LINE_LIMIT) -> str:
    """`text` with its line breaks and runs of blanks made single spaces, cut at `limit` characters with
    "…": how a refusal is shown, whatever a library's message looked like (PyYAML's take four lines,
    pydantic's one per problem). Words are read one at a time, so a text of gigabytes costs no copy."""
    parts: list[str] = []
    room = limit
    for word in _WORD.finditer(text):
        start, end = word.span()
        needed = end - start + (1 if parts else 0)
        if needed > room:  # what fits of this word, then the mark, within `limit` characters
            return " ".join([*parts, text[start : start + room]])[: max(limit - 1, 0)].rstrip() + "…"
        parts.append(text[start:end])
        room -= needed
    return " ".join(parts)


FILE_EXPECTATIONS: dict[type[OSError], str] = {
    IsADirectoryError: "; expected a file",
    PermissionError: "; expected one this user may read and write",
}
"""What was expected, where the system's words ("Is a directory") do not say it ("No such file or
directory" does)."""


def file_failure(error: OSError) -> InvalidInput:
    """A file or folder that cannot be read, written or made, named with what the system said."""
    where = error.filename if error.filename2 is None else f"{error.filename} -> {error.filename2}"
    expected = FILE_EXPECTATIONS.get(type(error), "")
    return InvalidInput(f"{where}: {error.strerror or error}{expected}")


def not_utf8(error: UnicodeDecodeError, where: str = "the input") -> InvalidInput:
    """Text that is not UTF-8, with its first bad byte and that byte's offset from the start."""
    bad = error.object[error.start : error.start + 1].hex()
    return InvalidInput(
        f"{where}: not UTF-8 text: byte 0x{bad} at byte offset {error.start} ({error.reason}); "
        "expected a UTF-8 text file"
    )


def _command(argv: object) -> str:
    return shlex.join(map(str, argv)) if isinstance(argv, list | tuple) else str(argv)


def _last_line(output: str | bytes | None) -> str:
    """The last line a command printed: where git and docker say what went wrong."""
    text = output.decode(errors="replace") if isinstance(output, bytes) else output or ""
    lines = text.strip().splitlines()
    return f": {lines[-1].strip()}" if lines else ""


def expected_failure(error: BaseException) -> JaxbenchError | None:
    """The one-line failure an exception that escaped a command stands for, where it is an expected one: a
    file that cannot be read or written, text that is not UTF-8, a command (git, docker) that failed or
    hung, the network. None: it is none of these, so a bug, whose traceback must be seen."""
    match error:
        case JaxbenchError():
            return error
        case UnicodeDecodeError():
            # Which file is unknown here (core/files.py: read_text names it); --debug shows where it was read.
            return not_utf8(error, "a file (rerun with --debug to see which)")
        case subprocess.CalledProcessError():
            return ExternalFailure(
                f"{_command(error.cmd)} exited with status {error.returncode}{_last_line(error.stderr)}"
            )
        case subprocess.TimeoutExpired():
            return ExternalFailure(f"{_command(error.cmd)}: no answer within {error.timeout:g} s")
        case ConnectionError() | TimeoutError() | socket.gaierror():
            return ExternalFailure(f"the network failed: {error}")
        case OSError() if error.filename is not None:
            return file_failure(error)
    return None
