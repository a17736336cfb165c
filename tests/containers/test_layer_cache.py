"""The engine's layer cache survives from one build to the next: the classic builder puts the value of every
build argument in scope into the cache key of each RUN step, so an argument that changes with every build
(the dated tag, the commit, the creation time) declared above a RUN that does not use it rebuilds that step
(an apt-get or a TransformerEngine compile) every night for nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxbench.containers.build import BuildRequest, plan_build
from jaxbench.containers.manifest import load_manifest
from jaxbench.containers.resolve import resolve
from tests.conftest import REPO

MANIFEST = load_manifest()


def _per_build_arguments(flavor: str) -> set[str]:
    """The build arguments whose values differ between two builds of the same flavor and pins."""
    resolved = resolve(MANIFEST, flavor)
    one, other = (
        plan_build(
            resolved,
            BuildRequest(
                registry="ghcr.io/acme",
                date=date,
                created=f"{date}T08:00:00+00:00",
                revision=revision,
                source="https://github.com/acme/jaxbench",
            ),
        )
        for date, revision in (("2026-11-22", "a" * 40), ("2026-11-23", "b" * 40))
    )
    return {
        key
        for first, second in zip(one, other, strict=True)
        for key in first.build_args.keys() | second.build_args.keys()
        if first.build_args.get(key) != second.build_args.get(key)
    }


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined and comments left out."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    return [
        (parts[0].upper(), parts[1] if len(parts) > 1 else "")
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
        for parts in [line.strip().split(None, 1)]
    ]


def rebuilt_for_nothing(dockerfile: Path, per_build: set[str]) -> list[str]:
    """The RUN steps below a per-build argument of their stage that they do not use."""
    found = []
    in_scope: set[str] = set()
    for instruction, arguments in _instructions(dockerfile):
        if instruction == "FROM":
            in_scope = set()  # an ARG before FROM, or in another stage, is not in this stage's scope
        elif instruction == "ARG":
            name = arguments.split("=", 1)[0].strip()
            if name in per_build:
                in_scope.add(name)
        elif instruction == "RUN":
            unused = sorted(n for n in in_scope if not re.search(rf"\$\{{?{n}\b", arguments))
            if unused:
                step = " ".join(arguments.split())[:40]
                found.append(f"{dockerfile.name}: RUN {step}... is below ARG {', '.join(unused)}")
    return found


@pytest.mark.parametrize("flavor", sorted(MANIFEST.flavors))
def test_no_step_is_rebuilt_because_of_an_argument_it_does_not_use(flavor: str) -> None:
    per_build = _per_build_arguments(flavor)
    assert {"JAXBENCH_IMAGE", "JAXBENCH_GIT_COMMIT", "CREATED"} <= per_build
    dockerfiles = {
        REPO / "containers" / MANIFEST.stages[s].dockerfile for s in MANIFEST.flavors[flavor].stages
    }
    assert [line for path in sorted(dockerfiles) for line in rebuilt_for_nothing(path, per_build)] == []


def test_a_per_build_argument_above_an_unrelated_step_is_found(tmp_path: Path) -> None:
    dockerfile = tmp_path / "stage.Dockerfile"
    dockerfile.write_text(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nARG JAXBENCH_IMAGE\n"
        "RUN apt-get update \\\n    && apt-get install -y python3\n"
        'RUN echo "$JAXBENCH_IMAGE" > /image\n'
        "FROM ${BASE_IMAGE} AS runtime\nRUN true\n"
    )
    assert rebuilt_for_nothing(dockerfile, {"JAXBENCH_IMAGE"}) == [
        "stage.Dockerfile: RUN apt-get update && apt-get install -y pyt... is below ARG JAXBENCH_IMAGE"
    ]
