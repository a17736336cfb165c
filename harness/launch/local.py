"""The local launcher: the run happens in this process, on this machine's devices.

jaxbench run llama2 --launcher local      (the default)
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.flags import environment
from jaxbench.harness.launch import Launched, LaunchOptions, Processes
from jaxbench.harness.runtime.options import RunOptions
from jaxbench.harness.runtime.result import Status


def exit_code(status: Status) -> ExitCode:
    if status is Status.OK:
        return ExitCode.OK
    return ExitCode.INTERRUPTED if status is Status.INTERRUPTED else ExitCode.FAILED


class LocalLauncher:
    name = "local"

    def __init__(self, options: LaunchOptions) -> None:
        options.refuse_cluster_options()
        if options.image is not None:
            raise InvalidInput(
                f"--image {options.image}: the local launcher runs in this environment; "
                "use --launcher image to run inside an image"
            )

    def processes(self, environ: Mapping[str, str]) -> Processes:
        """This process, on this machine's devices, with this environment."""
        return Processes(environment.device_hint(environ), environ)

    def launch(self, run: RunOptions, console: Console) -> Launched:
        # Imported here: `jaxbench --help` and the commands that do not train never import a backend.
        from jaxbench.harness.run.runner import execute
        from jaxbench.harness.runtime.reporter import RichReporter

        result, path = execute(run, RichReporter())
        return Launched(exit_code(result.status), [path] if path is not None else [])
