"""A SLURM job for one run, as plain data and the sbatch script it becomes (pure: no SLURM needed).

One task per GPU (or `--tasks-per-node`, e.g. two CPU processes on a test node): every task runs the same
`jaxbench run`, and jax.distributed finds its peers from SLURM's environment
(harness/backends/native/distributed.py); process 0 writes the result. Each task's output goes to
rank-<N>.log and, when it ends, its exit code and host to rank-<N>.exit, so that the launcher can name the
rank and host of a failure (harness/launch/slurm.py). With an image, srun starts each task in it through
pyxis/enroot (`--container-image`), the run's folder mounted at the same path.

    jaxbench run llama2 --launcher slurm --nodes 2 --gpus-per-node 8 --dry-run
"""

from __future__ import annotations

import shlex
from pathlib import Path

from harness.launch import ClusterRequest

RANK_LOG = "rank-%t.log"
"""srun's per-task output file; %t is the task's rank."""


def rank_log(folder: Path, rank: int) -> Path:
    return folder / f"rank-{rank}.log"


def rank_exit(folder: Path, rank: int) -> Path:
    return folder / f"rank-{rank}.exit"


def sbatch_script(
    request: ClusterRequest,
    *,
    job_name: str,
    folder: Path,
    command: list[str],
    image: str | None = None,
    mounts: tuple[Path, ...] = (),
    environment: dict[str, str] | None = None,
) -> str:
    """The batch script: SLURM's options, then one srun step that runs `command` once per task.

    `folder` (absolute) holds the job's log, each rank's log and exit file; `mounts` are the folders a
    containerized task must see at the same paths (the results' folder); `environment` is exported first."""
    directives = [
        f"--job-name={job_name}",
        f"--nodes={request.nodes}",
        f"--ntasks-per-node={request.tasks_per_node_resolved}",
        f"--output={folder / 'job.log'}",
    ]
    directives += [f"--gpus-per-node={request.gpus_per_node}"] if request.gpus_per_node else []
    directives += [f"--partition={request.partition}"] if request.partition else []
    directives += [f"--account={request.account}"] if request.account else []
    directives += [f"--time={request.time}"] if request.time else []
    srun = [
        "srun",
        # One rank that fails ends the step: the others would wait for it in a collective until the limit.
        "--kill-on-bad-exit=1",
        f"--output={folder / RANK_LOG}",
    ]
    if image:
        paths = sorted({str(path) for path in (folder, *mounts)})
        srun += [f"--container-image={image}", f"--container-mounts={','.join(f'{p}:{p}' for p in paths)}"]
    # Each task records its exit code and host where the launcher reads them, also when it failed.
    record = (
        '"$@"; code=$?; echo "$code $(hostname)" > '
        + shlex.quote(str(folder))
        + '/rank-"$SLURM_PROCID".exit; exit $code'
    )
    step = [*srun, "bash", "-c", record, "rank", *command]
    exports = [f"export {name}={shlex.quote(value)}" for name, value in sorted((environment or {}).items())]
    lines = [
        "#!/bin/bash",
        "# Written by jaxbench (harness/launch/slurm_job.py): one run of the harness, one task per process.",
        *(f"#SBATCH {directive}" for directive in directives),
        "set -u",
        *exports,
        'echo "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: $SLURM_NTASKS tasks"',
        shlex.join(step),
    ]
    return "\n".join(lines) + "\n"
