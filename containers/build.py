"""What `make build FLAVOR=…` builds: image names, the chain of stage builds with their build arguments,
plans and labels. Pure; `containers.docker` runs the plan.

Images are `<registry>/jax:<flavor>-<date>` and `<registry>/jax:<flavor>`; the stages before the last
are tagged `jaxbench-stage/<flavor>-<stage>:<date>` (local intermediates, never pushed).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from jaxbench.containers.resolve import Resolved
from jaxbench.core.dates import parse_date
from jaxbench.core.errors import InvalidInput

CONTAINERS_DIR = Path("containers")
PLAN_DIR = Path("build/plan")
"""Inside the build context (the repository root): one JSON plan per stage, written before building, named
`<stage>-<digest of its content>.json`."""

OCI = "org.opencontainers.image"
LABEL_PREFIX = "dev.jaxbench"

_REGISTRY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


@dataclasses.dataclass(frozen=True)
class BuildRequest:
    registry: str
    """e.g. ghcr.io/my-org: images are <registry>/jax:<flavor>-<date>."""
    date: str
    created: str
    """RFC 3339 build time (OCI `created`)."""
    revision: str | None
    """This checkout's git commit (OCI `revision`)."""
    source: str
    """This project's repository URL (OCI `source`)."""
    base_image: str | None = None
    """Overrides the flavor's base image."""
    pip_index_url: str | None = None
    pip_extra_index_url: str | None = None


@dataclasses.dataclass(frozen=True)
class StageBuild:
    stage: str
    dockerfile: Path
    tags: tuple[str, ...]
    build_args: dict[str, str]
    labels: dict[str, str]
    plan_path: Path
    """Relative to the build context."""
    plan: dict[str, Any]


def image_tags(registry: str, flavor: str, date: str) -> tuple[str, str]:
    """(dated, undated) references of a flavor's image."""
    if not _REGISTRY.match(registry):
        raise InvalidInput(f"GHCR_ORG/REGISTRY {registry!r}: expected a registry path like ghcr.io/my-org")
    parse_date(date, "DATE")
    return f"{registry}/jax:{flavor}-{date}", f"{registry}/jax:{flavor}"


def stage_tag(flavor: str, stage: str, date: str) -> str:
    return f"jaxbench-stage/{flavor}-{stage}:{date}"


def labels(resolved: Resolved, request: BuildRequest, image: str) -> dict[str, str]:
    """OCI labels plus one per component commit (and version, where known), on the final image."""
    out = {
        f"{OCI}.title": f"jaxbench {resolved.flavor}",
        f"{OCI}.description": f"jaxbench {resolved.flavor} image ({resolved.accelerator})",
        f"{OCI}.source": request.source,
        f"{OCI}.created": request.created,
        f"{OCI}.version": request.date,
        f"{OCI}.ref.name": image,
        f"{OCI}.base.name": request.base_image or resolved.base_image,
        f"{LABEL_PREFIX}.flavor": resolved.flavor,
    }
    if request.revision:
        out[f"{OCI}.revision"] = request.revision
    for name, component in resolved.components.items():
        out[f"{LABEL_PREFIX}.component.{name}.commit"] = component.commit or "unknown"
        if component.version:
            out[f"{LABEL_PREFIX}.component.{name}.version"] = component.version
    return out


def plan_text(plan: dict[str, Any]) -> str:
    """The plan file's text. Not key-sorted: the components are in the stage's order, which the installer
    follows."""
    return json.dumps(plan, indent=2) + "\n"


def plan_digest(plan: dict[str, Any]) -> str:
    """Names a stage's plan by its content. Flavors that share their first stages (every CUDA flavor's base
    and jax) then pass the same PLAN argument and file to them, so the layer cache builds them once."""
    return hashlib.sha256(plan_text(plan).encode()).hexdigest()[:12]


def stage_plan(resolved: Resolved, index: int, *, last: bool = False) -> dict[str, Any]:
    """What containers/install_stage.py installs for one stage (in an image, or into a framework's
    virtualenv): its components in order, resolved."""
    stage = resolved.stages[index]
    plan: dict[str, Any] = {
        "stage": stage.name,
        "index": index,
        "accelerator": resolved.accelerator,
        "components": {name: c.model_dump(mode="json") for name, c in stage.components.items()},
    }
    if last:
        plan["flavor"] = resolved.flavor
    return plan


def plan_build(resolved: Resolved, request: BuildRequest) -> list[StageBuild]:
    dated, undated = image_tags(request.registry, resolved.flavor, request.date)
    proxy_args = {
        "PIP_INDEX_URL": request.pip_index_url or "",
        "PIP_EXTRA_INDEX_URL": request.pip_extra_index_url or "",
    }
    builds = []
    previous = request.base_image or resolved.base_image
    for index, stage in enumerate(resolved.stages):
        last = index == len(resolved.stages) - 1
        plan = stage_plan(resolved, index, last=last)
        plan_path = PLAN_DIR / f"{stage.name}-{plan_digest(plan)}.json"
        build_args = {"BASE_IMAGE": previous, **proxy_args}
        if index == 0:
            build_args["PYTHON_VERSION"] = resolved.python
        else:
            build_args["PLAN"] = plan_path.as_posix()
        if stage.python is not None:
            build_args["STAGE_PYTHON"] = stage.python
        if last:
            build_args |= {
                # A BASE_IMAGE of the user's own is the runtime base too: the same OS, known to work.
                "RUNTIME_IMAGE": request.base_image or resolved.runtime_image,
                "JAXBENCH_IMAGE": dated,
                "JAXBENCH_GIT_COMMIT": request.revision or "",
                "CREATED": request.created,
            }
        tags = (dated, undated) if last else (stage_tag(resolved.flavor, stage.name, request.date),)
        builds.append(
            StageBuild(
                stage=stage.name,
                dockerfile=CONTAINERS_DIR / stage.dockerfile,
                tags=tags,
                build_args=build_args,
                labels=labels(resolved, request, dated) if last else {},
                plan_path=plan_path,
                plan=plan,
            )
        )
        previous = tags[0]
    return builds
