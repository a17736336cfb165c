"""The k8s launcher's real adapter (harness/launch/k8s_api.py: KubernetesClient, on the official `kubernetes`
client) against a loopback HTTP server on 127.0.0.1 that answers the few endpoints it uses as an API server
would: the requests the client really sends (paths, query, body, the kubeconfig's token and namespace), and
what the launcher makes of the answers. No Kubernetes cluster runs here: this is the closest offline check."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from rich.console import Console

from jaxbench.core.errors import ExitCode, ExternalFailure, InvalidInput
from jaxbench.harness.launch import ClusterRequest, LaunchOptions
from jaxbench.harness.launch.job_watch import Polling
from jaxbench.harness.launch.k8s import K8sLauncher
from jaxbench.harness.launch.k8s_api import JobSetState, KubernetesClient, PodState
from jaxbench.harness.launch.k8s_schema import validate
from jaxbench.harness.runtime.options import RunOptions
from jaxbench.harness.runtime.result import RESULT_BEGIN, RESULT_END

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/bench/jobsets"
PODS = "/api/v1/namespaces/bench/pods"
RESULT = {
    "recipe": {"name": "llama2-tiny"},
    "started_at": "2026-11-26T06:00:00.000+00:00",
    "run_id": "cd" * 16,
}


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    authorization: str


def pod(index: int, phase: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"js-workers-0-{index}-abcde",
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)},
        },
        "spec": {"nodeName": f"node-{index}"},
        "status": {"phase": phase, **status},
    }


class FakeApiServer:
    """Answers as an API server would, for one JobSet: Running for `running_polls` reads, then `final`."""

    def __init__(
        self, final: dict[str, Any], pods: list[dict[str, Any]], log: list[str], running_polls: int = 1
    ):
        self.final, self.pod_items, self.log, self.running_polls = final, pods, log, running_polls
        self.requests: list[Request] = []
        self.created: dict[str, Any] | None = None
        self.deleted = False
        self.refuse_create: tuple[int, str] | None = None
        self.reads = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, code: int, body: Any, content_type: str = "application/json") -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                server.requests.append(
                    Request(
                        self.command,
                        url.path,
                        parse_qs(url.query),
                        body,
                        self.headers.get("Authorization", ""),
                    )
                )
                code, answer, kind = server.answer(self.command, url.path, body)
                self._answer(code, answer, kind)

            do_GET = do_POST = do_DELETE = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any, str]:
        status = {"kind": "Status", "apiVersion": "v1", "status": "Failure"}
        if method == "POST" and path == JOBSETS:
            if self.refuse_create:
                code, message = self.refuse_create
                return code, status | {"message": message, "code": code}, "application/json"
            self.created = body
            return 201, body, "application/json"
        if self.created and path == f"{JOBSETS}/{self.created['metadata']['name']}":
            if method == "DELETE":
                self.deleted = True
                return 200, {"kind": "Status", "status": "Success"}, "application/json"
            if self.deleted:
                return (
                    404,
                    status | {"message": "jobsets.jobset.x-k8s.io not found", "code": 404},
                    "application/json",
                )
            self.reads += 1
            final = self.reads > self.running_polls
            return 200, self.created | {"status": self.final if final else {}}, "application/json"
        if method == "GET" and path == PODS:
            return 200, {"kind": "PodList", "apiVersion": "v1", "items": self.pod_items}, "application/json"
        if method == "GET" and path.startswith(PODS + "/") and path.endswith("/log"):
            return 200, "".join(f"{line}\n" for line in self.log), "text/plain"
        return 404, status | {"message": f"no route {method} {path}"}, "application/json"


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Start a FakeApiServer and point KUBECONFIG at it (context namespace `bench`, a bearer token)."""
    started: list[FakeApiServer] = []

    def start(server: FakeApiServer) -> FakeApiServer:
        server.thread.start()
        started.append(server)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "loop", "cluster": {"server": server.url}}],
            "users": [{"name": "bench", "user": {"token": "t0k3n"}}],
            "contexts": [
                {"name": "loop", "context": {"cluster": "loop", "user": "bench", "namespace": "bench"}}
            ],
            "current-context": "loop",
        }
        (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        return server

    yield start
    for server in started:
        server.httpd.shutdown()
        server.httpd.server_close()


def launch(tmp_path: Path, sleep: Any = lambda _: None) -> tuple[Any, str]:
    options = LaunchOptions("k8s", image="ghcr.io/jaxbench/jax:cuda", cluster=ClusterRequest(nodes=2))
    console = Console(width=300, record=True)
    launcher = K8sLauncher(options, polling=Polling(0, sleep), log_wait_s=30)
    launched = launcher.launch(RunOptions("llama2", steps=20, out_dir=tmp_path / "runs"), console)
    return launched, console.export_text()


def result_log(**fields: Any) -> list[str]:
    return ["step 1", RESULT_BEGIN, *json.dumps(RESULT | fields, indent=2).splitlines(), RESULT_END]


COMPLETED = {
    "conditions": [{"type": "Completed", "status": "True", "message": "jobset completed successfully"}]
}


def test_a_run_through_the_official_client(tmp_path: Path, serve: Any) -> None:
    done = {
        "containerStatuses": [
            {"name": "jaxbench", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]
    }
    server = serve(
        FakeApiServer(COMPLETED, [pod(0, "Succeeded", **done), pod(1, "Succeeded", **done)], result_log())
    )
    launched, text = launch(tmp_path)
    assert launched.exit_code == ExitCode.OK, text
    assert json.loads(launched.results[0].read_text()) == RESULT
    create, *reads = server.requests
    # The JobSet goes where the CRD lives, in the kubeconfig context's namespace, validated strictly.
    assert (create.method, create.path, create.query) == ("POST", JOBSETS, {"fieldValidation": ["Strict"]})
    assert create.authorization == "Bearer t0k3n"
    validate(create.body)
    assert create.body["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2
    name = create.body["metadata"]["name"]
    pod_lists = [r for r in reads if r.path == PODS]
    assert pod_lists and all(
        r.query == {"labelSelector": [f"jobset.sigs.k8s.io/jobset-name={name}"]} for r in pod_lists
    )
    [log] = [r for r in reads if r.path.endswith("/log")]
    assert log.path == f"{PODS}/js-workers-0-0-abcde/log"
    assert log.query == {"container": ["jaxbench"], "follow": ["true"]}
    assert {r.path for r in reads if r.method == "GET" and r.path.startswith(JOBSETS)} == {
        f"{JOBSETS}/{name}"
    }
    assert not [r for r in reads if r.method == "DELETE"]
    assert "in namespace bench: 2 pods" in text and "step 1" in text


def test_an_interrupt_deletes_the_jobset_in_the_foreground(tmp_path: Path, serve: Any) -> None:
    server = serve(
        FakeApiServer(COMPLETED, [pod(0, "Running"), pod(1, "Running")], result_log(status="interrupted"), 99)
    )
    calls = {"n": 0}

    def sleep(_: float) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    launched, text = launch(tmp_path, sleep)
    assert launched.exit_code == ExitCode.INTERRUPTED, text
    [delete] = [r for r in server.requests if r.method == "DELETE"]
    assert delete.path == f"{JOBSETS}/{server.created['metadata']['name']}"
    # Foreground: the Jobs and pods go first (each pod gets SIGTERM), then the JobSet.
    assert delete.query == {"propagationPolicy": ["Foreground"]}
    assert json.loads(launched.results[0].read_text())["status"] == "interrupted"


def test_the_pods_and_jobset_are_read_from_the_apis_json(serve: Any) -> None:
    oom = {"containerStatuses": [{"name": "jaxbench", "state": {"terminated": {
        "exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-26T06:01:00Z"}}}]}  # fmt: skip
    pulling = {"containerStatuses": [{"name": "jaxbench", "state": {"waiting": {"reason": "ErrImagePull"}}}]}
    unschedulable = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    late = {
        "reason": "DeadlineExceeded",
        "message": "Pod was active on the node longer than the specified deadline",
    }
    pods = [pod(0, "Failed", **oom), pod(1, "Pending", **pulling), pod(2, "Pending", **unschedulable)]
    failed = {"terminalState": "Failed", "conditions": [{"type": "Failed", "status": "True", "message": "m"}]}
    serve(FakeApiServer(failed, [*pods, pod(3, "Failed", **late)], []))
    api = KubernetesClient()
    assert api.namespace == "bench"
    assert api.pods("js") == [
        PodState("js-workers-0-0-abcde", 0, "Failed", "node-0", "OOMKilled", 137, "2026-11-26T06:01:00Z"),
        PodState("js-workers-0-1-abcde", 1, "Pending", "node-1", "ErrImagePull"),
        PodState("js-workers-0-2-abcde", 2, "Pending", "node-2", "Unschedulable"),
        PodState("js-workers-0-3-abcde", 3, "Failed", "node-3", "DeadlineExceeded"),
    ]
    assert api.jobset("never-created") is None  # 404: gone
    assert KubernetesClient(namespace="other").namespace == "other"


def test_jobset_states_from_conditions_or_terminal_state(serve: Any) -> None:
    from jaxbench.harness.launch.k8s_api import jobset_state

    assert jobset_state({"status": COMPLETED}) == JobSetState(True, False, "jobset completed successfully")
    assert jobset_state({"status": {"terminalState": "Failed"}}) == JobSetState(True, True, "")
    suspended = {
        "conditions": [{"type": "Suspended", "status": "True"}, {"type": "Failed", "status": "False"}]
    }
    assert jobset_state({"status": suspended}) == JobSetState()
    assert jobset_state({}) == JobSetState()


def test_the_api_servers_refusal_is_one_line_naming_what_was_asked(tmp_path: Path, serve: Any) -> None:
    server = serve(FakeApiServer(COMPLETED, [], []))
    server.refuse_create = (403, 'jobsets.jobset.x-k8s.io is forbidden: User "bench" cannot create resource')
    with pytest.raises(ExternalFailure, match=r"create jobset jaxbench-llama2-\S+ in namespace bench: 403 "
                       r"Forbidden: jobsets.jobset.x-k8s.io is forbidden: User \"bench\""):  # fmt: skip
        launch(tmp_path)


def test_a_cluster_that_does_not_answer_or_a_missing_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, serve: Any
) -> None:
    server = serve(FakeApiServer(COMPLETED, [], []))
    server.httpd.server_close()  # the port refuses connections from now on
    with pytest.raises(ExternalFailure, match="did not answer"):
        KubernetesClient().jobset("js")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nowhere"))
    with pytest.raises(InvalidInput, match=r"KUBECONFIG=.*nowhere: no usable cluster configuration"):
        KubernetesClient()
