"""A SLURM job for one run, as plain data and the sbatch script it becomes (pure: no SLURM needed).

One task per GPU (or `--tasks-per-node`); every task runs the same `jaxbench run`, jax.distributed finds
its peers from SLURM's environment, and process 0 writes the result. Each task records its log, start and
exit (rank-<N>.log, .start, .exit) so the launcher can name the first failure; with an image, srun starts
tasks through pyxis/enroot. Every value from the user enters the script quoted, or is refused. The files
and why: docs/design.md, "SLURM".

    jaxbench run llama2 --launcher slurm --nodes 2 --gpus-per-node 8 --dry-run
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.launch import ClusterRequest

RANK_LOG = "rank-%t.log"
"""srun's per-task output file; %t is the task's rank."""
COMPONENT_SEPARATORS = ("hetjob", "packjob")
"""Words that make sbatch start another component of a heterogeneous job wherever an #SBATCH line holds
them, quoted or not (src/sbatch/opt.c, "packjob" before SLURM 19.05)."""
FOLDER = "the job's folder (--out, then slurm-<recipe file name>-<time>)"


def check_sbatch_text(value: str, what: str) -> str:
    """`value` unchanged where an #SBATCH line can hold it; InvalidInput naming `what` where it holds a
    character that is not printable (a line break ends the line) or a word that starts another job
    component (COMPONENT_SEPARATORS)."""
    unprintable = next((c for c in value if not c.isprintable()), None)
    if unprintable is not None:
        raise InvalidInput(
            f"{what} {value!r} holds {unprintable!r}, which an #SBATCH line cannot hold; "
            "expected printable characters only"
        )
    separator = next((word for word in COMPONENT_SEPARATORS if word in value.lower()), None)
    if separator is not None:
        raise InvalidInput(
            f"{what} {value!r} holds {separator!r}, which sbatch reads as the start of another job "
            "anywhere in an #SBATCH line; expected text without it"
        )
    return value


def sbatch_word(value: str, what: str) -> str:
    """`value` as one argument of an #SBATCH line, as sbatch splits those lines (src/sbatch/opt.c,
    _get_argument): in double quotes, a backslash before each backslash and double quote; checked first
    (check_sbatch_text)."""
    check_sbatch_text(value, what)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def filename_pattern(folder: Path) -> str:
    """`folder` as the start of a SLURM filename pattern (--output): '%' doubled, since '%j' or '%t'
    would be replaced. A backslash anywhere turns every replacement off (rank-%t.log would be one file for
    all ranks): refused."""
    if "\\" in str(folder):
        raise InvalidInput(
            f"{FOLDER} {str(folder)!r} holds a backslash, which turns off SLURM's %t in the ranks' log "
            "names; expected a path without one"
        )
    return str(folder).replace("%", "%%")


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
    check_sbatch_text(str(folder), FOLDER)
    directives = [
        f"--job-name={sbatch_word(job_name, 'the job name (from the recipe file name)')}",
        f"--nodes={request.nodes}",
        f"--ntasks-per-node={request.tasks_per_node_resolved}",
        f"--output={sbatch_word(filename_pattern(folder) + '/job.log', FOLDER)}",
    ]
    directives += [f"--gpus-per-node={request.gpus_per_node}"] if request.gpus_per_node else []
    directives += [f"--partition={request.partition}"] if request.partition else []
    directives += [f"--account={request.account}"] if request.account else []
    directives += [f"--time={request.time}"] if request.time else []
    srun = [
        "srun",
        # One rank that fails ends the step: the others would wait for it in a collective until the limit.
        "--kill-on-bad-exit=1",
        f"--output={filename_pattern(folder)}/{RANK_LOG}",
    ]
    if image:
        paths = sorted({str(path) for path in (folder, *mounts)})
        if separated := next((path for path in paths if "," in path or ":" in path), None):
            raise InvalidInput(
                f"{separated!r} (under --out), mounted into the image: pyxis's --container-mounts "
                "separates mounts with ',' and a mount's source from its target with ':'; expected a path "
                "without either"
            )
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
