"""Offline validation of a JobSet manifest, before anything reaches a cluster (also on --dry-run): against
the JobSet CRD's OpenAPI schema (release JOBSET_RELEASE, checked in under harness/launch/schemas/, whose
README says where it comes from and how to update it), the name rules of JobSet's admission webhook, and
its Job with the pod template against Kubernetes' own schemas (the pinned `kubernetes-validate` package),
strictly: an unknown field is refused. A problem is one line naming the field's path.

    jaxbench run llama2 --launcher k8s --image IMAGE --nodes 2 --dry-run     # validates, then prints
"""

from __future__ import annotations

import functools
import gzip
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from jaxbench.core.errors import InvalidInput
from jaxbench.harness.launch.k8s_jobset import GROUP, KIND, NAME_LIMIT, VERSION, longest_pod_name

JOBSET_RELEASE = "v0.9.1"
JOBSET_SHA256 = "6307f9c78901dbebea69050e9da71e35e36743348d79235b870e7d263f8b7013"
"""sha256 of the uncompressed CRD file, as released (tests/harness/test_k8s_schema.py checks it)."""
CRD_PATH = Path(__file__).resolve().parent / "schemas" / "jobset.x-k8s.io_jobsets.yaml.gz"
CORE_VERSION = "1.31"
"""The Kubernetes version whose schemas the Job is checked against: the oldest JobSet v0.9.1 supports."""
K8S_EXTRA = "pip install -e '.[k8s]' (make venv EXTRAS=k8s installs it)"
"""How to get the optional packages the k8s launcher uses."""

_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class InvalidManifest(InvalidInput):
    """A generated manifest the schemas refuse: one line, the field's path first."""


def field_path(parts: Iterable[str | int]) -> str:
    """`spec.replicatedJobs[0].template` from a JSON Schema error's path."""
    text = ""
    for part in parts:
        if isinstance(part, int) or not _KEY.fullmatch(part):  # an index, or a key like nvidia.com/gpu
            text += f"[{part!r}]"
        else:
            text += f".{part}" if text else part
    return text or "(the manifest)"


@functools.cache
def jobset_crd_text() -> bytes:
    return gzip.decompress(CRD_PATH.read_bytes())


@functools.cache
def jobset_schema() -> dict[str, Any]:
    """The openAPIV3Schema of the CRD's VERSION."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C loader reads the 750 kB in 0.1 s
    crd = yaml.load(jobset_crd_text(), Loader=loader)
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    return schema


def _first(errors: Iterable[Any], prefix: list[str | int], where: str) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(errors)
    if error is not None:
        path = field_path([*prefix, *error.absolute_path])
        raise InvalidManifest(f"the JobSet manifest is invalid at {path}: {error.message} ({where})")


def _check_names(manifest: Mapping[str, Any]) -> None:
    """What JobSet's webhook (pkg/webhooks/jobset_webhook.go, ValidateCreate) checks of generated names."""
    name = manifest["metadata"].get("name", "")
    for index, rjob in enumerate(manifest["spec"]["replicatedJobs"]):
        pods = rjob["template"]["spec"].get("completions", 1)
        longest_pod = longest_pod_name(name, pods, rjob["name"], rjob.get("replicas", 1))
        for value, path in ((name, "metadata.name"), (longest_pod, f"spec.replicatedJobs[{index}].name")):
            if len(value) > NAME_LIMIT or not _DNS_1035.fullmatch(value):
                raise InvalidManifest(
                    f"the JobSet manifest is invalid at {path}: {value!r} must be a DNS-1035 label "
                    f"(lower case letters, digits, '-', starting with a letter, at most {NAME_LIMIT} "
                    f"characters; JobSet {JOBSET_RELEASE} webhook)"
                )


def validate(manifest: Mapping[str, Any]) -> None:
    """Raise InvalidManifest, naming the field, for a manifest the schemas refuse. (What the API server
    checks beyond its schemas, such as value ranges, is not repeated here.)"""
    try:
        import jsonschema
        import kubernetes_validate
    except ImportError as error:
        raise InvalidInput(
            f"--launcher k8s validates with {error.name}, not installed: {K8S_EXTRA}"
        ) from None
    expected = {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND}
    for key, value in expected.items():
        if manifest.get(key) != value:
            raise InvalidManifest(f"the JobSet manifest is invalid at {key}: expected {value!r}")
    crd = f"JobSet {JOBSET_RELEASE} CRD schema"
    # OpenAPI 3.0's schema objects are JSON Schema draft 4 with extensions (x-kubernetes-*, ignored here).
    _first(jsonschema.Draft4Validator(jobset_schema()).iter_errors(manifest), [], crd)
    _check_names(manifest)
    for index, rjob in enumerate(manifest["spec"]["replicatedJobs"]):
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": rjob["name"]},
            **rjob["template"],
        }
        try:
            kubernetes_validate.validate(job, CORE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            where = f"Kubernetes {CORE_VERSION} Job schema, kubernetes-validate"
            _first([error], ["spec", "replicatedJobs", index, "template"], where)
