"""The SLURM launcher: a run as a batch job (harness/launch/slurm_job.py writes its script), submitted with
sbatch, watched with scontrol until it ends while rank 0's log is shown, cancelled with scancel on Ctrl-C or
SIGTERM. SLURM's commands sit behind `SlurmCommands`, which the tests replace.

    jaxbench run llama2 --launcher slurm --nodes 2 --gpus-per-node 8 [--partition P] [--account A] [--time T]
    jaxbench run llama2 --launcher slurm --tasks-per-node 2 --dry-run      # print the script, submit nothing

The script, the job's log and each rank's log and exit file stay in <out>/slurm-<recipe>-<UTC time>/, beside
the result that process 0 writes into --out.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from rich.console import Console

from core.errors import ExitCode, InvalidInput, JaxbenchError
from core.files import writable_folder
from harness.launch import Launched, LaunchOptions
from harness.launch.slurm_job import rank_exit, rank_log, sbatch_script
from harness.provenance import SLURM_VERSION_ENV
from harness.run.options import OUT_FLAG, RunOptions
from harness.run.outcome import Terminated, sigterm_raises

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
    "TIMEOUT": "the job exceeded its time limit (--time)",
    "NODE_FAIL": "a node of the job failed",
    "OUT_OF_MEMORY": "a task ran out of host memory",
    "BOOT_FAIL": "a node failed to boot",
    "DEADLINE": "the job reached its deadline",
    "PREEMPTED": "the job was preempted",
    "CANCELLED": "the job was cancelled",
}


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


@dataclasses.dataclass(frozen=True)
class RankEnd:
    rank: int
    exit_code: int
    host: str


def rank_ends(folder: Path, tasks: int) -> list[RankEnd]:
    """The ranks that recorded their end, by rank; a rank killed before it could is missing."""
    ends = []
    for rank in range(tasks):
        try:
            code, host = rank_exit(folder, rank).read_text().split(maxsplit=1)
            ends.append(RankEnd(rank, int(code), host.strip()))
        except (OSError, ValueError):
            continue
    return ends


def failure(info: JobInfo, ends: list[RankEnd], tasks: int) -> str | None:
    """Why the job failed, naming the first failing rank and its host; None when every rank succeeded."""
    failed = [end for end in ends if end.exit_code != 0]
    silent = tasks - len(ends)
    if info.state == "COMPLETED" and not failed and not silent:
        return None
    parts = [WHY.get(info.state, f"the job ended {info.state}")]
    if failed:
        first = failed[0]
        killed = " (killed by SIGKILL: out of memory?)" if first.exit_code == 137 else ""
        parts.append(f"rank {first.rank} on {first.host} exited with {first.exit_code}{killed}")
    if silent:
        parts.append(f"{silent} of {tasks} ranks never recorded an end")
    return "; ".join(parts)


class SlurmLauncher:
    name = "slurm"

    def __init__(
        self,
        options: LaunchOptions,
        commands: SlurmCommands | None = None,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = 1.0,
    ) -> None:
        self.request = options.cluster
        self.image = options.image
        self.dry_run = options.dry_run
        if commands is None and not options.dry_run and shutil.which("sbatch") is None:
            raise InvalidInput(
                "--launcher slurm: sbatch is not on PATH (run on a SLURM login node, or use --dry-run)"
            )
        self.commands = commands or Scontrol()
        self.sleep, self.poll_s = sleep, poll_s

    def command(self, run: RunOptions, out: Path) -> list[str]:
        """What each task runs: this harness (or the image's), writing into `out`, never ingesting."""
        jaxbench = ["jaxbench"] if self.image else [sys.executable, "-m", "jaxbench"]
        return [*jaxbench, "run", *run.recipe_arguments(), "--out", str(out), "--no-ingest"]

    def launch(self, run: RunOptions, console: Console) -> Launched:
        out = writable_folder(run.out_dir, OUT_FLAG).resolve()
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
        name = Path(run.recipe).stem
        folder = out / f"slurm-{name}-{stamp}"
        script = sbatch_script(
            self.request,
            job_name=f"jaxbench-{name}",
            folder=folder,
            command=self.command(run, out),
            image=self.image,
            mounts=(out,),
            environment={} if self.dry_run else {SLURM_VERSION_ENV: self.commands.version()},
        )
        if self.dry_run:
            console.print(script, markup=False, highlight=False, soft_wrap=True, end="")
            return Launched(ExitCode.OK, [])
        folder.mkdir()
        (folder / "job.sbatch").write_text(script)
        before = set(out.glob("*.json"))
        job_id = self.commands.submit(folder / "job.sbatch")
        console.print(f"submitted job {job_id}: {self.request.tasks} tasks; files in {folder}", markup=False)
        info, interrupted = self._watch(job_id, folder, console)
        results = sorted(set(out.glob("*.json")) - before)
        problem = failure(info, rank_ends(folder, self.request.tasks), self.request.tasks)
        if interrupted:
            console.print(f"job {job_id} cancelled", markup=False)
            return Launched(ExitCode.INTERRUPTED, results)
        if problem:
            console.print(f"job {job_id} failed: {problem} (logs in {folder})", markup=False)
            return Launched(ExitCode.FAILED, results)
        console.print(f"job {job_id} completed on {info.nodes}", markup=False)
        return Launched(ExitCode.OK if results else ExitCode.FAILED, results)

    def _watch(self, job_id: str, folder: Path, console: Console) -> tuple[JobInfo, bool]:
        """Poll the job to its end, showing state changes and rank 0's new output; on Ctrl-C or SIGTERM,
        cancel it and keep watching until SLURM says it ended (each rank then writes what it can)."""
        shown, last_state, interrupted = 0, "", False
        with sigterm_raises():
            while True:
                try:
                    info = self.commands.job(job_id)
                    if info.state != last_state:
                        reason = f" ({info.reason})" if info.reason and info.reason != "None" else ""
                        console.print(f"job {job_id}: {info.state}{reason}", markup=False)
                        last_state = info.state
                    shown = self._show_new_output(rank_log(folder, 0), shown, console)
                    if info.state in ENDED:
                        return info, interrupted
                    self.sleep(self.poll_s)
                except (KeyboardInterrupt, Terminated):
                    if interrupted:  # a second Ctrl-C while cancelling: stop waiting
                        return JobInfo("CANCELLED"), True
                    interrupted = True
                    console.print(f"cancelling job {job_id} (scancel)", markup=False)
                    self.commands.cancel(job_id)

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
