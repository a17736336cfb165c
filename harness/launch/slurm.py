"""The SLURM launcher: a run as a batch job (harness/launch/slurm_job.py writes its script), submitted with
sbatch, watched with scontrol until it ends while rank 0's log is shown, cancelled with scancel on Ctrl-C or
SIGTERM. SLURM's commands sit behind `SlurmCommands`, which the tests replace.

The job's files stay in <out>/slurm-<recipe>-<UTC time>/; a job that fails is a failed result whatever
killed it, naming the rank that failed first, its host and SLURM's state (job_result.py). Details:
docs/design.md, "SLURM".

    jaxbench run llama2 --launcher slurm --nodes 2 --gpus-per-node 8 [--partition P] [--account A] [--time T]
    jaxbench run llama2 --launcher slurm --tasks-per-node 2 --dry-run      # print the script, submit nothing
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput, JaxbenchError
from jaxbench.core.files import folder_to_write, writable_folder
from jaxbench.harness.launch import Launched, LaunchOptions, Processes, image_reference, job_result
from jaxbench.harness.launch.job_result import NAMED_RANKS, planned_hint
from jaxbench.harness.launch.job_watch import Polling
from jaxbench.harness.launch.slurm_job import RankRecord, rank_log, read_rank, sbatch_script
from jaxbench.harness.provenance.collection import SLURM_VERSION_ENV
from jaxbench.harness.provenance.record import ClusterJob
from jaxbench.harness.runtime.options import OUT_FLAG, RunOptions
from jaxbench.harness.runtime.result import Status

ENDED = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)
"""scontrol's job states after which nothing more runs (squeue(1), JOB STATE CODES)."""

WHY = {
    "FAILED": "a rank failed",
    "TIMEOUT": "the job exceeded its time limit",
    "NODE_FAIL": "a node of the job failed",
    "OUT_OF_MEMORY": "a task ran out of host memory",
    "BOOT_FAIL": "a node failed to boot",
    "DEADLINE": "the job reached its deadline",
    "PREEMPTED": "the job was preempted",
    "CANCELLED": "the job was cancelled",
}

STATUS = {
    "OUT_OF_MEMORY": Status.OOM,
    "CANCELLED": Status.INTERRUPTED,
    "PREEMPTED": Status.INTERRUPTED,
}
"""The result's status for a job that ended in this state; any other failure is Status.FAILED."""

EXIT_NOTES = {
    130: " (interrupted by SIGINT or SIGTERM)",
    137: " (killed by SIGKILL: out of memory?)",
    143: " (killed by SIGTERM)",
}
"""What a task's exit code says beyond itself: jaxbench's own INTERRUPTED, or 128 + a signal's number."""

POLLING = Polling(every_s=1.0)
"""How often the launcher asks scontrol for the job's state."""


class SlurmFailed(JaxbenchError):
    """A SLURM command failed (sbatch refused the job, the controller did not answer)."""

    exit_code = ExitCode.FAILED


@dataclasses.dataclass(frozen=True)
class JobInfo:
    state: str
    """scontrol's JobState (PENDING, RUNNING, COMPLETED, TIMEOUT, ...)."""
    reason: str = ""
    nodes: str = ""


class SlurmCommands(Protocol):
    def submit(self, script: Path) -> str: ...
    def job(self, job_id: str) -> JobInfo: ...
    def cancel(self, job_id: str) -> None: ...
    def version(self) -> str: ...


def parse_job(line: str) -> JobInfo:
    """One-line `scontrol show job -o` output -> the fields the launcher reads."""
    fields = dict(re.findall(r"(\w+)=(\S*)", line))
    if "JobState" not in fields:
        raise SlurmFailed(f"scontrol gave no JobState: {line.strip()[:300]}")
    return JobInfo(fields["JobState"], fields.get("Reason", ""), fields.get("NodeList", ""))


class Scontrol:
    """SLURM's own commands, on PATH (SLURM_CONF, where set, chooses the cluster)."""

    def _run(self, argv: list[str]) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise SlurmFailed(f"{' '.join(argv[:2])} failed: {(done.stderr or done.stdout).strip()[:500]}")
        return done.stdout

    def submit(self, script: Path) -> str:
        return self._run(["sbatch", "--parsable", str(script)]).strip().split(";")[0]

    def job(self, job_id: str) -> JobInfo:
        return parse_job(self._run(["scontrol", "show", "job", "-o", job_id]))

    def cancel(self, job_id: str) -> None:
        self._run(["scancel", job_id])

    def version(self) -> str:
        return self._run(["scontrol", "--version"]).strip()


def failed_ranks(ranks: list[RankRecord]) -> list[RankRecord]:
    """The ranks that did not end well, the first to fail first: those with an exit code by the time they
    ended, then those killed before they recorded one, then those that never started."""

    def order(rank: RankRecord) -> tuple[int, float, int]:
        if rank.exit_code is not None:
            return 0, rank.ended_at or 0.0, rank.rank
        return (1 if rank.host else 2), 0.0, rank.rank

    return sorted((r for r in ranks if r.exit_code != 0), key=order)


def describe_rank(rank: RankRecord, first: bool = False) -> str:
    if rank.host is None:
        return f"rank {rank.rank} never started"
    if rank.exit_code is None:
        return f"rank {rank.rank} on {rank.host} was killed before it recorded an exit code"
    exited = "exited first, with" if first else "exited with"
    return f"rank {rank.rank} on {rank.host} {exited} {rank.exit_code}{EXIT_NOTES.get(rank.exit_code, '')}"


def failure(info: JobInfo, ranks: list[RankRecord]) -> str | None:
    """Why the job failed, with SLURM's state and reason, naming the rank that failed first and its host,
    then the others; None when every rank succeeded."""
    failed = failed_ranks(ranks)
    if info.state == "COMPLETED" and not failed:
        return None
    slurm = info.state + (f", {info.reason}" if info.reason and info.reason != "None" else "")
    why = f"{WHY.get(info.state, f'the job ended {info.state}')} (SLURM: {slurm})"
    # Which rank failed first is only known among those that recorded when they ended.
    first = len(failed) > 1 and failed[1].exit_code is not None
    named = [describe_rank(rank, first and index == 0) for index, rank in enumerate(failed[:NAMED_RANKS])]
    if len(failed) > NAMED_RANKS:
        named.append(f"{len(failed) - NAMED_RANKS} more ranks did not end well")
    return why + (": " + "; ".join(named) if named else "")


def pyxis_image(image: str) -> str:
    """`image` unchanged where pyxis's --container-image takes it: an OCI image reference, enroot's
    REGISTRY#NAME[:TAG], or the absolute path of a squashfs file; InvalidInput naming --image otherwise."""
    registry, enroot, name = image.partition("#")
    try:
        if image.startswith("/"):
            if any(not c.isprintable() or c.isspace() or c == "," for c in image):
                raise InvalidInput(image)
        else:
            image_reference(f"{registry}/{name}" if enroot else image)
    except InvalidInput:
        raise InvalidInput(
            f"--image {image!r}: expected an image reference ([registry/]name[:tag][@digest], the name in "
            "lower case), enroot's REGISTRY#NAME[:TAG], or the absolute path of a squashfs file, without "
            "spaces or commas"
        ) from None
    return image


class SlurmLauncher:
    name = "slurm"

    def __init__(
        self, options: LaunchOptions, commands: SlurmCommands | None = None, polling: Polling = POLLING
    ) -> None:
        if options.namespace is not None:
            raise InvalidInput(
                f"--namespace {options.namespace}: an option of the k8s launcher (a Kubernetes namespace); "
                "the SLURM launcher takes --partition and --account"
            )
        self.request = options.cluster
        self.image = None if options.image is None else pyxis_image(options.image)
        self.dry_run = options.dry_run
        if commands is None and not options.dry_run and shutil.which("sbatch") is None:
            raise InvalidInput(
                "--launcher slurm: sbatch is not on PATH (run on a SLURM login node, or use --dry-run)"
            )
        self.commands = commands or Scontrol()
        self.polling = polling

    def processes(self, environ: Mapping[str, str]) -> Processes:
        """The job's tasks inherit this environment; their devices are the GPUs asked for, else what this
        machine has (harness/launch/job_result.py: planned_hint)."""
        return Processes(planned_hint(self.request, environ), environ)

    def command(self, run: RunOptions, out: Path) -> list[str]:
        """What each task runs: this harness (or the image's), writing into `out`, never ingesting."""
        jaxbench = ["jaxbench"] if self.image else [sys.executable, "-m", "jaxbench"]
        return [*jaxbench, "run", *run.recipe_arguments(), "--out", str(out), "--no-ingest"]

    def launch(self, run: RunOptions, console: Console) -> Launched:
        out = folder_to_write(run.out_dir, OUT_FLAG).resolve()  # made only once the script is sound
        job = job_result.plan(run, self.request, self.image, os.environ)
        submitted_at = dt.datetime.now(dt.UTC)
        name = Path(run.recipe).stem
        folder = out / f"slurm-{name}-{submitted_at.strftime('%Y%m%dT%H%M%S')}"
        version = None if self.dry_run else self.commands.version()
        script = sbatch_script(
            self.request,
            job_name=f"jaxbench-{name}",
            folder=folder,
            command=self.command(run, out),
            image=self.image,
            mounts=(out,),
            environment={SLURM_VERSION_ENV: version} if version else {},
        )
        if self.dry_run:
            console.print(script, markup=False, highlight=False, soft_wrap=True, end="")
            return Launched(ExitCode.OK, [])
        writable_folder(out, OUT_FLAG)
        folder.mkdir()
        (folder / "job.sbatch").write_text(script)
        before = set(out.glob("*.json"))
        job_id = self.commands.submit(folder / "job.sbatch")
        console.print(f"submitted job {job_id}: {self.request.tasks} tasks; files in {folder}", markup=False)
        info, interrupted = self._watch(job_id, folder, console)
        results = sorted(set(out.glob("*.json")) - before)
        ranks = [read_rank(folder, rank) for rank in range(self.request.tasks)]
        problem = failure(info, ranks)
        if problem is None and results:
            console.print(f"job {job_id} completed on {info.nodes}", markup=False)
            return Launched(ExitCode.OK, results)
        why = problem or "it completed"  # and no rank wrote a result: the launcher writes it
        ended = "cancelled" if interrupted else "failed"
        console.print(f"job {job_id} {ended}: {why} (logs in {folder})", markup=False)
        where = next((rank.host for rank in failed_ranks(ranks) if rank.host), None) or info.nodes
        ending = job_result.Ending(
            status=Status.INTERRUPTED if interrupted else STATUS.get(info.state, Status.FAILED),
            reason=f"SLURM job {job_id}: {why}",
            interrupted=interrupted,
            started_at=submitted_at.isoformat(timespec="milliseconds"),
            cluster_job=self._cluster_job(job_id, info, version),
            host=where or job_result.UNKNOWN,
            missing="no rank wrote a result",
            logs=f"logs in {folder}",
        )
        return job_result.settle(job, results, out, ending, console)

    def _cluster_job(self, job_id: str, info: JobInfo, version: str | None) -> ClusterJob:
        """The job as a process inside it records it (harness/provenance/collection.py: read_cluster_job)."""
        return ClusterJob(
            scheduler=self.name,
            job_id=job_id,
            nodes=info.nodes or None,
            node_count=self.request.nodes,
            tasks=self.request.tasks,
            version=version,
        )

    def _watch(self, job_id: str, folder: Path, console: Console) -> tuple[JobInfo, bool]:
        """Poll the job to its end, showing state changes and rank 0's new output; on Ctrl-C or SIGTERM,
        cancel it and keep watching until SLURM says it ended (each rank then writes what it can)."""
        info, shown = JobInfo(""), 0

        def poll() -> bool:
            nonlocal info, shown
            last, info = info, self.commands.job(job_id)
            if info.state != last.state:
                reason = f" ({info.reason})" if info.reason and info.reason != "None" else ""
                console.print(f"job {job_id}: {info.state}{reason}", markup=False)
            shown = self._show_new_output(rank_log(folder, 0), shown, console)
            return info.state in ENDED

        def cancel() -> None:
            console.print(f"cancelling job {job_id} (scancel)", markup=False)
            self.commands.cancel(job_id)

        interrupted = self.polling.until_ended(poll, cancel)
        if info.state not in ENDED:  # a second Ctrl-C while cancelling: the wait stopped first
            info = JobInfo("CANCELLED", nodes=info.nodes)
        return info, interrupted

    @staticmethod
    def _show_new_output(log: Path, shown: int, console: Console) -> int:
        """Print the complete lines written to `log` since byte `shown`; returns the new offset."""
        try:
            with log.open("rb") as handle:
                handle.seek(shown)
                new = handle.read()
        except OSError:
            return shown
        end = new.rfind(b"\n")
        if end < 0:
            return shown
        text = new[:end].decode(errors="replace")
        console.print(text, markup=False, highlight=False, soft_wrap=True)
        return shown + end + 1
