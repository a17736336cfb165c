"""A Kubernetes JobSet (jobset.x-k8s.io) for one run, as the plain dict the API takes (pure: no cluster or
client needed).

One replicated job of one Indexed Job with a pod per node: every pod runs the same `jaxbench run` inside the
image, one process per pod with the node's GPUs. Process 0's pod is the coordinator, reached by its stable
name in the JobSet's headless service (`<jobset>-workers-0-0.<jobset>`); each pod's process id is its
completion index, read from the pod's annotation (harness/backends/native/distributed.py takes them as
JAX_COORDINATOR_ADDRESS, JAXBENCH_NUM_PROCESSES, JAXBENCH_PROCESS_ID). Process 0 prints its result to its
log (harness/runtime/result.py: RESULT_IN_LOG_ENV), where the launcher collects it (harness/launch/k8s.py).

    jaxbench run llama2 --launcher k8s --image ghcr.io/jaxbench/jax:cuda --nodes 2 --gpus-per-node 8 --dry-run
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.backends.native.distributed import COORDINATOR_ENV, NUM_PROCESSES_ENV, PROCESS_ID_ENV
from jaxbench.harness.launch import ClusterRequest, time_limit_seconds
from jaxbench.harness.runtime.result import RESULT_IN_LOG_ENV

GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
PLURAL = "jobsets"
KIND = "JobSet"
REPLICATED_JOB = "workers"
CONTAINER = "jaxbench"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""The label JobSet puts on every Job and pod it makes (the launcher lists the pods by it)."""
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""The annotation an Indexed Job puts on each pod: its index, 0 .. completions-1 (the process id)."""
COORDINATOR_PORT = 1234
RESULTS_PATH = "/results"
"""Where the run inside a pod writes (an emptyDir): only rank 0's log leaves the pod."""
TERMINATION_GRACE_S = 60
"""Between SIGTERM and SIGKILL when the JobSet is deleted: process 0 writes its `interrupted` result
meanwhile."""
TTL_AFTER_FINISHED_S = 86_400
"""A finished JobSet (and its pods' logs) stays a day for inspection, then Kubernetes deletes it."""
NAME_LIMIT = 63
"""A DNS-1035 label (RFC 1035): the most characters of a JobSet's generated pod names and host names."""


def pod_hostname(jobset: str, index: int, replicated_job: str = REPLICATED_JOB, job_index: int = 0) -> str:
    """Host name of the pod with completion index `index` in a JobSet's Job (its pod name: this and 5
    random characters)."""
    return f"{jobset}-{replicated_job}-{job_index}-{index}"


def longest_pod_name(jobset: str, pods: int, replicated_job: str = REPLICATED_JOB, jobs: int = 1) -> str:
    """The longest pod name the JobSet makes: its last Job's last pod, with the 5 random characters the Job
    controller appends (here 'abcde')."""
    return pod_hostname(jobset, pods - 1, replicated_job, jobs - 1) + "-abcde"


def coordinator_address(jobset: str) -> str:
    """Process 0's pod through the headless service that JobSet names after itself (spec.network)."""
    return f"{pod_hostname(jobset, 0)}.{jobset}:{COORDINATOR_PORT}"


def jobset_name(recipe: str, when: dt.datetime, nodes: int) -> str:
    """`jaxbench-<recipe>-<UTC time>`, lower case, the recipe shortened so that the longest pod name
    (`<name>-workers-0-<nodes-1>-xxxxx`) stays within a DNS label, as JobSet's webhook requires."""
    stamp = when.astimezone(dt.UTC).strftime("%Y%m%d-%H%M%S")
    slug = dns_slug(recipe, NAME_LIMIT - len(longest_pod_name("", nodes)) - len(f"jaxbench--{stamp}"))
    return f"jaxbench-{slug}-{stamp}" if slug else f"jaxbench-{stamp}"


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def namespace_name(namespace: str) -> str:
    """`namespace` unchanged where it is a Kubernetes namespace name, a DNS-1123 label (RFC 1123) of at most
    NAME_LIMIT characters; InvalidInput naming --namespace otherwise."""
    if len(namespace) > NAME_LIMIT or not _DNS_LABEL.fullmatch(namespace):
        raise InvalidInput(
            f"--namespace {namespace!r}: expected a Kubernetes namespace, a DNS-1123 label (lower case "
            f"letters, digits and '-', starting and ending with a letter or digit, at most {NAME_LIMIT} "
            "characters)"
        )
    return namespace


def dns_slug(text: str, limit: int = NAME_LIMIT) -> str:
    """`text` in lower case letters, digits and inner '-', at most `limit` characters (maybe none)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower())[: max(limit, 0)].strip("-")


def environment(jobset: str, nodes: int) -> list[dict[str, Any]]:
    """What each pod's process needs: its peers (several pods), and to print its result to the log."""
    env: list[dict[str, Any]] = [{"name": RESULT_IN_LOG_ENV, "value": "1"}]
    if nodes > 1:
        index = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}
        env += [
            {"name": COORDINATOR_ENV, "value": coordinator_address(jobset)},
            {"name": NUM_PROCESSES_ENV, "value": str(nodes)},
            {"name": PROCESS_ID_ENV, "valueFrom": index},
        ]
    return env


def jobset_manifest(
    request: ClusterRequest,
    *,
    name: str,
    image: str,
    command: list[str],
    labels: dict[str, str],
    namespace: str | None = None,
) -> dict[str, Any]:
    """The JobSet: `request.nodes` pods of `image` running `command`, each with `request.gpus_per_node`
    GPUs; one failing pod fails the whole set, never retried (a benchmark failure is a result)."""
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "command": command,
        "env": environment(name, request.nodes),
        "volumeMounts": [{"name": "results", "mountPath": RESULTS_PATH}],
    }
    if request.gpus_per_node:
        container["resources"] = {"limits": {"nvidia.com/gpu": request.gpus_per_node}}
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
        "containers": [container],
        "volumes": [{"name": "results", "emptyDir": {}}],
    }
    deadline = time_limit_seconds(request.time) if request.time else None
    if deadline:
        # On the pod, not the Job: the kubelet stops the pod and marks it DeadlineExceeded, which the
        # launcher reports (a Job's deadline deletes the pods, and their reason with them); like sbatch's
        # --time it counts from the pod's start, not from its wait to be scheduled.
        pod["activeDeadlineSeconds"] = deadline
    job = {
        "parallelism": request.nodes,
        "completions": request.nodes,
        "completionMode": "Indexed",
        "backoffLimit": 0,
        "template": {"spec": pod},
    }
    metadata: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        metadata["namespace"] = namespace
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": metadata,
        "spec": {
            "network": {"enableDNSHostnames": True},
            "failurePolicy": {"maxRestarts": 0},
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_S,
            "replicatedJobs": [{"name": REPLICATED_JOB, "replicas": 1, "template": {"spec": job}}],
        },
    }
