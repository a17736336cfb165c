"""What one nightly does: its date, which images to build on which runners, which benchmarks to run where.

The workflow's inputs (or, on a schedule, the repository's variables, or the defaults) come in as text and
leave as the job matrices GitHub Actions reads with `fromJSON`. Everything is checked here, in the first
job, so a typo in a dispatch input fails in seconds with the input's name rather than after an hour of
builds. Pure: the manifest's flavors and the recipes' sizes are passed in.

    jaxbench nightly plan --flavors cpu,jax --benchmarks "llama2:7b gpt3" --bench-runners '{"h100": [...]}'
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from jaxbench.containers.publish import ARCHES
from jaxbench.core.documents import parse_json
from jaxbench.core.errors import InvalidInput
from jaxbench.harness.launch import ClusterRequest
from jaxbench.harness.recipes import benchmarks

DEFAULT_BUILD_RUNNERS: dict[str, list[str]] = {"amd64": ["ubuntu-24.04"], "arm64": ["ubuntu-24.04-arm"]}
DEFAULT_BENCH_FLAVOR = "jax"

Label = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9._:/-]+$")]


class HardwareClass(BaseModel):
    """The self-hosted runners of one kind of machine."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    labels: list[Label] = Field(min_length=1)
    """`runs-on` labels that select such a runner, e.g. [self-hosted, linux, x64, h100-8]."""
    nodes: int = Field(default=1, ge=1, le=1024)
    """Hosts per run; more than one goes to the multi-node job."""
    arch: Literal["amd64", "arm64"] = "amd64"
    """Which architecture's image the runners pull (arm64 for Grace Hopper)."""
    gpus_per_node: int | None = Field(default=None, ge=1, le=64)
    """Multi-node classes: GPUs each node gives the job (the SLURM launcher's --gpus-per-node; one task per
    GPU); unset: the cluster's default."""
    partition: str | None = None
    """Multi-node classes: the SLURM partition (--partition); unset: the cluster's default."""
    account: str | None = None
    """Multi-node classes: the SLURM account charged (--account)."""
    time: str | None = None
    """Multi-node classes: the job's time limit as sbatch takes it (--time: 90, 1:30:00, 1-00)."""

    @field_validator("partition", "account", "time")
    @classmethod
    def _as_slurm_takes_it(cls, value: str | None, info: ValidationInfo) -> str | None:
        # The launcher's own check, so the plan refuses what `jaxbench run --launcher slurm` would.
        asked: dict[str, Any] = {str(info.field_name): value}
        try:
            ClusterRequest(**asked)
        except InvalidInput as error:
            raise ValueError(str(error)) from None
        return value

    @model_validator(mode="after")
    def _cluster_fields_need_nodes(self) -> HardwareClass:
        given = [name for name in ("gpus_per_node", "partition", "account", "time") if getattr(self, name)]
        if given and self.nodes == 1:
            raise ValueError(
                f"{', '.join(given)}: only for multi-node classes (nodes > 1, run through SLURM); "
                "a single-node runner uses its own GPUs"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _labels_alone(cls, data: Any) -> Any:
        # A bare label list is shorthand for {labels: [...]}.
        return {"labels": data} if isinstance(data, list) else data


class BenchRunners(RootModel[dict[Label, HardwareClass]]):
    pass


class BuildRunners(RootModel[dict[Label, list[Label]]]):
    pass


@dataclasses.dataclass(frozen=True)
class NightlyInputs:
    """The dispatch inputs as text; empty means the default."""

    flavors: str = ""
    arches: str = ""
    benchmarks: str = ""
    """Recipes and sizes, `recipe[:size]` separated by spaces or commas (a recipe alone: its default size)."""
    bench_flavor: str = ""
    build_runners: str = ""
    """JSON: architecture -> runs-on labels."""
    bench_runners: str = ""
    """JSON: hardware class -> runs-on labels, or {labels: [...], nodes: N, arch: amd64}. Empty: no
    benchmark jobs (a fork without GPU runners builds and reports only)."""
    backends: str = ""
    """Who trains the benchmarks, separated by spaces or commas (native, maxtext, levanter, pax). Empty:
    native, and each framework whose image flavor is built tonight."""
    registry_owner: str = ""
    """The GitHub owner; images go to ghcr.io/<owner, lower case> (GHCR refuses upper case)."""
    publish: bool = True
    """False: images go to <registry>/trial, and no tag anyone pulls moves."""


@dataclasses.dataclass(frozen=True)
class NightlyPlan:
    date: str
    registry: str
    publish: bool
    arches: list[str]
    build: list[dict[str, Any]]
    flavors: list[str]
    bench_flavor: str
    bench: list[dict[str, Any]]
    multinode: list[dict[str, Any]]
    left_out: list[str] = dataclasses.field(default_factory=list)
    """Benchmarks a chosen backend refuses ("llama2:1b on pax: train.attention=cudnn: ..."): not planned,
    so that a setting a framework cannot express is one line here, not a failed job every night."""

    def outputs(self) -> dict[str, str]:
        """`key=value` lines for $GITHUB_OUTPUT (compact JSON: one line each)."""

        def compact(value: object) -> str:
            return json.dumps(value, separators=(",", ":"))

        return {
            "date": self.date,
            "registry": self.registry,
            "publish": str(self.publish).lower(),
            "arches": ",".join(self.arches),
            "build": compact({"include": self.build}),
            "flavors": compact(self.flavors),
            "bench-flavor": self.bench_flavor,
            "bench": compact({"include": self.bench}),
            "has-bench": str(bool(self.bench)).lower(),
            "multinode": compact({"include": self.multinode}),
            "has-multinode": str(bool(self.multinode)).lower(),
            "left-out": compact(self.left_out),
        }


def _words(text: str) -> list[str]:
    return [word for word in re.split(r"[\s,]+", text.strip()) if word]


def _json(name: str, text: str, model: type[RootModel[Any]]) -> Any:
    try:
        return model.model_validate(parse_json(text, name)).model_dump()
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidInput(
            f"{name}: {where or 'value'}: {first['msg']} (expected an object of runs-on label lists, "
            f'e.g. {{"h100": ["self-hosted", "h100"]}})'
        ) from None


def _choose(name: str, text: str, allowed: Sequence[str], default: Sequence[str]) -> list[str]:
    chosen = _words(text) or list(default)
    unknown = [item for item in chosen if item not in allowed]
    if unknown:
        raise InvalidInput(f"{name}: {', '.join(unknown)}: expected some of {', '.join(allowed)}")
    return list(dict.fromkeys(chosen))


def _benchmarks(text: str, recipes: Mapping[str, tuple[str, Sequence[str]]]) -> list[tuple[str, str]]:
    """(recipe, size) pairs; `recipes` maps each recipe to (default size, sizes); none given: every recipe."""
    return benchmarks(_words(text) or list(recipes), recipes, "benchmarks")


@dataclasses.dataclass(frozen=True)
class BackendPlan:
    flavor: str | None
    """The image flavor that holds the backend; None: any (native runs in the bench flavor)."""
    recipes: tuple[str, ...]
    """The recipes it trains."""


NATIVE_ONLY: Mapping[str, BackendPlan] = {"native": BackendPlan(None, ())}


def _backends(text: str, backends: Mapping[str, BackendPlan], flavors: Sequence[str]) -> list[str]:
    if not text.strip():
        return [name for name, b in backends.items() if b.flavor is None or b.flavor in flavors]
    chosen = _choose("backends", text, list(backends), [])
    for name in chosen:
        flavor = backends[name].flavor
        if flavor is not None and flavor not in flavors:
            raise InvalidInput(
                f"backends: {name} runs in the {flavor} image, which is not among the flavors built tonight "
                f"({', '.join(flavors)})"
            )
    return chosen


def plan_nightly(
    inputs: NightlyInputs,
    *,
    flavors: Sequence[str],
    recipes: Mapping[str, tuple[str, Sequence[str]]],
    now: dt.datetime,
    backends: Mapping[str, BackendPlan] = NATIVE_ONLY,
    refused: Callable[[str, str, str], str | None] = lambda recipe, size, backend: None,
) -> NightlyPlan:
    """The nightly's matrices. `flavors` are the manifest's, `recipes` maps recipe -> (default size, sizes),
    `backends` who can train them (a backend with no recipes listed trains every one), `refused` why a
    backend cannot train a recipe at a size (its settings; None: it can). The date is the UTC
    day the nightly started: every job tags and files its results under it, even one that runs past
    midnight. Benchmarks are recipes x sizes x backends x hardware, less the pairs a backend does not
    train."""
    chosen_flavors = _choose("flavors", inputs.flavors, flavors, flavors)
    arches = _choose("arches", inputs.arches, ARCHES, ARCHES)
    build_runners = (
        _json("build-runners", inputs.build_runners, BuildRunners)
        if inputs.build_runners.strip()
        else DEFAULT_BUILD_RUNNERS
    )
    missing = [arch for arch in arches if arch not in build_runners]
    if missing:
        raise InvalidInput(f"build-runners: no runner labels for {', '.join(missing)}")
    bench_flavor = inputs.bench_flavor.strip() or DEFAULT_BENCH_FLAVOR
    if bench_flavor not in chosen_flavors:
        built = ", ".join(chosen_flavors)
        raise InvalidInput(f"bench-flavor: {bench_flavor} is not among the flavors built tonight ({built})")
    benchmarks = _benchmarks(inputs.benchmarks, recipes)
    chosen_backends = _backends(inputs.backends, backends, chosen_flavors)
    hardware: dict[str, Any] = (
        _json("bench-runners", inputs.bench_runners, BenchRunners) if inputs.bench_runners.strip() else {}
    )
    bench: list[dict[str, Any]] = []
    multinode: list[dict[str, Any]] = []
    left_out: dict[str, None] = {}
    for name, entry in hardware.items():
        if entry["arch"] not in arches:
            raise InvalidInput(
                f"bench-runners: {name}.arch: {entry['arch']} is not among the arches built tonight "
                f"({', '.join(arches)})"
            )
        for backend in chosen_backends:
            trains = backends[backend].recipes
            for recipe, size in benchmarks:
                if trains and recipe not in trains:
                    continue
                reason = refused(recipe, size, backend)
                if reason is not None:
                    left_out[f"{recipe}:{size} on {backend}: {reason}"] = None
                    continue
                job = {"recipe": recipe, "size": size, "hardware": name, "runner": entry["labels"]}
                job |= {"nodes": entry["nodes"], "arch": entry["arch"], "backend": backend}
                job |= {"flavor": backends[backend].flavor or bench_flavor}
                if entry["nodes"] > 1:
                    # Empty where unset: the workflow passes them to make, which leaves empty ones out.
                    job |= {
                        key: entry[key] or "" for key in ("gpus_per_node", "partition", "account", "time")
                    }
                (bench if entry["nodes"] == 1 else multinode).append(job)
    owner = inputs.registry_owner.strip().lower()
    if not re.fullmatch(r"[a-z0-9](?:[a-z0-9-]{0,38})", owner):
        raise InvalidInput(
            f"registry-owner: {inputs.registry_owner!r}: expected a GitHub user or organisation"
        )
    return NightlyPlan(
        date=now.astimezone(dt.UTC).date().isoformat(),
        registry=f"ghcr.io/{owner}" + ("" if inputs.publish else "/trial"),
        publish=inputs.publish,
        arches=arches,
        build=[
            {
                "flavor": flavor,
                "arch": arch,
                "runner": build_runners[arch],
                # What the image's smoke test trains: native, and the framework the flavor holds.
                "smoke-backends": " ".join(
                    name for name, b in backends.items() if b.flavor is None or b.flavor == flavor
                ),
            }
            for flavor in chosen_flavors
            for arch in arches
        ],
        flavors=chosen_flavors,
        bench_flavor=bench_flavor,
        bench=bench,
        multinode=multinode,
        left_out=list(left_out),
    )
