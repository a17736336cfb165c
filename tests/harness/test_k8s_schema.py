"""Every JobSet manifest the k8s launcher generates validates against the JobSet CRD's OpenAPI schema (v0.9.1,
checked in) and Kubernetes' core Job schema (kubernetes-validate, strict); broken ones fail naming the field.
Also the pure parts of the manifest: names within DNS limits, --time in seconds."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import re
from collections.abc import Callable
from typing import Any

import pytest

from jaxbench.harness.launch import ClusterRequest
from jaxbench.harness.launch.k8s_jobset import (
    jobset_manifest,
    jobset_name,
    longest_pod_name,
    time_limit_seconds,
)
from jaxbench.harness.launch.k8s_schema import (
    CRD_PATH,
    JOBSET_RELEASE,
    JOBSET_SHA256,
    InvalidManifest,
    field_path,
    jobset_crd_text,
    jobset_schema,
    validate,
)
from tests.conftest import REPO

WHEN = dt.datetime(2026, 11, 26, 6, 23, 0, tzinfo=dt.UTC)


def manifest(request: ClusterRequest, recipe: str = "llama2", namespace: str | None = None) -> dict[str, Any]:
    return jobset_manifest(
        request,
        name=jobset_name(recipe, WHEN, request.nodes),
        image="ghcr.io/jaxbench/jax:cuda-2026-11-26",
        command=["jaxbench", "run", "llama2", "--out", "/results", "--no-ingest"],
        labels={"app.kubernetes.io/name": "jaxbench"},
        namespace=namespace,
    )


def test_the_checked_in_crd_is_the_released_file_its_readme_names() -> None:
    assert hashlib.sha256(jobset_crd_text()).hexdigest() == JOBSET_SHA256
    readme = (CRD_PATH.parent / "README.md").read_text()
    assert JOBSET_SHA256 in readme and f"`{JOBSET_RELEASE}`" in readme
    schema = jobset_schema()
    assert {"spec", "status"} <= set(schema["properties"])


@pytest.mark.parametrize("nodes", [1, 2, 4])
@pytest.mark.parametrize("gpus", [None, 8])
@pytest.mark.parametrize("time", [None, "30", "1-12:00:00"])
def test_every_generated_manifest_validates(nodes: int, gpus: int | None, time: str | None) -> None:
    request = ClusterRequest(nodes=nodes, gpus_per_node=gpus, time=time)
    generated = manifest(request, namespace="perf" if nodes == 4 else None)
    validate(generated)
    job = generated["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["parallelism"] == job["completions"] == nodes
    pod = job["template"]["spec"]
    assert ("activeDeadlineSeconds" in pod) == bool(time)
    assert ("resources" in pod["containers"][0]) == bool(gpus)


def _container(m: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = m["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container


POD = "spec.replicatedJobs[0].template.spec.template.spec"


@pytest.mark.parametrize(
    ("breaking", "message"),
    [
        # Only Kubernetes' strict core schema knows a container has no such field (the CRD's would prune it).
        (
            lambda m: _container(m).update(imagePullPolcy="Always"),
            rf"at {re.escape(POD)}.containers\[0\]: Additional properties are not allowed \('imagePullPolcy'",
        ),
        (
            lambda m: _container(m)["env"][0].update(value=1),
            rf"at {re.escape(POD)}.containers\[0\].env\[0\].value: 1 is not of type 'string'",
        ),
        (
            lambda m: m["spec"]["failurePolicy"].update(maxRestarts="none"),
            r"at spec.failurePolicy.maxRestarts: 'none' is not of type 'integer' \(JobSet v0.9.1 CRD",
        ),
        (
            lambda m: m["spec"]["replicatedJobs"][0].pop("name"),
            r"at spec.replicatedJobs\[0\]: 'name' is a required property",
        ),
        (
            lambda m: _container(m).update(resources={"limits": {"nvidia.com/gpu": [8]}}),
            r"at .*resources.limits\['nvidia.com/gpu'\]: \[8\] is not valid under any of the given schemas",
        ),
        (
            lambda m: m["metadata"].update(name="Jaxbench_Run"),
            r"at metadata.name: 'Jaxbench_Run' must be a DNS-1035 label",
        ),
        (
            lambda m: m["spec"]["replicatedJobs"][0]["template"]["spec"].update(completions=10**60),
            r"at spec.replicatedJobs\[0\].name: .* must be a DNS-1035 label",
        ),
        (lambda m: m.update(kind="Job"), r"at kind: expected 'JobSet'"),
    ],
)
def test_a_broken_manifest_fails_naming_the_field(
    breaking: Callable[[dict[str, Any]], object], message: str
) -> None:
    broken = copy.deepcopy(manifest(ClusterRequest(nodes=2, gpus_per_node=8)))
    breaking(broken)
    with pytest.raises(InvalidManifest, match=message):
        validate(broken)


def test_names_fit_a_dns_label_however_long_the_recipe() -> None:
    for recipe, nodes in (("llama2", 1), ("a" * 80, 4), ("My Recipe_v2.yaml", 1024), ("!!!", 2)):
        name = jobset_name(recipe, WHEN, nodes)
        assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name), name
        assert len(longest_pod_name(name, nodes)) <= 63
        validate(manifest(ClusterRequest(nodes=nodes), recipe=recipe))
    assert jobset_name("My Recipe_v2", WHEN, 2) == "jaxbench-my-recipe-v2-20261126-062300"
    assert jobset_name("!!!", WHEN, 2) == "jaxbench-20261126-062300"


@pytest.mark.parametrize(
    ("limit", "seconds"),
    [("30", 1800), ("0", None), ("1:30", 90), ("1:30:00", 5400), ("2-00", 172_800), ("1-02:03", 93_780),
     ("1-02:03:04", 93_784)],
)  # fmt: skip
def test_time_limits_in_sbatch_formats_become_seconds(limit: str, seconds: int | None) -> None:
    ClusterRequest(time=limit)  # a format the SLURM launcher accepts too
    assert time_limit_seconds(limit) == seconds


def test_field_paths_read_as_in_kubectl_explain() -> None:
    assert field_path(["spec", "replicatedJobs", 0, "template"]) == "spec.replicatedJobs[0].template"
    assert field_path(["limits", "nvidia.com/gpu"]) == "limits['nvidia.com/gpu']"
    assert field_path([]) == "(the manifest)"


def test_the_schemas_ship_with_the_package() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"launch/schemas/*"' in pyproject and CRD_PATH.is_file()
