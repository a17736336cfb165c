"""The Kubernetes launcher: a run as a JobSet (harness/launch/k8s_jobset.py builds it), validated offline
against the schemas (k8s_schema.py), created through the Kubernetes API (k8s_api.py, the cluster from
KUBECONFIG), watched until it ends while rank 0's log is shown, deleted on Ctrl-C or SIGTERM.

    jaxbench run llama2 --launcher k8s --image IMAGE --nodes 2 --gpus-per-node 8 [--time T] [--namespace NS]
    jaxbench run llama2 --launcher k8s --image IMAGE --nodes 2 --dry-run     # print the manifest only

Each pod writes into its own emptyDir; process 0 also prints its result between two marker lines
(harness/run/result.py: RESULT_IN_LOG_ENV), and the launcher copies it from rank 0's log into --out, where
the `jaxbench run` command ingests it. A failure names the first failing rank, its node and why (its exit
code, OOMKilled, DeadlineExceeded).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from core.errors import ExitCode, InvalidInput
from core.files import file_in, writable_folder, write_atomic
from harness.launch import Launched, LaunchOptions
from harness.launch.k8s_api import PHASES, JobSetState, KubernetesApi, KubernetesClient, PodState
from harness.launch.k8s_jobset import (
    RESULTS_PATH,
    TERMINATION_GRACE_S,
    dns_slug,
    jobset_manifest,
    jobset_name,
)
from harness.launch.k8s_schema import validate
from harness.run.options import OUT_FLAG, RunOptions
from harness.run.outcome import Terminated, sigterm_raises
from harness.run.result import RESULT_BEGIN, RESULT_END, result_stem

LOG_WAIT_S = TERMINATION_GRACE_S + 30
"""After the JobSet ended: how long rank 0's log may still run (its pod stopping, writing its result)."""

WHY = {
    "OOMKilled": "out of memory",
    "DeadlineExceeded": "past its time limit, --time",
    "Evicted": "evicted by its node",
}


def result_in_log(lines: Iterable[str]) -> str | None:
    """The last result printed between the marker lines, or None."""
    found: str | None = None
    block: list[str] | None = None
    for line in lines:
        if line == RESULT_BEGIN:
            block = []
        elif line == RESULT_END and block is not None:
            found, block = "\n".join(block) + "\n", None
        elif block is not None:
            block.append(line)
    return found


def progress(pods: list[PodState]) -> str:
    """`2 Running, 1 Pending (ErrImagePull)`: the pods by phase, with why they wait or failed."""
    counts = Counter((p.phase, p.reason if p.phase in ("Pending", "Failed") else "") for p in pods)
    order = sorted(counts, key=lambda key: (PHASES.index(key[0]) if key[0] in PHASES else len(PHASES), key))
    return (
        ", ".join(f"{counts[key]} {key[0]}" + (f" ({key[1]})" if key[1] else "") for key in order)
        or "no pods"
    )


def failure(state: JobSetState | None, pods: list[PodState]) -> str | None:
    """Why the JobSet failed, naming the first pod that failed (its rank, node and reason); None when it
    completed."""
    if state is not None and state.ended and not state.failed:
        return None
    parts = [(state.message or "the jobset failed") if state else "the jobset is gone"]
    failed = [p for p in pods if p.phase == "Failed" or p.exit_code not in (None, 0)]
    if failed:
        first = min(failed, key=lambda p: (p.finished_at or "~", p.rank if p.rank is not None else 1 << 30))
        why = [p for p in (first.reason, WHY.get(first.reason, "")) if p]
        why += [f"exit code {first.exit_code}"] if first.exit_code is not None else []
        rank = f"rank {first.rank}" if first.rank is not None else f"pod {first.name}"
        parts.append(f"{rank} on {first.node or 'no node'} failed: {', '.join(why) or first.phase}")
    return "; ".join(parts)


def collect_result(text: str, out: Path) -> Path:
    """Rank 0's result, as it wrote it, into `out` under its own name; InvalidInput if it is no result."""
    try:
        result = json.loads(text)
        stem = result_stem(result["recipe"]["name"], result["started_at"], result["run_id"])
    except (ValueError, KeyError, TypeError) as error:
        raise InvalidInput(f"rank 0's log held no readable result ({error})") from None
    path = file_in(out, f"{stem}.json")
    write_atomic(path, text)
    return path


class LogFollower:
    """Rank 0's log, read on a thread (it blocks until a line comes) and shown from the watching one; the
    result block is kept, not shown."""

    def __init__(self, api: KubernetesApi, pod: str) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self._hiding = False
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._read, args=(api, pod), daemon=True)
        self._thread.start()

    def _read(self, api: KubernetesApi, pod: str) -> None:
        try:
            for line in api.log_lines(pod):
                self._queue.put(line.rstrip("\r"))
        except Exception as error:  # shown by the watching thread; the run goes on without its log
            self.error = error

    def show(self, console: Console) -> None:
        while True:
            try:
                line = self._queue.get_nowait()
            except queue.Empty:
                return
            self.lines.append(line)
            self._hiding = line != RESULT_END and (self._hiding or line == RESULT_BEGIN)
            if not self._hiding and line != RESULT_END:
                console.print(line, markup=False, highlight=False, soft_wrap=True)

    def finish(self, console: Console, timeout_s: float) -> list[str]:
        self._thread.join(timeout_s)
        self.show(console)
        return self.lines

    @property
    def running(self) -> bool:
        return self._thread.is_alive()


@dataclasses.dataclass
class Watched:
    state: JobSetState | None
    pods: list[PodState]
    interrupted: bool = False
    follower: LogFollower | None = None


class K8sLauncher:
    name = "k8s"

    def __init__(
        self,
        options: LaunchOptions,
        api: KubernetesApi | None = None,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = 2.0,
        log_wait_s: float = LOG_WAIT_S,
    ) -> None:
        request = options.cluster
        slurm_only = {"--partition": request.partition, "--account": request.account}
        named = [f"{flag} {value}" for flag, value in slurm_only.items() if value is not None]
        if named:
            raise InvalidInput(
                f"{', '.join(named)}: options of the SLURM launcher; the k8s launcher takes --namespace"
            )
        if request.tasks_per_node not in (None, 1):
            raise InvalidInput(
                f"--tasks-per-node {request.tasks_per_node}: the k8s launcher runs one process per pod, "
                "with all of its node's GPUs (--gpus-per-node)"
            )
        if not options.image:
            raise InvalidInput(
                "--launcher k8s: give the image each pod runs with --image (make bench IMAGE=...)"
            )
        self.request, self.image, self.dry_run = request, options.image, options.dry_run
        self.namespace = options.namespace
        self.api = api or (None if options.dry_run else KubernetesClient(options.namespace))
        self.sleep, self.poll_s, self.log_wait_s = sleep, poll_s, log_wait_s

    def manifest(self, run: RunOptions, now: dt.datetime) -> dict[str, Any]:
        """The JobSet for `run`; every pod runs the image's `jaxbench run`, writing into its emptyDir."""
        recipe = Path(run.recipe).stem
        command = ["jaxbench", "run", *run.recipe_arguments(), "--out", RESULTS_PATH, "--no-ingest"]
        return jobset_manifest(
            self.request,
            name=jobset_name(recipe, now, self.request.nodes),
            image=self.image,
            command=command,
            labels={"app.kubernetes.io/name": "jaxbench", "jaxbench.dev/recipe": dns_slug(recipe)},
            namespace=self.namespace,
        )

    def launch(self, run: RunOptions, console: Console) -> Launched:
        out = writable_folder(run.out_dir, OUT_FLAG).resolve()
        manifest = self.manifest(run, dt.datetime.now(dt.UTC))
        validate(manifest)
        api = self.api
        if self.dry_run or api is None:
            console.print(yaml.safe_dump(manifest, sort_keys=False), markup=False, highlight=False, end="")
            return Launched(ExitCode.OK, [])
        name = manifest["metadata"]["name"]
        api.create_jobset(manifest)
        console.print(
            f"created jobset {name} in namespace {api.namespace}: {self.request.nodes} pods", markup=False
        )
        watched = self._watch(api, name, console)
        results = self._collect(watched, out, console)
        if watched.interrupted:
            console.print(f"jobset {name} deleted", markup=False)
            return Launched(ExitCode.INTERRUPTED, results)
        problem = failure(watched.state, watched.pods)
        if problem is None and results:
            console.print(f"jobset {name} completed", markup=False)
            return Launched(ExitCode.OK, results)
        console.print(
            f"jobset {name} failed: {problem or 'it completed, but rank 0 printed no result'}", markup=False
        )
        return Launched(ExitCode.FAILED, results)

    def _watch(self, api: KubernetesApi, name: str, console: Console) -> Watched:
        """Poll the JobSet to its end, showing the pods' phases as they change and rank 0's log; on Ctrl-C
        or SIGTERM, delete it and keep watching until it is gone (rank 0 writes its result meanwhile)."""
        watched, shown = Watched(None, []), ""
        with sigterm_raises():
            while True:
                try:
                    watched.state = api.jobset(name)
                    watched.pods = api.pods(name) if watched.state else watched.pods
                    if (now := progress(watched.pods)) != shown:
                        console.print(f"jobset {name}: {now}", markup=False)
                        shown = now
                    self._follow_rank_0(api, watched, console)
                    if watched.state is None or watched.state.ended:
                        return watched
                    self.sleep(self.poll_s)
                except (KeyboardInterrupt, Terminated):
                    if watched.interrupted:  # a second Ctrl-C while deleting: stop waiting
                        return watched
                    watched.interrupted = True
                    console.print(f"deleting jobset {name} (its pods get SIGTERM)", markup=False)
                    api.delete_jobset(name)

    @staticmethod
    def _follow_rank_0(api: KubernetesApi, watched: Watched, console: Console) -> None:
        if watched.follower is None:
            rank_0 = next((p for p in watched.pods if p.rank == 0 and p.phase != "Pending"), None)
            if rank_0 is not None:
                console.print(f"rank 0: pod {rank_0.name} on {rank_0.node}", markup=False)
                watched.follower = LogFollower(api, rank_0.name)
        if watched.follower is not None:
            watched.follower.show(console)

    def _collect(self, watched: Watched, out: Path, console: Console) -> list[Path]:
        """Rank 0's result from its log, once the log has ended (or LOG_WAIT_S passed), into `out`."""
        if watched.follower is None:
            return []
        try:
            lines = watched.follower.finish(console, self.log_wait_s)
        except KeyboardInterrupt:  # the JobSet has ended: only the wait for the end of its log stops
            lines = watched.follower.lines
        if watched.follower.error is not None:
            console.print(f"rank 0's log: {watched.follower.error}", markup=False)
        text = result_in_log(lines)
        if text is None:
            still = " (still running)" if watched.follower.running else ""
            console.print(f"rank 0's log{still} held no result", markup=False)
            return []
        try:
            return [collect_result(text, out)]
        except InvalidInput as error:
            console.print(str(error), markup=False)
            return []
