"""What the k8s launcher asks of a cluster (`KubernetesApi`: create, watch and delete a JobSet, list its pods,
follow a pod's log), the pure reading of the API's JSON into the states the launcher shows, and the real
adapter on the official `kubernetes` client (the cluster from KUBECONFIG). The tests replace the adapter with
a fake, and run the real one against a loopback server (tests/harness/test_k8s_client.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, cast

from jaxbench.core.errors import ExternalFailure, InvalidInput
from jaxbench.harness.launch.k8s_jobset import (
    COMPLETION_INDEX,
    CONTAINER,
    GROUP,
    JOBSET_NAME_LABEL,
    PLURAL,
    VERSION,
)
from jaxbench.harness.launch.k8s_schema import K8S_EXTRA

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
"""A pod's phases, in the order progress lists them."""


@dataclasses.dataclass(frozen=True)
class PodState:
    name: str
    rank: int | None
    """The pod's completion index: its process id (None where the annotation is missing)."""
    phase: str
    node: str = ""
    reason: str = ""
    """Why it waits or ended: the pod's own reason (DeadlineExceeded, Evicted, Unschedulable) or its
    container's (ContainerCreating, ErrImagePull, OOMKilled, Error, Completed)."""
    exit_code: int | None = None
    finished_at: str = ""
    """When its container ended (RFC 3339, so that the first failure sorts first)."""


@dataclasses.dataclass(frozen=True)
class JobSetState:
    ended: bool = False
    failed: bool = False
    message: str = ""
    """The condition's message of an ended JobSet ("jobset failed due to one or more job failures")."""


class KubernetesApi(Protocol):
    namespace: str

    def create_jobset(self, manifest: Mapping[str, Any]) -> None: ...
    def jobset(self, name: str) -> JobSetState | None:
        """The JobSet's state; None once it is gone (deleted)."""
        ...

    def pods(self, jobset: str) -> list[PodState]: ...
    def log_lines(self, pod: str) -> Iterator[str]:
        """The pod's log line by line, following it until its container ends (then ending at once)."""
        ...

    def delete_jobset(self, name: str) -> None:
        """Delete it and, first, its Jobs and pods (each pod gets SIGTERM and its grace period)."""
        ...


def jobset_state(jobset: Mapping[str, Any]) -> JobSetState:
    """A JobSet object's status (conditions Completed / Failed, or status.terminalState)."""
    status = jobset.get("status") or {}
    true = {c.get("type"): c for c in status.get("conditions") or [] if c.get("status") == "True"}
    terminal = status.get("terminalState") or ""
    for kind in ("Failed", "Completed"):
        if kind in true or terminal == kind:
            return JobSetState(
                ended=True, failed=kind == "Failed", message=true.get(kind, {}).get("message", "")
            )
    return JobSetState()


def pod_state(pod: Mapping[str, Any]) -> PodState:
    """A pod object as the launcher reports it: rank, phase, node, and why it waits or ended."""
    metadata, spec, status = (pod.get(key) or {} for key in ("metadata", "spec", "status"))
    statuses = status.get("containerStatuses") or []
    container: dict[str, Any] = next((c for c in statuses if c.get("name") == CONTAINER), {})
    ended = (container.get("state") or {}).get("terminated") or {}
    waiting = (container.get("state") or {}).get("waiting") or {}
    unschedulable = [
        c.get("reason", "")
        for c in status.get("conditions") or []
        if c.get("type") == "PodScheduled" and c.get("status") == "False"
    ]
    index = (metadata.get("annotations") or {}).get(COMPLETION_INDEX, "")
    return PodState(
        name=metadata.get("name", ""),
        rank=int(index) if index.isdigit() else None,
        phase=status.get("phase") or "Unknown",
        node=spec.get("nodeName") or "",
        reason=status.get("reason")
        or ended.get("reason")
        or waiting.get("reason")
        or "".join(unschedulable[:1]),
        exit_code=ended.get("exitCode"),
        finished_at=ended.get("finishedAt") or "",
    )


class KubernetesClient:
    """The cluster of the kubeconfig in KUBECONFIG (else ~/.kube/config), through the official client:
    JobSets as custom objects, pods and logs through the core API."""

    def __init__(self, namespace: str | None = None, kubeconfig: str | None = None) -> None:
        try:
            from kubernetes import client, config
        except ImportError:
            raise InvalidInput(f"--launcher k8s needs the kubernetes client: {K8S_EXTRA}") from None
        path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        try:
            api = config.new_client_from_config(config_file=path)
            _, current = config.list_kube_config_contexts(config_file=path)
        except (config.ConfigException, OSError) as error:
            raise InvalidInput(f"KUBECONFIG={path}: no usable cluster configuration ({error})") from None
        self.namespace = namespace or (current.get("context") or {}).get("namespace") or "default"
        self.host = api.configuration.host
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)

    @contextlib.contextmanager
    def _call(self, what: str, missing_ok: bool = False) -> Iterator[None]:
        """An API error or an unreachable cluster as one line, naming what was asked (exit 6)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            yield
        except ApiException as error:
            if missing_ok and error.status == 404:
                return
            raise ExternalFailure(f"Kubernetes API at {self.host}: {what}: {_api_message(error)}") from None
        except HTTPError as error:
            raise ExternalFailure(f"Kubernetes API at {self.host} did not answer ({what}): {error}") from None

    def create_jobset(self, manifest: Mapping[str, Any]) -> None:
        name = manifest["metadata"]["name"]
        with self._call(f"create jobset {name} in namespace {self.namespace}"):
            # Strict: the server refuses an unknown field instead of dropping it.
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, dict(manifest), field_validation="Strict"
            )

    def jobset(self, name: str) -> JobSetState | None:
        found: dict[str, Any] | None = None
        with self._call(f"read jobset {name}", missing_ok=True):
            found = cast(
                dict[str, Any],
                self.custom.get_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name),
            )
        return None if found is None else jobset_state(found)

    def pods(self, jobset: str) -> list[PodState]:
        with self._call(f"list the pods of jobset {jobset}"):
            # The raw response (urllib3's, whatever the annotation says): pod_state reads the API's own JSON.
            response: Any = self.core.list_namespaced_pod(
                self.namespace, label_selector=f"{JOBSET_NAME_LABEL}={jobset}", _preload_content=False
            )
            items = json.loads(response.data).get("items") or []
        return [pod_state(item) for item in items]

    def log_lines(self, pod: str) -> Iterator[str]:
        from kubernetes.watch.watch import iter_resp_lines

        with self._call(f"follow the log of pod {pod}"):
            response: Any = self.core.read_namespaced_pod_log(  # a stream, read as it comes
                pod, self.namespace, container=CONTAINER, follow=True, _preload_content=False
            )
            try:
                yield from iter_resp_lines(response)
            finally:
                response.release_conn()

    def delete_jobset(self, name: str) -> None:
        with self._call(f"delete jobset {name}", missing_ok=True):
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name, propagation_policy="Foreground"
            )


def _api_message(error: Any) -> str:
    """The Status object's message where the server sent one, else the HTTP status."""
    try:
        message = json.loads(error.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"{error.status} {error.reason}" + (f": {message}" if message else "")
