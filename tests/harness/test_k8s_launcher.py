"""The k8s launcher (harness/launch/k8s.py) with the Kubernetes API replaced by a fake that plays a JobSet:
the dry-run manifest, the result collected from rank 0's log, failures naming rank, node and reason (a crash,
OOMKilled, DeadlineExceeded, a pod that never started), the result the launcher writes where rank 0 printed
none and its amendment of rank 0's (harness/launch/job_result.py), deletion on interrupt, and refused
options. tests/harness/test_k8s_client.py runs the real client adapter against a loopback server;
tests/harness/test_k8s_schema.py validates the manifests."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from core.errors import ExitCode, InvalidInput
from harness.launch import ClusterRequest, LaunchOptions
from harness.launch.job_watch import Polling
from harness.launch.k8s import K8sLauncher, collect_result, failure, progress, result_in_log
from harness.launch.k8s_api import JobSetState, PodState
from harness.runtime.options import RunOptions
from harness.runtime.result import (
    RESULT_BEGIN,
    RESULT_END,
    RESULT_IN_LOG_ENV,
    RunResult,
    Status,
    print_result_for_launcher,
    read_result,
)
from results import synthetic
from results.ingest import read_result_file
from tests.conftest import REPO

RESULT = {
    "recipe": {"name": "llama2-tiny"},
    "started_at": "2026-11-26T06:00:00.000+00:00",
    "run_id": "ab" * 16,
}
RESULT_FILE = "llama2-tiny-20261126T060000-abababab.json"


def result_block(**fields: Any) -> list[str]:
    return [RESULT_BEGIN, *json.dumps(RESULT | fields, indent=2).splitlines(), RESULT_END]


def rank_0_result(status: Status) -> list[str]:
    """A whole result of `status` as rank 0 prints it (the launcher reads and amends these)."""
    written = synthetic.run_result(dt.date(2026, 11, 26), 0.1, recipe="llama2-tiny", status=status)
    text = RunResult.model_validate(written).model_dump_json(indent=2)
    return ["step 1", RESULT_BEGIN, *text.splitlines(), RESULT_END]


def jaxbench_run(*args: str, result_in_log: str = "") -> subprocess.CompletedProcess[str]:
    """`jaxbench run ARGS` as a pod runs it (RESULT_IN_LOG_ENV set where asked)."""
    env = {**os.environ, RESULT_IN_LOG_ENV: result_in_log}
    argv = [sys.executable, "-m", "jaxbench", "run", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=240, env=env)


RUNNING = [PodState("w-0-x", 0, "Running", "node-a"), PodState("w-1-y", 1, "Running", "node-b")]


class FakeKubernetes:
    """Plays a JobSet: (state, pods) per poll in turn, the last one repeated; rank 0's log lines."""

    namespace = "bench"

    def __init__(self, polls: list[tuple[JobSetState | None, list[PodState]]], log: list[str]) -> None:
        self.polls, self.log = polls, log
        self.created: list[Mapping[str, Any]] = []
        self.deleted: list[str] = []
        self.followed: list[str] = []
        self.n = 0

    def create_jobset(self, manifest: Mapping[str, Any]) -> None:
        self.created.append(manifest)

    def jobset(self, name: str) -> JobSetState | None:
        if self.deleted:
            return None  # gone
        self.n += 1
        return self.polls[min(self.n, len(self.polls)) - 1][0]

    def pods(self, jobset: str) -> list[PodState]:
        return self.polls[min(self.n, len(self.polls)) - 1][1]

    def log_lines(self, pod: str) -> Iterator[str]:
        self.followed.append(pod)
        yield from self.log

    def delete_jobset(self, name: str) -> None:
        self.deleted.append(name)


def launcher(api: FakeKubernetes | None = None, dry_run: bool = False, **cluster: Any) -> K8sLauncher:
    options = LaunchOptions(
        "k8s", image="ghcr.io/jaxbench/jax:cuda", cluster=ClusterRequest(**cluster), dry_run=dry_run
    )
    return K8sLauncher(options, api=api, polling=Polling(0, lambda _: None), log_wait_s=10)


def run_options(tmp_path: Path) -> RunOptions:
    return RunOptions("llama2", steps=20, out_dir=tmp_path / "runs")


def launch(api: FakeKubernetes, tmp_path: Path, **cluster: Any) -> tuple[Any, str]:
    console = Console(width=300, record=True)
    launched = launcher(api, nodes=2, **cluster).launch(run_options(tmp_path), console)
    return launched, console.export_text()


def launched_result(api: FakeKubernetes, tmp_path: Path, **cluster: Any) -> tuple[int, RunResult, str]:
    """The exit code, the one result in --out, and what the launcher printed."""
    launched, text = launch(api, tmp_path, **cluster)
    (path,) = launched.results
    assert list((tmp_path / "runs").glob("*.json")) == [path]
    return launched.exit_code, read_result(path), text


def jobset(api: FakeKubernetes) -> str:
    """The JobSet the launcher created, as its results name it: namespace/name."""
    return f"bench/{api.created[0]['metadata']['name']}"


FAILED = JobSetState(ended=True, failed=True, message="jobset failed due to one or more job failures")


def test_a_two_node_dry_run_prints_the_manifest_and_needs_no_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))  # never read for a dry run
    job = launcher(dry_run=True, nodes=2, gpus_per_node=8)
    launched = job.launch(run_options(tmp_path), Console(width=300))
    assert launched.exit_code == ExitCode.OK and launched.results == []
    manifest = yaml.safe_load(capsys.readouterr().out)
    name = manifest["metadata"]["name"]
    assert re.fullmatch(r"jaxbench-llama2-\d{8}-\d{6}", name)
    job_spec = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (job_spec["parallelism"], job_spec["completions"], job_spec["completionMode"]) == (2, 2, "Indexed")
    (container,) = job_spec["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["JAX_COORDINATOR_ADDRESS"] == f"{name}-workers-0-0.{name}:1234"
    assert env["JAXBENCH_NUM_PROCESSES"] == "2"
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert env["JAXBENCH_PROCESS_ID"] == {"fieldRef": {"fieldPath": index}}
    assert container["command"] == [
        "jaxbench", "run", "llama2", "--steps", "20", "--out", "/results", "--no-ingest"
    ]  # fmt: skip
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 8}}
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_completed_jobset_returns_the_result_from_rank_0s_log(tmp_path: Path) -> None:
    done = [PodState("w-0-x", 0, "Succeeded", "node-a", "Completed", 0), RUNNING[1]]
    api = FakeKubernetes(
        [(JobSetState(), []), (JobSetState(), RUNNING), (JobSetState(ended=True), done)],
        ["compiled in 1.0 s", "result: /results/x.json", *result_block(status="ok")],
    )
    launched, text = launch(api, tmp_path)
    assert launched.exit_code == ExitCode.OK
    assert [p.name for p in launched.results] == [RESULT_FILE]
    assert json.loads(launched.results[0].read_text())["status"] == "ok"
    assert api.followed == ["w-0-x"] and len(api.created) == 1 and api.deleted == []
    assert "jobset jaxbench-llama2-" in text and ": 2 Running" in text and "compiled in 1.0 s" in text
    assert '"run_id"' not in text  # the result block is collected, not shown
    assert re.search(r"jobset jaxbench-llama2-\S+ completed", text)


def test_a_rank_that_crashes_puts_its_rank_node_and_reason_in_front_of_rank_0s_result(tmp_path: Path) -> None:
    """Rank 1 crashed; rank 0's collective broke, and it printed a failed result of its own, later."""
    crashed = PodState("w-1-y", 1, "Failed", "node-b", "Error", 1, "2026-11-26T06:01:00Z")
    stopped = PodState("w-0-x", 0, "Failed", "node-a", "Error", 3, "2026-11-26T06:01:05Z")
    api = FakeKubernetes(
        [(JobSetState(), RUNNING), (FAILED, [stopped, crashed])], rank_0_result(Status.FAILED)
    )
    code, result, text = launched_result(api, tmp_path)
    assert code == ExitCode.FAILED and result.status is Status.FAILED
    why = "jobset failed due to one or more job failures; rank 1 on node-b failed: Error, exit code 1"
    assert result.reason == f"JobSet {jobset(api)}: {why}; process 0: failed in the test"
    assert f"failed: {why}" in text
    assert result.timing.raw_step_times_s  # rank 0's measurements stay


def test_rank_0s_own_diagnosis_keeps_its_status(tmp_path: Path) -> None:
    crashed = PodState("w-1-y", 1, "Failed", "node-b", "Error", 1, "2026-11-26T06:01:00Z")
    api = FakeKubernetes([(FAILED, [RUNNING[0], crashed])], rank_0_result(Status.NAN))
    _, result, _ = launched_result(api, tmp_path)
    assert result.status is Status.NAN and (result.reason or "").endswith("; process 0: nan in the test")


def test_an_oom_killed_rank_0_is_an_oom_result_the_launcher_writes(tmp_path: Path) -> None:
    oom = PodState("w-0-x", 0, "Failed", "node-a", "OOMKilled", 137, "2026-11-26T06:01:00Z")
    api = FakeKubernetes([(JobSetState(), RUNNING), (FAILED, [oom, RUNNING[1]])], ["step 1"])
    code, result, text = launched_result(api, tmp_path)
    assert code == ExitCode.FAILED and result.status is Status.OOM
    assert result.reason == (
        f"JobSet {jobset(api)}: jobset failed due to one or more job failures; rank 0 on node-a failed: "
        "OOMKilled, out of memory, exit code 137; rank 0 printed no result "
        "(log of rank 0: kubectl logs -n bench w-0-x)"
    )
    assert "rank 0's log held no result" in text and "rank 0 printed no result: the launcher wrote" in text
    # What was asked, as rank 0 would have recorded it; nothing measured; the JobSet in provenance.job.
    assert result.recipe.name == "llama2-tiny" and result.recipe.resolved["train"]["steps"] == 20
    devices = result.provenance.devices
    assert (devices.process_count, devices.count, devices.hostname) == (2, 2, "node-a")
    assert result.provenance.job is not None and result.provenance.job.model_dump() == {
        "scheduler": "kubernetes",
        "job_id": jobset(api),
        "nodes": "node-a,node-b",
        "node_count": 2,
        "tasks": 2,
        "version": None,
    }
    assert result.timing.raw_step_times_s == [] and result.metrics == []
    # The store takes it: a run that ran out of memory.
    parsed = read_result_file(next((tmp_path / "runs").glob("*.json"))).run
    assert parsed.status == "oom" and parsed.hosts == 2 and parsed.reason == result.reason


def test_a_jobset_past_its_time_limit_is_a_failed_result_saying_so(tmp_path: Path) -> None:
    """The kubelet's SIGTERM at the deadline: rank 0 printed an interrupted result, which the launcher makes
    a failure of the JobSet, as SLURM's time limit."""
    late = [PodState(p.name, p.rank, "Failed", p.node, "DeadlineExceeded") for p in RUNNING]
    api = FakeKubernetes([(JobSetState(), RUNNING), (FAILED, late)], rank_0_result(Status.INTERRUPTED))
    code, result, _ = launched_result(api, tmp_path, time="30")
    assert code == ExitCode.FAILED and result.status is Status.FAILED
    assert result.reason == (
        f"JobSet {jobset(api)}: jobset failed due to one or more job failures; rank 0 on node-a failed: "
        "DeadlineExceeded, past its time limit, --time; process 0: interrupted in the test"
    )
    manifest = api.created[0]
    pod = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["activeDeadlineSeconds"] == 1800


def interrupted_at_second_poll(api: FakeKubernetes, tmp_path: Path, **cluster: Any) -> tuple[Any, str]:
    calls = {"n": 0}

    def sleep(_: float) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    options = LaunchOptions("k8s", image="img", cluster=ClusterRequest(nodes=2, **cluster))
    console = Console(width=300, record=True)
    job = K8sLauncher(options, api=api, polling=Polling(0, sleep))
    return job.launch(run_options(tmp_path), console), console.export_text()


def test_an_interrupt_deletes_the_jobset_and_collects_rank_0s_interrupted_result(tmp_path: Path) -> None:
    api = FakeKubernetes([(JobSetState(), RUNNING)], ["step 1", *result_block(status="interrupted")])
    launched, text = interrupted_at_second_poll(api, tmp_path)
    assert api.deleted == [api.created[0]["metadata"]["name"]]
    assert launched.exit_code == ExitCode.INTERRUPTED
    assert json.loads(launched.results[0].read_text())["status"] == "interrupted"  # as rank 0 wrote it
    assert "deleting jobset" in text


def test_an_interrupt_while_a_pod_cannot_pull_its_image_is_an_interrupted_result(tmp_path: Path) -> None:
    """Rank 1's image cannot be pulled: the JobSet waits until Ctrl-C, and rank 0 printed nothing."""
    pulling = [RUNNING[0], PodState("w-1-y", 1, "Pending", "node-b", "ErrImagePull")]
    api = FakeKubernetes([(JobSetState(), pulling)], ["waiting for process 1"])
    launched, text = interrupted_at_second_poll(api, tmp_path, gpus_per_node=8)
    assert launched.exit_code == ExitCode.INTERRUPTED
    (path,) = launched.results
    result = read_result(path)
    assert result.status is Status.INTERRUPTED
    why = (
        "the launcher deleted it (Ctrl-C or SIGTERM); "
        "rank 1 on node-b never started: ErrImagePull, its image could not be pulled"
    )
    assert result.reason == f"JobSet {jobset(api)}: {why}; rank 0 printed no result"  # its logs went with it
    assert f"interrupted: {why}" in text
    devices = result.provenance.devices
    # --gpus-per-node 8: two pods, one process and 8 GPUs each, on GPUs this machine cannot name.
    assert (devices.platform, devices.kind, devices.count, devices.process_count, devices.hostname) == (
        "gpu",
        "unknown",
        16,
        2,
        "node-b",
    )
    assert result.provenance.job is not None and result.provenance.job.tasks == 2


def test_pending_pods_show_why_they_wait() -> None:
    pods = [
        PodState("a", 0, "Pending", reason="ErrImagePull"),
        PodState("b", 1, "Pending", reason="ErrImagePull"),
        PodState("c", 2, "Running"),
        PodState("d", 3, "Succeeded", reason="Completed"),
    ]
    assert progress(pods) == "2 Pending (ErrImagePull), 1 Running, 1 Succeeded"
    assert progress([]) == "no pods"


def test_failure_names_the_first_pod_that_failed_and_nothing_for_a_completed_jobset() -> None:
    later = PodState("a", 0, "Failed", "n0", "Error", 143, "2026-11-26T06:02:00Z")
    first = PodState("b", 3, "Failed", "n3", "Error", 2, "2026-11-26T06:01:00Z")
    why = failure(JobSetState(ended=True, failed=True), [later, first])
    assert why == "the jobset failed; rank 3 on n3 failed: Error, exit code 2"
    assert failure(JobSetState(ended=True), [later]) is None
    assert failure(None, []) == "the jobset is gone"


def test_failure_names_the_pods_that_never_started_then_counts_them() -> None:
    waiting = [PodState(f"p{rank}", rank, "Pending", reason="Unschedulable") for rank in range(6, 0, -1)]
    why = failure(JobSetState(), [PodState("p0", 0, "Running", "n0"), *waiting], interrupted=True)
    assert why == (
        "the launcher deleted it (Ctrl-C or SIGTERM); "
        + "; ".join(f"rank {rank} never started: Unschedulable, no node can take it" for rank in range(1, 5))
        + "; 2 more pods never started"
    )


def test_a_jobset_deleted_by_someone_else_is_an_interrupted_result(tmp_path: Path) -> None:
    api = FakeKubernetes([(JobSetState(), RUNNING), (None, [])], ["step 1"])
    code, result, _ = launched_result(api, tmp_path)
    assert (code, result.status) == (ExitCode.INTERRUPTED, Status.INTERRUPTED)
    assert result.reason == (
        f"JobSet {jobset(api)}: the jobset is gone; rank 0 printed no result "
        "(log of rank 0: kubectl logs -n bench w-0-x)"
    )


def test_the_result_is_read_from_the_last_complete_block(tmp_path: Path) -> None:
    lines = ["x", RESULT_BEGIN, "{}", RESULT_END, RESULT_BEGIN, '{"a": 1}', RESULT_END, RESULT_BEGIN, "{"]
    assert result_in_log(lines) == '{"a": 1}\n'
    assert result_in_log(["no", "markers"]) is None
    with pytest.raises(InvalidInput, match="rank 0's log held no readable result"):
        collect_result('{"a": 1}\n', tmp_path)


def test_the_run_prints_its_result_between_the_markers_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(RESULT, indent=2) + "\n")
    print_result_for_launcher(path, {})
    assert capsys.readouterr().out == ""
    print_result_for_launcher(path, {RESULT_IN_LOG_ENV: "1"})
    text = result_in_log(capsys.readouterr().out.splitlines())
    assert text == path.read_text()
    assert collect_result(text, tmp_path / "..").name == RESULT_FILE


@pytest.mark.slow
def test_a_real_run_prints_its_result_to_its_log(tmp_path: Path) -> None:
    """Process 0 of `jaxbench run` (as each pod runs it) prints the file it wrote."""
    done = jaxbench_run("llama2", "--steps", "6", "--no-ingest", "--out", str(tmp_path), result_in_log="1")
    assert done.returncode == 0, done.stderr
    [written] = tmp_path.glob("*.json")
    assert result_in_log(done.stdout.splitlines()) == written.read_text()


@pytest.mark.parametrize(
    ("cluster", "image", "message"),
    [
        ({"tasks_per_node": 2}, "img", "--tasks-per-node 2: the k8s launcher runs one process per pod"),
        (
            {"partition": "gpu", "account": "perf"},
            "img",
            "--partition gpu, --account perf: options of the SLURM launcher; the k8s launcher takes --names",
        ),
        ({"account": "perf"}, "img", "--account perf: an option of the SLURM launcher"),
        ({}, None, "--launcher k8s: give the image each pod runs with --image"),
        ({"time": "1h"}, "img", "--time '1h': expected minutes"),
    ],
)
def test_options_the_k8s_launcher_cannot_honour_are_refused(
    cluster: dict[str, Any], image: str | None, message: str
) -> None:
    with pytest.raises(InvalidInput, match=re.escape(message)):
        K8sLauncher(LaunchOptions("k8s", image=image, cluster=ClusterRequest(**cluster), dry_run=True))


def test_the_local_launcher_refuses_a_namespace() -> None:
    from harness.launch.local import LocalLauncher

    with pytest.raises(InvalidInput, match=r"--namespace bench: the local launcher runs on this machine"):
        LocalLauncher(LaunchOptions("local", namespace="bench"))


@pytest.mark.slow
def test_the_command_line_dry_run(tmp_path: Path) -> None:
    flags = ["--launcher", "k8s", "--image", "img:1", "--nodes", "4", "--time", "2-00", "--namespace", "perf"]
    done = jaxbench_run("vit", *flags, "--out", str(tmp_path), "--dry-run")
    assert done.returncode == 0, done.stderr
    manifest = yaml.safe_load(done.stdout)
    assert manifest["metadata"]["namespace"] == "perf"
    job = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["parallelism"] == 4 and job["template"]["spec"]["activeDeadlineSeconds"] == 2 * 86400


def test_a_completed_jobset_whose_rank_0_printed_no_result_is_a_failed_result(tmp_path: Path) -> None:
    done = [PodState(p.name, p.rank, "Succeeded", p.node, "Completed", 0) for p in RUNNING]
    api = FakeKubernetes([(JobSetState(ended=True), done)], ["an old image: no result printed"])
    code, result, text = launched_result(api, tmp_path)
    assert code == ExitCode.FAILED and result.status is Status.FAILED
    assert result.reason == (
        f"JobSet {jobset(api)}: it completed; rank 0 printed no result "
        "(log of rank 0: kubectl logs -n bench w-0-x)"
    )
    assert "failed: it completed" in text


def test_invalid_input_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    for dry_run in (False, True):
        api = FakeKubernetes([(JobSetState(ended=True), [])], [])
        job = launcher(api, dry_run=dry_run)
        with pytest.raises(InvalidInput, match=r"--steps 5: .*warmup_steps \(5\) must be smaller than steps"):
            job.launch(RunOptions("llama2", steps=5, out_dir=tmp_path), Console(quiet=True))
        with pytest.raises(InvalidInput, match=r"--set train\.nope=1"):
            job.launch(
                RunOptions("llama2", overrides=("train.nope=1",), out_dir=tmp_path), Console(quiet=True)
            )
        assert api.created == [] and list(tmp_path.iterdir()) == []


def test_a_dry_run_submits_nothing_even_with_a_cluster_at_hand(tmp_path: Path) -> None:
    api = FakeKubernetes([(JobSetState(ended=True), [])], [])
    launched = launcher(api, dry_run=True).launch(run_options(tmp_path), Console(width=300, quiet=True))
    assert launched.exit_code == ExitCode.OK and api.created == []
