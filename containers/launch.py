"""The image launcher: `jaxbench run` inside one of our images, the host's GPUs passed through, the result
written into --out on the host (the `jaxbench run` command then ingests it there).

    jaxbench run llama2 --image ghcr.io/jaxbench/jax:cpu-2026-11-22     (make bench IMAGE=...)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from rich.console import Console

from jaxbench.containers import docker
from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.core.files import writable_folder
from jaxbench.core.processes import run_to_its_end
from jaxbench.harness.flags import autotune, environment
from jaxbench.harness.launch import Launched, LaunchOptions, Processes, image_reference
from jaxbench.harness.runtime.options import OUT_FLAG, RunOptions

PASSED_VARIABLES = ("XLA_FLAGS", "JAX_PLATFORMS", "NCCL_DEBUG")
"""The host's variables a run inside the image keeps (the rest of its environment is the image's)."""


def host_has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0


class ImageLauncher:
    name = "image"

    def __init__(self, options: LaunchOptions) -> None:
        options.refuse_cluster_options()
        if not options.image:
            raise InvalidInput(
                "--launcher image: give the image to run in with --image (make bench IMAGE=...)"
            )
        self.image = image_reference(options.image)

    def processes(self, environ: Mapping[str, str]) -> Processes:
        """The host's GPUs, passed through, and the variables a run inside the image keeps."""
        return Processes(
            environment.device_hint(environ), {k: v for k, v in environ.items() if k in PASSED_VARIABLES}
        )

    def launch(self, run: RunOptions, console: Console) -> Launched:
        image = self.image
        out = writable_folder(run.out_dir, OUT_FLAG)  # before a pull or a run: a bad --out loses nothing
        docker.require_engine(f"IMAGE={image}")
        if not docker.image_exists(image):
            # As `docker run` would, but before the run: a missing image stops here, not as a failed run.
            console.print(f"{image} is not here: pulling it", markup=False)
            try:
                docker.DockerCli().pull(image)  # retried while the registry fails transiently
            except docker.DockerFailed as error:
                raise ExternalFailure(
                    f"IMAGE={image}: not here, and {error} (make build FLAVOR=…?)"
                ) from None
        before = set(out.glob("*.json"))
        env = {k: v for k, v in os.environ.items() if k in PASSED_VARIABLES}
        inside = ["run", *run.recipe_arguments(), "--out", "/results", "--no-ingest"]
        gpus = host_has_gpu()
        argv = docker.run_command(
            image, inside, out, gpus, env, autotune.shared_root(os.environ) if gpus else None
        )
        console.print("+ " + " ".join(argv), markup=False, soft_wrap=True)
        # On Ctrl-C docker passes the signal into the container, whose run writes an interrupted result.
        code = run_to_its_end(argv)
        return Launched(code, sorted(set(out.glob("*.json")) - before))
