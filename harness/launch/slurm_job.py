"""A SLURM job for one run, as plain data and the sbatch script it becomes (pure: no SLURM needed).

One task per GPU (or `--tasks-per-node`, e.g. two CPU processes on a test node): every task runs the same
`jaxbench run`, and jax.distributed finds its peers from SLURM's environment
(harness/backends/native/distributed.py); process 0 writes the result. Each task's output goes to
rank-<N>.log; its host goes to rank-<N>.start when it starts and, when it ends, its exit code, host and
time to rank-<N>.exit, so that the launcher can name the rank and host of a failure, the first to fail
first, and those killed before they could record an end (harness/launch/slurm.py). With an image, srun
starts each task in it through pyxis/enroot (`--container-image`), the run's folder mounted at the same
path.

    jaxbench run llama2 --launcher slurm --nodes 2 --gpus-per-node 8 --dry-run
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from harness.launch import ClusterRequest

RANK_LOG = "rank-%t.log"
"""srun's per-task output file; %t is the task's rank."""


def rank_log(folder: Path, rank: int) -> Path:
    return folder / f"rank-{rank}.log"


def rank_start(folder: Path, rank: int) -> Path:
    return folder / f"rank-{rank}.start"


def rank_exit(folder: Path, rank: int) -> Path:
    return folder / f"rank-{rank}.exit"


@dataclasses.dataclass(frozen=True)
class RankRecord:
    """What one rank's files say of it: None where it never started, or never recorded an end (killed, as a
    node that fails or srun's --kill-on-bad-exit kills, by SIGKILL, before the wrapper could write)."""

    rank: int
    host: str | None
    exit_code: int | None
    ended_at: float | None
    """Seconds since the epoch, on its host's clock."""


def read_rank(folder: Path, rank: int) -> RankRecord:
    """The rank's start and exit files, as the script's wrapper writes them (`echo HOST`, then
    `echo CODE HOST TIME`); a missing or garbled file counts as not written."""
    try:
        host: str | None = rank_start(folder, rank).read_text().strip() or None
    except OSError:
        host = None
    try:
        code, host, ended = rank_exit(folder, rank).read_text().split()
        return RankRecord(rank, host, int(code), float(ended))
    except (OSError, ValueError):
        return RankRecord(rank, host, None, None)


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
    # Each task records its host as it starts, and its exit code, host and time as it ends, where the launcher
    # reads them (read_rank), also when it failed. The wrapper outlives a SIGTERM (a time limit, scancel):
    # it records the code of the run it waits for, which writes its result then; only SIGKILL stops it.
    files = shlex.quote(str(folder)) + '/rank-"$SLURM_PROCID"'
    record = (
        f'host=$(hostname); echo "$host" > {files}.start; trap : TERM; "$@"; code=$?; '
        f'echo "$code $host $(date +%s.%N)" > {files}.exit; exit $code'
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
