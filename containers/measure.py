"""Measuring a built image (adapters around docker): its size report (`jaxbench image-size`) and what it holds
(the resolved manifest and package list the harness stage wrote), and the build record `make build` leaves
for the nightly (results/build_record.py).
"""

from __future__ import annotations

import concurrent.futures
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

from jaxbench.containers import image_size as sizes
from jaxbench.containers.build import BuildRequest
from jaxbench.containers.resolve import Resolved
from jaxbench.core.documents import parse_yaml
from jaxbench.core.errors import ExternalFailure
from jaxbench.core.files import write_atomic
from jaxbench.results.build_record import (
    BuildRecord,
    NamedSize,
    RecordedComponent,
    SizeTotal,
    StageTime,
    packages_of,
    record_path,
)
from jaxbench.results.records import manifest_components

MANIFEST_IN_IMAGE = "/opt/jaxbench/manifest.yaml"
PACKAGES_IN_IMAGE = "/opt/jaxbench/packages.txt"


def size_report(image: str) -> sizes.SizeReport:
    """The image's layers and packages in one pass over `docker save`. Who owns which file (a `docker run`
    of seconds) is asked meanwhile: Docker before 25 writes the whole export before it streams a byte, and
    the first file waits for the answer only if it comes later."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        owners = pool.submit(sizes.probed_owners, image)
        measured = sizes.saved_image(image, lambda path: owners.result()(path))
        return sizes.build_report(image, measured.layers, measured.buckets)


def image_contents(image: str) -> tuple[dict[str, Any], list[str]]:
    """The image's resolved manifest and its `name==version` package list (one offline `docker run`)."""
    script = f"cat {MANIFEST_IN_IMAGE}; echo '---'; cat {PACKAGES_IN_IMAGE}"
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c", script],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise ExternalFailure(f"reading the manifest inside {image} failed: {done.stderr.strip()[-400:]}")
    manifest_text, _, packages_text = done.stdout.rpartition("\n---\n")
    manifest = parse_yaml(manifest_text, f"the manifest inside {image}") or {}
    return manifest, [line for line in packages_text.splitlines() if line.strip()]


def _components(manifest: dict[str, Any]) -> dict[str, RecordedComponent]:
    return {
        c.name: RecordedComponent(repository=c.repository, commit=c.commit, version=c.version)
        for c in manifest_components(manifest)
    }


def _named(size: sizes.Size) -> NamedSize:
    return NamedSize(name=size.name, bytes=size.bytes, compressed_bytes=size.compressed_bytes)


def build_record(
    request: BuildRequest,
    resolved: Resolved,
    architecture: str,
    stages: list[StageTime],
    report: sizes.SizeReport,
    manifest: dict[str, Any],
    packages: list[str],
) -> BuildRecord:
    """The record of a build (pure): what was asked, how long each stage took, what came out."""
    total = report.total
    return BuildRecord(
        flavor=resolved.flavor,
        date=request.date,
        image=stages[-1].image,
        created=request.created,
        architecture=architecture,
        install=resolved.install,
        base_image=request.base_image or resolved.base_image,
        revision=request.revision,
        builder=platform.node(),
        stages=stages,
        size=SizeTotal(bytes=total.bytes, compressed_bytes=total.compressed_bytes),
        groups=[_named(group) for group in report.groups],
        group_sizes="layers",
        layers=[_named(layer) for layer in report.layers],
        components=_components(manifest),
        packages=packages_of(packages),
    )


def record_build(
    request: BuildRequest,
    resolved: Resolved,
    architecture: str,
    stages: list[StageTime],
    directory: Path,
) -> tuple[Path, BuildRecord]:
    """Measure the final image (the last stage's), read what it holds, write the record into `directory`."""
    image = stages[-1].image
    report = size_report(image)
    manifest, packages = image_contents(image)
    record = build_record(request, resolved, architecture, stages, report, manifest, packages)
    path = record_path(directory, record.flavor, record.date)
    write_atomic(path, json.dumps(record.model_dump(mode="json"), indent=2) + "\n")
    return path, record
