"""The two ways a command stops early, and every exit code of `jaxbench`, in one table.

An `InvalidInput` is the user's to fix (a recipe, flag, file or variable): nothing has been run or written.
An `ExternalFailure` is a service outside jaxbench that failed (git, docker, a registry, the network): the
input may be right, and the same command may work once that service does.

    jaxbench run llama2 --steps 0        # exit 1: --steps 0: expected a positive number of steps
"""

from __future__ import annotations

import enum
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
    """A service outside jaxbench failed (git, docker, a registry, the network); retrying may work."""
    INTERRUPTED = 130
    """Interrupted by SIGINT or SIGTERM (a run's result was written)."""


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
