"""The k8s launcher (harness/launch/k8s.py) running a JobSet, the Kubernetes API replaced by a fake that plays
one (tests/harness/k8s_fake.py): the result collected from rank 0's log, failures naming rank, node and
reason (a crash, OOMKilled, DeadlineExceeded, a pod that never started), the result the launcher writes where
rank 0 printed none and its amendment of rank 0's (harness/launch/job_result.py), and deletion on interrupt.
Dry runs and refusals: tests/harness/test_k8s_launcher_input.py; tests/harness/test_k8s_client.py runs the
real client adapter against a loopback server; tests/harness/test_k8s_schema.py validates the manifests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from jaxbench.core.errors import ExitCode, InvalidInput
from jaxbench.harness.launch import ClusterRequest, LaunchOptions
from jaxbench.harness.launch.job_watch import Polling
from jaxbench.harness.launch.k8s import K8sLauncher, collect_result, failure, progress, result_in_log
from jaxbench.harness.launch.k8s_api import JobSetState, PodState
from jaxbench.harness.runtime.result import (
    RESULT_BEGIN,
    RESULT_END,
    RESULT_IN_LOG_ENV,
    Status,
    print_result_for_launcher,
    read_result,
)
from jaxbench.results.ingest import read_result_file
from tests.harness.k8s_fake import (
    FAILED,
    RESULT,
    RESULT_FILE,
    RUNNING,
    FakeKubernetes,
    jaxbench_run,
    jobset,
    launch,
    launched_result,
    rank_0_result,
    result_block,
    run_options,
)


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
