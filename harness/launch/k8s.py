"""The Kubernetes launcher: a run as a JobSet (harness/launch/k8s_jobset.py builds it), validated offline
against the schemas (k8s_schema.py), created through the Kubernetes API (k8s_api.py, the cluster from
KUBECONFIG), watched until it ends while rank 0's log is shown, deleted on Ctrl-C or SIGTERM.

Process 0 prints its result between marker lines and the launcher copies it into --out; a failure names the
first failing rank, its node and why, and a missing or failed result becomes one (job_result.py). Details:
docs/design.md, "Kubernetes".

    jaxbench run llama2 --launcher k8s --image IMAGE --nodes 2 --gpus-per-node 8 [--time T] [--namespace NS]
    jaxbench run llama2 --launcher k8s --image IMAGE --nodes 2 --dry-run     # print the manifest only
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import queue
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.core.files import file_in, folder_to_write, writable_folder, write_atomic
from jaxbench.harness.flags.environment import DeviceHint
from jaxbench.harness.launch import (
    ClusterRequest,
    Launched,
    LaunchOptions,
    Processes,
    image_reference,
    job_result,
)
from jaxbench.harness.launch.job_result import NAMED_RANKS
from jaxbench.harness.launch.job_watch import Polling
from jaxbench.harness.launch.k8s_api import PHASES, JobSetState, KubernetesApi, KubernetesClient, PodState
from jaxbench.harness.launch.k8s_jobset import (
    RESULTS_PATH,
    TERMINATION_GRACE_S,
    dns_slug,
    jobset_manifest,
    jobset_name,
    namespace_name,
)
from jaxbench.harness.launch.k8s_schema import validate
from jaxbench.harness.provenance.record import ClusterJob
from jaxbench.harness.runtime.options import OUT_FLAG, RunOptions
from jaxbench.harness.runtime.result import RESULT_BEGIN, RESULT_END, Status, result_stem

LOG_WAIT_S = TERMINATION_GRACE_S + 30
"""After the JobSet ended: how long rank 0's log may still run (its pod stopping, writing its result)."""
POLLING = Polling(every_s=2.0)
"""How often the launcher reads the JobSet and its pods from the API server."""
SCHEDULER = "kubernetes"
"""provenance.job.scheduler of the results the launcher writes."""

WHY = {
    "OOMKilled": "out of memory",
    "DeadlineExceeded": "past its time limit, --time",
    "Evicted": "evicted by its node",
    "ErrImagePull": "its image could not be pulled",
    "ImagePullBackOff": "its image could not be pulled",
    "Unschedulable": "no node can take it",
}

STATUS = {"OOMKilled": Status.OOM}
"""The result's status where the first pod to fail ended so; any other failure is Status.FAILED, a JobSet
deleted (by the launcher on Ctrl-C, or by anyone) Status.INTERRUPTED, as SLURM's mapping does."""


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


def pod_hint(request: ClusterRequest) -> DeviceHint:
    """The devices each pod's process finds: the GPUs it asks for, of a model the launcher cannot name, else
    the CPU. (Not this machine's: the pods run elsewhere, and inherit none of its environment.)"""
    return DeviceHint("gpu", job_result.UNKNOWN) if request.gpus_per_node else DeviceHint("cpu", "cpu")


def pod_environment(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The variables the manifest sets for each pod's process (not those from the pod's annotations)."""
    pod = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return {item["name"]: item["value"] for item in container["env"] if "value" in item}


def by_rank(pod: PodState) -> tuple[bool, int]:
    return pod.rank is None, pod.rank or 0


def first_failed(pods: list[PodState]) -> PodState | None:
    """The pod that failed first: the first whose container ended, then the lowest rank."""
    failed = [p for p in pods if p.phase == "Failed" or p.exit_code not in (None, 0)]
    return min(failed, key=lambda p: (p.finished_at or "~", *by_rank(p))) if failed else None


def never_started(pods: list[PodState]) -> list[PodState]:
    return sorted((p for p in pods if p.phase == "Pending"), key=by_rank)


def describe_pod(pod: PodState, ended: str) -> str:
    """`rank 1 on node-b failed: OOMKilled, out of memory, exit code 137`."""
    why = [p for p in (pod.reason, WHY.get(pod.reason, "")) if p]
    why += [f"exit code {pod.exit_code}"] if pod.exit_code is not None else []
    who = f"rank {pod.rank}" if pod.rank is not None else f"pod {pod.name}"
    where = f" on {pod.node}" if pod.node else ""
    return f"{who}{where} {ended}: {', '.join(why) or pod.phase}"


def failure(state: JobSetState | None, pods: list[PodState], interrupted: bool = False) -> str | None:
    """Why the JobSet did not complete: how it ended, the first pod that failed (its rank, node and
    reason), then the pods that never started; None when it completed."""
    if not interrupted and state is not None and state.ended and not state.failed:
        return None
    if interrupted:
        parts = ["the launcher deleted it (Ctrl-C or SIGTERM)"]
    else:
        parts = [(state.message or "the jobset failed") if state else "the jobset is gone"]
    first = first_failed(pods)
    parts += [describe_pod(first, "failed")] if first else []
    waiting = never_started(pods)
    parts += [describe_pod(pod, "never started") for pod in waiting[:NAMED_RANKS]]
    if len(waiting) > NAMED_RANKS:
        parts.append(f"{len(waiting) - NAMED_RANKS} more pods never started")
    return "; ".join(parts)


def ending_status(state: JobSetState | None, pods: list[PodState], interrupted: bool) -> Status:
    if interrupted or state is None:
        return Status.INTERRUPTED
    first = first_failed(pods)
    return STATUS.get(first.reason, Status.FAILED) if first else Status.FAILED


def told_of(pods: list[PodState]) -> PodState | None:
    """The pod a failure is told of: the first that failed, else the first that never started, else
    rank 0."""
    return first_failed(pods) or next(iter(never_started(pods)), None) or min(pods, key=by_rank, default=None)


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
        polling: Polling = POLLING,
        log_wait_s: float = LOG_WAIT_S,
    ) -> None:
        request = options.cluster
        slurm_only = {"--partition": request.partition, "--account": request.account}
        named = [f"{flag} {value}" for flag, value in slurm_only.items() if value is not None]
        if named:
            what = "options" if len(named) > 1 else "an option"
            raise InvalidInput(
                f"{', '.join(named)}: {what} of the SLURM launcher; the k8s launcher takes --namespace"
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
        namespace = None if options.namespace is None else namespace_name(options.namespace)
        # One process per pod: the job's tasks are its pods, whatever GPUs each has.
        self.request = dataclasses.replace(request, tasks_per_node=1)
        self.image, self.dry_run, self.namespace = image_reference(options.image), options.dry_run, namespace
        self.api = api or (None if options.dry_run else KubernetesClient(options.namespace))
        self.polling, self.log_wait_s = polling, log_wait_s

    def processes(self, environ: Mapping[str, str]) -> Processes:
        """Pods elsewhere, with the GPUs asked for, inheriting none of this machine's environment."""
        return Processes(pod_hint(self.request), {})

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
        out = folder_to_write(run.out_dir, OUT_FLAG).resolve()  # made only once there is a job to write for
        created_at = dt.datetime.now(dt.UTC)
        manifest = self.manifest(run, created_at)
        job = job_result.plan(
            run, self.request, self.image, pod_environment(manifest), pod_hint(self.request)
        )
        validate(manifest)
        api = self.api
        if self.dry_run or api is None:
            console.print(yaml.safe_dump(manifest, sort_keys=False), markup=False, highlight=False, end="")
            return Launched(ExitCode.OK, [])
        name = manifest["metadata"]["name"]
        writable_folder(out, OUT_FLAG)
        api.create_jobset(manifest)
        console.print(
            f"created jobset {name} in namespace {api.namespace}: {self.request.nodes} pods", markup=False
        )
        watched = self._watch(api, name, console)
        results = self._collect(watched, out, console)
        problem = failure(watched.state, watched.pods, watched.interrupted)
        if problem is None and results:
            console.print(f"jobset {name} completed", markup=False)
            return Launched(ExitCode.OK, results)
        why = problem or "it completed"  # and rank 0 printed no result: the launcher writes one
        ended = "interrupted" if watched.interrupted else "failed"
        console.print(f"jobset {name} {ended}: {why}", markup=False)
        ending = self._ending(api.namespace, name, watched, why, created_at)
        return job_result.settle(job, results, out, ending, console)

    def _ending(
        self, namespace: str, name: str, watched: Watched, why: str, created_at: dt.datetime
    ) -> job_result.Ending:
        """How the JobSet ended, for its result (harness/launch/job_result.py)."""
        pods, interrupted, jobset = watched.pods, watched.interrupted, f"{namespace}/{name}"
        told = told_of(pods)
        # A deleted JobSet's pods are gone with their logs; a pod that never started has none.
        logged = told is not None and told.phase != "Pending" and not interrupted
        rank = f"rank {told.rank}" if told and told.rank is not None else "its pod"
        nodes = dict.fromkeys(p.node for p in sorted(pods, key=by_rank) if p.node)
        return job_result.Ending(
            status=ending_status(watched.state, pods, interrupted),
            reason=f"JobSet {jobset}: {why}",
            interrupted=interrupted,
            started_at=created_at.isoformat(timespec="milliseconds"),
            cluster_job=ClusterJob(
                scheduler=SCHEDULER,
                job_id=jobset,
                nodes=",".join(nodes) or None,
                node_count=self.request.nodes,
                tasks=self.request.tasks,
                version=None,
            ),
            host=(told.node if told else "") or job_result.UNKNOWN,
            missing="rank 0 printed no result",
            logs=f"log of {rank}: kubectl logs -n {namespace} {told.name}" if told and logged else None,
        )

    def _watch(self, api: KubernetesApi, name: str, console: Console) -> Watched:
        """Poll the JobSet to its end, showing the pods' phases as they change and rank 0's log; on Ctrl-C
        or SIGTERM, delete it and keep watching until it is gone (rank 0 writes its result meanwhile)."""
        watched, shown = Watched(None, []), ""

        def poll() -> bool:
            nonlocal shown
            watched.state = api.jobset(name)
            watched.pods = api.pods(name) if watched.state else watched.pods
            if (now := progress(watched.pods)) != shown:
                console.print(f"jobset {name}: {now}", markup=False)
                shown = now
            self._follow_rank_0(api, watched, console)
            return watched.state is None or watched.state.ended

        def delete() -> None:
            console.print(f"deleting jobset {name} (its pods get SIGTERM)", markup=False)
            api.delete_jobset(name)

        watched.interrupted = self.polling.until_ended(poll, delete)
        return watched

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
